"""What a method's step costs its host: time and aten operations per step at tiny shapes.

    python benchmarks/host_overhead.py --output DIR [--rounds 15]

At tiny shapes every operation's dispatch, and autograd's bookkeeping, outweigh its arithmetic,
so a step's time on the CPU is its host cost: a proxy for a GPU step that waits on its host (on
an H100, GFSA's kernel at N=1024 took 0.58 ms of GPU time and 2.13 ms of wall time a step). Each
case is timed against its baseline (one SDPA call for kernels, the softmax module for modules),
alternated in rounds in one process on one thread (:func:`filterformer.timing.alternate`); a
ratio is the median of the rounds' ratios, with their quartiles.
The operations counted are the aten operations run, views aside (they compute nothing): on a GPU
each is a launch, allocations aside. A second table counts each step's operations under bfloat16
autocast twice: as the CPU runs it, and on the path CUDA takes, with every method's Triton kernels
allowed (run in Triton's interpreter: each launch counts as one operation, the interpreter's own
operations none). Writes DIR/host_overhead.json and DIR/host_overhead.md.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

if not torch.cuda.is_available():  # before Triton is imported: its kernels run on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

from report_files import check_output, write_report

from filterformer.attention import build_attention
from filterformer.functional import agf_triton, gfsa, gfsa_triton, samsa_triton
from filterformer.functional.triton_support import triton_available
from filterformer.machine import machine_info
from filterformer.provenance import source_revision
from filterformer.timing import alternate

#: Kernels' q, k, v ``(B, h, N, d)``; modules' x ``(B, N, D)`` with D = h·d.
BATCH, HEADS, LENGTH, HEAD_DIM = 1, 2, 16, 8
DIM = HEADS * HEAD_DIM

Step = Callable[[], None]


#: Operations that only allocate memory: no launch on a GPU.
ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty",
                         "new_empty_strided"})
#: The modules of filterformer's Triton kernels, each with its ``SWITCH`` and ``launch``.
KERNEL_MODULES = (agf_triton, samsa_triton, gfsa_triton)


class _Operations(TorchDispatchMode):
    """Counts the operations run inside the mode, views aside, and the allocations among them."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.allocations = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.count += 1
            self.allocations += func.overloadpacket.__name__ in ALLOCATIONS
        return func(*args, **(kwargs or {}))


@contextmanager
def _kernels_counted_by(operations: _Operations) -> Iterator[None]:
    """Every method's Triton kernels allowed on the CPU's tensors (in Triton's interpreter),
    each launch counted by ``operations`` as one operation, none of the interpreter's own."""

    def counted(launch, *args, **kwargs):
        operations.count += 1
        with _disable_current_modes():
            return launch(*args, **kwargs)

    with ExitStack() as stack:
        for module in KERNEL_MODULES:
            stack.enter_context(mock.patch.object(module.SWITCH, "allows", lambda x: True))
            stack.enter_context(mock.patch.object(module, "launch",
                                                  partial(counted, module.launch)))
        yield


def _kernel_step(kernel: Callable[..., torch.Tensor], train: bool, *,
                 coefficients: bool = False, autocast: bool = False) -> Step:
    """``kernel(q, k, v)``, with ``coefficients`` also per-head ``w0, w1, wK`` (GFSA's)."""
    q, k, v = (torch.randn(BATCH, HEADS, LENGTH, HEAD_DIM, requires_grad=train) for _ in range(3))
    weights = [torch.randn(HEADS, requires_grad=train) for _ in range(3 if coefficients else 0)]
    return partial(_run, lambda: kernel(q, k, v, *weights), train, autocast)


def _module_step(method: str, options: dict, train: bool, autocast: bool = False) -> Step:
    module = build_attention(method, DIM, HEADS, **options).train(train)
    x = torch.randn(BATCH, LENGTH, DIM, requires_grad=train)
    return partial(_run, lambda: module(x), train, autocast)


