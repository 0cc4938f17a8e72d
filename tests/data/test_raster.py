"""Supersampled drawing helpers against closed forms and scipy."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from filterformer.data.raster import dilate, gather_window, scatter_window, segment_coverage


def render(starts, ends, half_width, size=16):
    origin, coverage = segment_coverage(np.asarray(starts, float), np.asarray(ends, float),
                                        half_width)
    grid = np.zeros((len(starts), size, size))
    scatter_window(grid, np.arange(len(starts)), origin, coverage)
    return grid


def test_horizontal_stroke_matches_hand_computed_coverage():
    # row 5.5, columns 2..6, half-width 0.5: sub-pixel centres at ±0.25 rows are inked; the
    # round caps reach sub-pixel columns 1.75 and 6.25, half of pixels 1 and 6
    grid = render([[5.5, 2.0]], [[5.5, 6.0]], 0.5)[0]
    expected = np.zeros((16, 16))
    expected[5, 2:6] = 1.0
    expected[5, [1, 6]] = 0.5
    np.testing.assert_allclose(grid, expected)


def test_disc_coverage_approximates_its_area():
    radius = 4.0
    grid = render([[8.0, 8.0]], [[8.0, 8.0]], radius, size=20)[0]
    assert abs(grid.sum() - np.pi * radius**2) / (np.pi * radius**2) < 0.05


def test_stroke_is_symmetric_under_swapping_its_ends():
    rng = np.random.default_rng(0)
    starts = rng.uniform(4, 12, (20, 2))
    ends = starts + rng.uniform(-2, 2, (20, 2))
    np.testing.assert_allclose(render(starts, ends, 0.5), render(ends, starts, 0.5))


def test_dilate_equals_scipy_binary_dilation():
    mask = np.random.default_rng(1).random((3, 12, 12)) > 0.9
    expected = np.stack([ndimage.binary_dilation(m, structure=np.ones((3, 3))) for m in mask])
    assert np.array_equal(dilate(mask), expected)


def test_gather_reads_windows_and_the_outside_value():
    grid = np.random.default_rng(2).random((2, 6, 6)) > 0.5
    origin = np.array([[-1, 3], [2, 2]])
    windows = gather_window(grid, np.array([1, 0]), origin, 4, outside=True)
    for k, (image, (r0, c0)) in enumerate(zip([1, 0], origin, strict=True)):
        for i in range(4):
            for j in range(4):
                r, c = r0 + i, c0 + j
                inside = 0 <= r < 6 and 0 <= c < 6
                assert windows[k, i, j] == (grid[image, r, c] if inside else True)
