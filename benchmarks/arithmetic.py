"""What the arithmetic allows each GPU target: the floating-point operations of its two steps.

    python benchmarks/arithmetic.py --output DIR [--measured BENCH_JSON] [--match TEXT ...]

A time target compares two steps. Were both to run their arithmetic at one rate, with nothing
else taking time, their time ratio would be the ratio of their operations: the value the
arithmetic allows the target, against which a measured value shows how much of a step goes to
anything else (memory traffic, launches, the host). The operations are counted by torch's
``FlopCounterMode``: matrix products and attention (scaled dot-product attention, two products
of ``2·N·M·d`` a head forward and five backward); elementwise operations, reductions, gathers and
the optimiser's update count nothing. Each side is built as ``filterformer bench`` builds it
(``build_case``) at its target's shape with batch 1, stepped once on the CPU under bfloat16
autocast, and its counts are multiplied by the target's batch (every count is proportional to
the batch). Where CUDA's path does other arithmetic than the CPU's, CUDA's is counted: SAMSA's
hard evaluation, whose kernel reads every token's keys and values, projects them all.

A cached generation's targets are not counted: at batch 1 each token's step reads every weight
for little arithmetic, so its time follows memory. With ``--measured`` (a ``bench.json`` of
``filterformer bench --device cuda --gpu-targets``), each side's median time in that run gives
its rate in TFLOP/s. Writes DIR/arithmetic.json and DIR/arithmetic.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import shlex
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partialmethod
from pathlib import Path
from unittest import mock

import torch
from report_files import check_output, write_report
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from filterformer.attention.samsa import SamplingAttention
from filterformer.bench.method_table import build_case
from filterformer.bench.step_cases import BenchShape
from filterformer.bench.target_list import GPU_TARGETS
from filterformer.bench.targets import Case, Target
from filterformer.machine import machine_info
from filterformer.provenance import source_revision
from filterformer.training.precision import autocast

_aten = torch.ops.aten
#: torch's CPU attention kernel, which ``FlopCounterMode`` has no formula for: the formulas of
#: its CUDA kernels (the same products).
_CPU_ATTENTION = {
    _aten._scaled_dot_product_flash_attention_for_cpu:
        lambda query, key, value, *args, out_shape=None, **kwargs:
            sdpa_flop_count(query, key, value),
    _aten._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda grad_out, query, key, value, *args, out_shape=None, **kwargs:
            sdpa_backward_flop_count(grad_out, query, key, value),
}
#: Targets whose steps are a cached generation: not counted (see above).
_GENERATION = ("generate-", "decode-")


class CountError(RuntimeError):
    """A count that cannot be made or cannot be right: the run stops and says why (exit 2)."""


@contextmanager
def _cuda_arithmetic() -> Iterator[None]:
    """SAMSA's layers choose the rows they project as on CUDA, where its kernels serve. (A tree
    whose SAMSA makes no such choice, run with ``PYTHONPATH`` at its checkout's ``src`` to count
    the arithmetic of a GPU run made there, projects every token on either path.)"""
    if "projects_own_rows" not in vars(SamplingAttention):
        yield
        return
    if "kernels_allowed" not in inspect.signature(SamplingAttention.projects_own_rows).parameters:
        raise CountError("this tree's SAMSA chooses the rows it projects with no "
                           "kernels_allowed argument: CUDA's choice cannot be counted on the CPU")
    choice = partialmethod(SamplingAttention.projects_own_rows, kernels_allowed=True)
    with mock.patch.object(SamplingAttention, "projects_own_rows", choice):
        yield


def count(case: Case, shape: BenchShape, precision: str = "bf16", *,
          cuda: bool = True) -> dict[str, int]:
    """Floating-point operations of one step of ``case`` built at ``shape`` (its batch as given)
    under ``precision``'s autocast on the CPU, with CUDA's arithmetic where ``cuda``:
    ``products`` (matrix products) and ``attention`` (scaled dot-product attention, forward and
    backward)."""
    built = build_case(case.method, shape, case.N, case.mode, "cpu")
    counter = FlopCounterMode(display=False, custom_mapping=_CPU_ATTENTION)
    with _cuda_arithmetic() if cuda else ExitStack(), \
            autocast(precision, torch.device("cpu")), counter:
        built.step()
    counts = {"products": 0, "attention": 0}
    for operation, flops in counter.get_flop_counts()["Global"].items():
        counts["attention" if "attention" in str(operation) else "products"] += int(flops)
    return counts


def counted(target: Target) -> bool:
    """Whether ``target`` is counted here: a time ratio, neither side a cached generation."""
    return target.quantity == "time" and not any(
        case.method.startswith(_GENERATION) for case in (target.numerator, target.denominator))


def target_row(target: Target) -> dict:
    """``target``'s sides counted at batch 1 and scaled to its batch; ``allowed``: numerator
    over denominator, the target's value were both sides' arithmetic to run at one rate."""
    shape = target.shape or BenchShape()
    sides = []
    for case in (target.numerator, target.denominator):
        one = count(case, dataclasses.replace(shape, batch=1), target.precision)
        sides.append({"case": list(case), **{k: n * shape.batch for k, n in one.items()}})
    totals = [side["products"] + side["attention"] for side in sides]
    if not all(t > 0 for t in totals):
        raise CountError(f"{target.name}: a side counts no arithmetic ({sides})")
    allowed = totals[0] / totals[1]
    holds = allowed <= target.bound if target.direction == "<=" else allowed >= target.bound
    return {"target": target.name, "bound": target.bound, "direction": target.direction,
            "batch": shape.batch, "sides": sides, "allowed": allowed,
            "holds_at_one_rate": holds if target.direction != "info" else None}


def read_measured(path: Path) -> dict:
    """``path``'s GPU targets: {name: {"value", "median_ms": [numerator's, denominator's]}},
    its machine and whether its run had ended (``complete``: false in the files of a run that
    was stopped, whose targets not reached are not measured; a file without the field was
    written at its run's end); ValueError naming what is missing or not finite."""
    report = json.loads(path.read_text())
    if not isinstance(report, dict) or not isinstance(report.get("targets"), list):
        raise ValueError("not a bench.json: it has no list of 'targets'")
    measured = {}
    for row in report["targets"]:
        if not (isinstance(row, dict) and isinstance(row.get("name"), str)
                and isinstance(row.get("sides") or [], list)
                and all(isinstance(side, dict) for side in row.get("sides") or [])):
            raise ValueError(f"a target that is not a bench.json row with a name and sides: "
                             f"{str(row)[:200]}")
        times = [side.get("median_ms") for side in row.get("sides") or []]
        if row.get("value") is None or len(times) != 2 or None in times:
            continue  # a CPU target, or one not measured in that run
        values = [row["value"], *times]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values):
            raise ValueError(f"target {row.get('name')!r}: a value or time that is not a "
                             f"finite positive number ({values})")
        measured[row["name"]] = {"value": row["value"], "median_ms": times}
    complete = report.get("complete", True)
    if not isinstance(complete, bool):
        raise ValueError(f"'complete' must be true or false; got {complete!r}")
    machine = report.get("machine") if isinstance(report.get("machine"), dict) else {}
    source = machine.get("source") if isinstance(machine.get("source"), dict) else {}
    return {"targets": measured, "gpu": machine.get("gpu"), "date": machine.get("date"),
            "commit": source.get("commit"), "modified": bool(source.get("modified")),
            "complete": complete}


