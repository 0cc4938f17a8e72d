"""Benchmark cases: a method built at one size, fed seeded random inputs, ready to step.

Kernels take q, k, v ``(B, h, N, d)``; attention modules take hidden states ``(B, N, D)`` and a
context that already holds a first layer's values V⁰ (so NeuTRENO's term is active); models take
``(B, N, D)`` embeddings. A ``train`` step is forward + backward of a fixed random upstream
gradient (plus any auxiliary loss, e.g. AGF's regulariser); an ``inference`` step is the forward
under ``torch.inference_mode`` in ``eval()``. Inputs come from their own seeded generator, so
methods compared with each other are fed the same tensors whatever their weights consumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..attention import AttentionContext

__all__ = ["MODES", "BenchCase", "BenchShape", "kernel_case", "model_case", "module_case"]

#: ``train`` times forward + backward, ``inference`` the forward under ``torch.inference_mode``.
MODES = ("train", "inference")
#: The seed of every case's inputs (weights are seeded by the caller).
INPUT_SEED = 0


@dataclass(frozen=True)
class BenchShape:
    """The sizes every method is measured at: B, h, d (width ``D = h·d``), and the whole-model
    benchmarks' depth and MLP ratio."""

    batch: int = 2
    heads: int = 4
    head_dim: int = 64
    depth: int = 4
    mlp_ratio: float = 4.0

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @classmethod
    def quick(cls) -> BenchShape:
        """Tiny sizes for tests and smoke runs."""
        return cls(batch=1, heads=2, head_dim=8, depth=1, mlp_ratio=2.0)


@dataclass
class BenchCase:
    """One method at one size: ``forward()`` returns its main output, then scalar losses;
    ``grad_output`` is the main output's upstream gradient (``train`` only), ``leaves`` the
    inputs and parameters whose gradients :meth:`reset` clears, ``inputs`` what the forward is
    fed, and ``module`` the module or model stepped, if any."""

    forward: Callable[[], Sequence[Tensor]]
    mode: str
    grad_output: Tensor | None = None
    leaves: list[Tensor] = field(default_factory=list)
    inputs: dict[str, Tensor] = field(default_factory=dict)
    module: nn.Module | None = None

    def step(self) -> None:
        """Forward + backward (``train``) or the forward alone (``inference``)."""
        if self.mode == "inference":
            with torch.inference_mode():
                self.forward()
            return
        outputs = list(self.forward())
        torch.autograd.backward(outputs, [self.grad_output] + [None] * (len(outputs) - 1))

    def reset(self) -> None:
        """Clear gradients between steps (untimed), so no step accumulates into the last."""
        for leaf in self.leaves:
            leaf.grad = None


#: ``build(shape, N, mode, device)`` -> a :class:`BenchCase`.
CaseBuilder = Callable[[BenchShape, int, str, torch.device], BenchCase]


def _sampler(device: torch.device) -> Callable[..., Tensor]:
    generator = torch.Generator().manual_seed(INPUT_SEED)

    def draw(*shape: int, grad: bool = False) -> Tensor:
        return torch.randn(shape, generator=generator).to(device).requires_grad_(grad)

    return draw


def kernel_case(kernel: Callable[..., Tensor], *, coefficients: bool = False) -> CaseBuilder:
    """Cases of ``kernel(q, k, v) -> (B, h, N, d)`` on random q, k, v ``(B, h, N, d)``; with
    ``coefficients``, also per-head ``w0, w1, wK`` ``(h,)`` (GFSA's, learned in ``train``)."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        train, draw = mode == "train", _sampler(device)
        qkv = (shape.batch, shape.heads, N, shape.head_dim)
        names = ("q", "k", "v", "w0", "w1", "wK") if coefficients else ("q", "k", "v")
        inputs = {n: draw(*(qkv if n in "qkv" else (shape.heads,)), grad=train) for n in names}
        return BenchCase(
            forward=lambda: [kernel(*inputs.values())], mode=mode,
            grad_output=draw(*qkv) if train else None,
            leaves=list(inputs.values()) if train else [], inputs=inputs,
        )

    return build


def module_case(attention: Callable[[BenchShape], nn.Module]) -> CaseBuilder:
    """Cases of the attention module ``attention(shape)`` on random x ``(B, N, D)``, with V⁰
    ``(B, h, N, d)`` in its context (from an earlier layer, so it takes gradients in ``train``)."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        train, draw = mode == "train", _sampler(device)
        module = attention(shape).to(device).train(train)
        x = draw(shape.batch, N, shape.width, grad=train)
        first_values = draw(shape.batch, shape.heads, N, shape.head_dim, grad=train)

        def forward() -> list[Tensor]:
            context = AttentionContext(first_values=first_values)  # collects this step's losses
            out, aux = module(x, context=context), context.aux_loss()
            return [out] if aux is None else [out, aux]

        return BenchCase(
            forward=forward, mode=mode, grad_output=draw(*x.shape) if train else None,
            leaves=[x, first_values, *module.parameters()] if train else [],
            inputs={"x": x, "first_values": first_values}, module=module,
        )

    return build


def model_case(
    model: Callable[[BenchShape, int], nn.Module],
    forward: Callable[[nn.Module, Tensor], Sequence[Tensor]],
) -> CaseBuilder:
    """Cases of the whole model ``model(shape, N)`` on random embeddings x ``(B, N, D)``;
    ``forward(model, x)`` returns the last hidden states ``(B, N, D)``, then any losses."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        train, draw = mode == "train", _sampler(device)
        built = model(shape, N).to(device).train(train)
        x = draw(shape.batch, N, shape.width)
        return BenchCase(
            forward=lambda: forward(built, x), mode=mode,
            grad_output=draw(*x.shape) if train else None,
            leaves=list(built.parameters()) if train else [], inputs={"x": x}, module=built,
        )

    return build
