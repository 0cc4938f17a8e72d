"""The patched attention function against explicit references (decoding: test_hf_decoding)."""

import copy

import pytest
import torch

from filterformer import patch, patched_parameters
from filterformer.patching.hf_attention import HuggingFaceAttentionPatch, filterformer_attention

from .helpers import (
    ReferencePlan,
    coefficients_by_layer,
    hf_inputs,
    hf_model,
    hidden,
    randomise_patch,
    real_tokens,
    reference_model,
)

#: Some models' eager attention takes its softmax in float32, even for float64 inputs.
EAGER_TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}

CASES = [
    ("bert", "gfsa", {"K": 3}),
    ("roberta", "gfsa+neutreno", {"K": 4, "neutreno_lambda": 0.6}),
    ("albert", "gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.5, "layers": [1, 2]}),
    ("vit", "gfsa", {"K": 5}),
    ("gpt2", "gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4}),
    ("llama", "gfsa", {"K": 2, "layers": [1]}),
    ("llama", "gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4}),
]


@pytest.mark.parametrize(("kind", "method", "options"), CASES)
def test_filtered_model_equals_explicit_reference(kind, method, options):
    model = hf_model(kind, dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs(kind, torch.float64)
    real = real_tokens(kind, inputs)
    before = hidden(model, inputs)

    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    after = hidden(model, inputs)
    assert (after - before)[real].abs().max() > 1e-3  # the coefficients act

    layers = options.get("layers")
    plan = ReferencePlan(
        coefficients_by_layer(model, layers), options["K"], options.get("neutreno_lambda", 0.0),
        layers,
    )
    expected = hidden(reference_model(unpatched, plan), inputs)
    torch.testing.assert_close(after[real], expected[real], **EAGER_TOLERANCE)


def test_neutreno_on_selected_layers_only():
    model = hf_model("llama", dtype=torch.float64, layers=3)  # V⁰ from layer 0, used in 2 only
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs("llama", torch.float64)
    real = real_tokens("llama", inputs)
    patch(model, "neutreno", neutreno_lambda=0.7, layers=[2])
    plan = ReferencePlan({}, 2, 0.7, layers=[2])
    expected = hidden(reference_model(unpatched, plan), inputs)
    torch.testing.assert_close(hidden(model, inputs)[real], expected[real], **EAGER_TOLERANCE)
    assert patched_parameters(model) == []  # a fixed λ adds no parameter


def test_output_attentions_returns_the_filter():
    model = hf_model("bert", dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs("bert", torch.float64)
    patch(model, "gfsa", K=3)
    randomise_patch(patched_parameters(model))
    maps = model(**inputs, output_attentions=True).attentions
    plan = ReferencePlan(coefficients_by_layer(model), 3, 0.0)
    expected = reference_model(unpatched, plan)(**inputs, output_attentions=True).attentions
    real = real_tokens("bert", inputs)[:, None, :, None]
    for got, want in zip(maps, expected, strict=True):
        assert got.shape == want.shape
        torch.testing.assert_close(got * real, want * real, **EAGER_TOLERANCE)


def test_unsupported_attention_arguments_are_refused():
    model = hf_model("llama")
    patch(model, "gfsa")
    module = model.layers[0].self_attn
    q = torch.randn(1, 4, 3, 8)
    kv = torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match="softcap"):
        filterformer_attention(module, q, kv, kv, None, softcap=30.0)


def test_filter_response_is_the_closed_form_of_the_patch_coefficients():
    model = patch(hf_model("llama"), "gfsa", K=4)
    randomise_patch(patched_parameters(model))
    patches = [m for m in model.modules() if isinstance(m, HuggingFaceAttentionPatch)]
    sigma = torch.linspace(0, 1, 9, dtype=torch.float64)
    for module in patches:
        w0, w1, wK = (getattr(module, n).detach().double()[:, None] for n in ("w0", "w1", "wK"))
        response = module.filter_response(sigma)
        assert response.shape == (4, 9) and response.dtype == torch.float64
        taylor = sigma + 3 * (sigma**2 - sigma)
        torch.testing.assert_close(response, w0 + w1 * sigma + wK * taylor)
    assert len(patches) == 2


def test_filter_response_needs_a_gfsa_patch():
    model = patch(hf_model("bert"), "neutreno", neutreno_lambda=0.5)
    module = next(m for m in model.modules() if isinstance(m, HuggingFaceAttentionPatch))
    with pytest.raises(ValueError, match="without GFSA"):
        module.filter_response(torch.linspace(0, 1, 5))
