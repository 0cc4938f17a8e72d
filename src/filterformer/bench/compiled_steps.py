"""Compiled training steps against eager ones, paired, with the compile time apart and the
compiled outputs checked against eager's.

For each method and length N, two copies of the model ``filterformer train`` builds for a
classification task (a :class:`~filterformer.models.SequenceClassifier` from the method's preset,
the same seed, every parameter then moved by the same small random amount, so that each method's
own terms act: GFSA's filter starts as plain attention) take training steps on one batch of
``(B, N)`` random tokens with a padding mask: forward, backward, clipping and AdamW, as
:func:`~filterformer.training.optimization.training_step` takes them in the trainer. One copy
runs eagerly; the other as a compiled run does (:func:`~filterformer.training.compilation.
compile_model`, the sequence dimension marked dynamic). Its first forward and backward compile
the graphs; their wall time is ``compile_s``, and the forward's logits and loss are compared
with the eager copy's on the same weights (``max_abs_diff``). Compiling uses inductor's
``fallback_random``, so random draws (SAMSA's Gumbel noise) are eager's and the outputs compare;
it changes only random ops. The eager and compiled steps then alternate in rounds
(:func:`~filterformer.timing.paired_step_times`): ``speedup`` is the median over rounds of
eager's mean step over the compiled one's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..methods import DEFAULT_METHODS, apply_method
from ..models import SequenceClassifier, TransformerConfig
from ..timing import paired_step_times, time_step
from ..training import compilation
from ..training.compilation import compile_model, mark_sequence_dynamic
from ..training.optimization import build_optimizer, training_step
from ..training.precision import grad_scaler
from ..training.run_config import OptimizerConfig

__all__ = ["FULL_CONFIGURATIONS", "QUICK_CONFIGURATIONS", "CompiledStepRecord",
           "CompiledStepSettings", "measure_compiled_step", "run_compiled_steps"]

#: ``(method, N)``: every method at 4096, and AGF at 16384.
FULL_CONFIGURATIONS: tuple[tuple[str, int], ...] = (
    *((method, 4096) for method in DEFAULT_METHODS), ("agf", 16384),
)
QUICK_CONFIGURATIONS: tuple[tuple[str, int], ...] = (("softmax", 64), ("agf", 64))
#: How far each parameter moves off its initial value (times a standard normal draw).
PERTURBATION = 0.02


@dataclass(frozen=True)
class CompiledStepSettings:
    """What is compiled, at which sizes, timed how.

    Attributes:
        configurations: ``(method, N)`` pairs; methods are presets of
            :mod:`filterformer.methods`.
        batch, heads, head_dim, depth, mlp_ratio: the model's sizes (width ``heads·head_dim``).
        vocab_size, num_classes: the task's.
        rounds, warmup_steps: timed and untimed rounds (:func:`~filterformer.timing.
            paired_step_times`); two rounds or more.
        seed: seeds the weights, their perturbation and the batch.
        device: ``cpu`` or ``cuda``.
    """

    configurations: tuple[tuple[str, int], ...] = FULL_CONFIGURATIONS
    batch: int = 2
    heads: int = 4
    head_dim: int = 64
    depth: int = 4
    mlp_ratio: float = 4.0
    vocab_size: int = 32
    num_classes: int = 10
    rounds: int = 10
    warmup_steps: int = 2
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.rounds < 2:
            raise ValueError(f"rounds must be >= 2; got {self.rounds}")

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @classmethod
    def quick(cls, **changes: Any) -> CompiledStepSettings:
        """Tiny sizes for tests and ``bench --quick`` (compiling still takes seconds)."""
        small = dict(configurations=QUICK_CONFIGURATIONS, batch=1, heads=2, head_dim=8, depth=1,
                     mlp_ratio=2.0, rounds=3, warmup_steps=1)
        return cls(**{**small, **changes})


@dataclass
class CompiledStepRecord:
    """One method at one length, eager against compiled.

    Attributes:
        method, N: what stepped.
        eager_ms, compiled_ms: the median over rounds of each side's mean step (ms).
        speedup: the median over rounds of eager's mean step over the compiled one's.
        speedup_spread: the quartiles of the rounds' ratios.
        round_eager_ms, round_compiled_ms: each side's mean step per round, in round order.
        steps_per_round: eager's and the compiled side's steps in each round.
        compile_s: wall time of the first compiled forward and backward (compiling both
            graphs; that step's own work included), apart from every timed step.
        max_abs_diff: the largest absolute difference of the compiled forward's logits and
            loss from eager's, on the same weights and batch (float32).
        batch, width, depth, heads, device, threads: where and at which sizes.
        backend: the compiler backend.
    """

    method: str
    N: int
    eager_ms: float
    compiled_ms: float
    speedup: float
    speedup_spread: tuple[float, float]
    round_eager_ms: list[float]
    round_compiled_ms: list[float]
    steps_per_round: list[int]
    compile_s: float
    max_abs_diff: float
    batch: int
    width: int
    depth: int
    heads: int
    device: str
    threads: int
    backend: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _classifier(method: str, N: int, settings: CompiledStepSettings,
                device: torch.device) -> nn.Module:
    """``method``'s classifier for sequences up to ``N``, seeded, then perturbed alike."""
    torch.manual_seed(settings.seed)
    fields = {"dim": settings.width, "depth": settings.depth, "num_heads": settings.heads,
              "mlp_ratio": settings.mlp_ratio, "vocab_size": settings.vocab_size, "max_len": N}
    model = SequenceClassifier(TransformerConfig(**apply_method(fields, method)),
                               settings.num_classes)
    generator = torch.Generator().manual_seed(settings.seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * PERTURBATION)
    return model.to(device).train()


def _batch(N: int, settings: CompiledStepSettings, device: torch.device) -> dict[str, Tensor]:
    """Tokens ``(B, N)``, an all-true padding mask ``(B, N)`` and labels ``(B,)``."""
    generator = torch.Generator().manual_seed(settings.seed)
    batch = {
        "input_ids": torch.randint(0, settings.vocab_size, (settings.batch, N),
                                   generator=generator),
        "padding_mask": torch.ones(settings.batch, N, dtype=torch.bool),
        "labels": torch.randint(0, settings.num_classes, (settings.batch,), generator=generator),
    }
    return mark_sequence_dynamic({name: t.to(device) for name, t in batch.items()})


def _first_compiled_pass(eager: nn.Module, compiled: nn.Module, inputs: dict[str, Tensor],
                         seed: int) -> tuple[float, float]:
    """Compile with one forward and backward -> ``(seconds, max |compiled − eager|)`` over the
    forward's logits and loss, random draws seeded alike; the gradients are dropped."""
    torch.manual_seed(seed)
    with torch.no_grad():
        reference = eager(**inputs)
    from torch._inductor import config as inductor_config  # loaded only where it compiles

    start = time.perf_counter()
    with inductor_config.patch(fallback_random=True):
        torch.manual_seed(seed)
        out = compiled(**inputs)
        out.loss.backward()
    seconds = time.perf_counter() - start
    compiled.zero_grad(set_to_none=True)
    diff = max(float((out.logits.detach() - reference.logits).abs().max()),
               float((out.loss.detach() - reference.loss).abs()))
    return seconds, diff


def measure_compiled_step(method: str, N: int,
                          settings: CompiledStepSettings) -> CompiledStepRecord:
    """``method`` at ``N``: the compile time and outputs, then eager and compiled steps
    alternated (see the module)."""
    device = torch.device(settings.device)
    inputs = _batch(N, settings, device)
    eager = _classifier(method, N, settings, device)
    twin = _classifier(method, N, settings, device)
    compiled = compile_model(twin)
    compile_s, diff = _first_compiled_pass(eager, compiled, inputs, settings.seed)
    scaler = grad_scaler("fp32", device)
    clip = 1.0  # TrainConfig's default grad_clip

    def stepper(model: nn.Module, parameters: nn.Module) -> Callable[[], None]:
        optimizer = build_optimizer(parameters, OptimizerConfig())
        return lambda: training_step(model, inputs, optimizer, scaler, precision="fp32",
                                     device=device, grad_clip=clip, parameters=parameters)

    times = paired_step_times([stepper(eager, eager), stepper(compiled, twin)],
                              rounds=settings.rounds, warmup_steps=settings.warmup_steps,
                              timer=time_step)
    eager_ms, compiled_ms = ([s * 1e3 for s in side] for side in times.round_step_s)
    return CompiledStepRecord(
        method=method, N=N, eager_ms=times.median_s[0] * 1e3,
        compiled_ms=times.median_s[1] * 1e3, speedup=times.ratio(0, 1)[0],
        speedup_spread=times.ratio(0, 1)[1:], round_eager_ms=eager_ms,
        round_compiled_ms=compiled_ms, steps_per_round=times.steps_per_round,
        compile_s=compile_s, max_abs_diff=diff, batch=settings.batch, width=settings.width,
        depth=settings.depth, heads=settings.heads, device=settings.device,
        threads=torch.get_num_threads(), backend=str(compilation.BACKEND),
    )


def run_compiled_steps(
    settings: CompiledStepSettings, *, log: Callable[[str], None] | None = None
) -> list[CompiledStepRecord]:
    """:func:`measure_compiled_step` for every configuration of ``settings``, in order."""
    records = []
    for method, N in settings.configurations:
        record = measure_compiled_step(method, N, settings)
        records.append(record)
        if log is not None:
            log(f"compiled {method} N={N}: eager {record.eager_ms:.2f} ms, compiled "
                f"{record.compiled_ms:.2f} ms (×{record.speedup:.3f} faster), compiled in "
                f"{record.compile_s:.1f} s, max |Δ| {record.max_abs_diff:.2e}")
    return records
