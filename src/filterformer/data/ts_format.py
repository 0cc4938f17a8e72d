"""Reader for the ``.ts`` format of the UEA/UCR time-series classification archive.

The format (as written by the archive and by sktime/aeon): ``#`` comment lines, then a header of
``@tag value`` lines (``@problemName``, ``@timeStamps``, ``@missing``, ``@univariate``,
``@dimensions``, ``@equalLength``, ``@seriesLength``, ``@classLabel true <labels...>``), then
``@data`` and one case per line: the channels separated by ``:``, each a comma-separated list of
values, ``?`` for a missing value, and the class label as the last ``:`` field. Channels and cases
may differ in length. A value that is not a finite number (``inf``, ``1e400``) or lies beyond the
reader's ``max_magnitude`` is refused, naming its line: it would turn every statistic and loss
computed from the data into NaN.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["TimeSeriesCases", "parse_ts", "read_ts"]


@dataclass
class TimeSeriesCases:
    """The cases of one ``.ts`` file.

    Attributes:
        series: one ``(length, channels)`` float64 array per case; NaN marks a missing value, and
            a channel shorter than the case's longest is padded with NaN.
        labels: the class label of each case, as written in the file.
        class_labels: the labels the header declares (``@classLabel true ...``), in order, or None.
        header: every header tag (lower-cased, without ``@``) and its raw value.
        line_numbers: the 1-based line of the text each case was read from.
    """

    series: list[np.ndarray]
    labels: list[str]
    class_labels: list[str] | None = None
    header: dict[str, str] = field(default_factory=dict)
    line_numbers: list[int] = field(default_factory=list)

    @property
    def num_channels(self) -> int:
        return self.series[0].shape[1] if self.series else 0

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.series], dtype=np.int64)


def _parse_value(text: str, max_magnitude: float) -> float:
    text = text.strip()
    if text in ("?", "") or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"value {text[:40]!r} is not a number (nor '?' for missing)") from None
    if not (math.isfinite(value) and abs(value) <= max_magnitude):
        limit = "a finite number" if math.isinf(max_magnitude) else (
            f"a number of magnitude <= {max_magnitude:.4g}")
        raise ValueError(f"value {text[:40]!r} is not {limit}")
    return value


def _parse_case(
    line: str, has_label: bool, dimensions: int | None, max_magnitude: float
) -> tuple[np.ndarray, str]:
    fields = line.split(":")
    label = fields.pop().strip() if has_label else ""
    if dimensions is not None and len(fields) != dimensions:
        raise ValueError(f"a case has {len(fields)} channels where @dimensions says {dimensions}")
    channels = [[_parse_value(v, max_magnitude) for v in f.split(",")] for f in fields]
    length = max(len(c) for c in channels)
    values = np.full((length, len(channels)), np.nan)
    for j, channel in enumerate(channels):
        values[: len(channel), j] = channel
    return values, label


def parse_ts(text: str, max_magnitude: float = math.inf) -> TimeSeriesCases:
    """Parse the text of a ``.ts`` file.

    Args:
        text: the file's text.
        max_magnitude: the largest absolute value accepted (values beyond it are refused).

    Raises:
        ValueError: the text is not in the format (no ``@data``, time stamps, channel counts or
            labels that contradict the header), or holds a value that is not a finite number
            within ``max_magnitude``; a case's error starts ``line <n>:``.
    """
    header: dict[str, str] = {}
    series: list[np.ndarray] = []
    labels: list[str] = []
    line_numbers: list[int] = []
    in_data = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            if not line.startswith("@"):
                raise ValueError(f"expected a header line starting with '@'; got {line[:40]!r}")
            tag, _, value = line[1:].partition(" ")
            tag = tag.lower()
            if tag == "data":
                in_data = True
                if header.get("timestamps", "false").lower() == "true":
                    raise ValueError("time-stamped .ts files (@timeStamps true) are not supported")
                has_label = header.get("classlabel", "false").split()[0].lower() == "true"
                dims = int(header["dimensions"]) if "dimensions" in header else None
                if header.get("univariate", "").lower() == "true":
                    dims = 1
            else:
                header[tag] = value.strip()
            continue
        try:
            values, label = _parse_case(line, has_label, dims, max_magnitude)
        except ValueError as err:
            raise ValueError(f"line {number}: {err}") from None
        series.append(values)
        labels.append(label)
        line_numbers.append(number)
    if not in_data:
        raise ValueError("the text has no @data line; it is not a .ts file")
    class_labels = None
    declared = header.get("classlabel", "false").split()
    if declared and declared[0].lower() == "true":
        class_labels = declared[1:]
        unknown = sorted(set(labels) - set(class_labels))
        if unknown:
            raise ValueError(f"labels {unknown} are not among the declared {class_labels}")
    return TimeSeriesCases(series=series, labels=labels, line_numbers=line_numbers,
                           class_labels=class_labels, header=header)


def read_ts(path: str | os.PathLike, max_magnitude: float = math.inf) -> TimeSeriesCases:
    """Read a ``.ts`` file; see :func:`parse_ts`. Errors start with the file's path."""
    try:
        return parse_ts(Path(path).read_text(encoding="utf-8"), max_magnitude)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
