"""B3DB's regression table (logBB): reading, random splits, float targets standardised with the
training split's statistics only; a fixture and the real table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from filterformer.data import B3DB_TABLES, load_task, read_b3db, task_options
from filterformer.graphs import GraphBatch

SMILES = ["CCO", "c1ccccc1O", "CC(=O)O", "CCN", "C1CC(", "CCCl", "OCCO", "CCCC", "c1ccncc1",
          "CC=O", "NCC(=O)O", "CCOC", "CC(C)O", "OC(=O)CCC(=O)O", "CN"]
#: The fixture's one unreadable SMILES is 1/15 of it, above the default 5 %.
LENIENT = {"max_unreadable_fraction": 0.1}


def _write_table(path, smiles, values) -> None:
    lines = ["NO.\tSMILES\tlogBB"] + [f"{i}\t{s}\t{v}" for i, (s, v) in
                                       enumerate(zip(smiles, values, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def _labels(dataset) -> np.ndarray:
    return np.array([dataset[i].label for i in range(len(dataset))], dtype=np.float64)


def test_regression_fixture_loads_with_float_targets_scaled_by_the_training_split(tmp_path):
    values = (torch.randn(len(SMILES), dtype=torch.float64) * 0.8 - 0.1).tolist()
    path = tmp_path / "regression.tsv"
    _write_table(path, SMILES, values)
    assert read_b3db(path, table="regression") == list(zip(SMILES, values, strict=True))
    with pytest.warns(UserWarning, match=r"1 of 15 rows \(6\.7%\) have a SMILES RDKit cannot "
                                         r"read \('C1CC\('\); they are left out"):
        task = load_task("b3db", table="regression", path=path, cache_dir=tmp_path,
                         validation_fraction=0.2, test_fraction=0.2, **LENIENT)
    assert task.kind == "graph_regression" and task.num_classes is None
    assert task.metadata["unreadable_smiles"] == ["C1CC("]
    splits = [_labels(s) for s in (task.train, task.validation, task.test)]
    assert [len(s) for s in splits] == [8, 3, 3]  # 14 readable molecules, 60/20/20
    readable = [np.float32(v) for s, v in zip(SMILES, values, strict=True) if s != "C1CC("]
    assert sorted(np.concatenate(splits).tolist()) == sorted(float(v) for v in readable)
    train = splits[0]
    assert task.target_mean == pytest.approx(train.mean(), rel=1e-9)
    assert task.target_std == pytest.approx(train.std(), rel=1e-9)
    batch = task.collate([task.validation[i] for i in range(len(task.validation))])
    assert isinstance(batch, GraphBatch) and batch.labels.dtype == torch.float32
    assert batch.labels.tolist() == splits[1].tolist()


@pytest.mark.filterwarnings("ignore:B3DB. 1 of 15 rows")
def test_standardisation_ignores_validation_and_test_targets(tmp_path):
    values = torch.randn(len(SMILES), dtype=torch.float64).tolist()
    options = dict(table="regression", cache_dir=tmp_path, validation_fraction=0.2,
                   test_fraction=0.2, **LENIENT)
    _write_table(tmp_path / "a.tsv", SMILES, values)
    task = load_task("b3db", path=tmp_path / "a.tsv", **options)
    # The same molecules with every held-out target moved far away: the scale must not move.
    held_out = {task.validation[i].label for i in range(len(task.validation))} | \
               {task.test[i].label for i in range(len(task.test))}
    shifted = [v + 100.0 if np.float32(v).item() in held_out else v for v in values]
    _write_table(tmp_path / "b.tsv", SMILES, shifted)
    moved = load_task("b3db", path=tmp_path / "b.tsv", **options)
    assert (moved.target_mean, moved.target_std) == (task.target_mean, task.target_std)
    assert _labels(moved.validation).min() > 50


@pytest.mark.filterwarnings("ignore:B3DB. 1 of 15 rows")
def test_the_split_is_fixed_and_seed_draws_the_training_subset(tmp_path):
    values = torch.randn(len(SMILES), dtype=torch.float64).tolist()
    _write_table(tmp_path / "t.tsv", SMILES, values)
    options = dict(table="regression", path=tmp_path / "t.tsv", cache_dir=tmp_path,
                   validation_fraction=0.2, test_fraction=0.2, num_train=4, **LENIENT)
    tasks = [load_task("b3db", seed=seed, **options) for seed in range(6)]
    for task in tasks:
        assert len(task.train) == 4
        assert _labels(task.validation).tolist() == _labels(tasks[0].validation).tolist()
        assert _labels(task.test).tolist() == _labels(tasks[0].test).tolist()
    assert len({tuple(_labels(t.train)) for t in tasks}) > 1


def test_bad_tables_and_cells_name_the_valid_choices(tmp_path):
    assert task_options("b3db")["table"] == "classification"
    assert set(B3DB_TABLES) == {"classification", "regression"}
    with pytest.raises(ValueError, match=r"table must be one of \('classification', "
                                         r"'regression'\); got 'logbb'"):
        load_task("b3db", table="logbb")
    path = tmp_path / "bad.tsv"
    _write_table(path, ["CCO", "CCN"], [0.5, "n/a"])
    with pytest.raises(ValueError, match="logBB column holds 'n/a'; valid: a finite number"):
        read_b3db(path, table="regression")


def test_real_regression_table_gives_1058_molecules_with_finite_logbb(tmp_path):
    rows = read_b3db(table="regression")
    assert len(rows) == 1058
    values = np.array([value for _, value in rows])
    assert np.isfinite(values).all() and -3 < values.min() < values.max() < 3
    task = load_task("b3db", table="regression", cache_dir=tmp_path)
    sizes = [len(task.train), len(task.validation), len(task.test)]
    assert sum(sizes) == 1058 - len(task.metadata["unreadable_smiles"])
    train = _labels(task.train)
    assert np.isfinite(train).all()
    assert (task.target_mean, task.target_std) == pytest.approx((train.mean(), train.std()))
    # 10 % each for validation and test, as in the classification table
    assert sizes[1] == sizes[2] == round(0.1 * sum(sizes))


# -- unreadable SMILES and malformed tables --------------------------------------------------

READABLE = [s for s in SMILES if s != "C1CC("]


def _unreadable(rng: np.random.Generator, count: int) -> list[str]:
    """SMILES RDKit cannot read: an unclosed branch or ring after a random readable one."""
    return [f"{rng.choice(READABLE)}{rng.choice(['(', '1', '(C'])}" for _ in range(count)]


def _write_classes(path, smiles, classes) -> None:
    lines = ["NO.\tSMILES\tBBB+/BBB-"] + [f"{i}\t{s}\t{c}" for i, (s, c) in
                                          enumerate(zip(smiles, classes, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def test_a_class_lost_to_unreadable_smiles_is_refused(tmp_path):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    size = int(rng.integers(6, 12))
    # Every BBB- molecule unreadable: what is left is one class, which any model "classifies".
    smiles = list(rng.choice(READABLE, size)) + _unreadable(rng, size)
    classes = ["BBB+"] * size + ["BBB-"] * size
    order = rng.permutation(2 * size)
    path = tmp_path / "t.tsv"
    _write_classes(path, [smiles[i] for i in order], [classes[i] for i in order])
    with pytest.raises(ValueError, match=rf"{size} of {2 * size} rows \(50\.0%\) have a SMILES "
                                         "RDKit cannot read .*every molecule of class BBB-"):
        load_task("b3db", path=path, cache_dir=tmp_path, max_unreadable_fraction=1.0)
    with pytest.raises(ValueError, match=r"more than max_unreadable_fraction=0\.05"):
        load_task("b3db", path=path, cache_dir=tmp_path)


def test_more_unreadable_rows_than_the_allowed_fraction_are_refused(tmp_path):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    size = 40
    dropped = int(rng.integers(1, 5))
    smiles = list(rng.choice(READABLE, size - dropped)) + _unreadable(rng, dropped)
    _write_table(tmp_path / "t.tsv", smiles, rng.normal(size=size).tolist())
    options = dict(table="regression", path=tmp_path / "t.tsv", cache_dir=tmp_path)
    allowed = dropped / size
    with pytest.raises(ValueError, match=rf"{dropped} of {size} rows .*more than "
                                         rf"max_unreadable_fraction={allowed / 2}"):
        load_task("b3db", max_unreadable_fraction=allowed / 2, **options)
    with pytest.warns(UserWarning, match=rf"B3DB: {dropped} of {size} rows"):
        task = load_task("b3db", max_unreadable_fraction=allowed, **options)
    assert len(task.train) + len(task.validation) + len(task.test) == size - dropped
    with pytest.raises(ValueError, match=r"max_unreadable_fraction must be a number in \[0, 1\]"):
        load_task("b3db", max_unreadable_fraction=float("nan"), **options)


def test_malformed_tables_name_the_file_and_line(tmp_path):
    no_smiles = tmp_path / "no_smiles.tsv"
    no_smiles.write_text("NO.\tsmiles_string\tBBB+/BBB-\n0\tCCO\tBBB+\n")
    with pytest.raises(ValueError, match=rf"{no_smiles} has no 'SMILES' column; its columns: "
                                         r"\['NO\.', 'smiles_string', 'BBB\+/BBB-'\]"):
        load_task("b3db", path=no_smiles, cache_dir=tmp_path)
    bad_cell = tmp_path / "bad_cell.tsv"
    classes = ["BBB+", "BBB-"] * 3
    row = int(torch.randint(0, len(classes), ()))
    classes[row] = "maybe"
    _write_classes(bad_cell, READABLE[: len(classes)], classes)
    with pytest.raises(ValueError, match=rf"{bad_cell}: line {row + 2}: BBB\+/BBB- column holds "
                                         "'maybe'"):
        read_b3db(bad_cell)
    with pytest.raises(FileNotFoundError, match=r"B3DB table \(task option path\) .*absent"):
        load_task("b3db", path=tmp_path / "absent.tsv", cache_dir=tmp_path)
