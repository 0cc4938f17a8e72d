"""Where the scripts of ``benchmarks/`` write their reports: a directory, checked before the
run and written after it, as ``<stem>.json`` and ``<stem>.md`` (exit 2, naming ``--output``,
when it cannot be)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def check_output(parser: argparse.ArgumentParser, output: Path) -> None:
    """Refuse (exit 2) an ``--output`` that is a file, before the run."""
    if output.exists() and not output.is_dir():
        parser.error(f"--output {output} is a file, not a directory")


def write_report(parser: argparse.ArgumentParser, output: Path, stem: str, report: dict,
                 markdown: str) -> None:
    """Write ``report`` as ``output/<stem>.json`` and ``markdown`` as ``output/<stem>.md``, then
    print the markdown; exit 2 naming ``--output`` where they cannot be written, and writing
    nothing where ``report`` holds a number that is not finite."""
    try:
        text = json.dumps(report, indent=1, allow_nan=False) + "\n"
    except ValueError as err:
        parser.error(f"--output {output}: nothing written, the report holds a number that is "
                     f"not finite ({err})")
    try:
        output.mkdir(parents=True, exist_ok=True)
        (output / f"{stem}.json").write_text(text)
        (output / f"{stem}.md").write_text(markdown)
    except OSError as err:
        parser.error(f"--output {output}: cannot write there ({err})")
    print(markdown)
