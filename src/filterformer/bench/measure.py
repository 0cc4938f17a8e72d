"""Cases measured side by side in this process: each one's first full-size step (its time and
extra memory), then their steps alternated in rounds (:func:`~filterformer.timing.
paired_step_times`, blocks timed by ``torch.utils.benchmark``). A table row is one case alone.

Memory: on the CPU the rise of the peak resident set over the resident set before the first step
(:mod:`filterformer.process_memory`); on CUDA the peak allocated over what was allocated before.
A step of the same method at N=64 runs first, so one-time start-up costs (thread pools, kernel
selection, BLAS buffers) stay out of the measured steps.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..process_memory import peak_rise_mib, start_peak_window
from ..timing import paired_step_times, steps_per_round, time_step
from ..training.precision import autocast
from .decoding import DECODE_METHODS
from .gpu_rows import GPU_METHODS
from .method_table import BENCH_METHODS, BenchMethod, PeerUnavailable
from .records import BenchRecord
from .step_cases import COMPILED, BenchCase, BenchShape
from .targets import Case, PairMeasurement

__all__ = ["CASE_METHODS", "Rounds", "case_method", "make_record", "measure_cases"]

#: Every case a run can build: the method table's, the decoding rows', the GPU targets' rows.
CASE_METHODS: dict[str, BenchMethod] = {**BENCH_METHODS, **DECODE_METHODS, **GPU_METHODS}
PRIME_LENGTH = 64
#: A round's block of a side's steps lasts at least this long (timer resolution).
MIN_BLOCK_S = 1e-3


@dataclass(frozen=True)
class Rounds:
    """Rounds for about ``budget_s`` in all, from ``least`` to ``most``; a side whose first
    step says that ``least`` rounds would take longer than ``limit_s`` is skipped."""

    least: int = 3
    most: int = 15
    budget_s: float = 0.5
    limit_s: float = 600.0


def case_method(name: str) -> BenchMethod:
    """The method of case ``name``; ValueError listing the valid names otherwise."""
    if name not in CASE_METHODS:
        raise ValueError(f"unknown benchmark method {name!r}; valid choices: "
                         f"{', '.join(CASE_METHODS)}")
    return CASE_METHODS[name]


def make_record(case: Case, shape: BenchShape, device: str, **values: Any) -> BenchRecord:
    """The record of ``case`` at ``shape`` with ``values``: what was measured, or why not."""
    method = case_method(case.method)
    return BenchRecord(case.method, case.N, case.mode, device, batch=shape.batch,
                       heads=shape.heads, dim=shape.head_dim, level=method.level,
                       width=None if method.level == "kernel" else shape.width,
                       baseline=method.baseline, notes=method.timed, **values)


def _build(case: Case, shape: BenchShape, device: str, precision: str) -> BenchCase:
    """``case`` built from seed 0 after a priming step of it at N=64 at most, its forward under
    autocast to ``precision``."""
    method, where = case_method(case.method), torch.device(device)
    for prime in (True, False):
        torch.manual_seed(0)
        built = method.build(shape, min(case.N, PRIME_LENGTH) if prime else case.N, case.mode,
                             where)
        built.forward = partial(_autocast, built.forward, precision, where)
        if prime:  # built, stepped once, dropped
            built.step()
            del built
            gc.collect()
    return built


def _autocast(forward: Callable[[], Any], precision: str, device: torch.device) -> Any:
    with autocast(precision, device):
        return forward()


def _first_step(case: BenchCase, device: str) -> tuple[float, float | None]:
    """Run one step: ``(its ms, its extra memory in MiB or None where unreadable)``."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        ms = time_step(case.step)
        return ms, (torch.cuda.max_memory_allocated() - before) / 2**20
    before = start_peak_window()
    ms = time_step(case.step)
    return ms, None if before is None else peak_rise_mib(before)


def _difference(cases: list[BenchCase]) -> float:
    """The largest absolute difference of the cases' outputs, each forward from seed 0."""
    outputs = []
    for case in cases:
        torch.manual_seed(0)
        outputs.append([t.detach().float() for t in case.forward()])
        case.reset()
    return max(float((a - b).abs().max()) for a, b in zip(*outputs, strict=True))


