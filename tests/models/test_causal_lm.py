import math

import pytest
import torch

from filterformer.models import CausalLM

from .helpers import KINDS, VOCAB, config, randomise_filters


def _model(kind):
    model = CausalLM(config(causal=True, **KINDS[kind])).double().eval()
    randomise_filters(model)
    return model


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_equals_full_recomputation(kind):
    model = _model(kind)
    ids = torch.randint(0, VOCAB, (2, 14))
    full = model(ids).logits
    cache = model.new_cache()
    steps = [model(ids[:, :6], cache=cache).logits]  # prefill
    steps.append(model(ids[:, 6:9], cache=cache).logits)  # a block of several new tokens
    steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(9, 14)]
    assert cache.length == 14
    assert (torch.cat(steps, dim=1) - full).abs().max() <= 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_generate_with_cache_equals_without(kind):
    model = _model(kind)
    prompt = torch.randint(0, VOCAB, (3, 4))
    cached = model.generate(prompt, 10)
    assert cached.shape == (3, 14) and torch.equal(cached[:, :4], prompt)
    assert torch.equal(cached, model.generate(prompt, 10, use_cache=False))
    sampled = [
        model.generate(prompt, 6, do_sample=True, top_k=5, use_cache=use,
                       generator=torch.Generator().manual_seed(3))
        for use in (True, False)
    ]
    assert torch.equal(*sampled)


def test_cached_decoding_with_padding_mask_over_the_past():
    model = _model("gfsa+neutreno")
    ids = torch.randint(0, VOCAB, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, :3] = False  # left padding
    full = model(ids, padding_mask=mask).logits
    cache = model.new_cache()
    first = model(ids[:, :5], padding_mask=mask[:, :5], cache=cache).logits
    rest = [model(ids[:, t : t + 1], padding_mask=mask[:, : t + 1], cache=cache).logits
            for t in range(5, 8)]
    got = torch.cat([first, *rest], dim=1)
    torch.testing.assert_close(got[0], full[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(got[1, 3:], full[1, 3:], rtol=0, atol=1e-10)


def test_loss_is_next_token_cross_entropy_ignoring_minus_100():
    model = _model("softmax")
    ids = torch.randint(0, VOCAB, (2, 6))
    labels = torch.randint(0, VOCAB, (2, 6))
    labels[0, :2] = -100
    out = model(ids, labels=labels)
    logp = out.logits.log_softmax(-1)
    keep = labels != -100
    expected = -logp[keep].gather(-1, labels[keep][:, None]).mean()
    torch.testing.assert_close(out.loss, expected)


def test_causal_lm_rejects_bad_configs():
    with pytest.raises(ValueError, match="causal=True"):
        CausalLM(config(causal=False))
    with pytest.raises(ValueError, match="vocab_size"):
        CausalLM(config(causal=True, vocab_size=None, input_dim=3))
    with pytest.raises(ValueError, match="max_new_tokens"):
        _model("softmax").generate(torch.zeros(1, 2, dtype=torch.long), -1)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"max_new_tokens": 1.5}, "max_new_tokens must be an integer >= 0"),
        ({"do_sample": True, "temperature": float("nan")}, "temperature must be positive"),
        ({"do_sample": True, "top_k": 0}, "top_k must be a positive integer or None"),
        ({"do_sample": True, "top_k": -2}, "top_k must be a positive integer or None"),
    ],
)
def test_generate_names_a_bad_argument(options, needle):
    options = {"max_new_tokens": 2, **options}
    with pytest.raises(ValueError, match=needle):
        _model("softmax").generate(torch.zeros(1, 2, dtype=torch.long), **options)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_fresh_model_starts_near_the_uniform_loss(norm):
    # Tied to the embedding initialised N(0, 0.02²), the output layer starts with logits near 0,
    # so the cross-entropy on random targets is close to ln(vocab) (N(0, 1) gives ~10× that).
    vocab = 256
    model = CausalLM(config(causal=True, vocab_size=vocab, norm=norm))
    ids, labels = (torch.randint(0, vocab, (8, 32)) for _ in range(2))
    with torch.no_grad():
        loss = model(ids, labels=labels).loss.item()
    assert abs(loss - math.log(vocab)) < 0.3
