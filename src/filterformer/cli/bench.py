"""Benchmark every attention method: time and extra memory against N, and the targets.

Writes bench.json (the machine, one record per method, N and mode, and the targets), bench.md
(tables, targets, what each step runs, what was skipped and why) and bench.png (log-log plots) to
--output; bench.json and bench.md are rewritten after each configuration and target, so that a
run stopped part-way keeps what it measured and says that it had not ended. Each target's two
cases are measured side by side in one process, their steps alternated in rounds. --gpu-targets
measures the GPU targets alone. Exits 2 when nothing was measured.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..bench import (
    ALL_MODES,
    BENCH_METHODS,
    MODES,
    BenchSettings,
    BenchShape,
    method_names,
    run_and_write,
)
from ..bench.run import DEFAULT_LENGTHS, OUTPUT_FILES, QUICK_LENGTHS, NothingMeasured
from ..machine import DEVICES, resolve_device

__all__ = ["add_arguments", "run", "settings_from_args"]

#: The options the report's command line repeats where they differ from the defaults.
_ECHOED = ("quick", "gpu_targets", "no_targets", "methods", "lengths", "modes", "repeats",
           "device", "compile")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--methods", nargs="+", metavar="METHOD",
        help="rows to run (default: the table's; see --list)")
    add("--lengths", nargs="+", type=int, metavar="N",
        help=f"sequence lengths (default: {' '.join(map(str, DEFAULT_LENGTHS))}; --quick: "
        f"{' '.join(map(str, QUICK_LENGTHS))})")
    add("--modes", nargs="+", choices=ALL_MODES,
        help="default: train inference (compiled: a training step of the compiled method)")
    add("--repeats", type=int, help="time at least this many rounds (default 3; --quick 2)")
    add("--device", choices=DEVICES, default="auto", help="default: auto")
    add("--output", type=Path, default=Path("bench-results"),
        help=f"directory for {', '.join(OUTPUT_FILES)} (default: bench-results)")
    add("--quick", action="store_true",
        help="tiny sizes and lengths (smoke test): B=1, h=2, d=8, depth 1; the targets at N/64")
    add("--no-targets", action="store_true", help="measure the table alone")
    add("--gpu-targets", action="store_true",
        help="measure only the GPU targets (attention modules at D=768 and D=128, GFSA's "
        "kernel, a BERT-base-sized training step, first and warmed generation; bf16); needs "
        "CUDA (with --quick: tiny sizes, any device)")
    add("--compile", action="store_true",
        help="add the compiled-step targets (eager against torch.compile training steps), "
        "which a full run includes and --quick leaves out")
    add("--list", action="store_true", help="list every row and exit")


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    """The :class:`~filterformer.bench.BenchSettings` the command line asks for."""
    if args.gpu_targets and not args.quick and resolve_device(args.device) != "cuda":
        raise ValueError("--gpu-targets measures GPU shapes (32,768 tokens a batch, a "
                         "BERT-base-sized model): use it with --device cuda on a GPU, or add "
                         "--quick to run its code at tiny sizes")
    if args.gpu_targets and args.no_targets:
        raise ValueError("--gpu-targets and --no-targets exclude each other; choose one")
    return BenchSettings(
        methods=tuple(args.methods or (() if args.gpu_targets else method_names())),
        lengths=tuple(args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)),
        modes=tuple(args.modes or MODES), device=args.device,
        shape=BenchShape.quick() if args.quick else BenchShape(),
        repeats=(2 if args.quick else 3) if args.repeats is None else args.repeats,
        min_run_s=0.02 if args.quick else 0.5,
        targets="gpu" if args.gpu_targets else "none" if args.no_targets else "cpu",
        compile=args.compile or not args.quick, target_s=0.05 if args.quick else 60.0,
        quick=args.quick,
    )


def _command(args: argparse.Namespace) -> str:
    """The command line that repeats this run."""
    parts = ["filterformer", "bench"]
    for name in _ECHOED:
        value = getattr(args, name)
        if value not in (None, False, "auto"):
            values = [] if value is True else value if isinstance(value, list) else [value]
            parts += [f"--{name.replace('_', '-')}", *map(str, values)]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    if args.list:
        for name, method in BENCH_METHODS.items():
            print(f"{name:<20} {method.level:<7} {method.timed}")
        return 0
    try:
        report = run_and_write(settings_from_args(args), args.output, command=_command(args),
                               directory_name="--output")
    except NothingMeasured as err:  # the report is written and shown; main() exits 2
        print(f"\n{err.report}")
        raise
    print(f"\n{report}")
    written = [name for name in OUTPUT_FILES if (args.output / name).exists()]
    print(f"wrote {args.output}/{', '.join(written)}")
    return 0
