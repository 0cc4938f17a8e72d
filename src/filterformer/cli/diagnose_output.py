"""The files of an earlier ``filterformer diagnose`` run in its output directory.

A run that draws fewer models or figures than the one before it would otherwise leave the older
figures beside the new ones (a ``gfsa_filters_<label>`` of a model no longer diagnosed), where
they read as this run's. Only names a diagnose run writes are removed: ``diagnostics.json`` and
its figures in the formats it can save; any other file in the directory is left alone.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["earlier_outputs", "remove_earlier_outputs"]


def earlier_outputs(directory: Path) -> list[Path]:
    """The files in ``directory`` (not below it) that a diagnose run writes, sorted by name."""
    from ..diagnostics.figures import LEARNED_FILTER_FIGURES, REPORT_FIGURES, SAVED_FORMATS

    if not directory.is_dir():
        return []

    def written_by_diagnose(path: Path) -> bool:
        if path.name == "diagnostics.json":
            return True
        if path.suffix.lstrip(".") not in SAVED_FORMATS:
            return False
        return path.stem in REPORT_FIGURES or path.stem.startswith(LEARNED_FILTER_FIGURES)

    return sorted(path for path in directory.iterdir()
                  if (path.is_file() or path.is_symlink()) and written_by_diagnose(path))


def remove_earlier_outputs(directory: Path) -> list[Path]:
    """Remove :func:`earlier_outputs` of ``directory``; returns the removed paths."""
    removed = earlier_outputs(directory)
    for path in removed:
        path.unlink()
    return removed
