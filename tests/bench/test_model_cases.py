"""Decoding cases: cached greedy decoding chooses the tokens recomputation without a cache
chooses, the cache cut back to the prompt decodes them again, and a case's steps repeat."""

from __future__ import annotations

import random

import pytest
import torch

from filterformer.bench import BenchShape, build_case
from filterformer.bench.method_table import BENCH_METHODS, get_method
from filterformer.bench.model_cases import TOKENS, VOCAB_SIZE, decode_greedy, decoder_model

QUICK = BenchShape.quick()
DECODING_METHODS = ("softmax", "gfsa", "neutreno")


def test_a_case_decodes_the_same_tokens_at_every_step_from_its_cut_back_cache():
    N = random.randint(8, 24)
    names = [f"decode-{m}" for m in DECODING_METHODS]
    assert set(names) <= set(BENCH_METHODS)
    for name in names:
        case = build_case(name, QUICK, N, "inference")
        first, again = (case.forward()[0].clone() for _ in range(2))
        assert first.shape == (QUICK.batch, TOKENS) and torch.equal(first, again)
    assert get_method(names[1]).baseline == names[0] and not get_method(names[0]).table


@pytest.mark.parametrize("method", DECODING_METHODS)
def test_cached_greedy_tokens_equal_recomputation_and_repeat_after_the_crop(method):
    new = 6
    context = 10
    model = decoder_model(method, QUICK, context + new + 1)
    filters = [p for n, p in model.named_parameters() if n.rsplit(".", 1)[-1] in ("w0", "w1", "wK")]
    assert bool(filters) == (method == "gfsa")
    with torch.no_grad():  # GFSA's filter starts as plain attention: move it so Ā²V counts
        for param in filters:
            param.add_(torch.randn_like(param) * 0.5)
    prompt = torch.randint(3, VOCAB_SIZE, (2, context))
    with torch.inference_mode():
        cache = model.new_cache()
        first = model(prompt, cache=cache).logits[:, -1].argmax(-1, keepdim=True)
        cached = torch.cat([first, decode_greedy(model, cache, first, new)], dim=1)
        cache.crop(context)
        again = torch.cat([first, decode_greedy(model, cache, first, new)], dim=1)
        tokens = prompt
        for _ in range(new + 1):  # the whole sequence again at every step
            logits = model(tokens).logits
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(cached, tokens[:, context:])
    assert torch.equal(again, cached)
