"""Cases measured side by side in this process: each built after a priming step at N=64 (so
start-up costs stay out), its first full-size step timed with its extra memory (CPU: peak RSS
rise, :mod:`filterformer.process_memory`; CUDA: peak allocated), then blocks of its steps timed
by ``torch.utils.benchmark.Timer`` (steps of a second or more: by its synchronising clock, without
warm-up steps) and alternated with the other cases' in rounds."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch.utils.benchmark import Timer

from ..process_memory import peak_rise_mib, start_peak_window
from ..timing import Block, alternate, steps_per_round, time_step
from ..training.precision import autocast
from .method_table import get_method
from .records import BenchRecord
from .step_cases import BenchCase, BenchShape
from .targets import Case, PairMeasurement

__all__ = ["Rounds", "build_primed", "make_record", "measure_cases"]

PRIME_LENGTH = 64
MIN_BLOCK_S = 1e-3  # a side's block in a round lasts at least this long (timer resolution)
LONG_STEP_S = 1.0  # from this step time on, blocks are timed without warm-up steps


@dataclass(frozen=True)
class Rounds:
    """Rounds for about ``budget_s`` in all, from ``least`` to ``most``; a side whose first
    step says that ``least`` rounds would take longer than ``limit_s`` is skipped."""

    least: int = 3
    most: int = 15
    budget_s: float = 0.5
    limit_s: float = 600.0


def make_record(case: Case, shape: BenchShape, device: str, **values: Any) -> BenchRecord:
    """The record of ``case`` at ``shape`` with ``values``: what was measured, or why not."""
    return BenchRecord(*case, device, batch=shape.batch, heads=shape.heads, dim=shape.head_dim,
                       **values)


def build_primed(case: Case, shape: BenchShape, device: str, precision: str) -> BenchCase:
    """``case`` built from seed 0, its forward under autocast to ``precision``, after a priming
    step of it at N=64 at most (built, stepped once, dropped)."""

    def build(N: int) -> BenchCase:
        torch.manual_seed(0)
        built = get_method(case.method).build(shape, N, case.mode, torch.device(device))
        built.forward = partial(_autocast, built.forward, precision, device)
        if built.train_step is not None:  # a whole step: its forward runs inside it
            built.train_step = partial(_autocast, built.train_step, precision, device)
        return built

    build(min(case.N, PRIME_LENGTH)).step()
    gc.collect()
    return build(case.N)


def _autocast(forward: Callable[[], Any], precision: str, device: str) -> Any:
    with autocast(precision, torch.device(device)):
        return forward()


def _first_step(case: BenchCase, device: str) -> tuple[float, float | None]:
    """``(ms, extra MiB or None where unreadable)`` of one step."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        return time_step(case.step), (torch.cuda.max_memory_allocated() - before) / 2**20
    before = start_peak_window()
    ms = time_step(case.step)
    return ms, None if before is None else peak_rise_mib(before)


def _prepared(case: Case, shape: BenchShape, device: str,
              precision: str) -> BenchCase | BenchRecord:
    """``case`` built, or the record saying why it is not measured."""
    longest = get_method(case.method).longest.get(case.mode, case.N)
    if longest < case.N:
        return make_record(case, shape, device,
                           skipped=f"not run past N={longest} (explicit N×N matrices)")
    try:
        return build_primed(case, shape, device, precision)
    except ImportError as err:
        return make_record(case, shape, device, skipped=str(err))
    except Exception as err:
        return make_record(case, shape, device, skipped=f"{type(err).__name__}: {err}",
                           failed=True)


def _warm_up_steps(count: int, step_s: float) -> int:
    """Untimed steps before a block of ``count``: ``Timer.timeit``'s max(count/100, 2) for steps
    under :data:`LONG_STEP_S`, none for longer ones (each case has been stepped twice already,
    and two more such steps a round would triple a round's cost, and cut its rounds to a third)."""
    return 0 if step_s >= LONG_STEP_S else max(count // 100, 2)


def _timed_block(step: Callable[[], None], step_s: float) -> Block:
    """Blocks of ``step`` timed by ``Timer.timeit`` on every thread torch uses, or, for steps of
    :data:`LONG_STEP_S` or more, whole by the same synchronising clock: the mean step (s)."""
    if step_s >= LONG_STEP_S:
        return lambda index, count: time_step(lambda: [step() for _ in range(count)]) / count / 1e3
    timer = Timer("step()", globals={"step": step}, num_threads=torch.get_num_threads())
    return lambda index, count: timer.timeit(count).mean


def _alternated(cases: list[BenchCase], step_ms: list[float], rounds: Rounds) -> Any:
    """The cases' steps alternated in rounds, each side's block at least :data:`MIN_BLOCK_S`."""
    step_s = [ms / 1e3 for ms in step_ms]
    repeats = [max(n, math.ceil(MIN_BLOCK_S / s))
               for n, s in zip(steps_per_round(*step_s), step_s, strict=True)]
    round_s = sum((n + _warm_up_steps(n, s)) * s for n, s in zip(repeats, step_s, strict=True))
    count = max(rounds.least, min(rounds.most, int(rounds.budget_s / round_s)))
    return alternate([_timed_block(case.step, s) for case, s in zip(cases, step_s, strict=True)],
                     repeats, count)


def measure_cases(cases: list[Case], shape: BenchShape, device: str = "cpu", *,
                  precision: str = "fp32", rounds: Rounds = Rounds()) -> PairMeasurement:
    """Build every case, take its first step, then alternate their steps in rounds. A case that
    cannot be built, raises or is too slow gives a record saying why, and then no case is
    timed."""
    record = partial(make_record, shape=shape, device=device)
    beside = "not timed: the case beside it was not measured"
    built = [_prepared(case, shape, device, precision) for case in cases]
    if not all(isinstance(b, BenchCase) for b in built):
        return PairMeasurement([b if isinstance(b, BenchRecord) else record(c, skipped=beside)
                                for c, b in zip(cases, built, strict=True)])
    try:
        first = [_first_step(b, device) for b in built]
        # The faster of two steps (a first step may meet one-time costs: fresh pages, say),
        # unless the first alone took half the limit.
        fastest = [ms if ms / 1e3 > rounds.limit_s / 2 else min(ms, time_step(b.step))
                   for (ms, _), b in zip(first, built, strict=True)]
        # The least rounds, each a block of one step after its warm-up steps.
        steps = [rounds.least * (1 + _warm_up_steps(1, ms / 1e3)) for ms in fastest]
        if any(ms / 1e3 * n > rounds.limit_s for ms, n in zip(fastest, steps, strict=True)):
            return PairMeasurement([record(c, first_ms=ms, skipped=(
                f"a step took {fast / 1e3:.1f} s; {n} steps exceed the limit of "
                f"{rounds.limit_s:g} s") if fast / 1e3 * n > rounds.limit_s else beside)
                for c, (ms, _), fast, n in zip(cases, first, fastest, steps, strict=True)])
        times = _alternated(built, fastest, rounds)
    except Exception as err:
        return PairMeasurement([record(c, failed=True, skipped=f"{type(err).__name__}: {err}")
                                for c in cases])
    return PairMeasurement([record(
        c, median_ms=median_s * 1e3, first_ms=ms, peak_mb=mib,
        times_ms=[s * 1e3 for s in round_s]) for c, (ms, mib), median_s, round_s in zip(
            cases, first, times.median_s, times.round_step_s, strict=True)], times)
