"""Compiled training steps against eager ones, paired, the compile time apart.

Two copies of a method's classifier (its preset, one seed, then every parameter moved alike so
that the method's own terms act) take the trainer's training steps
(:func:`~filterformer.training.optimization.training_step`) on one batch of ``(B, N)`` tokens,
one eagerly, one compiled as a compiled run is
(:func:`~filterformer.training.compilation.compile_model`). The first compiled forward and
backward compile: their time is ``compile_s``, and the forward's logits and loss are compared
with eager's (``max_abs_diff``; inductor's ``fallback_random`` keeps SAMSA's random draws
eager's). The steps then alternate in rounds (:func:`~filterformer.timing.paired_step_times`):
rows ``step-{method}`` in modes ``eager`` and ``compiled``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..methods import DEFAULT_METHODS, apply_method
from ..models import SequenceClassifier, TransformerConfig
from ..timing import paired_step_times
from ..training import compilation
from ..training.compilation import compile_model, mark_sequence_dynamic
from ..training.optimization import build_optimizer, training_step
from ..training.precision import grad_scaler
from ..training.run_config import OptimizerConfig
from .records import BenchRecord, round_records
from .step_cases import BenchShape

__all__ = ["FULL_CONFIGURATIONS", "QUICK_CONFIGURATIONS", "measure_compiled_step", "run"]

#: ``(method, N)``: every method at 4096, and AGF at 16384.
FULL_CONFIGURATIONS = (*((method, 4096) for method in DEFAULT_METHODS), ("agf", 16384))
QUICK_CONFIGURATIONS = (("softmax", 64), ("agf", 64))
VOCAB_SIZE, NUM_CLASSES = 32, 10
#: How far each parameter moves off its initial value (times a standard normal draw).
PERTURBATION = 0.02


def _classifier(method: str, N: int, shape: BenchShape, device: str) -> nn.Module:
    """``method``'s classifier for sequences up to ``N``, seeded, then perturbed alike."""
    torch.manual_seed(0)
    fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
              "mlp_ratio": shape.mlp_ratio, "vocab_size": VOCAB_SIZE, "max_len": N}
    model = SequenceClassifier(TransformerConfig(**apply_method(fields, method)), NUM_CLASSES)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * PERTURBATION)
    return model.to(device).train()


def _first_compiled_pass(eager: nn.Module, compiled: nn.Module,
                         inputs: dict[str, Tensor]) -> tuple[float, float]:
    """Compile with one forward and backward -> ``(seconds, max |compiled − eager|)`` over the
    forward's logits and loss, random draws seeded alike; the gradients are dropped."""
    torch.manual_seed(0)
    with torch.no_grad():
        reference = eager(**inputs)
    from torch._inductor import config as inductor_config  # loaded only where it compiles

    start = time.perf_counter()
    with inductor_config.patch(fallback_random=True):
        torch.manual_seed(0)
        out = compiled(**inputs)
        out.loss.backward()
    seconds = time.perf_counter() - start
    compiled.zero_grad(set_to_none=True)
    diff = max(float((out.logits.detach() - reference.logits).abs().max()),
               float((out.loss.detach() - reference.loss).abs()))
    return seconds, diff


def measure_compiled_step(method: str, N: int, shape: BenchShape, *, device: str = "cpu",
                          rounds: int = 10) -> list[BenchRecord]:
    """``method`` at ``N``: the compile time and outputs, then eager and compiled steps
    alternated in ``rounds`` rounds (two or more) after two warm-up rounds; its eager and
    compiled records."""
    generator = torch.Generator().manual_seed(0)
    inputs = mark_sequence_dynamic({name: t.to(device) for name, t in {
        "input_ids": torch.randint(0, VOCAB_SIZE, (shape.batch, N), generator=generator),
        "padding_mask": torch.ones(shape.batch, N, dtype=torch.bool),
        "labels": torch.randint(0, NUM_CLASSES, (shape.batch,), generator=generator),
    }.items()})
    eager, twin = (_classifier(method, N, shape, device) for _ in range(2))
    compiled = compile_model(twin)
    compile_s, diff = _first_compiled_pass(eager, compiled, inputs)
    scaler = grad_scaler("fp32", torch.device(device))

    def stepper(model: nn.Module, parameters: nn.Module) -> Callable[[], None]:
        optimizer = build_optimizer(parameters, OptimizerConfig())  # clipping: TrainConfig's
        return lambda: training_step(model, inputs, optimizer, scaler, precision="fp32",
                                     device=torch.device(device), grad_clip=1.0,
                                     parameters=parameters)

    times = paired_step_times([stepper(eager, eager), stepper(compiled, twin)], rounds=rounds,
                              warmup_steps=2)
    notes = f"a training step of {method}'s classifier: forward, backward, clipping, AdamW"
    common = dict(method=f"step-{method}", N=N, device=device, batch=shape.batch,
                  heads=shape.heads, dim=shape.head_dim, width=shape.width, level="model")
    return round_records(times, [
        dict(mode="eager", notes=notes, **common),
        dict(mode="compiled", compile_s=compile_s, max_abs_diff=diff, **common,
             notes=f"{notes}; torch.compile, backend {compilation.BACKEND}"),
    ])


def run(quick: bool, device: str) -> list[BenchRecord]:
    """Every configuration (tiny sizes with ``quick``), in order; one that fails to compile or
    run gives skipped records saying why."""
    shape = BenchShape.quick() if quick else BenchShape()
    records = []
    for method, N in QUICK_CONFIGURATIONS if quick else FULL_CONFIGURATIONS:
        try:
            records += measure_compiled_step(method, N, shape, device=device,
                                             rounds=3 if quick else 10)
        except Exception as err:  # one method's failure leaves the others measured
            records += [BenchRecord(f"step-{method}", N, mode, device,
                                    skipped=f"{type(err).__name__}: {err}", failed=True)
                        for mode in ("eager", "compiled")]
    return records
