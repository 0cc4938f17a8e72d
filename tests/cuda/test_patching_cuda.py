"""Patched Hugging Face models (BERT, RoBERTa, ALBERT, ViT, GPT-2, grouped-query Llama) and a
patched timm ViT in float32 on CUDA: their outputs equal the explicit float64 references of the
CPU tests, and their gradients equal the patched model's float64 copy on the CPU."""

import copy

import pytest
import torch

from filterformer import patch, patched_parameters

from ..patching.helpers import (
    ReferencePlan,
    coefficients_by_layer,
    hf_inputs,
    hf_model,
    hidden,
    images,
    randomise_patch,
    real_tokens,
    reference_model,
    timm_model,
)
from ..patching.test_hf_attention import CASES
from ..patching.test_timm_vit import REFERENCE_CASES, explicit_reference
from .parity import (
    assert_matches_float64,
    assert_relative_close,
    device_copy,
    inputs_on,
    weighted_sum,
)

pytestmark = pytest.mark.cuda


def _hidden_and_loss(real):
    def outputs(model, inputs):
        states = hidden(model, inputs)
        return {"hidden": states, "loss": weighted_sum(states, real)}

    return outputs


@pytest.mark.parametrize(("kind", "method", "options"), CASES)
def test_patched_hugging_face_model_equals_explicit_reference(kind, method, options, cuda_device):
    model = hf_model(kind, dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs(kind, torch.float64)
    real = real_tokens(kind, inputs)
    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    layers = options.get("layers")
    plan = ReferencePlan(
        coefficients_by_layer(model, layers), options["K"], options.get("neutreno_lambda", 0.0),
        layers,
    )
    expected = hidden(reference_model(unpatched, plan), inputs)
    on_device = device_copy(model, cuda_device)
    with torch.no_grad():
        got = hidden(on_device, inputs_on(inputs, cuda_device, torch.float32))
    assert_relative_close(got.cpu()[real], expected[real], "hidden states")
    assert_matches_float64(
        model, inputs, _hidden_and_loss(real), cuda_device, real={"hidden": real}
    )


@pytest.mark.parametrize(("method", "options"), REFERENCE_CASES)
def test_patched_timm_vit_equals_explicit_reference(method, options, cuda_device):
    model = timm_model(dtype=torch.float64)
    reference = copy.deepcopy(model)
    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    x = images(torch.float64)
    expected = explicit_reference(reference, model, method, options)(x)
    with torch.no_grad():
        got = device_copy(model, cuda_device)(x.to(cuda_device, torch.float32))
    assert_relative_close(got, expected, "logits")

    def outputs(network, inputs):
        logits = network(inputs["x"])
        every = torch.ones(logits.shape[:1], dtype=torch.bool)
        return {"logits": logits, "loss": weighted_sum(logits, every)}

    assert_matches_float64(model, {"x": x}, outputs, cuda_device)
