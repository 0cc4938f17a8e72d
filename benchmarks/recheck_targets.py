"""Measure chosen CPU targets again, each with its cases side by side, with a larger time budget
per target than a full run gives (more alternated rounds), and write them as a bench run does.

    python benchmarks/recheck_targets.py --output DIR --target-s 180 NAME_PART [NAME_PART ...]

Every CPU target whose name contains one of the NAME_PARTs is measured (the compiled ones
included); the others are recorded as not run. Writes DIR/bench.json and DIR/bench.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from filterformer.bench import run as bench_run
from filterformer.bench.run import BenchSettings, run_and_write


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="+", metavar="NAME_PART")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--target-s", type=float, default=180.0)
    args = parser.parse_args()
    chosen = tuple(t for t in bench_run.TARGETS if any(p in t.name for p in args.parts))
    if not chosen:
        parser.error(f"no CPU target's name contains any of {args.parts}")
    bench_run.TARGETS, bench_run.GPU_TARGETS = chosen, ()
    settings = replace(BenchSettings(), methods=(), target_s=args.target_s)
    command = shlex.join(["python", "benchmarks/recheck_targets.py", *sys.argv[1:]])
    run_and_write(settings, args.output, command=command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
