import math
from collections import Counter
from contextlib import nullcontext

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from filterformer.models import CausalLM, TransformerConfig

from .helpers import KINDS, VOCAB, causal_lm, config


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_equals_full_recomputation(kind):
    model = causal_lm(kind)
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
    model = causal_lm(kind)
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
    model = causal_lm("gfsa+neutreno")
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
    model = causal_lm("softmax")
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
        causal_lm("softmax").generate(torch.zeros(1, 2, dtype=torch.long), -1)


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"max_new_tokens": 1.5}, "max_new_tokens must be an integer >= 0"),
        ({"do_sample": True, "temperature": float("nan")},
         "temperature must be a finite number > 0"),
        ({"do_sample": True, "top_k": -2},
         r"top_k must be an integer >= 0 \(0 keeps every token\)"),
    ],
)
def test_generate_names_a_bad_argument(options, needle):
    options = {"max_new_tokens": 2, **options}
    with pytest.raises(ValueError, match=needle):
        causal_lm("softmax").generate(torch.zeros(1, 2, dtype=torch.long), **options)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("depth", [2, 8])
def test_a_fresh_model_starts_near_the_uniform_loss(depth, norm):
    # Tied to the embedding initialised N(0, 0.02²), the output layer starts with logits near 0,
    # so the cross-entropy on random targets is close to ln(vocab) (N(0, 1) gives ~20× that).
    vocab = 256
    model = CausalLM(TransformerConfig(causal=True, vocab_size=vocab, depth=depth, norm=norm))
    ids, labels = (torch.randint(0, vocab, (8, 32)) for _ in range(2))
    with torch.no_grad():
        loss = model(ids, labels=labels).loss.item()
    assert abs(loss / math.log(vocab) - 1) < 0.05


@pytest.mark.parametrize("depth", [2, 8])
def test_greedy_decoding_from_a_fresh_model_is_not_one_repeated_token(depth):
    # A saturated tied embedding makes every token predict itself, so every greedy continuation
    # is its prompt's last token repeated; at the N(0, 0.02²) init some prompts still fall into a
    # one-token loop (scripts/causal_lm_init.py measures how many), never all of them.
    vocab, prompts, new = 256, 16, 16
    model = CausalLM(TransformerConfig(causal=True, vocab_size=vocab, depth=depth)).eval()
    out = model.generate(torch.randint(0, vocab, (prompts, 8)), new)[:, 8:]
    one_token = (out == out[:, :1]).all(dim=1)
    assert not one_token.all()


def _next_token_frequencies(model, prompt, samples, **sampling):
    """Empirical distribution of one sampled next token, ``(vocab,)`` float64."""
    many = prompt.expand(samples, -1)
    generator = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ())))
    tokens = model.generate(many, 1, do_sample=True, generator=generator, **sampling)[:, -1]
    return torch.bincount(tokens, minlength=VOCAB).double() / samples


@pytest.mark.parametrize("top_k", [0, None])
def test_top_k_zero_or_none_samples_from_the_full_softmax(top_k):
    model = CausalLM(config(causal=True)).eval()
    prompt = torch.randint(0, VOCAB, (1, 5))
    temperature = float(torch.empty(()).uniform_(0.02, 0.05))  # sharpen the near-uniform init
    logits = model(prompt).logits[0, -1].double()
    expected = (logits / temperature).softmax(-1)
    samples = 20_000
    got = _next_token_frequencies(model, prompt, samples, top_k=top_k, temperature=temperature)
    sigma = (expected * (1 - expected) / samples).sqrt()
    assert ((got - expected).abs() <= 5 * sigma + 1e-3).all()


def test_top_k_zero_equals_none_and_the_whole_vocabulary_for_a_fixed_seed():
    model = CausalLM(config(causal=True)).eval()
    prompt = torch.randint(0, VOCAB, (3, 4))
    seed = int(torch.randint(0, 2**31, ()))
    runs = [
        model.generate(prompt, 8, do_sample=True, top_k=k,
                       generator=torch.Generator().manual_seed(seed))
        for k in (0, None, VOCAB, VOCAB + 7)
    ]
    assert all(torch.equal(runs[0], run) for run in runs[1:])


