"""A whole run and what it writes: :data:`OUTPUT_FILES`, ``machine.json`` being the machine the
figures came from."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from ..jsonsafe import finite_json
from .markdown_report import markdown_report
from .measurement import save_records
from .paired_rounds import paired_results
from .performance_targets import evaluate_targets
from .sweep import BenchSettings, resolve_device, run_benchmarks

__all__ = ["OUTPUT_FILES", "machine_info", "run_and_write"]

OUTPUT_FILES = ("bench.json", "bench.md", "bench.png", "machine.json", "targets.json")


def _load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(device: str) -> dict[str, Any]:
    """What the figures depend on: hardware, threads, library versions, load, date."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        cpuinfo = []
    cpu = next((ln.partition(":")[2].strip() for ln in cpuinfo if ln.startswith("model name")),
               None)
    info: dict[str, Any] = {
        "device": device, "cpu": cpu or platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__, "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if _load_average() is not None:
        info["load_average"] = _load_average()
    if device == "cuda":
        info["gpu"], info["cuda"] = torch.cuda.get_device_name(), torch.version.cuda
    try:
        info["x_transformers"] = version("x-transformers")
    except PackageNotFoundError:
        info["x_transformers"] = None
    return info


def run_and_write(
    settings: BenchSettings, directory: Path, *, paired: str = "auto", command: str = "",
    log: Callable[[str], None] = print,
) -> str:
    """Run ``settings``, check the targets (re-measuring the ``paired`` ones side by side, see
    :func:`~.paired_rounds.paired_results`), write :data:`OUTPUT_FILES` to ``directory`` (the
    plot when anything was measured) and return the markdown report."""
    device = resolve_device(settings.device)
    directory.mkdir(parents=True, exist_ok=True)
    machine = machine_info(device)
    log(f"filterformer bench on {device} ({machine['cpu']}, {machine['torch_threads']} threads)")
    records = run_benchmarks(settings, log=log)
    if _load_average() is not None:  # other work moves CPU timings: how busy was it throughout
        machine["load_average_end"] = _load_average()
    results = paired_results(records, evaluate_targets(records), shape=settings.shape,
                             device=device, allocator=settings.allocator, which=paired, log=log)
    report = markdown_report(records, results, machine, command)
    save_records(records, directory / "bench.json")
    (directory / "bench.md").write_text(report)
    (directory / "machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    targets = [{"target": r.target.name, "mode": r.mode, "ratio": r.ratio, "op": r.target.op,
                "bound": r.target.bound, "paired": r.paired, "paired_spread": r.paired_spread,
                "passed": r.passed} for r in results]
    (directory / "targets.json").write_text(json.dumps(finite_json(targets), indent=1) + "\n")
    if any(r.measured for r in records):
        from .figures import plot_records  # matplotlib loads only here

        plot_records(records, directory / "bench.png")
    return report
