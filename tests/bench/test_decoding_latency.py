"""The decoding benchmark: every configuration recorded with positive, finite per-token times
and ratios; the methods' steps alternate in rounds; cached greedy decoding chooses the tokens
recomputation without a cache chooses, and the cache cut back to the prompt decodes them again."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from filterformer.bench import BenchShape, decoding_latency, evaluate_targets
from filterformer.bench.decoding_latency import (
    DECODING_METHODS,
    FAMILIES,
    VOCAB_SIZE,
    build_decoder_model,
    decode_greedy,
    measure_decoding,
    prefill,
)
from filterformer.bench.performance_targets import Measure, Target
from filterformer.timing import paired_step_times, round_orders

QUICK = BenchShape.quick()


@pytest.mark.parametrize("family", FAMILIES)
def test_a_measurement_records_every_method_in_one_round_group(family):
    records = measure_decoding(family, 12, QUICK, tokens=4, rounds=2)
    assert [(r.method, r.N, r.mode) for r in records] == [
        (f"decode-{family}-{m}", 12, "decode") for m in DECODING_METHODS]
    assert len({r.round_group for r in records}) == 1
    for record, method in zip(records, DECODING_METHODS, strict=True):
        assert record.measured and math.isfinite(record.median_ms) and record.median_ms > 0
        assert len(record.times_ms) == 2
        assert record.baseline == (None if method == "softmax" else f"decode-{family}-softmax")
    # Alternated in one process: a target's ratio of two of them is paired from their rounds.
    target = Target("t", Measure(records[1].method, 12, "decode"),
                    Measure(records[0].method, 12, "decode"), "<=", 2.2)
    (result,) = evaluate_targets(records, (target,))
    assert math.isfinite(result.paired) and result.paired > 0
    low, high = result.paired_spread
    assert 0 < low <= result.paired <= high


def test_the_methods_steps_alternate_in_rounds_each_on_its_cache_cut_back(monkeypatch):
    """Before each step its method's cache is cut back to the prompt; the rounds change the
    methods' order as the Williams design says."""
    events, steps = [], {}

    def timer(step) -> float:
        events.append(("step", steps.setdefault(step, len(steps))))
        step()
        return 1.0  # equal steps: one step per method and round

    real_prefill, decoders = decoding_latency.prefill, []

    def watched_prefill(family, model, prompt):
        decoder, side = real_prefill(family, model, prompt), len(decoders)
        crop = decoder.crop

        def watched_crop():
            crop()
            events.append(("crop", side))

        decoder.crop = watched_crop
        decoders.append(decoder)
        return decoder

    monkeypatch.setattr(decoding_latency, "paired_step_times",
                        partial(paired_step_times, timer=timer))
    monkeypatch.setattr(decoding_latency, "prefill", watched_prefill)
    decoding_latency.measure_decoding("native", 8, QUICK, tokens=2, rounds=4)
    expected = [side for orders in (round_orders(3, 2), round_orders(3, 4))
                for one in orders for side in one]
    assert events == [event for side in expected for event in (("crop", side), ("step", side))]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", DECODING_METHODS)
def test_cached_greedy_tokens_equal_recomputation_and_repeat_after_the_crop(family, method):
    new = 6
    context = 10
    model = build_decoder_model(family, method, QUICK, context + new + 1)
    filters = [p for n, p in model.named_parameters() if n.rsplit(".", 1)[-1] in ("w0", "w1", "wK")]
    assert bool(filters) == (method == "gfsa")
    with torch.no_grad():  # GFSA's filter starts as plain attention: move it so Ā²V counts
        for param in filters:
            param.add_(torch.randn_like(param) * 0.5)
    prompt = torch.randint(3, VOCAB_SIZE, (2, context))
    with torch.inference_mode():
        decoder = prefill(family, model, prompt)
        cached = torch.cat([decoder.first, decode_greedy(decoder, new)], dim=1)
        decoder.crop()
        again = torch.cat([decoder.first, decode_greedy(decoder, new)], dim=1)
        tokens = prompt
        for _ in range(new + 1):  # the whole sequence again at every step
            logits = model(tokens).logits if family == "native" else model(
                input_ids=tokens, use_cache=False).logits
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(cached, tokens[:, context:])
    assert torch.equal(again, cached)


def test_the_patched_llama_runs_its_method_and_the_unpatched_one_softmax():
    from filterformer.patching.state import get_patch_state

    assert get_patch_state(build_decoder_model("hf-llama", "softmax", QUICK, 32)) is None
    for method in ("gfsa", "neutreno"):
        state = get_patch_state(build_decoder_model("hf-llama", method, QUICK, 32))
        assert state.spec.name == method
