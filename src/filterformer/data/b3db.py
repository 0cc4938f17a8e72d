"""B3DB (Meng et al., 2021; CC0): blood–brain-barrier permeability of molecules, as graphs.

The PyPI package ``qc-b3db`` ships two tables, both read here:

- ``classification``: ``B3DB/B3DB_classification.tsv``, 7,807 molecules labelled BBB+ or BBB-
  (column ``BBB+/BBB-``); task kind ``graph_classification``, 2 classes (1 = BBB+).
- ``regression``: ``B3DB/B3DB_regression.tsv``, 1,058 molecules with their measured logBB
  (log10 of the brain/blood concentration ratio, column ``logBB``); task kind
  ``graph_regression``, a float32 target per graph.

Each SMILES becomes an atom/bond graph (:func:`~filterformer.data.molecules.molecule_graphs`).
SMILES that RDKit cannot read are dropped with a warning that counts them; a table that loses
more than ``max_unreadable_fraction`` of its rows (5 % by default), or every molecule of a class,
is refused, since what is left would measure something else.
There are no official splits: validation and test are carved with the fixed split seed,
stratified by label for classification and plainly at random for regression.
"""

from __future__ import annotations

import csv
import io
import os
import statistics
import warnings
from pathlib import Path

import numpy as np

from ..graphs import collate_graphs
from .datasets import ItemDataset
from .molecules import EDGE_FEATURES, NODE_FEATURES, molecule_graphs
from .sources import MissingSourceError, find_package_dir
from .splits import three_way_split
from .task import TaskData

__all__ = ["B3DB_TABLES", "MAX_UNREADABLE_FRACTION", "load_b3db", "read_b3db"]

QC_B3DB_PACKAGE = "qc-b3db"
#: Per table: its file in ``qc-b3db`` and the column holding the target.
B3DB_TABLES = {
    "classification": ("B3DB_classification.tsv", "BBB+/BBB-"),
    "regression": ("B3DB_regression.tsv", "logBB"),
}
_CLASS_NAMES = ["BBB-", "BBB+"]
#: The default share of a table's rows that may be dropped as unreadable SMILES.
MAX_UNREADABLE_FRACTION = 0.05


def _check_table(table: str) -> tuple[str, str]:
    if table not in B3DB_TABLES:
        raise ValueError(f"table must be one of {tuple(B3DB_TABLES)}; got {table!r}")
    return B3DB_TABLES[table]


def _target(text: str, column: str) -> int | float:
    """A table cell as the target: 1/0 for BBB+/BBB-, a finite float for logBB."""
    text = text.strip()
    if column == "BBB+/BBB-":
        if text not in _CLASS_NAMES:
            raise ValueError(f"BBB+/BBB- column holds {text!r}; valid: 'BBB+', 'BBB-'")
        return int(text == "BBB+")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        raise ValueError(f"{column} column holds {text!r}; valid: a finite number")
    return value


def read_b3db(
    path: str | os.PathLike | None = None, table: str = "classification"
) -> list[tuple[str, int | float]]:
    """One of B3DB's tables as ``(SMILES, target)`` rows.

    Args:
        path: a TSV with a ``SMILES`` column and the table's target column (``BBB+/BBB-`` or
            ``logBB``); default the table's file in ``qc-b3db``.
        table: ``"classification"`` (target 1 for BBB+, 0 for BBB-) or ``"regression"``
            (target logBB, a float).

    Raises:
        ValueError: for an unknown table, a file without the ``SMILES`` or target column, or a
            target cell that is not valid (naming the file and line).
        FileNotFoundError: when ``path`` does not exist.
        MissingSourceError: when ``path`` is None and ``qc-b3db`` is not installed.
    """
    file_name, column = _check_table(table)
    if path is None:
        package_dir = find_package_dir("B3DB")
        if package_dir is None or not (package_dir / file_name).is_file():
            raise MissingSourceError(
                file_name, f"the PyPI package {QC_B3DB_PACKAGE}", f"pip install {QC_B3DB_PACKAGE}"
            )
        path = package_dir / file_name
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"the B3DB table (task option path) {path} is not a file")
    reader = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")), delimiter="\t")
    missing = [name for name in ("SMILES", column) if name not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path} has no {' or '.join(map(repr, missing))} column; its columns: "
                         f"{reader.fieldnames or []} (tab-separated, header on the first line)")
    rows = []
    for record in reader:
        try:
            rows.append(((record["SMILES"] or "").strip(), _target(record[column] or "", column)))
        except ValueError as err:
            raise ValueError(f"{path}: line {reader.line_num}: {err}") from None
    return rows


