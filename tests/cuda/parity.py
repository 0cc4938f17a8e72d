"""A model on the device under test against its float64 copy on the CPU: outputs, losses and
every parameter's gradient, compared by relative norm."""

from __future__ import annotations

import copy
import sys
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from filterformer.attention import AttentiveGraphFilterAttention, SamplingAttention
from filterformer.functional import gumbel_noise

from ..models.helpers import randomise_filters

#: float32 against float64: ‖device − float64‖ ≤ RTOL·‖float64‖ (float32 rounding is ~1e-7 per
#: operation; the models chain a few hundred).
RTOL = 1e-4
#: A gradient whose float64 norm is below this fraction of the largest one is compared with that
#: floor instead of its own norm (an error up to RTOL·GRADIENT_FLOOR = 1e-7 of the largest,
#: float32's rounding): a gradient that cancels to ~0 (gate fusion's bias) keeps only rounding.
GRADIENT_FLOOR = 1e-3

#: A function of a model and its inputs returning named outputs, ``"loss"`` among them.
Outputs = Callable[[nn.Module, dict[str, Any]], dict[str, Tensor]]


def device_copy(reference: nn.Module, device: torch.device) -> nn.Module:
    """A float32 copy of ``reference`` on ``device`` (tied weights stay tied)."""
    return copy.deepcopy(reference).to(device=device, dtype=torch.float32)


def inputs_on(inputs: dict[str, Any], device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """``inputs`` on ``device``, floating-point tensors in ``dtype``, others as they are."""
    moved = {}
    for name, value in inputs.items():
        if isinstance(value, Tensor):
            value = value.to(device, dtype) if value.is_floating_point() else value.to(device)
        moved[name] = value
    return moved


def assert_relative_close(
    actual: Tensor, expected: Tensor, name: str, *, rtol: float = RTOL, floor: float = 0.0
) -> None:
    """``‖actual − expected‖ ≤ rtol·max(‖expected‖, floor)``, ``actual`` finite, any devices."""
    actual = actual.detach().to("cpu", torch.float64)
    expected = expected.detach().to("cpu", torch.float64)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    assert torch.isfinite(actual).all(), f"{name}: non-finite values on the device"
    error = (actual - expected).norm().item()
    bound = rtol * max(expected.norm().item(), floor)
    assert error <= bound, (
        f"{name}: ‖device − float64‖ = {error:.3g} > {bound:.3g} "
        f"(‖float64‖ = {expected.norm().item():.3g})"
    )


def assert_gradients_close(actual: nn.Module, expected: nn.Module, *, rtol: float = RTOL) -> None:
    """Every parameter's gradient in ``actual`` equals the one in ``expected`` (same names)."""
    wanted = dict(expected.named_parameters())
    norms = [p.grad.norm().item() for p in wanted.values() if p.grad is not None]
    assert norms and max(norms) > 0, "the float64 model received no gradient"
    floor = GRADIENT_FLOOR * max(norms)
    for name, param in actual.named_parameters():
        want = wanted[name].grad
        if want is None:
            assert param.grad is None or not param.grad.any(), f"{name}: a gradient only on device"
            continue
        assert param.grad is not None, f"{name}: no gradient on the device"
        assert_relative_close(param.grad, want, f"gradient of {name}", rtol=rtol, floor=floor)


def assert_matches_float64(
    reference: nn.Module, inputs: dict[str, Any], outputs: Outputs, device: torch.device,
    *, real: dict[str, Tensor] | None = None,
) -> None:
    """Run ``reference`` (float64, CPU) and its float32 copy on ``device`` on ``inputs``, then
    compare every output of ``outputs`` and, after ``loss.backward()``, every gradient.

    Args:
        reference: the float64 model, in the mode (train or eval) to compare.
        inputs: CPU inputs; floating-point ones are given to each model in its own dtype.
        outputs: ``(model, inputs) -> {name: tensor}``, with a scalar ``"loss"``.
        device: the device under test.
        real: ``{name: (B, N) bool}``: compare only these positions of the named outputs
            (padded positions' outputs are not defined).
    """
    model = device_copy(reference, device)
    expected = outputs(reference, inputs_on(inputs, torch.device("cpu"), torch.float64))
    actual = outputs(model, inputs_on(inputs, device, torch.float32))
    assert set(actual) == set(expected) and "loss" in expected
    for name, want in expected.items():
        got = actual[name]
        if real is not None and name in real:
            got, want = got[real[name].to(got.device)], want[real[name]]
        assert_relative_close(got, want, name)
    expected["loss"].backward()
    actual["loss"].backward()
    assert_gradients_close(model, reference)


def weighted_sum(output: Tensor, real: Tensor) -> Tensor:
    """A scalar that depends on every real position of ``output`` ``(B, N, …)``, with random
    weights drawn on the CPU from a generator seeded by the shape (every call and device sees the
    same ones)."""
    generator = torch.Generator().manual_seed(zlib.crc32(repr(tuple(output.shape)).encode()))
    weights = torch.randn(output.shape, dtype=torch.float64, generator=generator).to(output)
    trailing = [1] * (output.dim() - real.dim())
    mask = real.to(output.device, torch.bool).reshape(*real.shape, *trailing)
    # where, not a product: a padded position's value never reaches the loss, even if not finite.
    return torch.where(mask, output * weights, 0).sum()


def perturb_filters(model: nn.Module) -> None:
    """Move every learned filter away from its identity start, so that the filters act: GFSA's
    ``w0, w1, wK``, AGF's ``θ`` and singular-value projection, SAMSA's support scores and values
    (spread among the tokens' scores)."""
    randomise_filters(model)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, AttentiveGraphFilterAttention):
                module.p.normal_()
                module.singular_values.weight.normal_(std=0.5)
            if isinstance(module, SamplingAttention):
                module.support_scores.normal_()
                module.support_values.normal_()


def fix_gumbel_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make SAMSA's training noise the same on every device: drawn on the CPU from a generator
    seeded by the shape, then moved to the scores' device and dtype. Every module of the package
    that holds :func:`gumbel_noise` by that name gets the replacement."""

    def same_everywhere(
        like: Tensor, generator: torch.Generator | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        seed = zlib.crc32(repr(tuple(like.shape)).encode())
        cpu = torch.empty(like.shape, dtype=torch.float64)
        noise = gumbel_noise(cpu, generator=torch.Generator().manual_seed(seed))
        return noise.to(like.device, dtype or like.dtype)

    users = [
        module for name, module in list(sys.modules.items())
        if name.startswith("filterformer") and getattr(module, "gumbel_noise", None) is gumbel_noise
    ]
    assert users, "no module of filterformer holds gumbel_noise: fix SAMSA's noise another way"
    for module in users:
        monkeypatch.setattr(module, "gumbel_noise", same_everywhere)
