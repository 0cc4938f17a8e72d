"""The aten operations of a cached decoding step, each method's against softmax's.

    python benchmarks/decoding_operations.py --output DIR [--prompt 4096] [--methods gfsa neutreno]

Builds the CPU decoding targets' cases as ``filterformer bench`` does (the CausalLM at
``DECODING_SHAPE``, its cache cut back to a prompt of N tokens, then :data:`TOKENS` greedy
tokens) and counts the operations of one step under a dispatch mode, views included: what a
method's step runs beyond softmax's, and what softmax's runs that it does not. A ratio of step
times that an extra operation or two a layer cannot explain points at the machine, not the code.
Writes DIR/decoding_operations.json and DIR/decoding_operations.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from pathlib import Path

import torch
from report_files import check_output, write_report
from torch.utils._python_dispatch import TorchDispatchMode

from filterformer.bench.model_cases import TOKENS, decoding_case
from filterformer.bench.target_list import DECODING_SHAPE
from filterformer.machine import machine_info
from filterformer.provenance import source_revision


class _Operations(TorchDispatchMode):
    """Counts each aten operation run inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def step_operations(method: str, prompt: int) -> Counter[str]:
    """The operations of ``method``'s decoding step after a ``prompt``-token prompt (its second
    step: the first primes caches)."""
    case = decoding_case(method)(DECODING_SHAPE, prompt, "inference", torch.device("cpu"))
    case.forward()
    operations = _Operations()
    with operations:
        case.forward()
    return operations.counts


def _markdown(report: dict) -> str:
    lines = [
        "# Operations of a cached decoding step, against softmax's", "",
        f"- Machine: {report['machine']['cpu']}, torch {report['machine']['torch']}.",
        f"- Command: `{report['command']}` at commit {report.get('commit')}.",
        f"- Step: {report['tokens']} greedy tokens after a prompt of {report['prompt']}, "
        f"the CausalLM at {report['shape']}.", "",
        "| method | operations a step | beyond softmax's | softmax's beyond it |",
        "|---|---:|---|---|",
    ]
    for row in report["methods"]:
        extra = ", ".join(f"{name} ×{n}" for name, n in row["extra"].items()) or "none"
        missing = ", ".join(f"{name} ×{n}" for name, n in row["missing"].items()) or "none"
        lines.append(f"| {row['method']} | {row['operations']} | {extra} | {missing} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--prompt", type=int, default=4096, help="prompt tokens N")
    parser.add_argument("--methods", nargs="+", default=["gfsa", "neutreno"])
    args = parser.parse_args()
    if args.prompt < 1:
        parser.error(f"--prompt must be at least 1; got {args.prompt}")
    check_output(parser, args.output)
    torch.manual_seed(0)
    try:
        baseline = step_operations("softmax", args.prompt)
        counted = {method: step_operations(method, args.prompt) for method in args.methods}
    except (KeyError, ValueError) as err:
        parser.error(f"--methods: {err}")
    rows = [{"method": "softmax", "operations": baseline.total(), "extra": {}, "missing": {}}]
    rows += [{"method": method, "operations": counts.total(),
              "extra": dict(sorted((counts - baseline).items())),
              "missing": dict(sorted((baseline - counts).items()))}
             for method, counts in counted.items()]
    report = {
        "machine": machine_info("cpu"), **source_revision(),
        "command": shlex.join(["python", "benchmarks/decoding_operations.py", *sys.argv[1:]]),
        "prompt": args.prompt, "tokens": TOKENS, "shape": str(DECODING_SHAPE), "methods": rows,
    }
    write_report(parser, args.output, "decoding_operations", report, _markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
