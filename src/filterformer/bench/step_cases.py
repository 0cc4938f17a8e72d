"""Benchmark cases: a method built at one size, fed random inputs of their own seed (so methods
compared are fed the same tensors), ready to step. A ``train`` step is forward + backward of a
fixed upstream gradient (plus any auxiliary loss); ``compiled``, that of the compiled callable;
``inference``, the forward under ``torch.inference_mode`` in ``eval()``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..attention import AttentionContext

__all__ = ["ALL_MODES", "COMPILED", "MODES", "BenchCase", "BenchShape", "CaseBuilder",
           "kernel_case", "model_case", "module_case"]

MODES, COMPILED = ("train", "inference"), "compiled"  # compiled: a mode a run adds on request
ALL_MODES = (*MODES, COMPILED)


@dataclass(frozen=True)
class BenchShape:
    """B, h, d (width ``D = h·d``), and the whole-model benchmarks' depth and MLP ratio."""

    batch: int = 2
    heads: int = 4
    head_dim: int = 64
    depth: int = 4
    mlp_ratio: float = 4.0

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @classmethod
    def quick(cls) -> BenchShape:  # tiny sizes for tests and smoke runs
        return cls(batch=1, heads=2, head_dim=8, depth=1, mlp_ratio=2.0)


@dataclass
class BenchCase:
    """``forward()`` returns the main output, then scalar losses; ``grad_output``: the main
    output's upstream gradient (``train``); ``leaves``: what :meth:`reset` clears the gradient
    of; ``train_step``, where set, is a whole training step taken instead of forward + backward
    (the trainer's, :class:`~filterformer.training.training_steps.TrainingStep`)."""

    forward: Callable[[], Sequence[Tensor]]
    mode: str
    grad_output: Tensor | None = None
    leaves: list[Tensor] = field(default_factory=list)
    inputs: dict[str, Tensor] = field(default_factory=dict)
    module: nn.Module | None = None
    train_step: Callable[[], object] | None = None

    def step(self) -> None:
        if self.train_step is not None:
            self.train_step()
            return
        if self.mode == "inference":
            with torch.inference_mode():
                self.forward()
            return
        self.reset()
        outputs = list(self.forward())
        torch.autograd.backward(outputs, [self.grad_output] + [None] * (len(outputs) - 1))

    def reset(self) -> None:
        for leaf in self.leaves:
            leaf.grad = None


#: ``build(shape, N, mode, device)`` -> a :class:`BenchCase`.
CaseBuilder = Callable[[BenchShape, int, str, torch.device], BenchCase]


def _compiled_in(mode: str, call: Any) -> Any:
    if mode not in ALL_MODES:
        raise ValueError(f"mode must be one of {', '.join(ALL_MODES)}; got {mode!r}")
    if mode != COMPILED:
        return call
    from ..training.compilation import compile_model  # training's package: loaded on use

    return compile_model(call)


def _case(mode: str, device: torch.device, shapes: dict[str, tuple[int, ...]],
          forward: Callable[[dict[str, Tensor]], Sequence[Tensor]], out: tuple[int, ...],
          module: nn.Module | None = None, grad: bool = True) -> BenchCase:
    """Inputs of ``shapes`` (with gradients in ``train`` where ``grad``), then the upstream
    gradient of an output of shape ``out``."""
    train, generator = mode != "inference", torch.Generator().manual_seed(0)
    draw = lambda *shape: torch.randn(shape, generator=generator).to(device)  # noqa: E731
    inputs = {name: draw(*shape).requires_grad_(train and grad) for name, shape in shapes.items()}
    weights = [] if module is None else list(module.parameters())
    return BenchCase(lambda: forward(inputs), mode, draw(*out) if train else None, inputs=inputs,
                     leaves=[*(inputs.values() if grad else ()), *weights] if train else [],
                     module=module)


def kernel_case(kernel: Callable[..., Tensor], *, coefficients: bool = False) -> CaseBuilder:
    """Cases of ``kernel(q, k, v) -> (B, h, N, d)`` on random q, k, v ``(B, h, N, d)``; with
    ``coefficients``, also per-head ``w0, w1, wK`` ``(h,)`` (GFSA's, learned in ``train``)."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        qkv, call = (shape.batch, shape.heads, N, shape.head_dim), _compiled_in(mode, kernel)
        names = ("q", "k", "v", "w0", "w1", "wK") if coefficients else ("q", "k", "v")
        return _case(mode, device, {n: qkv if n in "qkv" else (shape.heads,) for n in names},
                     lambda x: [call(*x.values())], qkv)

    return build


def module_case(attention: Callable[[BenchShape], nn.Module]) -> CaseBuilder:
    """Cases of the attention module ``attention(shape)`` on random x ``(B, N, D)``, with V⁰
    ``(B, h, N, d)`` in its context (so NeuTRENO's term is active; it takes gradients)."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        module = attention(shape).to(device).train(mode != "inference")
        call = _compiled_in(mode, module)

        def forward(inputs: dict[str, Tensor]) -> list[Tensor]:
            context = AttentionContext(first_values=inputs["first_values"])  # collects losses
            out, aux = call(inputs["x"], context=context), context.aux_loss()
            return [out] if aux is None else [out, aux]

        shapes = {"x": (shape.batch, N, shape.width),
                  "first_values": (shape.batch, shape.heads, N, shape.head_dim)}
        return _case(mode, device, shapes, forward, shapes["x"], module)

    return build


def model_case(model: Callable[[BenchShape, int], nn.Module],
               forward: Callable[[nn.Module, Tensor], Sequence[Tensor]]) -> CaseBuilder:
    """Cases of the model ``model(shape, N)`` on random embeddings x ``(B, N, D)``;
    ``forward(model, x)`` returns the last hidden states ``(B, N, D)``, then any losses."""

    def build(shape: BenchShape, N: int, mode: str, device: torch.device) -> BenchCase:
        built = model(shape, N).to(device).train(mode != "inference")
        call, x = _compiled_in(mode, built), (shape.batch, N, shape.width)
        return _case(mode, device, {"x": x}, lambda inputs: forward(call, inputs["x"]), x,
                     built, grad=False)

    return build