def with_rates(row: dict, measured: dict) -> dict:
    """``row`` with the measured value, each side's rate (TFLOP/s, its operations over its
    median time) and ``needed``: the rate at which the side the bound limits (the denominator
    of a ``>=`` bound, the numerator of a ``<=`` one) would bring the measured value to the
    bound, the other side as measured. The value is the median of the rounds' ratios, not the
    ratio of the medians, so ``needed`` scales the limited side's rate by the bound over the
    value (``>=``) or the value over the bound (``<=``): a side that misses its bound needs
    more than it ran at. Where ``measured`` (:func:`read_measured`) has the target."""
    found = measured["targets"].get(row["target"])
    if found is None:
        return row
    flops = [side["products"] + side["attention"] for side in row["sides"]]
    rates = [n / (ms * 1e-3) / 1e12 for n, ms in zip(flops, found["median_ms"], strict=True)]
    value, bound, needed = found["value"], row["bound"], None
    if row["direction"] == ">=":  # the denominator's time must shrink by value / bound
        needed = {"side": "denominator", "tflops": rates[1] * bound / value}
    elif row["direction"] == "<=":  # the numerator's time must shrink by bound / value
        needed = {"side": "numerator", "tflops": rates[0] * value / bound}
    return {**row, "measured": value, "median_ms": found["median_ms"], "tflops": rates,
            "needed": needed}


