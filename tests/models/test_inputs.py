"""Every model refuses token ids outside the vocabulary and empty sequences, by name."""

import pytest
import torch

from filterformer.models import (
    CausalLM,
    SequenceClassifier,
    SequenceRegressor,
    Transformer,
)

from .helpers import VOCAB, config


def _token_models():
    return {
        "transformer": Transformer(config()),
        "classifier": SequenceClassifier(config(), num_classes=3),
        "regressor": SequenceRegressor(config()),
        "causal_lm": CausalLM(config(causal=True)),
    }


@pytest.mark.parametrize("name", ["transformer", "classifier", "regressor", "causal_lm"])
def test_token_ids_outside_the_vocabulary_raise_value_error_naming_them(name):
    model = _token_models()[name].eval()
    ids = torch.randint(0, VOCAB, (2, 7))
    low, high = -int(torch.randint(1, 9, ())), VOCAB + int(torch.randint(0, 9, ()))
    ids[0, int(torch.randint(0, 7, ()))] = low
    ids[1, int(torch.randint(0, 7, ()))] = high
    with pytest.raises(ValueError, match=rf"\[0, {VOCAB}\); 2 id\(s\) out of range, smallest "
                                         rf"{low}, largest {high}"):
        model(ids)
    for single in (low, high):  # each side alone is caught, not only both together
        one = torch.randint(0, VOCAB, (2, 7))
        one[1, 3] = single
        with pytest.raises(ValueError, match=rf"smallest {single}, largest {single}"):
            model(one)


def test_generate_refuses_a_prompt_outside_the_vocabulary():
    model = CausalLM(config(causal=True)).eval()
    prompt = torch.randint(0, VOCAB, (2, 4))
    prompt[1, 2] = VOCAB
    with pytest.raises(ValueError, match=rf"vocab_size\) = \[0, {VOCAB}\)"):
        model.generate(prompt, 3)


@pytest.mark.parametrize("name", ["transformer", "classifier", "regressor", "causal_lm"])
def test_an_empty_token_sequence_raises_instead_of_returning_nan(name):
    model = _token_models()[name].eval()
    with pytest.raises(ValueError, match=r"input_ids has sequence length N = 0"):
        model(torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize("kind", ["inputs", "inputs_embeds"])
def test_an_empty_continuous_sequence_raises_instead_of_returning_nan(kind):
    cfg = config(vocab_size=None, input_dim=5)
    width = {"inputs": 5, "inputs_embeds": cfg.dim}[kind]
    for model in (Transformer(cfg), SequenceClassifier(cfg, num_classes=2)):
        with pytest.raises(ValueError, match=rf"{kind} has sequence length N = 0"):
            model(**{kind: torch.randn(3, 0, width)})
