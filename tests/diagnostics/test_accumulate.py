import math

import torch

from filterformer.diagnostics.accumulate import MeanAccumulator, MinAccumulator, SumAccumulator


def test_mean_over_batches_ignores_nan():
    values = torch.randn(10, dtype=torch.float64)
    values[[2, 7]] = float("nan")
    accumulator = MeanAccumulator()
    for chunk in values.split(3):
        accumulator.update(chunk)
    assert math.isclose(accumulator.scalar(), float(values[~values.isnan()].mean()))


def test_rows_that_grow_count_earlier_samples_as_zero_padded():
    short, long = torch.rand(3, 2, dtype=torch.float64), torch.rand(2, 4, dtype=torch.float64)
    accumulator = MeanAccumulator()
    accumulator.update(short)
    accumulator.update(long)
    padded = torch.cat([torch.cat([short, torch.zeros(3, 2, dtype=torch.float64)], 1), long])
    torch.testing.assert_close(accumulator.mean(), padded.mean(0))


def test_nothing_seen_is_nan():
    assert math.isnan(MeanAccumulator().scalar())
    assert math.isnan(MinAccumulator().value)


def test_min_and_sum():
    values = torch.randn(9, dtype=torch.float64)
    smallest, total = MinAccumulator(), SumAccumulator()
    for chunk in values.split(4):
        smallest.update(torch.cat([chunk, torch.tensor([float("nan")], dtype=torch.float64)]))
        total.update(chunk.sum())
    assert smallest.value == float(values.min())
    assert math.isclose(float(total.total), float(values.sum()))