def test_top_k_samples_only_the_k_most_likely_tokens_renormalised():
    model = CausalLM(config(causal=True)).eval()
    prompt = torch.randint(0, VOCAB, (1, 5))
    k = int(torch.randint(2, 6, ()))
    temperature = float(torch.empty(()).uniform_(0.02, 0.05))
    logits = model(prompt).logits[0, -1].double() / temperature
    keep = logits.topk(k).indices
    expected = torch.zeros(VOCAB, dtype=torch.float64)
    expected[keep] = logits[keep].softmax(-1)
    samples = 20_000
    got = _next_token_frequencies(model, prompt, samples, top_k=k, temperature=temperature)
    outside = torch.ones(VOCAB, dtype=torch.bool)
    outside[keep] = False
    assert (got[outside] == 0).all()
    sigma = (expected * (1 - expected) / samples).sqrt()
    assert ((got - expected).abs() <= 5 * sigma + 1e-3).all()


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        ({"top_k": -1}, r"top_k must be an integer >= 0 \(0 keeps every token\) or None; got -1"),
        ({"top_k": 2.5}, r"top_k must be an integer >= 0"),
        ({"temperature": 0.0}, r"temperature must be a finite number > 0 when sampling; got 0.0"),
        ({"temperature": -1.0}, r"temperature must be a finite number > 0"),
        ({"temperature": float("nan")}, r"temperature must be a finite number > 0"),
        ({"temperature": float("inf")}, r"temperature must be a finite number > 0"),
    ],
)
def test_generate_refuses_bad_sampling_settings(sampling, message):
    model = CausalLM(config(causal=True)).eval()
    with pytest.raises(ValueError, match=message):
        model.generate(torch.randint(0, VOCAB, (2, 3)), 4, do_sample=True, **sampling)


def test_generate_refuses_a_non_integer_or_negative_length():
    model = CausalLM(config(causal=True)).eval()
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match=r"max_new_tokens must be an integer >= 0"):
            model.generate(torch.randint(0, VOCAB, (1, 3)), bad)


class _OpCounter(TorchDispatchMode):
    """Counts the aten operations run, and the casts of tensors of given shapes."""

    def __init__(self, cast_shapes):
        super().__init__()
        self.ops, self.casts, self.cast_shapes = Counter(), Counter(), cast_shapes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        if func.overloadpacket.__name__ in ("_to_copy", "to") and tuple(
            args[0].shape
        ) in self.cast_shapes:
            self.casts[tuple(args[0].shape)] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("outer", [torch.inference_mode, torch.no_grad, nullcontext])
def test_generation_casts_each_weight_once_and_checks_only_the_prompts_ids(outer):
    model = CausalLM(config(causal=True, depth=2)).eval()
    qkv_shape = tuple(model.transformer.blocks[0].attn.qkv.weight.shape)
    prompt = torch.randint(0, VOCAB, (2, int(torch.randint(2, 6, ()))))
    new = int(torch.randint(4, 9, ()))
    with outer(), torch.autocast("cpu", torch.bfloat16), _OpCounter({qkv_shape}) as counter:
        out = model.generate(prompt, new)
    assert out.shape == (2, prompt.shape[1] + new)
    # Each layer's qkv weight is cast to bfloat16 once, not once a token.
    assert counter.casts[qkv_shape] == model.config.depth
    # The range check reads ids on the host (a device sync a token on a GPU): prompt only.
    assert counter.ops["aminmax"] == 1


def test_generation_still_refuses_a_prompt_outside_the_vocabulary():
    model = causal_lm("softmax")
    prompt = torch.randint(0, VOCAB, (1, 4))
    prompt[0, int(torch.randint(0, 4, ()))] = VOCAB
    with pytest.raises(ValueError, match="vocab_size"):
        model.generate(prompt, 3)
