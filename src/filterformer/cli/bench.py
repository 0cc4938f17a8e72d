"""Benchmark every attention method: time and extra memory against N, and the targets.

Writes bench.json (one record per method, N and mode), bench.md (tables, targets, what each step
runs, what was skipped and why), bench.png (log-log plots), targets.json and machine.json to
--output. On the CPU each configuration runs in its own process, so its peak-memory figure is
its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path

from ..bench import (
    BENCH_METHODS,
    DEFAULT_LENGTHS,
    MODES,
    QUICK_LENGTHS,
    BenchSettings,
    BenchShape,
    method_names,
    run_and_write,
)
from ..bench.paired_rounds import PAIRED_CHOICES
from ..bench.run_outputs import OUTPUT_FILES
from ..bench.step_measures import ALLOCATORS
from ..bench.sweep import DEVICES

__all__ = ["add_arguments", "run", "settings_from_args"]

#: The options the report's command line repeats, in this order, where they differ from the
#: defaults.
_ECHOED = ("quick", "methods", "lengths", "modes", "repeats", "warmup", "device", "batch",
           "heads", "head_dim", "depth", "memory_budget_mb", "budget_s", "target_budget_s",
           "in_process", "allocator", "paired")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--methods", nargs="+", metavar="METHOD", help="methods to run (default: all; see --list)")
    add("--lengths", nargs="+", type=int, metavar="N",
        help=f"sequence lengths (default: {' '.join(map(str, DEFAULT_LENGTHS))} and those the "
        f"targets read; --quick: {' '.join(map(str, QUICK_LENGTHS))})")
    add("--modes", nargs="+", choices=MODES, help="default: train inference")
    add("--repeats", type=int, help="most timed repeats (default 5; --quick 2)")
    add("--warmup", type=int, default=1, help="untimed warm-up steps (default 1)")
    add("--device", choices=DEVICES, default="auto", help="default: auto")
    add("--output", type=Path, default=Path("bench-results"),
        help=f"directory for {', '.join(OUTPUT_FILES)} (default: bench-results)")
    add("--quick", action="store_true",
        help="tiny sizes and lengths (smoke test): B=1, h=2, d=8, depth 1")
    add("--batch", type=int, help="B (default 2)")
    add("--heads", type=int, help="h (default 4)")
    add("--head-dim", type=int, help="d (default 64)")
    add("--depth", type=int, help="blocks of the model benchmarks (default 4)")
    add("--budget-s", type=float, default=BenchSettings.config_budget_s,
        help="skip configurations projected to take longer in total (default %(default)g)")
    add("--target-budget-s", type=float, default=BenchSettings.target_budget_s,
        help="the same for the configurations the targets read (default %(default)g)")
    add("--memory-budget-mb", type=float,
        help="skip configurations projected to need more extra memory "
        "(default: 60%% of available memory, at most 8192 on the CPU)")
    add("--in-process", action="store_true",
        help="measure every configuration in this process (faster; CPU memory figures then "
        "share one heap)")
    add("--allocator", choices=ALLOCATORS, default="reuse",
        help="CPU heap while timing: reuse freed memory (default) or glibc's defaults, under "
        "which every tensor of 32 MiB or more page-faults anew each step")
    add("--paired", choices=PAIRED_CHOICES, default="auto",
        help="re-measure time targets with both sides alternated in one process: those within "
        "25%% of their bound (auto, default), all, or none; a target's verdict reads its "
        "paired ratio where one was measured")
    add("--list", action="store_true", help="list the methods and exit")


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """The :class:`~filterformer.bench.BenchSettings` the command line asks for."""
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 5)
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1; got {repeats}")
    sizes = {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim,
             "depth": args.depth}
    shape = dataclasses.replace(BenchShape.quick() if args.quick else BenchShape(),
                                **{k: v for k, v in sizes.items() if v is not None})
    return BenchSettings(
        methods=tuple(args.methods or method_names()),
        lengths=tuple(args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)),
        modes=tuple(args.modes or MODES), device=args.device, shape=shape, repeats=repeats,
        min_repeats=min(3, repeats), warmup=args.warmup, config_budget_s=args.budget_s,
        target_budget_s=args.target_budget_s, memory_budget_mb=args.memory_budget_mb,
        isolate=False if args.in_process else None, allocator=args.allocator,
        target_lengths=not (args.lengths or args.quick),
    )


def _command(args: argparse.Namespace) -> str:
    """The command line that repeats this run."""
    defaults = argparse.ArgumentParser()
    add_arguments(defaults)
    default = vars(defaults.parse_args([]))
    parts = ["filterformer", "bench"]
    for name in _ECHOED:
        value = getattr(args, name)
        if value != default[name]:
            values = [] if value is True else value if isinstance(value, list) else [value]
            parts += ["--" + name.replace("_", "-")] + [
                v if isinstance(v, str) else f"{v:g}" for v in values
            ]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name, method in BENCH_METHODS.items():
            print(f"{name:<20} {method.level:<7} {method.timed}")
        return 0
    report = run_and_write(settings_from_args(args), args.output, paired=args.paired,
                           command=_command(args))
    print(f"\n{report}")
    print(f"wrote {args.output}/{', '.join(OUTPUT_FILES)}")
    return 0
