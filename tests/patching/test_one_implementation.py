"""Every path reaches GFSA and NeuTRENO's V⁰ rule through the same function, and GFSA's
coefficients are set up, checked, applied and evaluated by the one graph-filter part.

Calls are recorded by the interpreter's profiler, by code object: a path that re-implemented the
method (even from the same kernel pieces) would not show up as a call.
"""

from __future__ import annotations

import pytest
import torch

from filterformer import patch, patched_parameters
from filterformer.attention import AttentionContext, GraphFilterAttention
from filterformer.attention.graph_filter import GraphFilter, check_graph_filter_options
from filterformer.functional import gfsa, gfsa_filter, gfsa_response
from filterformer.method_spec import MethodSpec
from filterformer.models import Transformer, TransformerConfig

from ..call_recording import recorded_calls
from .helpers import hf_inputs, hf_model, images, randomise_patch, timm_model

GFSA = gfsa
NEUTRENO_RULE = AttentionContext.neutreno
#: The graph filter's own steps: set-up, option checks, forward, explicit H̃, response.
SET_UP, CHECK = GraphFilter.init_graph_filter, check_graph_filter_options
FORWARD, MATRIX = GraphFilter.graph_filter, GraphFilter.filter_of
RESPONSE = GraphFilter.filter_response
KERNELS = (gfsa, gfsa_filter, gfsa_response)


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


def _filter_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if isinstance(m, GraphFilter) and hasattr(m, "w0")]


@pytest.mark.parametrize("kind", ["native", "bert", "llama"])
def test_coefficients_are_set_up_and_evaluated_by_the_one_graph_filter(kind):
    spec = MethodSpec.parse("gfsa+neutreno", K=4, learn=["w0", "wK"], layers=[1, 3])
    with recorded_calls(SET_UP, CHECK) as made:
        if kind == "native":
            model = Transformer(TransformerConfig(dim=16, depth=4, num_heads=2, input_dim=4,
                                                  spec=spec)).double()
        else:
            model = patch(hf_model(kind, dtype=torch.float64, layers=4), spec)
    modules = _filter_modules(model)
    assert len(modules) == 2 and made[SET_UP] == 2
    assert made[CHECK] >= 2  # each set-up checks its options through the one check
    for module in modules:
        assert (module.K, module.learn, module.exact_power, module.base) == (
            4, ("w0", "wK"), False, "softmax"
        )
        assert isinstance(module.w0, torch.nn.Parameter)
        assert not isinstance(module.w1, torch.nn.Parameter)  # not learned: a buffer
    randomise_patch([(n, p) for m in modules for n, p in m.named_parameters(recurse=False)])
    sigma = torch.rand(7, dtype=torch.float64)
    with recorded_calls(RESPONSE, gfsa_response) as calls:
        responses = [module.filter_response(sigma) for module in modules]
    assert calls[RESPONSE] == calls[gfsa_response] == len(modules)
    for module, response in zip(modules, responses, strict=True):
        w0, w1, wK = (w.detach().double()[:, None] for w in (module.w0, module.w1, module.wK))
        written_out = w0 + w1 * sigma + wK * (sigma + 3 * (sigma**2 - sigma))  # K − 1 = 3
        torch.testing.assert_close(response, written_out)
    inputs = ({"inputs": torch.randn(2, 5, 4, dtype=torch.float64)} if kind == "native"
              else hf_inputs(kind, torch.float64))
    with recorded_calls(FORWARD, MATRIX, *KERNELS) as calls:
        model(**inputs, output_attentions=True)
    assert calls[FORWARD] == calls[gfsa] == len(modules)
    assert calls[MATRIX] == calls[gfsa_filter] == len(modules)
