"""Drawing strokes and discs on batches of small images, supersampled, with numpy only.

Geometry is in pixel units of the final image: pixel ``(r, c)`` covers ``[r, r+1) × [c, c+1)``
and points are ``(row, col)``. A shape is rendered at ``scale``× resolution (a sub-pixel is inked
when its centre lies within the half-width of the shape) and each pixel's value is the fraction of
its inked sub-pixels, i.e. the supersampled image downsampled by averaging.

Every function works on many shapes at once, each on its own image of a ``(B, H, W)`` stack, so
drawing costs a few array operations per step rather than a Python loop per shape.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dilate", "gather_window", "scatter_window", "segment_coverage"]


def segment_coverage(
    starts: np.ndarray, ends: np.ndarray, half_width: float, scale: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel coverage of thick line segments (a disc when start equals end).

    Args:
        starts: ``(M, 2)`` segment starts ``(row, col)``.
        ends: ``(M, 2)`` segment ends.
        half_width: a sub-pixel is inked when its centre is at most this far from the segment.
        scale: sub-pixels per pixel along each axis.

    Returns:
        ``origin`` ``(M, 2)`` int, the top-left pixel of each shape's window, and ``coverage``
        ``(M, k, k)`` in ``[0, 1]``, the inked fraction of each window pixel (``k`` fits the
        largest shape).
    """
    span = float(np.abs(ends - starts).max(initial=0.0))
    size = int(np.ceil(2 * half_width + span)) + 1
    origin = np.floor(np.minimum(starts, ends) - half_width).astype(np.int64)
    # float32 and in-place steps: this is the generator's inner loop
    offsets = ((np.arange(size * scale) + 0.5) / scale).astype(np.float32)
    rel_rows = (origin[:, 0, None] - starts[:, 0, None]).astype(np.float32) + offsets
    rel_cols = (origin[:, 1, None] - starts[:, 1, None]).astype(np.float32) + offsets
    direction = (ends - starts).astype(np.float32)
    inverse_length_sq = 1.0 / np.maximum((direction**2).sum(-1), 1e-12)
    d_row = direction[:, 0, None, None]
    d_col = direction[:, 1, None, None]
    # position of each sub-pixel's projection along the segment, clamped to the segment
    along = rel_rows[:, :, None] * (d_row * inverse_length_sq[:, None, None]) + rel_cols[
        :, None, :
    ] * (d_col * inverse_length_sq[:, None, None])
    np.clip(along, 0.0, 1.0, out=along)
    off_row = rel_rows[:, :, None] - along * d_row
    off_col = rel_cols[:, None, :] - along * d_col
    off_row *= off_row
    off_col *= off_col
    off_row += off_col
    inked = off_row <= half_width**2
    counts = np.zeros((len(starts), size, size), dtype=np.float32)
    for i in range(scale):
        for j in range(scale):
            counts += inked[:, i::scale, j::scale]
    coverage = counts / scale**2
    return origin, coverage


def _window_index(
    origin: np.ndarray, size: int, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = origin[:, 0, None, None] + np.arange(size)[None, :, None]
    cols = origin[:, 1, None, None] + np.arange(size)[None, None, :]
    rows, cols = np.broadcast_arrays(rows, cols)
    inside = (rows >= 0) & (rows < shape[0]) & (cols >= 0) & (cols < shape[1])
    return np.clip(rows, 0, shape[0] - 1), np.clip(cols, 0, shape[1] - 1), inside


def gather_window(
    grid: np.ndarray, image: np.ndarray, origin: np.ndarray, size: int, outside: bool
) -> np.ndarray:
    """Read ``(M, size, size)`` windows of a ``(B, H, W)`` bool stack.

    Args:
        grid: the stack.
        image: ``(M,)`` which image each window reads.
        origin: ``(M, 2)`` top-left pixel of each window.
        size: window side.
        outside: the value read beyond the image border.
    """
    rows, cols, inside = _window_index(origin, size, grid.shape[1:])
    values = grid[image[:, None, None], rows, cols]
    return np.where(inside, values, outside)


def scatter_window(
    grid: np.ndarray, image: np.ndarray, origin: np.ndarray, values: np.ndarray
) -> None:
    """Raise a ``(B, H, W)`` stack to ``values`` ``(M, k, k)`` where they are larger, in place.

    Pixels beyond the border are dropped; each image must appear at most once in ``image``.
    """
    rows, cols, inside = _window_index(origin, values.shape[-1], grid.shape[1:])
    target = np.broadcast_to(image[:, None, None], rows.shape)
    b, r, c, v = target[inside], rows[inside], cols[inside], values[inside]
    grid[b, r, c] = np.maximum(grid[b, r, c], v.astype(grid.dtype))


def dilate(mask: np.ndarray) -> np.ndarray:
    """``(B, H, W)`` bool mask grown by one pixel in all 8 directions (a 3×3 maximum)."""
    padded = np.pad(mask, ((0, 0), (1, 1), (1, 1)))
    height, width = mask.shape[1:]
    grown = np.zeros_like(mask)
    for dr in range(3):
        for dc in range(3):
            grown |= padded[:, dr : dr + height, dc : dc + width]
    return grown