#: What the table says of a measured file whose run had not ended.
UNFINISHED = ", a run that had not ended: the targets it had not reached are not measured"


def _markdown(report: dict) -> str:
    machine, measured = report["machine"], report["measured"]
    lines = [
        "# What the arithmetic allows each GPU target",
        "",
        f"- Counted on: {machine['cpu']}, torch {machine['torch']}, {machine['date']}.",
        f"- Command: `{report['command']}` at commit {report['commit'] or '(unknown)'}"
        f"{' (with uncommitted changes)' if report['modified'] else ''}.",
        "- GFLOP a step at the target's batch (matrix products + attention), numerator then "
        "denominator. Allowed: numerator over denominator, the target's value were both "
        "sides' arithmetic to run at one rate.",
    ]
    if measured:
        lines.append(f"- Measured: `{measured['path']}`, {measured['gpu']}, {measured['date']}, "
                     f"commit {measured['commit']}"
                     f"{' (with uncommitted changes)' if measured['modified'] else ''}"
                     f"{'' if measured['complete'] else UNFINISHED}; rates "
                     "from its median times a step. The bound needs: the rate at which the side "
                     "it limits would meet it, the other side's time as measured.")
    lines += ["", "| target | bound | numerator GFLOP | denominator GFLOP | allowed | holds at "
              "one rate | measured | TFLOP/s (numerator, denominator) | the bound needs |",
              "|---|---|---:|---:|---:|---|---:|---|---|"]
    for row in report["rows"]:
        gflop = [f"{s['products'] / 1e9:.1f} + {s['attention'] / 1e9:.1f}" for s in row["sides"]]
        holds = {True: "yes", False: "**no**", None: "(info)"}[row["holds_at_one_rate"]]
        value = f"{row['measured']:.2f}" if "measured" in row else "–"
        rates = (", ".join(f"{r:.0f}" for r in row["tflops"]) if "tflops" in row else "–")
        needed = row.get("needed")
        needs = f"{needed['tflops']:.0f} of the {needed['side']}" if needed else "–"
        lines.append(f"| {row['target']} | {row['direction']} {row['bound']:g} | {gflop[0]} | "
                     f"{gflop[1]} | {row['allowed']:.2f} | {holds} | {value} | {rates} | "
                     f"{needs} |")
    lines += ["", "Not counted (a cached generation's time follows memory): "
              + "; ".join(report["not_counted"]) + "."] if report["not_counted"] else []
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--measured", type=Path, help="a GPU run's bench.json")
    parser.add_argument("--match", nargs="+", metavar="TEXT",
                        help="only the targets whose name contains one of these")
    args = parser.parse_args()
    check_output(parser, args.output)
    measured = None
    if args.measured is not None:
        try:
            measured = {"path": str(args.measured), **read_measured(args.measured)}
        except (OSError, ValueError) as err:  # json's decoding error is a ValueError
            parser.error(f"--measured {args.measured}: {err}")
    chosen = [t for t in GPU_TARGETS if not args.match or any(m in t.name for m in args.match)]
    if not any(map(counted, chosen)):
        parser.error(f"--match: no counted GPU target's name contains any of {args.match} (a "
                     "cached generation's targets are not counted)")
    torch.manual_seed(0)
    try:
        rows = [target_row(t) for t in chosen if counted(t)]
    except CountError as err:
        print(f"arithmetic.py: {err}", file=sys.stderr)
        return 2
    report = {
        "machine": machine_info("cpu"), **source_revision(),
        "command": shlex.join(["python", "benchmarks/arithmetic.py", *sys.argv[1:]]),
        "rows": [with_rates(row, measured) if measured else row for row in rows],
        "not_counted": [t.name for t in chosen if not counted(t)], "measured": measured,
    }
    write_report(parser, args.output, "arithmetic", report, _markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
