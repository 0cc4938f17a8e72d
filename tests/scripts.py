"""A script of ``scripts/`` or ``benchmarks/`` loaded as a module, for the tests that call its
functions; one run as a command."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

#: The repository's ``scripts/`` folder.
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
#: The repository's ``benchmarks/`` folder.
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(name: str, folder: Path = SCRIPTS) -> ModuleType:
    """``<folder>/<name>.py`` (``scripts/`` by default) executed as a fresh module named
    ``name``, with ``folder`` on the path while it runs, as ``python <folder>/<name>.py`` has
    it (a script of ``benchmarks/`` imports its neighbour ``report_files``)."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module


def run_benchmark(name: str, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/<name>.py ARGS``, its output captured (at most 300 s)."""
    return _run(BENCHMARKS / f"{name}.py", args)


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    """``python scripts/<name>.py ARGS`` from the repository's root, its output captured (at
    most 300 s)."""
    return _run(SCRIPTS / f"{name}.py", args, cwd=SCRIPTS.parent)


def _run(path: Path, args: tuple[str, ...], cwd: Path | None = None
         ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
