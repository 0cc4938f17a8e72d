"""UEA multivariate time-series classification (the archive used by AGF), from ``.ts`` files.

JapaneseVowels ships inside the PyPI packages ``aeon`` and ``sktime``; it is read from an installed
copy of either, or straight from the ``aeon`` wheel that ``scripts/setup.sh`` downloads, without
importing them. Any other archive set is read from the user's copy in the archive's layout,
``<root>/<Name>/<Name>_TRAIN.ts`` and ``<root>/<Name>/<Name>_TEST.ts``.

The archive has no validation split: it is carved from training with a fixed seed, stratified by
class. Each channel is standardised with the mean and deviation of the carved training cases only;
missing values become 0 (the training mean) after that. Unequal lengths are padded in batches and
masked by ``padding_mask``. A file without cases, a value that is not finite or beyond float32's
range, or a test label the training classes lack is refused, naming the file (and line).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from .cache import sources_dir
from .datasets import SequenceDataset, collate_sequences
from .sources import (
    MissingSourceError,
    find_package_dir,
    find_source_archive,
    read_archive_member,
)
from .splits import carve_validation, subsample
from .task import TaskData
from .ts_format import TimeSeriesCases, parse_ts

__all__ = ["AEON_REQUIREMENT", "load_uea", "read_uea"]

AEON_REQUIREMENT = "aeon==1.6.0"
_PACKAGES_WITH_DATA = ("aeon", "sktime")  # both keep the files under datasets/data/<Name>/
# The cases become float32 tensors: a larger value would be infinite there.
_LARGEST_VALUE = float(np.finfo(np.float32).max)


def _read_split_texts(
    name: str, root: str | os.PathLike | None, cache_dir: str | os.PathLike | None
) -> tuple[str, str, str]:
    """The TRAIN and TEST file texts of archive set ``name`` and where they came from."""
    files = (f"{name}_TRAIN.ts", f"{name}_TEST.ts")
    if root is not None:
        base = Path(root).expanduser()
        folder = base / name if (base / name).is_dir() else base
        paths = [folder / f for f in files]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise MissingSourceError(
                f"the UEA set {name!r} (looked for {', '.join(missing)})",
                f"your copy of the UEA archive, laid out as <root>/{name}/{files[0]}",
                f"load_task('uea', name={name!r}, root='<directory holding {name}/>')",
            )
        texts = [p.read_text(encoding="utf-8") for p in paths]
        return texts[0], texts[1], str(folder)
    for package in _PACKAGES_WITH_DATA:
        package_dir = find_package_dir(package)
        folder = package_dir / "datasets" / "data" / name if package_dir else None
        if folder is not None and all((folder / f).is_file() for f in files):
            texts = [(folder / f).read_text(encoding="utf-8") for f in files]
            return texts[0], texts[1], str(folder)
    for package in _PACKAGES_WITH_DATA:
        wheel = find_source_archive(f"{package}-*.whl", cache_dir)
        if wheel is None:
            continue
        try:
            texts = [
                read_archive_member(wheel, f"datasets/data/{name}/{f}").decode() for f in files
            ]
        except FileNotFoundError:
            continue
        return texts[0], texts[1], f"{wheel}:{package}/datasets/data/{name}"
    if name == "JapaneseVowels":
        raise MissingSourceError(
            "the UEA set 'JapaneseVowels'",
            f"the PyPI package {AEON_REQUIREMENT} (its wheel holds the .ts files)",
            f"pip download --no-deps {AEON_REQUIREMENT} -d {sources_dir(cache_dir)}",
        )
    raise MissingSourceError(
        f"the UEA set {name!r}",
        f"your copy of the UEA archive (timeseriesclassification.com), laid out as "
        f"<root>/{name}/{files[0]}",
        f"load_task('uea', name={name!r}, root='<directory holding {name}/>')",
    )


def _split_file(source: str, name: str, split: str) -> str:
    """Where a split's file was read: ``<directory>/<name>_<split>.ts`` or ``<wheel>:<member>``."""
    return f"{source}/{name}_{split}.ts"


def _parse_split(text: str, where: str) -> TimeSeriesCases:
    """One split's cases; every error names ``where`` and, for a case, its line."""
    try:
        cases = parse_ts(text, max_magnitude=_LARGEST_VALUE)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if not cases.series:
        raise ValueError(f"{where} holds no cases (no line after @data)")
    return cases


