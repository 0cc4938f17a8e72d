"""Decoding on CUDA in float32: the native causal LM's cache equals recomputing the prefix
(step logits, greedy and sampled generation, left padding over the past, across the cache's
bucket boundaries), and a patched grouped-query Llama generates the same with Hugging Face's
cache as without it (greedy and 4 beams, across the bucketed buffers' boundaries)."""

import pytest
import torch

from filterformer.attention import decoding_cache

from ..models.helpers import VOCAB
from ..patching.helpers import hf_inputs
from ..patching.test_hf_bucketed_decoding import BUCKET, grouped_query_llama, prompts
from ..patching.test_hf_bucketed_decoding import CASES as BUCKETED_CASES
from ..patching.test_hf_decoding import patched_lm
from .batches import padding_mask, token_ids
from .methods import CAUSAL_METHODS
from .models import build_model
from .parity import assert_relative_close, perturb_filters

pytestmark = pytest.mark.cuda

PROMPT, NEW = 4, 10


def _causal_lm(method, device):
    model = build_model("causal_lm", method)
    perturb_filters(model)
    return model.to(device).eval()


@pytest.mark.parametrize("method", CAUSAL_METHODS)
@torch.no_grad()
def test_cached_step_logits_equal_the_full_pass(method, cuda_device):
    model = _causal_lm(method, cuda_device)
    ids = token_ids().to(cuda_device)
    mask = padding_mask(left=True).to(cuda_device)
    full = model(ids, padding_mask=mask).logits
    cache = model.new_cache()
    steps = [model(ids[:, :5], padding_mask=mask[:, :5], cache=cache).logits]  # prefill
    steps.append(model(ids[:, 5:8], padding_mask=mask[:, :8], cache=cache).logits)  # a chunk
    steps += [
        model(ids[:, t : t + 1], padding_mask=mask[:, : t + 1], cache=cache).logits
        for t in range(8, ids.shape[1])
    ]
    assert cache.length == ids.shape[1]
    real = mask.cpu()
    assert_relative_close(torch.cat(steps, dim=1).cpu()[real], full.cpu()[real], "cached logits")


@pytest.mark.parametrize("method", CAUSAL_METHODS)
def test_generation_with_cache_equals_recomputation(method, cuda_device):
    model = _causal_lm(method, cuda_device)
    prompt = torch.randint(0, VOCAB, (3, PROMPT), device=cuda_device)
    greedy = model.generate(prompt, NEW)
    assert greedy.shape == (3, PROMPT + NEW) and torch.equal(greedy[:, :PROMPT], prompt)
    assert torch.equal(greedy, model.generate(prompt, NEW, use_cache=False))
    sampled = [
        model.generate(prompt, NEW, do_sample=True, top_k=5, use_cache=use,
                       generator=torch.Generator(cuda_device).manual_seed(3))
        for use in (True, False)
    ]
    assert torch.equal(*sampled)


@pytest.mark.parametrize("method", CAUSAL_METHODS)
def test_generation_across_cache_buckets_equals_recomputation(method, cuda_device):
    model = _causal_lm(method, cuda_device)
    prompt = torch.randint(0, VOCAB, (3, int(torch.randint(5, 12, ()))), device=cuda_device)
    new = 20  # 25 to 31 positions: buffers in buckets of BUCKET positions grow two or three times
    greedy = model.generate(prompt, new, cache_bucket=BUCKET)
    assert torch.equal(greedy, model.generate(prompt, new, use_cache=False))
    seed = int(torch.randint(0, 2**31, ()))
    sampled = [
        model.generate(prompt, new, do_sample=True, top_k=5, use_cache=use, cache_bucket=BUCKET,
                       generator=torch.Generator(cuda_device).manual_seed(seed))
        for use in (True, False)
    ]
    assert torch.equal(*sampled)


#: Decoding settings shared by every Hugging Face generation below.
GENERATE = dict(
    max_new_tokens=6, min_new_tokens=6, do_sample=False, output_scores=True,
    return_dict_in_generate=True,
)


