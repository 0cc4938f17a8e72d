"""Every path reaches GFSA and NeuTRENO's V⁰ rule through the same function.

Calls are recorded by the interpreter's profiler, by code object: a path that re-implemented the
method (even from the same kernel pieces) would not show up as a call.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Callable, Iterator

import pytest
import torch

from filterformer import patch, patched_parameters
from filterformer.attention import AttentionContext, GraphFilterAttention
from filterformer.functional import gfsa
from filterformer.models import Transformer, TransformerConfig

from .helpers import hf_inputs, hf_model, images, randomise_patch, timm_model

GFSA = gfsa
NEUTRENO_RULE = AttentionContext.neutreno


@contextlib.contextmanager
def recorded_calls(*functions: Callable) -> Iterator[collections.Counter]:
    """Count the calls of ``functions`` (by code object) made in this thread meanwhile."""
    codes = {function.__code__: function for function in functions}
    calls: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


def test_the_native_module_and_model_call_the_one_gfsa_and_v0_rule():
    module = GraphFilterAttention(16, 2, K=3)
    with recorded_calls(GFSA, NEUTRENO_RULE) as calls:
        module(torch.randn(2, 5, 16))
    assert calls[GFSA] == 1
    depth = 3
    config = TransformerConfig(dim=16, depth=depth, num_heads=2, attention="gfsa",
                               neutreno_lambda=0.5, input_dim=4)
    model = Transformer(config)
    with recorded_calls(GFSA, NEUTRENO_RULE) as calls:
        model(inputs=torch.randn(2, 5, 4))
    assert (calls[GFSA], calls[NEUTRENO_RULE]) == (depth, depth)


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_patched_hugging_face_models_call_the_one_gfsa_and_v0_rule(kind):
    model = hf_model(kind, dtype=torch.float64)
    patch(model, "gfsa+neutreno", neutreno_lambda=0.4)
    randomise_patch(patched_parameters(model))
    layers = model.config.num_hidden_layers
    with recorded_calls(GFSA, NEUTRENO_RULE) as calls:
        model(**hf_inputs(kind, torch.float64))
    assert (calls[GFSA], calls[NEUTRENO_RULE]) == (layers, layers)


def test_cached_decoding_of_a_grouped_query_llama_calls_the_one_gfsa_and_v0_rule():
    model = hf_model("llama", head=True, dtype=torch.float64)
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    patch(model, "gfsa+neutreno", neutreno_lambda=0.4)
    ids = torch.randint(3, 50, (2, 6))
    cache = model(ids[:, :5], use_cache=True).past_key_values
    layers = model.config.num_hidden_layers
    with recorded_calls(GFSA, NEUTRENO_RULE) as calls:
        model(ids[:, 5:], cache=cache)  # one new position after 5 cached ones
    assert (calls[GFSA], calls[NEUTRENO_RULE]) == (layers, layers)


def test_a_patched_timm_vit_calls_the_one_gfsa_and_v0_rule():
    model = timm_model(dtype=torch.float64, depth=3)
    patch(model, "gfsa+neutreno", neutreno_lambda=0.4)
    with recorded_calls(GFSA, NEUTRENO_RULE) as calls:
        model(images(torch.float64))
    assert (calls[GFSA], calls[NEUTRENO_RULE]) == (3, 3)


def test_the_recorder_sees_only_the_functions_it_watches():
    module = GraphFilterAttention(16, 2)
    with recorded_calls(NEUTRENO_RULE) as calls:
        module(torch.randn(1, 3, 16))  # a lone layer is the first of its pass: the rule runs
    assert calls[NEUTRENO_RULE] == 1 and calls[GFSA] == 0