def _check_unreadable(
    rows: list[tuple[str, int | float]],
    unreadable: list[str],
    labels: list[int | float],
    max_fraction: float,
    regression: bool,
) -> None:
    """Warn of the rows dropped as unreadable SMILES; refuse when too many are, or a class goes.

    Args:
        rows: the table's ``(SMILES, target)`` rows.
        unreadable: the SMILES RDKit could not read.
        labels: the targets of the readable rows.
        max_fraction: the share of rows that may be dropped.
        regression: the table is the logBB one (no classes).
    """
    if not unreadable:
        return
    dropped = len(unreadable)
    shown = ", ".join(repr(s) for s in unreadable[:3]) + (", …" if dropped > 3 else "")
    what = (f"{dropped} of {len(rows)} rows ({dropped / len(rows):.1%}) have a SMILES RDKit "
            f"cannot read ({shown})")
    if dropped > max_fraction * len(rows):
        raise ValueError(f"B3DB: {what}: more than max_unreadable_fraction={max_fraction} of the "
                         "table; fix the SMILES, or raise max_unreadable_fraction to train on "
                         "the rest")
    if not regression:
        lost = sorted({int(t) for _, t in rows} - {int(label) for label in labels})
        if lost:
            names = [_CLASS_NAMES[c] for c in lost]
            raise ValueError(f"B3DB: {what}, and with them every molecule of class "
                             f"{', '.join(names)}; a classifier of the rest would be meaningless")
    warnings.warn(f"B3DB: {what}; they are left out", stacklevel=2)


def load_b3db(
    *,
    table: str = "classification",
    path: str | os.PathLike | None = None,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_unreadable_fraction: float = MAX_UNREADABLE_FRACTION,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """B3DB as atom/bond graphs, batched as :class:`~filterformer.graphs.GraphBatch`.

    Args:
        table: ``"classification"`` (BBB+/BBB-, kind ``graph_classification``) or
            ``"regression"`` (logBB, kind ``graph_regression``; the task's ``target_mean`` and
            ``target_std`` are those of the training split, with which models standardise it).
        path: a TSV with ``SMILES`` and the table's target column; default the one in ``qc-b3db``.
        seed: draws the ``num_train`` subset.
        num_train: keep only this many training molecules; None keeps all.
        validation_fraction: share of the molecules held out for model selection.
        test_fraction: share of the molecules held out for the final test.
        max_unreadable_fraction: the share of the table's rows that may be dropped because
            RDKit cannot read their SMILES (each drop is reported in a warning); more is refused.
        cache_dir: cache root; the featurised graphs are stored there after the first load.

    Raises:
        ValueError: when more than ``max_unreadable_fraction`` of the rows, or every molecule of
            a class, would be dropped as unreadable; see also :func:`read_b3db`.
    """
    if isinstance(max_unreadable_fraction, bool) or not isinstance(
        max_unreadable_fraction, (int, float)
    ) or not 0 <= max_unreadable_fraction <= 1:
        raise ValueError("max_unreadable_fraction must be a number in [0, 1]; got "
                         f"{max_unreadable_fraction!r}")
    rows = read_b3db(path, table)
    if not rows:
        raise ValueError(f"the B3DB table {path or table!r} holds no rows")
    regression = table == "regression"
    targets = np.array([target for _, target in rows],
                       dtype=np.float32 if regression else np.int64)
    graphs, unreadable = molecule_graphs([smiles for smiles, _ in rows], targets, name="b3db",
                                         cache_dir=cache_dir)
    labels = [g.label for g in graphs]
    _check_unreadable(rows, unreadable, labels, max_unreadable_fraction, regression)
    splits = dict(zip(
        ("train", "validation", "test"),
        three_way_split(labels, validation_fraction, test_fraction, num_train, seed,
                        stratify=not regression),
        strict=True,
    ))
    datasets = {split: ItemDataset([graphs[i] for i in idx]) for split, idx in splits.items()}
    metadata = {"table": table, "num_molecules": len(rows), "unreadable_smiles": unreadable,
                "node_features": NODE_FEATURES, "edge_features": EDGE_FEATURES, "seed": seed}
    scale: dict[str, float] = {}
    if regression:
        train_targets = [labels[i] for i in splits["train"]]
        scale = {"target_mean": statistics.fmean(train_targets),
                 "target_std": statistics.pstdev(train_targets)}
        metadata["target"] = "logBB"
    else:
        metadata["class_names"] = list(_CLASS_NAMES)
    return TaskData(
        name="b3db",
        kind="graph_regression" if regression else "graph_classification",
        train=datasets["train"],
        validation=datasets["validation"],
        test=datasets["test"],
        collate=collate_graphs,
        num_classes=None if regression else 2,
        vocab_size=None,
        input_dim=NODE_FEATURES,
        max_len=max(g.num_nodes + g.num_edges for g in graphs),
        metadata=metadata,
        **scale,
    )
