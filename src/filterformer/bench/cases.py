"""Ready-to-run benchmark cases: inputs, a forward, and the step one timing measures.

Three levels, each fed fresh seeded random inputs:

- kernel: a pure function of q, k, v ``(B, h, N, d)``;
- module: an attention module on hidden states ``(B, N, D)`` with its projections, handed an
  :class:`~filterformer.attention.AttentionContext` that already holds a first layer's values V⁰
  (so NeuTRENO's term is active and every module sees the same context);
- model: a whole encoder on ``(B, N, D)`` embeddings.

A ``train`` step is forward + backward of a fixed random upstream gradient (plus any auxiliary
loss, e.g. AGF's regulariser); an ``inference`` step is the forward under
``torch.inference_mode`` with modules in ``eval()``. Gradients are cleared between steps, outside
the timed region. Inputs come from their own seeded generator, so methods compared with each
other are fed the same tensors whatever their weight initialisation consumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..attention import AttentionContext
from .config import BenchShape, check_choice

__all__ = ["INPUT_SEED", "BenchCase", "kernel_case", "model_case", "module_case"]

#: A forward: the main output first, then scalar losses that join the backward.
Forward = Callable[[], Sequence[Tensor]]


@dataclass
class BenchCase:
    """One configuration, built and ready to step.

    Attributes:
        forward: runs the method once; returns the main output then any scalar losses.
        mode: ``train`` or ``inference``.
        grad_output: the upstream gradient of the main output (``train`` only).
        leaves: tensors whose gradients are cleared between steps (inputs and parameters).
        inputs: what the forward is fed, by name (for inspection).
        module: the module or model stepped, if any.
    """

    forward: Forward
    mode: str
    grad_output: Tensor | None = None
    leaves: list[Tensor] = field(default_factory=list)
    inputs: dict[str, Tensor] = field(default_factory=dict)
    module: nn.Module | None = None

    def step(self) -> None:
        """One timed step: forward + backward (``train``) or forward only (``inference``)."""
        if self.mode == "inference":
            with torch.inference_mode():
                self.forward()
            return
        outputs = list(self.forward())
        grads = [self.grad_output] + [None] * (len(outputs) - 1)
        torch.autograd.backward(outputs, grads)

    def reset(self) -> None:
        """Clear gradients between steps (not timed), so no step accumulates into the last."""
        for leaf in self.leaves:
            leaf.grad = None


#: The seed of every case's inputs (weights are seeded by the caller).
INPUT_SEED = 0


class _Inputs:
    """Random inputs drawn from their own generator, independent of weight initialisation."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.generator = torch.Generator().manual_seed(INPUT_SEED)

    def __call__(self, shape: tuple[int, ...], requires_grad: bool = False) -> Tensor:
        sample = torch.randn(shape, generator=self.generator).to(self.device)
        return sample.requires_grad_(requires_grad)


def kernel_case(
    kernel: Callable[..., Tensor],
    shape: BenchShape,
    N: int,
    mode: str,
    device: torch.device,
    *,
    coefficients: bool = False,
) -> BenchCase:
    """A kernel ``kernel(q, k, v[, w0, w1, wK])`` on random ``(B, h, N, d)`` inputs.

    Args:
        kernel: the function to time.
        shape: sizes.
        N: sequence length.
        mode: ``train`` or ``inference``.
        device: where the tensors live.
        coefficients: also pass random per-head ``w0, w1, wK`` ``(h,)`` (GFSA), learned in
            ``train`` like the layer's.
    """
    check_choice("mode", mode, ("train", "inference"))
    train = mode == "train"
    draw = _Inputs(device)
    qkv_shape = (shape.batch, shape.heads, N, shape.head_dim)
    inputs = [draw(qkv_shape, train) for _ in range(3)]
    if coefficients:
        inputs += [draw((shape.heads,), train) for _ in range(3)]
    grad = draw(qkv_shape) if train else None
    names = ("q", "k", "v", "w0", "w1", "wK")
    return BenchCase(
        forward=lambda: [kernel(*inputs)],
        mode=mode,
        grad_output=grad,
        leaves=inputs if train else [],
        inputs=dict(zip(names, inputs, strict=False)),
    )


def module_case(
    module: nn.Module, shape: BenchShape, N: int, mode: str, device: torch.device
) -> BenchCase:
    """An attention module on random ``(B, N, D)`` hidden states, with V⁰ in its context.

    Args:
        module: an :class:`~filterformer.attention.AttentionBase` of width ``shape.width``.
        shape, N, mode, device: as :func:`kernel_case`.
    """
    check_choice("mode", mode, ("train", "inference"))
    train = mode == "train"
    module = module.to(device).train(train)
    draw = _Inputs(device)
    x = draw((shape.batch, N, shape.width), train)
    # V⁰ comes from an earlier layer in a real model, so gradients flow into it while training.
    first_values = draw((shape.batch, shape.heads, N, shape.head_dim), train)
    grad = draw(x.shape) if train else None

    def forward() -> list[Tensor]:
        # A fresh context per step: layers add their auxiliary losses to it.
        context = AttentionContext(first_values=first_values)
        out = module(x, context=context)
        aux = context.aux_loss()
        return [out] if aux is None else [out, aux]

    return BenchCase(
        forward=forward,
        mode=mode,
        grad_output=grad,
        leaves=[x, first_values, *module.parameters()] if train else [],
        inputs={"x": x, "first_values": first_values},
        module=module,
    )


def model_case(
    model: nn.Module,
    forward: Callable[[nn.Module, Tensor], Sequence[Tensor]],
    shape: BenchShape,
    N: int,
    mode: str,
    device: torch.device,
) -> BenchCase:
    """A whole model on random ``(B, N, D)`` input embeddings (which need no gradient).

    Args:
        model: the model.
        forward: ``forward(model, x)`` -> the last hidden states ``(B, N, D)`` then any scalar
            losses.
        shape, N, mode, device: as :func:`kernel_case`.
    """
    check_choice("mode", mode, ("train", "inference"))
    train = mode == "train"
    model = model.to(device).train(train)
    draw = _Inputs(device)
    x = draw((shape.batch, N, shape.width))
    return BenchCase(
        forward=lambda: forward(model, x),
        mode=mode,
        grad_output=draw(x.shape) if train else None,
        leaves=list(model.parameters()) if train else [],
        inputs={"x": x},
        module=model,
    )
