"""Measure chosen CPU targets again, each with its cases side by side, with a larger time budget
per target than a full run gives (more alternated rounds), and write them as a bench run does.

    python benchmarks/recheck_targets.py --output DIR --target-s 180 [--control] NAME_PART ...

Every CPU target whose name contains one of the NAME_PARTs is measured (the compiled ones
included); the others are recorded as not run. Writes DIR/bench.json and DIR/bench.md.

With ``--control``, each chosen target of time is followed by its control: the target's
denominator over a second copy of itself (a row of the same builder under another name, built
first, as a target's numerator is), measured by the same protocol. Its two sides run the same
code, so its ratio's distance from 1 is what the measurement alone gives at that shape: the
resolution against which the target's margin can be read. A control is an ``info`` row.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from filterformer.bench import method_table
from filterformer.bench import run as bench_run
from filterformer.bench.run import BenchSettings, run_and_write
from filterformer.bench.targets import Target

#: What a control's second copy of a row is called: ``decode-softmax`` → ``decode-softmax again``.
AGAIN = "{} again"


def control(target: Target) -> Target:
    """``target``'s control: its denominator's row over a copy of that row registered (in this
    process's :data:`~filterformer.bench.method_table.BENCH_METHODS`) as :data:`AGAIN`."""
    row = target.denominator.method
    copy = AGAIN.format(row)
    method_table.BENCH_METHODS.setdefault(copy, replace(method_table.get_method(row), name=copy,
                                                        table=False, baseline=row))
    return replace(target, name=f"control of {target.name!r}: {copy} / {row}",
                   numerator=target.denominator._replace(method=copy), direction="info")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", metavar="NAME_PART")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--target-s", type=float, default=180.0)
    parser.add_argument("--control", action="store_true",
                        help="follow each chosen target of time by its control (see above)")
    args = parser.parse_args()
    chosen = tuple(t for t in bench_run.TARGETS if any(p in t.name for p in args.parts))
    if not chosen:
        parser.error(f"no CPU target's name contains any of {args.parts}")
    if args.control:
        chosen = tuple(row for target in chosen for row in (
            (target, control(target)) if target.quantity == "time" else (target,)))
    bench_run.TARGETS, bench_run.GPU_TARGETS = chosen, ()
    settings = replace(BenchSettings(), methods=(), target_s=args.target_s)
    command = shlex.join(["python", "benchmarks/recheck_targets.py", *sys.argv[1:]])
    run_and_write(settings, args.output, command=command, directory_name="--output")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