@contextlib.contextmanager
def _random_draws_as_eager(cases: list[Case]) -> Iterator[None]:
    """Compiled code draws random numbers as eager code does (SAMSA's samples), so outputs
    compare."""
    if not any(case.mode == COMPILED for case in cases):
        yield
        return
    from torch._inductor import config  # loaded only where something compiles

    with config.patch(fallback_random=True):
        yield


def _prepared(case: Case, shape: BenchShape, device: str,
              precision: str) -> BenchCase | BenchRecord:
    """``case`` built, or the record saying why it is not measured."""
    longest = case_method(case.method).longest.get(case.mode)
    if longest is not None and longest < case.N:
        return make_record(case, shape, device,
                           skipped=f"not run past N={longest} (explicit N×N matrices)")
    try:
        return _build(case, shape, device, precision)
    except (PeerUnavailable, ImportError) as err:
        return make_record(case, shape, device, skipped=str(err))
    except Exception as err:
        return make_record(case, shape, device, skipped=f"{type(err).__name__}: {err}",
                           failed=True)


def _alternated(cases: list[BenchCase], first_ms: list[float], rounds: Rounds) -> Any:
    """The cases' steps alternated in rounds, each side's block at least :data:`MIN_BLOCK_S`."""
    # The faster of two steps: a first step may meet one-time costs or a burst of load.
    step_s = [min(ms, time_step(case.step)) / 1e3 for ms, case in zip(first_ms, cases,
                                                                       strict=True)]
    repeats = [max(n, math.ceil(MIN_BLOCK_S / s))
               for n, s in zip(steps_per_round(*step_s), step_s, strict=True)]
    round_s = sum((n + 2) * s for n, s in zip(repeats, step_s, strict=True))  # + timeit's 2
    count = max(rounds.least, min(rounds.most, int(rounds.budget_s / round_s)))
    return paired_step_times([case.step for case in cases], rounds=count, warmup_steps=0,
                             repeats=repeats)


def measure_cases(cases: list[Case], shape: BenchShape, device: str = "cpu", *,
                  precision: str = "fp32", rounds: Rounds = Rounds(),
                  difference: bool = False) -> PairMeasurement:
    """Build every case, take its first step, then alternate their steps in rounds; with
    ``difference``, first compare two cases' outputs. A case that cannot be built, raises or is
    too slow gives a record saying why, and then no case is timed."""
    beside = "not timed: the case beside it was not measured"
    with _random_draws_as_eager(cases):
        built = [_prepared(case, shape, device, precision) for case in cases]
        if not all(isinstance(b, BenchCase) for b in built):
            return PairMeasurement([b if isinstance(b, BenchRecord) else
                                    make_record(c, shape, device, skipped=beside)
                                    for c, b in zip(cases, built, strict=True)])
        try:
            result = PairMeasurement([], difference=_difference(built) if difference else None)
            first = [_first_step(b, device) for b in built]
            steps = 1 + 3 * rounds.least
            if any(ms / 1e3 * steps > rounds.limit_s for ms, _ in first):
                result.records = [make_record(c, shape, device, first_ms=ms, skipped=(
                    f"one step took {ms / 1e3:.1f} s; {steps} steps exceed the limit of "
                    f"{rounds.limit_s:g} s") if ms / 1e3 * steps > rounds.limit_s else beside)
                    for c, (ms, _) in zip(cases, first, strict=True)]
                return result
            result.times = _alternated(built, [ms for ms, _ in first], rounds)
        except Exception as err:
            return PairMeasurement([make_record(c, shape, device, failed=True,
                                                skipped=f"{type(err).__name__}: {err}")
                                    for c in cases])
    result.records = [make_record(
        c, shape, device, median_ms=median_s * 1e3, first_ms=ms, peak_mb=mib,
        times_ms=[s * 1e3 for s in round_s]) for c, (ms, mib), median_s, round_s in zip(
            cases, first, result.times.median_s, result.times.round_step_s, strict=True)]
    return result
