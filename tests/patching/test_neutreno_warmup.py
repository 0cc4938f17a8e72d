"""``neutreno_warmup``: a NeuTRENO patch that starts as the pretrained model and reaches its λ
after W optimiser steps, on the real all-MiniLM-L6-v2 and on tiny config-built models."""

import copy
import json

import pytest
import torch

from filterformer import from_pretrained, patch, patched_parameters, save_pretrained, unpatch
from filterformer.patching import advance_neutreno_warmup, patch_change
from filterformer.patching.neutreno_warmup import WARMUP_ATTRIBUTE

from .helpers import hf_inputs, hf_model, images, load_minilm, sentences, timm_model


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


def _hidden(model, batch):
    with torch.no_grad():
        return model(**batch).last_hidden_state


def test_a_warming_neutreno_minilm_is_the_pretrained_model_at_step_0(minilm):
    pretrained, tokenizer = minilm
    batch, _ = sentences(tokenizer, 8)
    real = batch["attention_mask"].bool()
    lam = 0.2 + 0.6 * torch.rand(()).item()
    warming = patch(copy.deepcopy(pretrained), "neutreno", neutreno_lambda=lam,
                    neutreno_warmup=int(torch.randint(2, 9, ())))
    difference = _hidden(warming, batch)[real] - _hidden(pretrained, batch)[real]
    assert difference.abs().max() <= 1e-6
    assert patch_change(pretrained, warming, batch).relative_change <= 1e-6
    plain = patch(copy.deepcopy(pretrained), "neutreno", neutreno_lambda=lam)
    assert patch_change(pretrained, plain, batch).relative_change > 0.1  # what the start avoids


def test_lambda_rises_linearly_and_reaches_its_value_after_the_warmup_steps(minilm):
    pretrained, tokenizer = minilm
    batch, _ = sentences(tokenizer, 6)
    real = batch["attention_mask"].bool()
    lam, steps = 0.4, int(torch.randint(3, 7, ()))
    warming = patch(copy.deepcopy(pretrained), "neutreno", neutreno_lambda=lam,
                    neutreno_warmup=steps)
    for taken in range(steps + 3):
        fraction = min(taken / steps, 1.0)
        plain = patch(copy.deepcopy(pretrained), "neutreno", neutreno_lambda=lam * fraction)
        torch.testing.assert_close(_hidden(warming, batch)[real], _hidden(plain, batch)[real],
                                   rtol=0, atol=1e-5)
        assert advance_neutreno_warmup(warming) == 1
    assert int(getattr(warming, WARMUP_ATTRIBUTE).steps_taken) == steps + 3


def test_a_learned_lambda_warms_up_and_then_learns():
    model = hf_model("bert")
    inputs = hf_inputs("bert")
    real = inputs["attention_mask"].bool()
    before = _hidden(model, inputs)
    patch(model, "neutreno", neutreno_lambda=0.5, neutreno_learnable=True, neutreno_warmup=2)
    torch.testing.assert_close(_hidden(model, inputs)[real], before[real], rtol=0, atol=1e-6)
    (name, lam), = patched_parameters(model)[1:]  # layer 0 only provides V⁰
    assert name.endswith("neutreno_lambda")
    advance_neutreno_warmup(model)
    model(**inputs).last_hidden_state[real].pow(2).sum().backward()
    assert lam.grad is not None and lam.grad.abs().sum() > 0


def test_the_step_count_is_saved_loaded_and_undone(tmp_path):
    model = hf_model("bert")
    inputs = hf_inputs("bert")
    original = _hidden(model, inputs)
    patch(model, "neutreno", neutreno_lambda=0.6, neutreno_warmup=4)
    for _ in range(3):
        advance_neutreno_warmup(model)
    expected = _hidden(model, inputs)
    loaded = from_pretrained(save_pretrained(model, tmp_path / "saved"))
    assert int(getattr(loaded, WARMUP_ATTRIBUTE).steps_taken) == 3
    torch.testing.assert_close(_hidden(loaded, inputs), expected, rtol=0, atol=1e-6)
    unpatch(model)
    assert not hasattr(model, WARMUP_ATTRIBUTE)
    torch.testing.assert_close(_hidden(model, inputs), original, rtol=0, atol=0)


def test_a_neutreno_save_from_before_the_warmup_option_loads_without_one(tmp_path):
    model = patch(hf_model("bert"), "neutreno", neutreno_lambda=0.6)
    inputs = hf_inputs("bert")
    directory = save_pretrained(model, tmp_path / "saved")
    patch_file = directory / "filterformer.json"
    data = json.loads(patch_file.read_text())
    assert data["options"].pop("neutreno_warmup") == 0
    patch_file.write_text(json.dumps(data))
    loaded = from_pretrained(directory)
    assert not hasattr(loaded, WARMUP_ATTRIBUTE)
    torch.testing.assert_close(_hidden(loaded, inputs), _hidden(model, inputs), rtol=0, atol=0)


def test_a_timm_vit_warms_up_too():
    model = timm_model()
    x = images()
    with torch.no_grad():
        before = model(x)
        patch(model, "neutreno", neutreno_lambda=0.6, neutreno_warmup=1)
        torch.testing.assert_close(model(x), before, rtol=0, atol=1e-6)
        advance_neutreno_warmup(model)
        assert (model(x) - before).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"neutreno_warmup": -1}, r"neutreno_warmup must be an integer >= 0"),
        ({"neutreno_warmup": True}, r"neutreno_warmup must be an integer >= 0"),
        ({"neutreno_warmup": 2.5}, r"neutreno_warmup must be an integer >= 0"),
        ({"neutreno_lambda": 0, "neutreno_warmup": 3},
         r"neutreno_warmup=3 raises NeuTRENO's λ from 0 to neutreno_lambda, and neutreno_lambda "
         r"is 0"),
    ],
)
def test_bad_warmups_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        patch(hf_model("bert"), "neutreno", **options)
