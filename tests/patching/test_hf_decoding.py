"""GFSA's cached ``ĀV`` under Hugging Face decoding: generation with the cache (greedy, beam
search, assisted) equals recomputation without it, the cache's own operations are followed, and
changes made behind the patch's back are refused, saying what they were."""

import copy

import pytest
import torch

from filterformer import patch, patched_parameters
from filterformer.functional.softmax import SDPA_GROUPS
from filterformer.patching.state import CachedPowers, PowerCache

from .helpers import DECODERS, VOCAB, hf_inputs, hf_model, randomise_patch

#: float64 models; generate() hands its scores back in float32.
DECODING_TOLERANCE = {"rtol": 1e-9, "atol": 1e-9}


def patched_lm(kind: str, method: str, **options):
    """A tiny float64 causal LM patched with ``method``, its coefficients moved so GFSA acts."""
    model = hf_model(kind, head=True, dtype=torch.float64)
    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    return model


def assert_same_generation(cached, recomputed) -> None:
    assert torch.equal(cached.sequences, recomputed.sequences)
    assert len(cached.scores) == len(recomputed.scores)
    for a, b in zip(cached.scores, recomputed.scores, strict=True):
        finite = a.isfinite()  # min_new_tokens and beam search set some scores to -inf
        assert torch.equal(finite, b.isfinite())
        torch.testing.assert_close(a[finite], b[finite], **DECODING_TOLERANCE)


def record(monkeypatch, operation: str) -> list:
    """The first argument of every call of GFSA's following of the cache's ``operation``."""
    calls = []
    follow = getattr(CachedPowers, operation)

    def spy(self, *args):
        calls.append(args[0] if args else None)
        return follow(self, *args)

    monkeypatch.setattr(CachedPowers, operation, spy)
    return calls


@pytest.mark.parametrize("kind", DECODERS)
@pytest.mark.parametrize("method", ["gfsa", "neutreno", "gfsa+neutreno"])
def test_generate_with_cache_equals_generate_without(kind, method):
    options = {"neutreno_lambda": 0.4} if "neutreno" in method else {}
    model = patched_lm(kind, method, **options)
    inputs = hf_inputs(kind)
    settings = dict(
        max_new_tokens=5, min_new_tokens=5, do_sample=False, output_scores=True,
        return_dict_in_generate=True,
    )
    cached = model.generate(**inputs, use_cache=True, **settings)
    recomputed = model.generate(**inputs, use_cache=False, **settings)
    assert_same_generation(cached, recomputed)


