"""The classifier, causal LM and regressor with every method: float32 on CUDA equals the float64
copy on the CPU (predictions, loss with its auxiliary terms, every gradient, padded batches), and
a bf16 autocast training step on CUDA is finite."""

import pytest
import torch

from filterformer.training.precision import autocast

from .methods import NOISY_METHODS
from .models import MODEL_METHODS, build_model, model_batch, model_outputs
from .parity import assert_matches_float64, fix_gumbel_noise, inputs_on, perturb_filters

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize(("model", "method"), MODEL_METHODS)
def test_training_forward_and_gradients_match_float64(model, method, cuda_device, monkeypatch):
    if method in NOISY_METHODS:
        fix_gumbel_noise(monkeypatch)
    reference = build_model(model, method)
    perturb_filters(reference)
    reference.double().train()
    inputs, real = model_batch(model)
    # The causal LM predicts at every real token; the heads pool them into one row each.
    positions = {"predictions": real} if model == "causal_lm" else None
    assert_matches_float64(reference, inputs, model_outputs, cuda_device, real=positions)


@pytest.mark.parametrize(("model", "method"), MODEL_METHODS)
def test_bf16_autocast_training_steps_are_finite(model, method, cuda_device):
    network = build_model(model, method)
    perturb_filters(network)
    network.to(cuda_device).train()
    before = {name: p.detach().clone() for name, p in network.named_parameters()}
    optimizer = torch.optim.AdamW(network.parameters(), lr=1e-3)
    inputs, _ = model_batch(model)
    inputs = inputs_on(inputs, cuda_device, torch.float32)
    for step in range(2):
        optimizer.zero_grad()
        with autocast("bf16", cuda_device):
            loss = network(**inputs).loss
        assert torch.isfinite(loss), f"step {step}: loss {loss.item()}"
        loss.backward()
        for name, param in network.named_parameters():
            assert param.grad is not None, f"step {step}: no gradient for {name}"
            assert torch.isfinite(param.grad).all(), f"step {step}: non-finite gradient of {name}"
        optimizer.step()
    for name, param in network.named_parameters():
        assert torch.isfinite(param).all(), f"{name} is not finite after the steps"
    moved = [name for name, p in network.named_parameters() if not torch.equal(p, before[name])]
    assert moved, "the optimiser steps changed no parameter"
