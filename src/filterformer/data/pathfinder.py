"""Long Range Arena Pathfinder-32: are the two marked dots joined by one contour of paddles?

Generated as in Linsley et al. (2018) with LRA's settings (``DATA.md``): on a 32×32 canvas, two
target snakes of ``contour_length`` paddles grow from seeds 7 px apart, and 5 distractor snakes of
4 paddles each. A paddle is a stroke 2 px long; each next paddle turns by an angle drawn with weight
cos²(min(|Δθ|, π/2)) (``continuity`` = 1) among the directions whose stroke lands on free space.
Two round markers (radius 1.5) sit on snake ends: label 1 when they are both ends of one target
snake, 0 when they are one end of each. Everything is drawn at 2× and averaged down.

Snakes never touch each other: a stroke may not ink a pixel that is inked by, or next to (8
neighbours), another snake or a target snake's marker place. So at :data:`DRAW_THRESHOLD` the
pixels of a positive image join the two markers and those of a negative one do not. Both classes
draw the same snakes, so the amount of ink says nothing about the label.

Everything is vectorised over a batch of images: one array step per paddle.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..checks import check_integer
from .cache import cache_key, cache_root, cached_arrays
from .datasets import SequenceDataset, collate_sequences
from .raster import dilate, gather_window, scatter_window, segment_coverage
from .task import TaskData

__all__ = [
    "CONTOUR_LENGTHS",
    "DRAW_THRESHOLD",
    "IMAGE_SIZE",
    "PATHFINDER_PRESETS",
    "PIXEL_FORMATS",
    "PathfinderImages",
    "generate_pathfinder",
    "load_pathfinder",
    "pixel_tokens",
    "pixel_values",
]

IMAGE_SIZE = 32
RENDER_SCALE = 2
PADDLE_LENGTH = 2.0
PADDLE_THICKNESS = 0.5  # half-width of a stroke: strokes are about 1 px wide
MARKER_RADIUS = 1.5
SEED_DISTANCE = 7.0
NUM_DISTRACTORS = 5
DISTRACTOR_LENGTH = 4
CONTOUR_LENGTHS = (6, 9, 14)  # LRA's easy, intermediate and hard ("Pathfinder-32" = 14)
DRAW_THRESHOLD = 0.25  # a pixel is drawn when at least one of its 2×2 sub-pixels is inked
NUM_DIRECTIONS = 16  # candidate directions per paddle
DISTRACTOR_ATTEMPTS = 8  # fresh random starts for a distractor that finds no room
_MARKER_MARGIN = 2.0  # keeps a seed's marker inside the canvas
_BATCH = 1024  # images drawn per vectorised pass (bounds memory)

PATHFINDER_PRESETS: dict[str, dict[str, int]] = {
    "lra": dict(num_train=160_000, num_validation=20_000, num_test=20_000),
    "small": dict(num_train=8_000, num_validation=1_000, num_test=1_000),
    "tiny": dict(num_train=1_000, num_validation=200, num_test=200),
}
PIXEL_FORMATS = ("tokens", "values")


@dataclass
class PathfinderImages:
    """Generated Pathfinder samples.

    Attributes:
        images: ``(N, 32, 32)`` uint8 intensities.
        labels: ``(N,)`` int64, 1 when the markers are joined.
        markers: ``(N, 2, 2)`` float, the two marker centres ``(row, col)``.
    """

    images: np.ndarray
    labels: np.ndarray
    markers: np.ndarray


def _weighted_choice(rng: np.random.Generator, weights: np.ndarray) -> np.ndarray:
    """One column index per row of ``weights`` ``(B, K)``, drawn in proportion to the weights."""
    threshold = rng.uniform(0, 1, len(weights)) * weights.sum(axis=1)
    below = np.cumsum(weights, axis=1) < threshold[:, None]
    return np.minimum(below.sum(axis=1), weights.shape[1] - 1)


def _free_strokes(
    taken: np.ndarray, images: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Whether each paddle ``starts[m] → ends[m]`` on image ``images[m]`` inks only free pixels.

    Returns:
        ``free`` ``(M,)`` and the paddles' ``origin``/``coverage`` from :func:`segment_coverage`.
    """
    origin, coverage = segment_coverage(starts, ends, PADDLE_THICKNESS, RENDER_SCALE)
    hit = gather_window(taken, images, origin, coverage.shape[-1], outside=True)
    return ~((coverage > 0) & hit).any(axis=(1, 2)), origin, coverage