def _run(forward: Callable[[], torch.Tensor], train: bool, autocast: bool = False) -> None:
    """A step: the forward (under bfloat16 autocast where ``autocast``, as the GPU targets'),
    then in training the backward of its sum."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast), \
            torch.set_grad_enabled(train):
        out = forward()
    if train:
        out.float().sum().backward()


#: (case, baseline, builder of a step given ``train``).
CASES: dict[str, tuple[str, Callable[[bool], Step]]] = {
    "sdpa": ("sdpa", partial(_kernel_step, F.scaled_dot_product_attention)),
    "gfsa kernel (K=3)": ("sdpa", partial(_kernel_step, partial(gfsa, K=3), coefficients=True)),
    "softmax module": ("softmax module", partial(_module_step, "softmax", {})),
    "gfsa module": ("softmax module", partial(_module_step, "gfsa", {})),
    "agf module": ("softmax module", partial(_module_step, "agf", {})),
    "samsa hard k=4 module": ("softmax module",
                              partial(_module_step, "samsa", {"mode": "hard", "num_samples": 4})),
    "samsa soft k=4 module": ("softmax module",
                              partial(_module_step, "samsa", {"mode": "soft", "num_samples": 4})),
}


def _block_time(step: Step, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def _measure(case: str, train: bool, rounds: int, repeats: int) -> dict:
    baseline, build = CASES[case]
    steps = [build(train), CASES[baseline][1](train)]
    for step in steps:  # warm-up
        _block_time(step, repeats)
    paired = alternate([lambda _round, count, step=step: _block_time(step, count)
                        for step in steps], [repeats, repeats], rounds)
    ratio, low, high = paired.ratio(0, 1)
    operations = _Operations()
    with operations:
        steps[0]()
    values = [paired.median_s[0] * 1e6, ratio, low, high]
    if not all(map(math.isfinite, values)):
        raise RuntimeError(f"{case}: a non-finite time ({values})")
    return {"case": case, "mode": "train" if train else "inference", "baseline": baseline,
            "us_per_step": values[0], "ratio": ratio, "ratio_middle_half": [low, high],
            "operations": operations.count}


def _count(case: str, train: bool, kernels: bool) -> _Operations:
    """The operations of ``case``'s second step under bfloat16 autocast (its first primes
    caches), on CUDA's path where ``kernels``."""
    step = CASES[case][1](train, autocast=True)
    operations = _Operations()
    with _kernels_counted_by(operations) if kernels else ExitStack():
        step()
        operations.count = operations.allocations = 0
        with operations:
            step()
    return operations


def _path_counts(case: str, train: bool) -> dict:
    eager, kernels = _count(case, train, False), _count(case, train, True)
    return {"case": case, "mode": "train" if train else "inference",
            "eager": [eager.count, eager.allocations],
            "kernels": [kernels.count, kernels.allocations]}


def _markdown(report: dict) -> str:
    machine = report["machine"]
    lines = [
        "# Host cost per step at tiny shapes",
        "",
        f"- Machine: {machine['cpu']} ({machine['cpu_count']} cores; one torch thread), torch "
        f"{machine['torch']}, {machine['date']}, load average (1, 5, 15 min) at start "
        f"{machine['load_average']}.",
        f"- Command: `{report['command']}` at commit {report['commit'] or '(unknown)'}"
        f"{' (with uncommitted changes)' if report['modified'] else ''}.",
        f"- Shapes: kernels' q, k, v {report['kernel_shape']}; modules' x "
        f"{report['module_shape']}.",
        "- Ratio: the median of the rounds' ratios to the baseline, timed alternately (middle "
        "half in parentheses). Operations: aten operations a step runs, views aside.",
        "",
        "| case | mode | µs a step | ratio to | ratio | operations |",
        "|---|---|---:|---|---:|---:|",
    ]
    for row in report["rows"]:
        low, high = row["ratio_middle_half"]
        lines.append(f"| {row['case']} | {row['mode']} | {row['us_per_step']:.1f} | "
                     f"{row['baseline']} | {row['ratio']:.2f} ({low:.2f}–{high:.2f}) | "
                     f"{row['operations']} |")
    if report["cuda_path"]:
        lines += [
            "",
            "## Operations a step under bfloat16 autocast: the CPU's path and CUDA's",
            "",
            "Each step's operations (allocations, which launch nothing on a GPU, in parentheses) "
            "as the CPU runs it, and with every method's Triton kernels allowed as on CUDA (run "
            "in Triton's interpreter; a launch counts as one operation). Compiled regions, which "
            "CUDA takes from 64K elements, run eagerly at these shapes on either path.",
            "",
            "| case | mode | CPU's path | CUDA's path |",
            "|---|---|---:|---:|",
        ]
        for row in report["cuda_path"]:
            (eager, eager_alloc), (fast, fast_alloc) = row["eager"], row["kernels"]
            lines.append(f"| {row['case']} | {row['mode']} | {eager} ({eager_alloc}) | "
                         f"{fast} ({fast_alloc}) |")
    elif report["cuda_path"] is None:
        lines += ["", "CUDA's path was not counted: Triton is not installed."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=100, help="steps in a timed block")
    args = parser.parse_args()
    if args.rounds < 2 or args.repeats < 1:  # the rounds' quartiles need two of them
        parser.error("--rounds must be at least 2 and --repeats at least 1")
    check_output(parser, args.output)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    machine = machine_info("cpu")  # before the run: its load average is the run's start
    rows = [_measure(case, train, args.rounds, args.repeats)
            for train in (False, True) for case in CASES]
    cuda_path = ([_path_counts(case, train) for train in (False, True) for case in CASES]
                 if triton_available() else None)
    report = {
        "machine": machine, **source_revision(),
        "command": shlex.join(["python", "benchmarks/host_overhead.py", *sys.argv[1:]]),
        "kernel_shape": [BATCH, HEADS, LENGTH, HEAD_DIM], "module_shape": [BATCH, LENGTH, DIM],
        "rows": rows, "cuda_path": cuda_path,
    }
    write_report(parser, args.output, "host_overhead", report, _markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
