"""The decoding benchmark: every configuration recorded with positive, finite per-token times
and ratios; the methods' steps alternate in rounds; cached greedy decoding chooses the tokens
recomputation without a cache chooses, and the cache cut back to the prompt decodes them again."""

from __future__ import annotations

import math

import pytest
import torch

from filterformer.bench import decoding_latency
from filterformer.bench.decoding_latency import (
    BASELINE,
    DECODING_METHODS,
    FAMILIES,
    DecodingSettings,
    build_decoder_model,
    decode_greedy,
    prefill,
    run_decoding_latency,
)
from filterformer.timing import round_orders

QUICK = DecodingSettings.quick(contexts=(12, 20), rounds=2)


def test_quick_run_records_every_family_method_and_context():
    lines = []
    records = run_decoding_latency(QUICK, log=lines.append)
    keys = [(r.family, r.method, r.context) for r in records]
    assert sorted(keys) == sorted((f, m, c) for f in FAMILIES for m in DECODING_METHODS
                                  for c in QUICK.contexts)
    assert len(lines) == len(FAMILIES) * len(QUICK.contexts)
    for record in records:
        assert record.skipped is None
        assert math.isfinite(record.ms_per_token) and record.ms_per_token > 0
        assert len(record.round_ms_per_token) == QUICK.rounds
        assert record.steps_per_round >= 1 and record.tokens == QUICK.tokens
        assert record.to_dict()["ms_per_token"] == record.ms_per_token
        if record.method == BASELINE:
            assert record.baseline is None and record.ratio is None
        else:
            assert record.baseline == BASELINE
            assert math.isfinite(record.ratio) and record.ratio > 0
            low, high = record.ratio_spread
            assert 0 < low <= high


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

    monkeypatch.setattr(decoding_latency, "time_step", timer)
    monkeypatch.setattr(decoding_latency, "prefill", watched_prefill)
    settings = DecodingSettings.quick(families=("native",), rounds=4, warmup_steps=2)
    decoding_latency.measure_decoding("native", 8, settings)
    expected = [side for orders in (round_orders(3, 2), round_orders(3, 4))
                for one in orders for side in one]
    assert events == [event for side in expected for event in (("crop", side), ("step", side))]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", DECODING_METHODS)
def test_cached_greedy_tokens_equal_recomputation_and_repeat_after_the_crop(family, method):
    settings = DecodingSettings.quick(tokens=6)
    context = 10
    model = build_decoder_model(family, method, settings, context + settings.tokens + 1)
    filters = [p for n, p in model.named_parameters() if n.rsplit(".", 1)[-1] in ("w0", "w1", "wK")]
    assert bool(filters) == (method == "gfsa")
    with torch.no_grad():  # GFSA's filter starts as plain attention: move it so Ā²V counts
        for param in filters:
            param.add_(torch.randn_like(param) * 0.5)
    prompt = torch.randint(3, settings.vocab_size, (2, context))
    with torch.inference_mode():
        decoder = prefill(family, model, prompt)
        cached = torch.cat([decoder.first, decode_greedy(decoder, settings.tokens)], dim=1)
        decoder.crop()
        again = torch.cat([decoder.first, decode_greedy(decoder, settings.tokens)], dim=1)
        tokens = prompt
        for _ in range(settings.tokens + 1):  # the whole sequence again at every step
            logits = model(tokens).logits if family == "native" else model(
                input_ids=tokens, use_cache=False).logits
            tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(cached, tokens[:, context:])
    assert torch.equal(again, cached)


def test_the_patched_llama_runs_its_method_and_the_unpatched_one_softmax():
    from filterformer.patching.state import get_patch_state

    settings = DecodingSettings.quick()
    assert get_patch_state(build_decoder_model("hf-llama", "softmax", settings, 32)) is None
    for method in ("gfsa", "neutreno"):
        state = get_patch_state(build_decoder_model("hf-llama", method, settings, 32))
        assert state.spec.method == method


@pytest.mark.parametrize(("changes", "message"), [
    ({"families": ("gpt2",)}, "unknown families"),
    ({"methods": ("gfsa", "softmax")}, "must start with the baseline"),
    ({"methods": ("softmax", "agf")}, "unknown methods"),
    ({"rounds": 1}, "need rounds >= 2"),
    ({"heads": 3, "kv_heads": 2}, "heads divisible by kv_heads"),
])
def test_settings_refuse_what_cannot_be_measured(changes, message):
    with pytest.raises(ValueError, match=message):
        DecodingSettings.quick(**changes)