def read_uea(
    name: str = "JapaneseVowels",
    root: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[TimeSeriesCases, TimeSeriesCases, str]:
    """Read an archive set's official train and test cases, unchanged.

    Returns:
        ``(train, test, source)``, ``source`` saying which directory or wheel was read.

    Raises:
        ValueError: naming the file (and line) when a split holds no cases, is not in the
            ``.ts`` format, or holds a value that is not finite or beyond float32's range.
    """
    train_text, test_text, source = _read_split_texts(name, root, cache_dir)
    return (_parse_split(train_text, _split_file(source, name, "TRAIN")),
            _parse_split(test_text, _split_file(source, name, "TEST")), source)


def _channel_statistics(series: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation over every observed value; 1 for constant ones."""
    values = np.concatenate(series, axis=0)
    mean = np.nanmean(values, axis=0)
    std = np.nanstd(values, axis=0)
    std = np.where(np.isfinite(std) & (std > 0), std, 1.0)
    return np.nan_to_num(mean), std


def load_uea(
    *,
    name: str = "JapaneseVowels",
    root: str | os.PathLike | None = None,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    normalize: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """A UEA classification task: ``inputs`` ``(N, channels)`` per case, masked to its length.

    Args:
        name: the archive set, e.g. ``"JapaneseVowels"`` (ships in aeon/sktime) or any set under
            ``root``.
        root: a directory in the archive layout (``<root>/<name>/<name>_TRAIN.ts``), or the
            set's own directory.
        seed: draws the ``num_train`` subset; the splits themselves use the fixed split seed.
        num_train: keep only this many training cases; None keeps all.
        validation_fraction: share of the training cases held out for model selection.
        normalize: standardise each channel with training statistics.
        cache_dir: cache root, where a downloaded aeon wheel is looked for.
    """
    train_cases, test_cases, source = read_uea(name, root, cache_dir)
    train_file, test_file = (_split_file(source, name, split) for split in ("TRAIN", "TEST"))
    if train_cases.num_channels != test_cases.num_channels:
        raise ValueError(f"{name}: {train_file} has {train_cases.num_channels} channels, "
                         f"{test_file} has {test_cases.num_channels}")
    classes = train_cases.class_labels or sorted(set(train_cases.labels) | set(test_cases.labels))
    class_index = {label: i for i, label in enumerate(classes)}
    unseen = [(line, label) for line, label in
              zip(test_cases.line_numbers, test_cases.labels, strict=True)
              if label not in class_index]
    if unseen:
        line, label = unseen[0]
        raise ValueError(f"{test_file}: line {line}: label {label!r} is not among the training "
                         f"classes {list(classes)} ({len(unseen)} test case(s) have such labels)")
    train_labels = np.array([class_index[label] for label in train_cases.labels])
    test_labels = np.array([class_index[label] for label in test_cases.labels])
    train_idx, validation_idx = carve_validation(
        len(train_labels), validation_fraction, labels=train_labels
    )
    train_idx = subsample(train_idx, num_train, seed)
    fit_series = [train_cases.series[i] for i in train_idx]
    channels = train_cases.num_channels
    mean, std = _channel_statistics(fit_series) if normalize else (np.zeros(channels),
                                                                    np.ones(channels))

    def tensors(series: list[np.ndarray]) -> list[torch.Tensor]:
        scaled = (np.nan_to_num((s - mean) / std).astype(np.float32) for s in series)
        return [torch.from_numpy(s) for s in scaled]

    train_series = tensors(train_cases.series)
    splits = {
        "train": SequenceDataset([train_series[i] for i in train_idx], train_labels[train_idx],
                                 "inputs"),
        "validation": SequenceDataset([train_series[i] for i in validation_idx],
                                      train_labels[validation_idx], "inputs"),
        "test": SequenceDataset(tensors(test_cases.series), test_labels, "inputs"),
    }
    lengths = np.concatenate([train_cases.lengths, test_cases.lengths])
    missing = sum(int(np.isnan(s).sum()) for s in train_cases.series + test_cases.series)
    return TaskData(
        name="uea",
        kind="classification",
        train=splits["train"],
        validation=splits["validation"],
        test=splits["test"],
        collate=collate_sequences,
        num_classes=len(classes),
        vocab_size=None,
        input_dim=channels,
        max_len=int(lengths.max()),
        metadata={
            "dataset": name,
            "source": source,
            "class_names": list(classes),
            "channel_mean": mean.tolist(),
            "channel_std": std.tolist(),
            "missing_values": missing,
            "seed": seed,
        },
    )