def _assert_same_generation(cached, recomputed, steps=GENERATE["max_new_tokens"]) -> None:
    assert torch.equal(cached.sequences, recomputed.sequences)
    assert len(cached.scores) == len(recomputed.scores) == steps
    for step, (a, b) in enumerate(zip(cached.scores, recomputed.scores, strict=True)):
        finite = a.isfinite()  # min_new_tokens and beam search set some scores to -inf
        assert torch.equal(finite, b.isfinite()), f"step {step}: -inf at other tokens"
        assert_relative_close(a[finite], b[finite], f"scores of step {step}")


def _patched_llama(method, device, **options):
    """The tiny grouped-query Llama (4 query heads, 2 key/value heads) patched with ``method``,
    its coefficients moved, in float32 on ``device``, and its left-padded prompts."""
    model = patched_lm("llama", method, **options).to(device=device, dtype=torch.float32)
    inputs = {name: x.to(device) for name, x in hf_inputs("llama").items()}
    return model, inputs


@pytest.mark.parametrize(
    ("method", "options"),
    [("gfsa", {"K": 3}), ("neutreno", {"neutreno_lambda": 0.4}),
     ("gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4})],
)
def test_patched_llama_greedy_with_cache_equals_without(method, options, cuda_device):
    model, inputs = _patched_llama(method, cuda_device, **options)
    cached = model.generate(**inputs, use_cache=True, **GENERATE)
    recomputed = model.generate(**inputs, use_cache=False, **GENERATE)
    _assert_same_generation(cached, recomputed)


@pytest.mark.parametrize(
    ("method", "options"),
    [("gfsa", {"K": 3}), ("gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4})],
)
def test_patched_llama_four_beams_with_cache_equal_without(method, options, cuda_device):
    model, inputs = _patched_llama(method, cuda_device, **options)
    cached = model.generate(**inputs, use_cache=True, num_beams=4, **GENERATE)
    recomputed = model.generate(**inputs, use_cache=False, num_beams=4, **GENERATE)
    _assert_same_generation(cached, recomputed)
    assert_relative_close(cached.sequences_scores, recomputed.sequences_scores, "beam scores")


@pytest.mark.parametrize("method", ["softmax", "gfsa"])
def test_generation_never_asks_cudnn_for_attention(method, cuda_device, monkeypatch):
    """cuDNN builds a plan per new shape (a prompt's length, a step's key length): every SDPA
    call of a generation, the prompt's included, runs with it switched off."""
    import torch.nn.functional as F

    model = _causal_lm(method, cuda_device)
    cudnn_allowed = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        cudnn_allowed.append(torch.backends.cuda.cudnn_sdp_enabled())
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    prompt = torch.randint(0, VOCAB, (2, int(torch.randint(3, 9, ()))), device=cuda_device)
    with torch.autocast("cuda", torch.bfloat16):
        model.generate(prompt, NEW)
    assert cudnn_allowed and not any(cudnn_allowed)


@pytest.mark.parametrize(("method", "options"), BUCKETED_CASES)
@pytest.mark.parametrize("beams", [1, 4])
def test_patched_llama_across_cache_buckets_equals_recomputation(
        method, options, beams, cuda_device, monkeypatch):
    monkeypatch.setattr(decoding_cache, "CACHE_BUCKET", BUCKET)  # 7 + 20 positions: 3 boundaries
    model = grouped_query_llama(method, options).to(device=cuda_device, dtype=torch.float32)
    inputs = {name: x.to(cuda_device) for name, x in prompts().items()}
    settings = {**GENERATE, "max_new_tokens": 20, "min_new_tokens": 20, "num_beams": beams}
    cached = model.generate(**inputs, use_cache=True, **settings)
    recomputed = model.generate(**inputs, use_cache=False, **settings)
    _assert_same_generation(cached, recomputed, steps=20)
