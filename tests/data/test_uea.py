"""UEA loading: JapaneseVowels out of the box, a user's archive directory, statistics and masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from filterformer.data import MissingSourceError, carve_validation, load_task, read_uea
from filterformer.data import uea as uea_module

from .test_ts_format import write_ts


def test_japanese_vowels_matches_the_archive():
    train, test, _ = read_uea("JapaneseVowels")
    assert (len(train.series), len(test.series)) == (270, 370)
    assert train.num_channels == test.num_channels == 12
    assert len(set(train.labels) | set(test.labels)) == 9
    lengths = np.concatenate([train.lengths, test.lengths])
    assert lengths.min() == 7 and lengths.max() == 29


def test_japanese_vowels_task_normalises_with_training_statistics_only():
    task = load_task("uea")
    assert (len(task.train) + len(task.validation), len(task.test)) == (270, 370)
    assert task.num_classes == 9 and task.input_dim == 12 and task.max_len == 29
    train, _, _ = read_uea("JapaneseVowels")
    labels = np.array([int(label) - 1 for label in train.labels])
    fit, _ = carve_validation(270, 0.1, labels=labels)
    raw = np.concatenate([train.series[i] for i in fit])
    np.testing.assert_allclose(task.metadata["channel_mean"], raw.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(task.metadata["channel_std"], raw.std(axis=0), rtol=1e-9)
    batch = task.collate([task.train[i] for i in range(len(task.train))])
    real = batch["inputs"][batch["padding_mask"]]
    torch.testing.assert_close(real.mean(0), torch.zeros(12), atol=1e-4, rtol=0)
    torch.testing.assert_close(real.std(0, unbiased=False), torch.ones(12), atol=1e-4, rtol=0)


def make_archive(root, rng):
    folder = root / "Toy"
    folder.mkdir(parents=True)
    data = {}
    for split, count in (("TRAIN", 30), ("TEST", 10)):
        series = []
        for length in rng.integers(4, 12, size=count):
            values = rng.normal(loc=[5.0, -3.0], scale=[2.0, 0.5], size=(length, 2))
            values[rng.random(values.shape) < 0.05] = np.nan
            series.append(values)
        labels = [str(v) for v in rng.choice(["x", "y"], size=count)]
        write_ts(folder / f"Toy_{split}.ts", series, labels, ["x", "y"])
        data[split] = (series, labels)
    return data


def test_user_archive_with_gaps_and_unequal_lengths(tmp_path):
    data = make_archive(tmp_path, np.random.default_rng(1))
    task = load_task("uea", name="Toy", root=tmp_path, validation_fraction=0.2)
    assert (len(task.train), len(task.validation), len(task.test)) == (24, 6, 10)
    assert task.metadata["missing_values"] == sum(
        int(np.isnan(s).sum()) for series, _ in data.values() for s in series
    )
    test_series, test_labels = data["TEST"]
    batch = task.collate([task.test[i] for i in range(10)])
    assert not torch.isnan(batch["inputs"]).any()
    assert batch["padding_mask"].sum(1).tolist() == [len(s) for s in test_series]
    assert batch["labels"].tolist() == [["x", "y"].index(label) for label in test_labels]
    mean, std = np.array(task.metadata["channel_mean"]), np.array(task.metadata["channel_std"])
    first = test_series[0]
    expected = np.where(np.isnan(first), 0.0, (first - mean) / std)
    np.testing.assert_allclose(batch["inputs"][0, : len(first)].numpy(), expected, rtol=1e-5,
                               atol=1e-6)


def test_missing_user_set_names_the_expected_path(tmp_path):
    with pytest.raises(MissingSourceError, match=r"Nope_TRAIN\.ts"):
        load_task("uea", name="Nope", root=tmp_path)


def test_missing_japanese_vowels_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setattr(uea_module, "find_package_dir", lambda name: None)
    with pytest.raises(MissingSourceError, match=r"pip download --no-deps aeon==1\.6\.0"):
        load_task("uea", cache_dir=tmp_path)
