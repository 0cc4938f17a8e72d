"""When the Triton kernels run: never under a ``torch.func`` transform or forward-mode AD, where
their autograd Functions have no batching rule or forward derivative and the eager operations
serve (in Triton's interpreter, CUDA's path on the CPU)."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as forward_ad
from torch.func import functional_call, grad, vmap

from filterformer.attention import build_attention
from filterformer.functional import (
    agf_triton,
    gfsa_triton,
    samsa_triton,
    triton_support,
)
from filterformer.functional.triton_support import transformed

from ..cuda.parity import fix_gumbel_noise
from .triton_interpreter import interpreter_only, record_launches

DIM, HEADS, LENGTH, BATCH = 16, 2, 12, 3

METHODS = {
    "gfsa": {},
    "agf": {},
    "samsa hard": {"mode": "hard", "num_samples": 3},
    "samsa soft": {"mode": "soft", "num_samples": 3},
}


def test_transformed_only_inside_a_transform_or_a_dual_level():
    x = torch.randn(4, 3)
    seen = []

    def note(y):
        seen.append(transformed())
        return y.sum()

    assert not transformed()
    vmap(note)(x)
    grad(note)(x[0])
    with forward_ad.dual_level():
        seen.append(transformed())
    note(x)
    assert seen == [True, True, True, False]
    assert not transformed()


def _counted_launches(monkeypatch) -> list[str]:
    """Every kernel launch, recorded, from a clean failure record."""
    modules = (agf_triton, gfsa_triton, samsa_triton)
    for module in modules:
        monkeypatch.setattr(module.SWITCH, "failed", False)
    return record_launches(monkeypatch, *modules)


def _in_the_interpreter(test):
    for mark in interpreter_only:
        test = mark(test)
    return test


def check_per_sample_gradients(monkeypatch, method: str, device: torch.device) -> None:
    """Per-sample gradients of a layer's parameters by ``vmap(grad(...))`` equal one backward
    per sample on ``device``; the kernels run in the latter (where ``device`` allows them) and
    never under the transform. Shared with the CUDA tier."""
    launches = _counted_launches(monkeypatch)
    fix_gumbel_noise(monkeypatch)  # SAMSA's noise: the same for every sample, in vmap or not
    layer = build_attention(method.split()[0], DIM, HEADS, **METHODS[method]).to(device).train()
    params = {name: p.detach() for name, p in layer.named_parameters()}
    x = torch.randn(BATCH, LENGTH, DIM, device=device)
    weights = torch.randn(LENGTH, DIM, device=device)  # a loss that weighs every output

    def loss(params, sample):
        out = functional_call(layer, params, (sample[None],))
        return (out[0] * weights).sum()

    batched = vmap(grad(loss), in_dims=(None, 0), randomness="same")(params, x)
    assert not launches, f"kernels ran under vmap: {launches}"
    for index in range(BATCH):
        leaves = {name: p.clone().requires_grad_() for name, p in params.items()}
        found = torch.autograd.grad(loss(leaves, x[index]), list(leaves.values()),
                                    allow_unused=True)
        for (name, reference), g in zip(leaves.items(), found, strict=True):
            expected = torch.zeros_like(reference) if g is None else g
            torch.testing.assert_close(batched[name][index], expected, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, n=name: f"{n}: {m}")
    assert launches, "the kernels did not run outside the transform"


@_in_the_interpreter
@pytest.mark.parametrize("method", sorted(METHODS))
def test_per_sample_gradients_by_vmap_equal_one_backward_per_sample(monkeypatch, method):
    # CUDA's path on the CPU: the kernels allowed by the device check alone.
    monkeypatch.setattr(triton_support, "on_kernel_device", lambda x: True)
    check_per_sample_gradients(monkeypatch, method, torch.device("cpu"))
