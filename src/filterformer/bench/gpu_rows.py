"""The GPU targets' rows: the shapes people train and decode at, each group's sides alternated.

Five extra benchmarks (:mod:`.extras`), each in its own worker, every step eager under bf16
autocast:

- ``gpu-d768``: attention modules with their projections at BERT/GPT-2 width (D=768, h=12),
  32,768 tokens a batch (B = 32768/N), N = 128 … 16384, training and inference: rows
  ``gpu-d768-{method}``.
- ``gpu-d128``: the same at an LRA model's width (D=128, h=2), N=1024, B=32, inference.
- ``gpu-kernel``: ``gfsa`` against one ``sdpa`` call, B=4, h=16, d=64, training, N ≥ 1024.
- ``gpu-bert``: a BERT-base-sized classifier's training step (depth 12, D=768, N=512, B=32,
  vocabulary 30,522, clipping, AdamW) for softmax, GFSA, SAMSA hard k=256 and AGF.
- ``gpu-decode``: a CausalLM (D=768, depth 12) generating 64 tokens after a 1,024-token prompt,
  softmax and GFSA: mode ``warm`` alternated in rounds, mode ``first`` the softmax model's first
  generation at these lengths (after a 16-token one has started the process's GPU libraries).

At each N and mode the sides are built, take one step each (a side that fails is recorded as
failed and left out), then alternate in rounds (:func:`~filterformer.timing.paired_step_times`),
so that their ratios are paired; a group that fails leaves the others measured.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch

from ..methods import GFSA_ORDER, apply_method
from ..models import SequenceClassifier, TransformerConfig
from ..timing import paired_step_times, time_step
from ..training.optimization import build_optimizer, training_step
from ..training.precision import autocast, grad_scaler
from ..training.run_config import OptimizerConfig
from .decoding_latency import build_decoder_model
from .method_table import BenchMethod, get_method, preset_module
from .records import BenchRecord, round_records
from .step_cases import BenchShape

__all__ = ["BERT", "DECODE", "GPU_GROUPS", "KERNEL_LENGTHS", "MODULE_LENGTHS", "ClassifierSteps",
           "Generations", "SideBySide", "run_bert", "run_decoding", "run_side_by_side"]

PRECISION = "bf16"
ROUNDS, WARMUP_ROUNDS = 10, 2
MODULE_LENGTHS = (128, 1024, 4096, 16384)
KERNEL_LENGTHS = (1024, 4096, 16384)
#: Rows only these groups measure (the table has GFSA as a kernel and a model, not a module).
GPU_ONLY_METHODS = {"gfsa-module": BenchMethod(
    name="gfsa-module", level="module", baseline="softmax-module", build=preset_module("gfsa"),
    timed=f"GFSA module (K={GFSA_ORDER}): projections, two fused attention passes, the "
    "filter's combination")}

#: A side: its record's fields, and what builds it and returns its step.
Side = tuple[dict[str, Any], Callable[[], Callable[[], None]]]


@dataclass(frozen=True)
class SideBySide:
    """Methods of the method table (or :data:`GPU_ONLY_METHODS`) at one shape, alternated at each
    N and mode: rows ``{prefix}{method}``, each compared with the first method's; B is
    ``tokens // N`` where ``tokens`` is set, else ``shape.batch``."""

    prefix: str
    methods: tuple[str, ...]
    shape: BenchShape
    lengths: tuple[int, ...]
    modes: tuple[str, ...]
    tokens: int | None = None

    def shape_at(self, N: int) -> BenchShape:
        return self.shape if self.tokens is None else replace(self.shape, batch=self.tokens // N)

    def quick(self) -> SideBySide:
        """Tiny sizes (h=2, d=8), one length, two sequences a batch: the code path alone."""
        return replace(self, shape=replace(BenchShape.quick(), batch=2), lengths=(32,),
                       tokens=None)


GPU_GROUPS = {group.prefix: group for group in (
    SideBySide("gpu-d768-", ("softmax-module", "gfsa-module", "agf", "samsa-hard-k128",
                             "samsa-hard-k256", "samsa-soft-k256"),
               BenchShape(heads=12, head_dim=64), MODULE_LENGTHS, ("inference", "train"),
               tokens=32768),
    SideBySide("gpu-d128-", ("softmax-module", "samsa-hard-k128", "samsa-soft-k128", "agf",
                             "gfsa-module"),
               BenchShape(batch=32, heads=2, head_dim=64), (1024,), ("inference",)),
    SideBySide("gpu-kernel-", ("sdpa", "gfsa"), BenchShape(batch=4, heads=16, head_dim=64),
               KERNEL_LENGTHS, ("train",)),
)}


@dataclass(frozen=True)
class ClassifierSteps:
    """Training steps of classifiers at ``shape`` and ``N`` alternated in ``rounds``: per side
    its row (``{prefix}{row}``), method preset and attention options; the first is the
    baseline."""

    prefix: str
    shape: BenchShape
    N: int
    vocab: int
    classes: int
    rounds: int
    sides: tuple[tuple[str, str, dict[str, Any]], ...]


@dataclass(frozen=True)
class Generations:
    """``methods``' CausalLMs at ``shape`` generating ``tokens`` after a ``prompt``-token prompt,
    each started with a ``start_prompt``-token generation, alternated in ``rounds``; the first
    method is the baseline and its first generation a row of its own."""

    prefix: str
    shape: BenchShape
    prompt: int
    tokens: int
    start_prompt: int
    rounds: int
    methods: tuple[str, ...]


BERT = ClassifierSteps("gpu-bert-", BenchShape(batch=32, heads=12, head_dim=64, depth=12),
                       N=512, vocab=30522, classes=2, rounds=10, sides=(
                           ("softmax", "softmax", {}), ("gfsa", "gfsa", {}),
                           ("samsa-hard-k256", "samsa_hard", {"num_samples": 256}),
                           ("agf", "agf", {})))
DECODE = Generations("gpu-decode-", BenchShape(batch=1, heads=12, head_dim=64, depth=12),
                     prompt=1024, tokens=64, start_prompt=16, rounds=8,
                     methods=("softmax", "gfsa"))


def _method(name: str) -> BenchMethod:
    return GPU_ONLY_METHODS.get(name) or get_method(name)


def _free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _failed(row: dict[str, Any], err: Exception) -> BenchRecord:
    return BenchRecord(**row, skipped=f"{type(err).__name__}: {err}", failed=True)


def _under_autocast(call: Callable[[], Any], device: str) -> Callable[[], Any]:
    def run() -> Any:
        with autocast(PRECISION, torch.device(device)):
            return call()

    return run


def _alternate(sides: Sequence[Side], *, device: str, rounds: int, warmup: int,
               per_step: int = 1) -> tuple[list[BenchRecord], list[float | None]]:
    """Each side built (``build()`` returns its step) and stepped once, timed; the sides that
    got that far alternated in ``rounds`` rounds after ``warmup``: a record per side in order
    (failed where its build, first step or the rounds raised) and each side's first step in ms
    (None where it failed)."""
    records: list[BenchRecord | None] = [None] * len(sides)
    first: list[float | None] = [None] * len(sides)
    steps: dict[int, Callable[[], None]] = {}
    for index, (row, build) in enumerate(sides):
        try:
            torch.manual_seed(0)
            step = build()
            first[index] = time_step(step)  # its kernels chosen, its plans built: kept apart
            steps[index] = step
        except Exception as err:
            records[index] = _failed(row, err)
            _free(device)
    if steps:
        try:
            times = paired_step_times(list(steps.values()), rounds=rounds, warmup_steps=warmup)
            done = round_records(times, [sides[i][0] for i in steps], per_step=per_step)
        except Exception as err:
            done = [_failed(sides[i][0], err) for i in steps]
        for index, record in zip(steps, done, strict=True):
            records[index] = record
    steps.clear()
    _free(device)
    return [r for r in records if r is not None], first


def _module_side(group: SideBySide, name: str, N: int, mode: str, device: str) -> Side:
    method, shape = _method(name), group.shape_at(N)
    row = dict(method=f"{group.prefix}{name}", N=N, mode=mode, device=device, batch=shape.batch,
               heads=shape.heads, dim=shape.head_dim, level=method.level,
               width=None if method.level == "kernel" else shape.width,
               baseline=None if name == group.methods[0] else f"{group.prefix}{group.methods[0]}",
               notes=f"{method.timed}; bf16 autocast")

    def build() -> Callable[[], None]:
        case = method.build(shape, N, mode, torch.device(device))
        case.forward = _under_autocast(case.forward, device)  # the forward only, as in training
        return case.step

    return row, build


def run_side_by_side(group: SideBySide, quick: bool, device: str) -> list[BenchRecord]:
    """``group`` at each mode and N (tiny sizes and 2 rounds with ``quick``)."""
    group, (rounds, warmup) = (group.quick(), (2, 1)) if quick else (group, (ROUNDS,
                                                                             WARMUP_ROUNDS))
    return [record for mode in group.modes for N in group.lengths for record in _alternate(
        [_module_side(group, name, N, mode, device) for name in group.methods],
        device=device, rounds=rounds, warmup=warmup)[0]]


def _classifier_step(preset: str, options: dict[str, Any], shape: BenchShape, N: int,
                     vocab: int, classes: int, device: str) -> Callable[[], None]:
    """A training step of ``preset``'s classifier on one random batch ``(B, N)``: forward under
    bf16 autocast, backward, clipping to norm 1, AdamW."""
    fields = {"dim": shape.width, "depth": shape.depth, "num_heads": shape.heads,
              "mlp_ratio": shape.mlp_ratio, "vocab_size": vocab, "max_len": N,
              "attention_options": options}
    config = TransformerConfig(**apply_method(fields, preset))
    model = SequenceClassifier(config, classes).to(device).train()
    generator = torch.Generator().manual_seed(0)
    inputs = {name: t.to(device) for name, t in {
        "input_ids": torch.randint(0, vocab, (shape.batch, N), generator=generator),
        "padding_mask": torch.ones(shape.batch, N, dtype=torch.bool),
        "labels": torch.randint(0, classes, (shape.batch,), generator=generator)}.items()}
    optimizer = build_optimizer(model, OptimizerConfig())
    where = torch.device(device)
    scaler = grad_scaler(PRECISION, where)

    def step() -> None:
        training_step(model, inputs, optimizer, scaler, precision=PRECISION, device=where,
                      grad_clip=1.0)

    return step


def run_bert(quick: bool, device: str) -> list[BenchRecord]:
    """:data:`BERT`'s sides alternated (with ``quick``: depth 1, width 16, N=32, 2 rounds)."""
    run = replace(BERT, shape=replace(BenchShape.quick(), batch=2), N=32, rounds=2) if quick else (
        BERT)
    shape, baseline = run.shape, f"{run.prefix}{run.sides[0][0]}"
    sides = [(dict(method=f"{run.prefix}{row}", N=run.N, mode="train", device=device,
                   batch=shape.batch, heads=shape.heads, dim=shape.head_dim, width=shape.width,
                   level="model", baseline=None if row == run.sides[0][0] else baseline,
                   notes=f"{preset} classifier (depth {shape.depth}, vocabulary {run.vocab}): "
                   "forward under bf16 autocast, backward, clipping, AdamW"),
              partial(_classifier_step, preset, options, shape, run.N, run.vocab, run.classes,
                      device))
             for row, preset, options in run.sides]
    return _alternate(sides, device=device, rounds=run.rounds,
                      warmup=1 if quick else WARMUP_ROUNDS)[0]


def _generation(method: str, shape: BenchShape, prompt: torch.Tensor, tokens: int, start: int,
                device: str) -> Callable[[], None]:
    """``method``'s CausalLM, started with a ``start``-token generation; its step generates
    ``tokens`` greedy tokens after ``prompt`` with the cache, in inference mode under bf16
    autocast."""
    model = build_decoder_model("native", method, shape, prompt.shape[1] + tokens + 1).to(device)

    def generate(ids: torch.Tensor, new: int) -> None:
        with torch.inference_mode():
            model.generate(ids, new)

    _under_autocast(partial(generate, prompt[:, :start], 2), device)()
    return _under_autocast(partial(generate, prompt, tokens), device)


def run_decoding(quick: bool, device: str) -> list[BenchRecord]:
    """:data:`DECODE`'s models, in ms per token: the first method's first generation (the
    process's first at these lengths: row mode ``first``), then their
    generations alternated (mode ``warm``); with ``quick`` depth 1, width 16, a 32-token prompt,
    4 tokens, 2 rounds."""
    run = replace(DECODE, shape=replace(BenchShape.quick(), batch=1), prompt=32, tokens=4,
                  start_prompt=8, rounds=2) if quick else DECODE
    shape, context, tokens = run.shape, run.prompt, run.tokens
    prompt = torch.randint(3, 4096, (1, context), generator=torch.Generator().manual_seed(0))
    prompt = prompt.to(device)

    def row(method: str, mode: str, baseline: str | None) -> dict[str, Any]:
        return dict(method=f"{run.prefix}{method}", N=context, mode=mode, device=device,
                    batch=1, heads=shape.heads, dim=shape.head_dim, width=shape.width,
                    level="model", baseline=baseline,
                    notes=f"our CausalLM ({method}, depth {shape.depth}): generate() of {tokens}"
                    f" greedy tokens with the cache, bf16 autocast; ms per token ({mode})")

    baseline = run.methods[0]
    sides = [(row(m, "warm", None if m == baseline else f"{run.prefix}{baseline}"),
              partial(_generation, m, shape, prompt, tokens, run.start_prompt, device))
             for m in run.methods]
    warm, first = _alternate(sides, device=device, rounds=run.rounds, warmup=1, per_step=tokens)
    first_row = row(baseline, "first", None)
    if first[0] is None:
        return [BenchRecord(**first_row, skipped="its model failed to build", failed=True), *warm]
    per_token = first[0] / tokens
    return [BenchRecord(**first_row, median_ms=per_token, times_ms=[per_token],
                        threads=torch.get_num_threads()), *warm]
