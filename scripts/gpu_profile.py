"""Where the GPU targets' steps spend their time: each side's GPU time, wall time and costliest
kernels, built exactly as ``filterformer bench --gpu-targets`` builds them.

    PYTHONPATH=src python scripts/gpu_profile.py [--match REGEX] [--skip REGEX] [--top 12]
                                                 [--steps 5] [--output FILE]
    PYTHONPATH=src python scripts/gpu_profile.py --device cpu --quick    # a check that it runs

Every distinct side (a case of the bench's method table at its length, mode, shape and
precision) of the GPU targets (``filterformer.bench.GPU_TARGETS``) whose name matches ``--match``
and not ``--skip`` (default: every target but cached generation's, which hold), built by the
bench's own builder (seed 0, bf16 autocast, a priming step at N=64). After warm-up steps it
prints, for each side: the wall time of a step (synchronised), the device time of a step (the
self time of every kernel torch.profiler records, summed) and the costliest kernels with their
calls a step. A wall time well above the device time says the host is the limit; the kernels
say what to fuse. Cases are profiled one after another on an otherwise idle GPU.

``--device cpu --quick`` runs the same at the bench's tiny sizes (``--quick``) on the CPU,
profiling CPU time: a check of the script, not a measurement. Writes the report to ``--output``
too, each side's section as soon as it is measured (a run stopped at a time limit keeps what it
measured). Exits 2 on a bad argument or where no target matches.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from filterformer.bench import GPU_TARGETS, BenchShape, Case
from filterformer.bench.measure import build_primed
from filterformer.bench.run import quick_target
from filterformer.machine import machine_info

#: The targets left out by default: cached generation's (both hold; a step is a whole generate).
DEFAULT_SKIP = "generation"

#: A side of a target: its case, shape and precision.
Side = tuple[Case, BenchShape, str]


def sides(match: str, skip: str, quick: bool) -> dict[Side, list[str]]:
    """The distinct sides of the GPU targets matching ``match`` and not ``skip`` (regular
    expressions searched in the targets' names), at the bench's tiny sizes where ``quick``,
    each with the names of the targets it is a side of."""
    found: dict[Side, list[str]] = {}
    for target in GPU_TARGETS:
        if not re.search(match, target.name) or (skip and re.search(skip, target.name)):
            continue
        run = quick_target(target) if quick else target
        for case in dict.fromkeys((run.numerator, run.denominator)):
            found.setdefault((case, run.shape, run.precision), []).append(target.name)
    return found


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def profile_step(step: Callable[[], None], device: str, steps: int, top: int) -> list[str]:
    """Lines saying what ``steps`` steps of ``step`` cost a step (after 3 warm-up steps): wall
    time, device (or, on the CPU, CPU) time summed over kernels (operators), and the ``top``
    costliest with their calls a step."""
    for _ in range(3):
        step()
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _synchronize(device)
    wall_ms = (time.perf_counter() - start) / steps * 1e3
    activity = ProfilerActivity.CUDA if device == "cuda" else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        for _ in range(steps):
            step()
        _synchronize(device)

    def self_us(event) -> float:
        return event.self_device_time_total if device == "cuda" else event.self_cpu_time_total

    events = [e for e in prof.key_averages() if self_us(e) > 0]
    total_ms = sum(map(self_us, events)) / steps / 1e3
    if not (wall_ms > 0 and total_ms > 0):
        raise RuntimeError(f"nothing was timed (wall {wall_ms} ms, profiled {total_ms} ms)")
    kind = "GPU" if device == "cuda" else "CPU (operators' self time)"
    lines = [f"- wall {wall_ms:.3f} ms a step; {kind} {total_ms:.3f} ms a step "
             f"(wall / profiled {wall_ms / total_ms:.2f})", "",
             "| ms a step | share | calls a step | kernel |", "|---:|---:|---:|---|"]
    for event in sorted(events, key=lambda e: -self_us(e))[:top]:
        ms = self_us(event) / steps / 1e3
        name = event.key.replace("|", "\\|")[:110]
        lines.append(f"| {ms:.3f} | {ms / total_ms:.0%} | {event.count / steps:g} | `{name}` |")
    return lines


def _header(device: str, command: str) -> list[str]:
    machine = machine_info(device)
    where = machine.get("gpu") or f"{machine['cpu']} ({machine['cpu_count']} cores)"
    return ["# Where the GPU targets' steps spend their time", "",
            f"- Machine: {where}, torch {machine['torch']}, {machine['date']}.",
            f"- Command: `{command}`.", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--match", default="", help="regular expression: targets to profile")
    parser.add_argument("--skip", default=DEFAULT_SKIP,
                        help=f"regular expression: targets left out (default {DEFAULT_SKIP!r}; "
                        "'' keeps every one)")
    parser.add_argument("--top", type=int, default=12, help="kernels listed a side")
    parser.add_argument("--steps", type=int, default=5, help="steps timed and profiled a side")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="the bench's tiny sizes")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    for name in ("match", "skip"):
        try:
            re.compile(getattr(args, name))
        except re.error as err:
            parser.error(f"--{name} {getattr(args, name)!r} is not a regular expression ({err})")
    if args.top < 1 or args.steps < 1:
        parser.error(f"--top and --steps must be at least 1; got {args.top} and {args.steps}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device (torch.cuda.is_available() is False)")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output {args.output} is a directory, not a file")
    chosen = sides(args.match, args.skip, args.quick)
    if not chosen:
        parser.error(f"no GPU target matches --match {args.match!r} outside --skip {args.skip!r}")
    command = " ".join(["python", "scripts/gpu_profile.py", *(argv or sys.argv[1:])])

    def report(lines: list[str], mode: str) -> None:  # each side's section as it is done
        print("\n".join(lines), flush=True)
        if args.output is not None:
            try:
                with args.output.open(mode) as file:
                    file.write("\n".join(lines) + "\n")
            except OSError as err:
                parser.error(f"--output {args.output}: cannot write there ({err})")

    report(_header(args.device, command), "w")
    for (case, shape, precision), targets in chosen.items():
        section = [f"## {case.method}, N={case.N}, {case.mode}: B={shape.batch}, "
                   f"h={shape.heads}, d={shape.head_dim}, depth {shape.depth}, {precision}", "",
                   *(f"- side of: {name}" for name in targets)]
        built = build_primed(case, shape, args.device, precision)
        section += [*profile_step(built.step, args.device, args.steps, args.top), ""]
        del built
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
        report(section, "a")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
