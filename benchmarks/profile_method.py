"""Where one benchmark configuration spends its time: ``torch.profiler`` over a few steps.

    python benchmarks/profile_method.py gfsa --length 4096 --mode train
    python benchmarks/profile_method.py model-softmax --length 1024 --steps 3 --rows 25

Prints the operators sorted by their own CPU (or CUDA) time; ``--trace out.json`` also writes a
Chrome trace. The CPU heap keeps freed memory for reuse, as the benchmark's timed steps do (see
``filterformer.process_memory.keep_freed_memory``).
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from filterformer.bench import ALL_MODES, BenchShape, build_case, method_names
from filterformer.bench.run import resolve_device
from filterformer.process_memory import keep_freed_memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", help=f"one of: {', '.join(method_names())}")
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--mode", choices=ALL_MODES, default="train")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=2, help="profiled steps after one warm-up")
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--trace", help="also write a Chrome trace to this path")
    args = parser.parse_args()

    device = resolve_device(args.device)
    torch.manual_seed(0)
    case = build_case(args.method, BenchShape(), args.length, args.mode, device)
    case.step()
    if device == "cpu":
        keep_freed_memory()
        case.step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            case.step()
    sort = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))
    if args.trace:
        prof.export_chrome_trace(args.trace)


if __name__ == "__main__":
    main()
