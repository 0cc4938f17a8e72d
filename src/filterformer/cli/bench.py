"""Benchmark every attention method: time and extra memory against N, and the targets.

Writes bench.json (one record per method, N and mode), bench.md (tables, targets, what each step
runs, what was skipped and why), bench.png (log-log plots), targets.json and machine.json to
--output. On the CPU each configuration runs in its own process, so its peak-memory figure is
its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
from pathlib import Path

from ..bench import (
    BENCH_METHODS,
    DEFAULT_LENGTHS,
    MODES,
    QUICK_LENGTHS,
    BenchSettings,
    BenchShape,
    evaluate_targets,
    machine_info,
    markdown_report,
    method_names,
    run_benchmarks,
    save_records,
)
from ..bench.allocator import ALLOCATORS
from ..bench.config import DEVICES, resolve_device
from ..bench.paired import PAIRED_CHOICES, paired_results
from ..jsonsafe import finite_json

__all__ = ["add_arguments", "run", "settings_from_args"]

DEFAULT_BUDGET_S = BenchSettings.config_budget_s
DEFAULT_TARGET_BUDGET_S = BenchSettings.target_budget_s


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--methods", nargs="+", metavar="METHOD",
        help="methods to run (default: all; see --list)",
    )
    parser.add_argument(
        "--lengths", nargs="+", type=int, metavar="N",
        help=f"sequence lengths (default: {' '.join(map(str, DEFAULT_LENGTHS))} and those the "
        f"targets read; --quick: {' '.join(map(str, QUICK_LENGTHS))})",
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, help="default: train inference")
    parser.add_argument(
        "--repeats", type=int, default=None, help="most timed repeats (default 5; --quick 2)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed warm-up steps (default 1)")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="default: auto")
    parser.add_argument(
        "--output", type=Path, default=Path("bench-results"),
        help="directory for bench.json, bench.md, bench.png (default: bench-results)",
    )
    parser.add_argument(
        "--quick", action="store_true",
        help="tiny sizes and lengths (smoke test): B=1, h=2, d=8, depth 1",
    )
    parser.add_argument("--batch", type=int, help="B (default 2)")
    parser.add_argument("--heads", type=int, help="h (default 4)")
    parser.add_argument("--head-dim", type=int, help="d (default 64)")
    parser.add_argument("--depth", type=int, help="blocks of the model benchmarks (default 4)")
    parser.add_argument(
        "--budget-s", type=float, default=DEFAULT_BUDGET_S,
        help=f"skip configurations projected to take longer in total (default "
        f"{DEFAULT_BUDGET_S:g})",
    )
    parser.add_argument(
        "--target-budget-s", type=float, default=DEFAULT_TARGET_BUDGET_S,
        help=f"the same for the configurations the targets read (default "
        f"{DEFAULT_TARGET_BUDGET_S:g})",
    )
    parser.add_argument(
        "--memory-budget-mb", type=float, default=None,
        help="skip configurations projected to need more extra memory "
        "(default: 60%% of available memory, at most 8192 on the CPU)",
    )
    parser.add_argument(
        "--in-process", action="store_true",
        help="measure every configuration in this process (faster; CPU memory figures then "
        "share one heap)",
    )
    parser.add_argument(
        "--allocator", choices=ALLOCATORS, default="reuse",
        help="CPU heap while timing: reuse freed memory (default) or glibc's defaults, under "
        "which every tensor of 32 MiB or more page-faults anew each step",
    )
    parser.add_argument(
        "--paired", choices=PAIRED_CHOICES, default="auto",
        help="re-measure time targets with both sides alternated in one process: those within "
        "25%% of their bound (auto, default), all, or none; a target's verdict reads its paired "
        "ratio where one was measured",
    )
    parser.add_argument("--list", action="store_true", help="list the methods and exit")


def _shape(args: argparse.Namespace) -> BenchShape:
    base = BenchShape.quick() if args.quick else BenchShape()
    sizes = {
        "batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "depth": args.depth,
    }
    return dataclasses.replace(base, **{k: v for k, v in sizes.items() if v is not None})


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """The :class:`BenchSettings` the command line asks for."""
    repeats = args.repeats if args.repeats is not None else (2 if args.quick else 5)
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1; got {repeats}")
    return BenchSettings(
        methods=tuple(args.methods) if args.methods else method_names(),
        lengths=tuple(args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)),
        modes=tuple(args.modes or MODES),
        device=args.device,
        shape=_shape(args),
        repeats=repeats,
        min_repeats=min(3, repeats),
        warmup=args.warmup,
        config_budget_s=args.budget_s,
        target_budget_s=args.target_budget_s,
        memory_budget_mb=args.memory_budget_mb,
        isolate=False if args.in_process else None,
        allocator=args.allocator,
        target_lengths=not (args.lengths or args.quick),
    )


def _command(settings: BenchSettings, args: argparse.Namespace) -> str:
    parts = ["filterformer", "bench"]
    if args.quick:
        parts.append("--quick")
    if args.methods:
        parts += ["--methods", *settings.methods]
    if args.lengths:
        parts += ["--lengths", *map(str, settings.lengths)]
    if args.modes:
        parts += ["--modes", *settings.modes]
    if args.repeats is not None:
        parts += ["--repeats", str(settings.repeats)]
    if args.device != "auto":
        parts += ["--device", args.device]
    for flag, value in (
        ("--batch", args.batch), ("--heads", args.heads), ("--head-dim", args.head_dim),
        ("--depth", args.depth), ("--memory-budget-mb", args.memory_budget_mb),
    ):
        if value is not None:
            parts += [flag, f"{value:g}"]
    if args.budget_s != DEFAULT_BUDGET_S:
        parts += ["--budget-s", f"{args.budget_s:g}"]
    if args.target_budget_s != DEFAULT_TARGET_BUDGET_S:
        parts += ["--target-budget-s", f"{args.target_budget_s:g}"]
    if args.in_process:
        parts.append("--in-process")
    if args.allocator != "reuse":
        parts += ["--allocator", args.allocator]
    if args.paired != "auto":
        parts += ["--paired", args.paired]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name, method in BENCH_METHODS.items():
            print(f"{name:<20} {method.level:<7} {method.timed}")
        return 0
    settings = settings_from_args(args)
    device = resolve_device(settings.device)
    args.output.mkdir(parents=True, exist_ok=True)
    machine = machine_info(device)
    print(f"filterformer bench on {device} ({machine['cpu']}, {machine['torch_threads']} threads)")
    records = run_benchmarks(settings, log=print)
    if hasattr(os, "getloadavg"):
        # Other work on the machine moves CPU timings: say how busy it was throughout.
        machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    results = evaluate_targets(records)
    results = paired_results(
        records, results, shape=settings.shape, device=device, allocator=settings.allocator,
        which=args.paired, log=print,
    )
    report = markdown_report(records, results, machine, _command(settings, args))
    save_records(records, args.output / "bench.json")
    (args.output / "bench.md").write_text(report)
    (args.output / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    targets = [
        {
            "target": r.target.name, "mode": r.mode, "ratio": r.ratio, "op": r.target.op,
            "bound": r.target.bound, "paired": r.paired, "paired_spread": r.paired_spread,
            "passed": r.passed,
        }
        for r in results
    ]
    (args.output / "targets.json").write_text(json.dumps(finite_json(targets), indent=1) + "\n")
    if any(r.measured for r in records):
        from ..bench.plot import plot_records

        plot_records(records, args.output / "bench.png")
    print()
    print(report)
    print(f"wrote {args.output}/bench.json, bench.md, bench.png, machine.json, targets.json")
    return 0
