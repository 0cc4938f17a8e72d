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
    task = load_task("b3db", table="regression", path=path, cache_dir=tmp_path,
                     validation_fraction=0.2, test_fraction=0.2)
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


def test_standardisation_ignores_validation_and_test_targets(tmp_path):
    values = torch.randn(len(SMILES), dtype=torch.float64).tolist()
    options = dict(table="regression", cache_dir=tmp_path, validation_fraction=0.2,
                   test_fraction=0.2)
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


def test_the_split_is_fixed_and_seed_draws_the_training_subset(tmp_path):
    values = torch.randn(len(SMILES), dtype=torch.float64).tolist()
    _write_table(tmp_path / "t.tsv", SMILES, values)
    options = dict(table="regression", path=tmp_path / "t.tsv", cache_dir=tmp_path,
                   validation_fraction=0.2, test_fraction=0.2, num_train=4)
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