def _grow_snakes(
    rng: np.random.Generator,
    starts: np.ndarray,
    num_paddles: int,
    blocked: np.ndarray,
    continuity: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grow one snake per image from ``starts`` ``(B, 2)`` around ``blocked`` ``(B, H, W)``.

    Each paddle picks among :data:`NUM_DIRECTIONS` jittered directions, in proportion to the
    continuity weight, restricted to those whose stroke inks no blocked pixel, no pixel of the
    snake's own earlier paddles and nothing beyond the canvas.

    Returns:
        ``points`` ``(B, num_paddles + 1, 2)``, ``ink`` ``(B, H, W)`` coverage and ``ok`` ``(B,)``,
        False where some paddle found no free direction (that image is unusable).
    """
    batch = len(starts)
    rows = np.arange(batch)
    ink = np.zeros(blocked.shape)
    older = np.zeros(blocked.shape, dtype=bool)  # the snake's own paddles before the last one
    last = np.zeros(blocked.shape, dtype=bool)
    ok = np.ones(batch, dtype=bool)
    position, heading = starts.astype(float), np.zeros(batch)
    points = [position]
    steps = np.arange(NUM_DIRECTIONS)
    for paddle in range(num_paddles):
        if paddle == 0:
            angles = rng.uniform(0, 2 * np.pi, (batch, 1)) + 2 * np.pi * steps / NUM_DIRECTIONS
            weights = np.ones((batch, NUM_DIRECTIONS))
        else:
            # jittered turns spanning (-π/2, π/2), weighted toward going straight on
            turn = (steps + rng.uniform(0, 1, (batch, NUM_DIRECTIONS))) / NUM_DIRECTIONS
            turn = (turn - 0.5) * np.pi
            angles = heading[:, None] + turn
            weights = np.cos(turn) ** (2 * continuity)
        ends = position[:, None, :] + PADDLE_LENGTH * np.stack([np.sin(angles), np.cos(angles)], -1)
        taken = blocked | older
        # Draw from all directions and check only the draw; where it is blocked, draw again
        # among the free directions. Together this is exactly the draw restricted to free
        # directions, at a fraction of the cost of checking every direction of every image.
        choice = _weighted_choice(rng, weights)
        free, origin, coverage = _free_strokes(taken, rows, position, ends[rows, choice])
        redo = np.flatnonzero(~free)
        if len(redo):
            candidates = ends[redo].reshape(-1, 2)
            redo_free, _, _ = _free_strokes(
                taken, np.repeat(redo, NUM_DIRECTIONS), np.repeat(position[redo], NUM_DIRECTIONS,
                                                                    axis=0), candidates
            )
            redo_weights = weights[redo] * redo_free.reshape(len(redo), NUM_DIRECTIONS)
            ok[redo] &= redo_weights.sum(axis=1) > 0
            choice[redo] = _weighted_choice(rng, redo_weights)
            _, origin[redo], coverage[redo] = _free_strokes(
                taken, redo, position[redo], ends[redo, choice[redo]]
            )
        older |= last
        last = np.zeros(blocked.shape, dtype=bool)
        scatter_window(last, rows, origin, coverage > 0)
        scatter_window(ink, rows, origin, coverage)
        position = ends[rows, choice]
        heading = angles[rows, choice]
        points.append(position)
    return np.stack(points, axis=1), ink, ok


def _disc(centres: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Marker discs, one per image: the boolean footprint and the coverage, each ``(B, H, W)``."""
    origin, coverage = segment_coverage(centres, centres, MARKER_RADIUS, RENDER_SCALE)
    ink = np.zeros(shape)
    scatter_window(ink, np.arange(len(centres)), origin, coverage)
    return ink > 0, ink


def _seed_pairs(
    rng: np.random.Generator, batch: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeds of the two target snakes, :data:`SEED_DISTANCE` apart, with room for markers.

    Returns:
        ``seed_a`` and ``seed_b`` ``(B, 2)``, and ``ok`` ``(B,)``: False in the rare scenes where
        no tried direction kept ``seed_b`` on the canvas.
    """
    low, high = _MARKER_MARGIN, IMAGE_SIZE - _MARKER_MARGIN
    seed_a = rng.uniform(low, high, (batch, 2))
    # a few directions per scene; the first that keeps the second seed on the canvas wins
    angles = rng.uniform(0, 2 * np.pi, (batch, 8))
    candidates = seed_a[:, None] + SEED_DISTANCE * np.stack([np.sin(angles), np.cos(angles)], -1)
    inside = ((candidates >= low) & (candidates <= high)).all(axis=-1)
    seed_b = candidates[np.arange(batch), inside.argmax(axis=1)]
    return seed_a, seed_b, inside.any(axis=1)


def _draw_scenes(
    rng: np.random.Generator, batch: int, contour_length: int, continuity: float
) -> tuple[np.ndarray, np.ndarray]:
    """Draw scenes of two target snakes and the distractors, without markers.

    Scenes where something found no room are dropped as soon as that happens.

    Returns:
        ``ink`` ``(B', H, W)`` and ``ends`` ``(B', 2, 2, 2)`` (target snake, start/end, row/col)
        for the ``B' <= batch`` scenes drawn in full.
    """
    shape = (batch, IMAGE_SIZE, IMAGE_SIZE)
    seed_a, seed_b, seeded = _seed_pairs(rng, batch)

    # Snake A keeps clear of B's marker place; B keeps clear of A and both of A's marker places.
    seed_b_disc, _ = _disc(seed_b, shape)
    near_seed_b = dilate(seed_b_disc)
    points_a, ink_a, ok = _grow_snakes(rng, seed_a, contour_length, near_seed_b, continuity)
    end_a_disc, _ = _disc(points_a[:, -1], shape)
    seed_a_disc, _ = _disc(seed_a, shape)
    ok &= seeded & ~(end_a_disc & near_seed_b).any(axis=(1, 2))
    occupied = (ink_a > 0) | seed_a_disc | end_a_disc
    ok &= ~(seed_b_disc & dilate(occupied)).any(axis=(1, 2))
    keep = np.flatnonzero(ok)
    points_a, ink_a, occupied = points_a[keep], ink_a[keep], occupied[keep]
    seed_b, seed_b_disc = seed_b[keep], seed_b_disc[keep]

    blocked = dilate(occupied)
    points_b, ink_b, ok = _grow_snakes(rng, seed_b, contour_length, blocked, continuity)
    end_b_disc, _ = _disc(points_b[:, -1], ink_b.shape)
    ok &= ~(end_b_disc & blocked).any(axis=(1, 2))
    occupied |= (ink_b > 0) | seed_b_disc | end_b_disc
    ink = np.maximum(ink_a, ink_b)

    for _ in range(NUM_DISTRACTORS):
        keep = np.flatnonzero(ok)
        ink, occupied = ink[keep], occupied[keep]
        points_a, points_b = points_a[keep], points_b[keep]
        ok = np.zeros(len(keep), dtype=bool)
        for _ in range(DISTRACTOR_ATTEMPTS):
            todo = np.flatnonzero(~ok)
            if len(todo) == 0:
                break
            starts = rng.uniform(0.5, IMAGE_SIZE - 0.5, (len(todo), 2))
            _, ink_d, grown = _grow_snakes(rng, starts, DISTRACTOR_LENGTH,
                                           dilate(occupied[todo]), continuity)
            done = todo[grown]
            ink[done] = np.maximum(ink[done], ink_d[grown])
            occupied[done] |= ink_d[grown] > 0
            ok[done] = True
    keep = np.flatnonzero(ok)
    ends = np.stack([points_a[keep][:, [0, -1]], points_b[keep][:, [0, -1]]], axis=1)
    return ink[keep], ends


def _marker_places(ends: np.ndarray, labels: np.ndarray, which_end: np.ndarray) -> np.ndarray:
    """Marker centres ``(B, 2, 2)``: both ends of snake A when the label is 1, else one end of A
    and one end of B, the ends chosen by ``which_end`` ``(B, 2)``."""
    index = np.arange(len(ends))
    first = ends[index, 0, which_end[:, 0]]
    second = np.where(
        labels[:, None] == 1,
        ends[index, 0, 1 - which_end[:, 0]],
        ends[index, 1, which_end[:, 1]],
    )
    return np.stack([first, second], axis=1)


def generate_pathfinder(
    num_samples: int,
    *,
    contour_length: int = 14,
    seed: int | Sequence[int] = 0,
    continuity: float = 1.0,
) -> PathfinderImages:
    """Generate Pathfinder-32 images with exactly balanced labels (``num_samples // 2`` positive).

    Args:
        num_samples: images to make.
        contour_length: paddles per target snake, one of :data:`CONTOUR_LENGTHS` (LRA uses 14
            for Pathfinder-32 "hard", 9 and 6 for easier splits).
        seed: generation seed (an int or a sequence of ints); the same seed gives the same images.
        continuity: exponent on the cos² turn weight; larger is straighter.
    """
    if contour_length not in CONTOUR_LENGTHS:
        raise ValueError(f"contour_length must be one of {CONTOUR_LENGTHS}; got {contour_length!r}")
    check_integer("num_samples", num_samples)
    rng = np.random.default_rng(seed)
    labels = np.zeros(num_samples, dtype=np.int64)
    labels[rng.permutation(num_samples)[: num_samples // 2]] = 1
    which_end = rng.integers(0, 2, (num_samples, 2))
    images = np.empty((num_samples, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    markers = np.empty((num_samples, 2, 2))
    have = 0
    while have < num_samples:
        # about a third of scenes find no room for everything; draw enough to fill in one pass
        batch = min(_BATCH, max(64, int(1.6 * (num_samples - have))))
        ink, ends = _draw_scenes(rng, batch, contour_length, continuity)
        take = min(len(ink), num_samples - have)
        done = slice(have, have + take)
        markers[done] = _marker_places(ends[:take], labels[done], which_end[done])
        for k in range(2):
            _, disc_ink = _disc(markers[done, k], ink[:take].shape)
            ink[:take] = np.maximum(ink[:take], disc_ink)
        images[done] = np.rint(ink[:take] * 255).astype(np.uint8)
        have += take
    return PathfinderImages(images=images, labels=labels, markers=markers)


def pixel_tokens(pixels: Tensor) -> Tensor:
    """uint8 intensities ``(N,)`` to token ids ``1..256`` (0 stays free for padding)."""
    return pixels.long() + 1


def pixel_values(pixels: Tensor) -> Tensor:
    """uint8 intensities ``(N,)`` to features ``(N, 1)`` in ``[0, 1]``."""
    return (pixels.float() / 255.0).unsqueeze(-1)


def load_pathfinder(
    *,
    contour_length: int = 14,
    preset: str = "lra",
    seed: int = 0,
    num_train: int | None = None,
    num_validation: int | None = None,
    num_test: int | None = None,
    pixel_format: str = "tokens",
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """The Pathfinder-32 task: 1,024-pixel sequences, 2 balanced classes; generated, then cached.

    Args:
        contour_length: 14 (LRA's Pathfinder-32), 9 or 6 (easier).
        preset: split sizes, ``"lra"`` (160k/20k/20k), ``"small"`` (8k/1k/1k) or ``"tiny"``
            (1k/200/200); the ``num_*`` options override it.
        seed: generation seed; each split has its own stream, so the test set does not change
            with ``num_train``.
        num_train: training images.
        num_validation: validation images.
        num_test: test images.
        pixel_format: ``"tokens"`` (``input_ids`` = intensity + 1, vocabulary 257 with padding 0)
            or ``"values"`` (``inputs`` ``(N, 1)`` = intensity / 255).
        cache_dir: cache root (default ``$FILTERFORMER_CACHE`` or ``~/.cache/filterformer``).
    """
    if preset not in PATHFINDER_PRESETS:
        raise ValueError(f"preset must be one of {sorted(PATHFINDER_PRESETS)}; got {preset!r}")
    if pixel_format not in PIXEL_FORMATS:
        raise ValueError(f"pixel_format must be one of {PIXEL_FORMATS}; got {pixel_format!r}")
    if contour_length not in CONTOUR_LENGTHS:
        raise ValueError(f"contour_length must be one of {CONTOUR_LENGTHS}; got {contour_length!r}")
    overrides = dict(num_train=num_train, num_validation=num_validation, num_test=num_test)
    sizes = {**PATHFINDER_PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    splits = {"train": sizes["num_train"], "validation": sizes["num_validation"],
              "test": sizes["num_test"]}
    key = cache_key(seed=seed, contour_length=contour_length, **splits)
    path = cache_root(cache_dir) / "pathfinder" / f"pathfinder{contour_length}-{key}.npz"

    def create() -> dict[str, np.ndarray]:
        arrays = {}
        for code, (split, size) in enumerate(splits.items()):
            generated = generate_pathfinder(size, contour_length=contour_length, seed=(seed, code))
            arrays[f"{split}_images"] = generated.images
            arrays[f"{split}_labels"] = generated.labels
        return arrays

    arrays = cached_arrays(path, create)
    key_name, transform = (
        ("input_ids", pixel_tokens) if pixel_format == "tokens" else ("inputs", pixel_values)
    )
    datasets = {
        split: SequenceDataset(
            torch.from_numpy(arrays[f"{split}_images"].reshape(-1, IMAGE_SIZE * IMAGE_SIZE)),
            arrays[f"{split}_labels"], key_name, transform=transform,
        )
        for split in splits
    }
    return TaskData(
        name="pathfinder",
        kind="classification",
        train=datasets["train"],
        validation=datasets["validation"],
        test=datasets["test"],
        collate=collate_sequences,
        num_classes=2,
        vocab_size=257 if pixel_format == "tokens" else None,
        input_dim=1 if pixel_format == "values" else None,
        max_len=IMAGE_SIZE * IMAGE_SIZE,
        metadata={"cache_path": str(path), "contour_length": contour_length, "seed": seed,
                  "pixel_format": pixel_format, "image_size": IMAGE_SIZE, **sizes},
    )