BEAM_CASES = [
    ("llama", "gfsa", {"K": 3}),
    ("llama", "gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4}),
    ("gpt2", "gfsa", {"K": 3, "exact_power": True}),  # ĀV and Ā²V kept per position
]


@pytest.mark.parametrize(("kind", "method", "options"), BEAM_CASES)
def test_beam_search_with_cache_equals_without(kind, method, options, monkeypatch):
    model = patched_lm(kind, method, **options)
    inputs = hf_inputs(kind)  # two prompts, one left-padded: 8 beams
    settings = dict(
        num_beams=4, max_new_tokens=5, min_new_tokens=5, do_sample=False, output_scores=True,
        return_dict_in_generate=True,
    )
    reorders = record(monkeypatch, "reorder_cache")
    cached = model.generate(**inputs, use_cache=True, **settings)
    assert len(reorders) == 5
    recomputed = model.generate(**inputs, use_cache=False, **settings)
    assert_same_generation(cached, recomputed)
    torch.testing.assert_close(
        cached.sequences_scores, recomputed.sequences_scores, **DECODING_TOLERANCE
    )
    # The beams really swapped: after the first step (whose beams are all copies of the prompt)
    # some reordering takes distinct beams out of their order.
    identity = torch.arange(len(reorders[0]))
    assert any(not torch.equal(idx.cpu(), identity) for idx in reorders[1:])


@pytest.mark.parametrize("method", ["gfsa", "gfsa+neutreno"])
@pytest.mark.parametrize("draft", ["twin", "small"])
def test_assisted_decoding_with_cache_equals_without(method, draft, monkeypatch):
    options = {"K": 3, "neutreno_lambda": 0.4} if "neutreno" in method else {"K": 3}
    model = patched_lm("llama", method, **options)
    if draft == "twin":  # the target with other coefficients: its drafts are partly accepted
        assistant = copy.deepcopy(model)
        randomise_patch(patched_parameters(assistant), scale=0.5)
    else:  # a 1-layer model from a config with the target's vocabulary, unpatched
        assistant = hf_model("llama", head=True, dtype=torch.float64, layers=1)
    # Draft 4 tokens every round, however unsure the draft is.
    assistant.generation_config.num_assistant_tokens = 4
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    assistant.generation_config.assistant_confidence_threshold = 0.0
    inputs = {name: x[:1] for name, x in hf_inputs("llama").items()}  # one sequence
    settings = dict(
        max_new_tokens=20, do_sample=False, output_scores=True, return_dict_in_generate=True
    )
    crops = record(monkeypatch, "crop")
    assisted = model.generate(**inputs, assistant_model=assistant, **settings)
    recomputed = model.generate(**inputs, use_cache=False, **settings)
    assert_same_generation(assisted, recomputed)
    assert any(n < 0 for n in crops)  # rejected draft tokens were cropped
    if draft == "twin":
        assert any(-4 < n < 0 for n in crops)  # part of a 4-token draft accepted


def _decode_after(model, cache, past, new):
    """Logits of ``new`` ``(B, 3)`` decoded with ``cache`` (holding ``past``) as a chunk of 2
    then 1, and the same recomputed from ``past`` and ``new`` without a cache."""
    out = model(new[:, :2], past_key_values=cache)
    steps = [out.logits, model(new[:, 2:], past_key_values=out.past_key_values).logits]
    full = model(torch.cat([past, new], dim=1), use_cache=False).logits
    return torch.cat(steps, dim=1), full[:, past.shape[1] :]


#: A cache operation, and the same operation on the ``(2, 5)`` prompt the cache holds.
OPERATIONS = {
    "reorder_cache": (
        lambda cache: cache.reorder_cache(torch.tensor([1, 0])), lambda ids: ids[[1, 0]]
    ),
    "batch_select_indices": (
        lambda cache: cache.batch_select_indices(torch.tensor([1])), lambda ids: ids[[1]]
    ),
    "batch_repeat_interleave": (
        lambda cache: cache.batch_repeat_interleave(2), lambda ids: ids.repeat_interleave(2, 0)
    ),
    "crop": (lambda cache: cache.crop(-2), lambda ids: ids[:, :-2]),
    "reset": (lambda cache: cache.reset(), lambda ids: ids[:, :0]),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_cache_operations_are_followed(operation):
    model = patched_lm("llama", "gfsa+neutreno", K=3, neutreno_lambda=0.4)
    ids = torch.randint(3, VOCAB, (2, 5))
    cache = model(ids, use_cache=True).past_key_values
    on_cache, on_ids = OPERATIONS[operation]
    on_cache(cache)
    past = on_ids(ids)
    new = torch.randint(3, VOCAB, (past.shape[0], 3))
    decoded, recomputed = _decode_after(model, cache, past, new)
    torch.testing.assert_close(decoded, recomputed, **DECODING_TOLERANCE)


def test_a_copied_cache_carries_its_own_powers():
    model = patched_lm("llama", "gfsa", K=3)
    ids = torch.randint(3, VOCAB, (2, 5))
    with torch.no_grad():  # as when reusing a prompt's cache (deepcopy takes no autograd graph)
        cache = model(ids, use_cache=True).past_key_values
    twin = copy.deepcopy(cache)
    twin.reorder_cache(torch.tensor([1, 0]))  # reorders the copy's ĀV only
    new = torch.randint(3, VOCAB, (2, 3))
    for got, want in (
        _decode_after(model, cache, ids, new),
        _decode_after(model, twin, ids[[1, 0]], new),
    ):
        torch.testing.assert_close(got, want, **DECODING_TOLERANCE)


def test_step_by_step_decoding_equals_full_forward():
    model = patched_lm("llama", "gfsa+neutreno", K=4, neutreno_lambda=0.3)
    ids = torch.randint(3, VOCAB, (2, 9))
    full = model(ids, use_cache=False).logits
    out = model(ids[:, :4], use_cache=True)  # a prefill, a chunk of 3, then single tokens
    steps = [out.logits]
    out = model(ids[:, 4:7], past_key_values=out.past_key_values)
    steps.append(out.logits)
    for t in (7, 8):
        out = model(ids[:, t : t + 1], past_key_values=out.past_key_values)
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **DECODING_TOLERANCE)


#: Operations on a cache's layers, which the patch cannot see, and what its refusal says.
LAYER_OPERATIONS = {
    "reorder_cache": (
        lambda layer: layer.reorder_cache(torch.tensor([1, 0])),
        "reordered or overwritten through its layers",
    ),
    "crop": (lambda layer: layer.crop(-1), "cropped or extended through its layers"),
    "batch_select_indices": (
        lambda layer: layer.batch_select_indices(torch.tensor([1])),
        "batch was changed through the cache's layers",
    ),
}


@pytest.mark.parametrize("operation", LAYER_OPERATIONS)
def test_operations_on_the_cache_layers_are_refused(operation):
    model = patched_lm("gpt2", "gfsa", K=3)
    ids = torch.randint(3, VOCAB, (2, 5))
    cache = model(ids, use_cache=True).past_key_values
    on_layer, message = LAYER_OPERATIONS[operation]
    for layer in cache.layers:
        on_layer(layer)
    rows = cache.layers[0].keys.shape[0]
    with pytest.raises(ValueError, match=message):
        model(ids[:rows, :1], past_key_values=cache)


def test_cache_made_before_patching_is_refused():
    model = hf_model("gpt2", head=True)
    ids = torch.randint(3, VOCAB, (1, 5))
    cache = model(ids, use_cache=True).past_key_values
    patch(model, "gfsa")
    with pytest.raises(ValueError, match="holds no ĀV for them: the cache was filled before"):
        model(ids[:, :1], past_key_values=cache)


def test_cached_powers_crop_as_transformers_caches_do():
    store = PowerCache()
    store.append_key(torch.randn(1, 2, 5, 4))  # a step appends its keys, then ĀV at them
    store.append_power(1, torch.randn(1, 2, 5, 4))
    powers = CachedPowers({0: store})
    for tokens_to_remove, length in ((0, 5), (-2, 3), (2, 2)):  # positive: the length kept
        powers.crop(tokens_to_remove)
        assert store.length == length and store.power(1).shape[-2] == length


def test_kept_keys_follow_crops_and_reorders_across_decoding_steps():
    store = PowerCache()
    keys = torch.randn(2, 2, 6, 4)
    for start, end in ((0, 3), (3, 4), (4, 5), (5, 6)):  # a prompt, then one token at a time
        store.append_key(keys[..., start:end, :])
        assert store.length == end
        assert torch.equal(store.last_key, keys[:, :1, end - 1 : end, :])
    powers = CachedPowers({0: store})
    powers.crop(-2)
    assert store.length == 4 and torch.equal(store.last_key, keys[:, :1, 3:4, :])
    powers.reorder_cache(torch.tensor([1, 0]))
    store.append_key(keys[[1, 0], :, 4:5, :])
    assert store.length == 5 and torch.equal(store.last_key, keys[[1, 0], :1, 4:5, :])
    powers.batch_select_indices(torch.tensor([1]))
    assert store.last_key.shape == (1, 1, 1, 4)
    assert torch.equal(store.last_key, keys[:1, :1, 4:5, :])


@pytest.mark.skipif(not SDPA_GROUPS, reason="SDPA attends grouped keys from torch 2.5")
@pytest.mark.parametrize("method", ["neutreno", "gfsa"])
def test_decoding_attends_grouped_keys_without_a_copy_per_query_head(method, monkeypatch):
    options = {"neutreno_lambda": 0.4} if method == "neutreno" else {}
    model = patched_lm("llama", method, **options)
    config = model.config
    ids = torch.randint(3, VOCAB, (2, 6))
    cache = model(ids[:, :5], use_cache=True).past_key_values
    key_heads = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, value, *args, **kwargs):
        key_heads.append((key.shape[1], value.shape[1]))
        return sdpa(query, key, value, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model(ids[:, 5:], past_key_values=cache)
    grouped = (config.num_key_value_heads,) * 2
    # ĀV: the cache's keys and values as they are; GFSA's Ā²V mixes a value per query head.
    per_layer = [grouped] if method == "neutreno" else [
        grouped, (config.num_attention_heads,) * 2,
    ]
    assert key_heads == per_layer * config.num_hidden_layers
