"""The .ts reader: a synthetic multivariate file with unequal lengths and gaps round-trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from filterformer.data import parse_ts, read_ts


def write_ts(path, series, labels, classes, missing="?"):
    """An independent writer of the archive's format."""
    lines = [
        "# a synthetic set",
        "@problemName Synthetic",
        "@timeStamps false",
        "@missing true",
        "@univariate false",
        f"@dimensions {series[0].shape[1]}",
        "@equalLength false",
        "@classLabel true " + " ".join(classes),
        "@data",
    ]
    for values, label in zip(series, labels, strict=True):
        channels = [
            ",".join(missing if np.isnan(v) else repr(float(v)) for v in values[:, j])
            for j in range(values.shape[1])
        ]
        lines.append(":".join(channels) + ":" + label)
    path.write_text("\n".join(lines) + "\n")


def test_unequal_lengths_and_missing_values_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    series = []
    for length in rng.integers(3, 15, size=12):
        values = rng.normal(size=(length, 3))
        values[rng.random(values.shape) < 0.1] = np.nan
        series.append(values)
    labels = [str(v) for v in rng.choice(["up", "down", "flat"], size=12)]
    path = tmp_path / "Synthetic_TRAIN.ts"
    write_ts(path, series, labels, ["up", "down", "flat"])
    cases = read_ts(path)
    assert cases.labels == labels and cases.class_labels == ["up", "down", "flat"]
    assert cases.num_channels == 3 and cases.header["problemname"] == "Synthetic"
    assert cases.lengths.tolist() == [len(s) for s in series]
    for read, written in zip(cases.series, series, strict=True):
        np.testing.assert_array_equal(read, written)  # NaN at the same places


def test_shorter_channel_is_padded_with_missing_values():
    cases = parse_ts("@dimensions 2\n@classLabel true a b\n@data\n1,2,3:4,5:a\n")
    np.testing.assert_array_equal(cases.series[0], [[1, 4], [2, 5], [3, np.nan]])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("@problemName x\n1,2:a\n", "header"),
        ("@problemName x\n", "@data"),
        ("@dimensions 2\n@classLabel true a\n@data\n1,2:a\n", "channels"),
        ("@classLabel true a b\n@data\n1,2:c\n", "declared"),
        ("@timeStamps true\n@data\n(0,1):a\n", "time-stamped"),
    ],
)
def test_malformed_files_are_rejected(text, message):
    with pytest.raises(ValueError, match=message):
        parse_ts(text)


@pytest.mark.parametrize("bad", ["inf", "-Infinity", "1e400", "abc"])
def test_values_that_are_not_finite_numbers_name_their_line(tmp_path, bad):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    series = [rng.normal(size=(int(rng.integers(2, 6)), 2)) for _ in range(5)]
    path = tmp_path / "x.ts"
    write_ts(path, series, ["a"] * 5, ["a"])
    lines = path.read_text().splitlines()
    line = len(lines) - 5 + int(rng.integers(0, 5))
    lines[line] = f"{bad}," + lines[line]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"{path}: line {line + 1}: value '{bad}' is not "):
        read_ts(path)
    with pytest.raises(ValueError, match=r"value '2\.5' is not a number of magnitude <= 2"):
        parse_ts("@data\n1,2.5\n", max_magnitude=2.0)
