"""Pathfinder-32: labels agree with a flood fill of the drawn pixels, balance, determinism, task."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from scipy import ndimage

from filterformer.data import DRAW_THRESHOLD, generate_pathfinder, load_task

EIGHT_NEIGHBOURS = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]


def markers_joined(image: np.ndarray, markers: np.ndarray) -> bool:
    """Flood fill (breadth first) over drawn pixels from one marker centre: is the other reached?"""
    drawn = image.astype(float) / 255 >= DRAW_THRESHOLD
    start, goal = (tuple(int(v) for v in np.floor(m)) for m in markers)
    if not drawn[start] or not drawn[goal]:
        return False
    seen = {start}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return True
        for dr, dc in EIGHT_NEIGHBOURS:
            nxt = (r + dr, c + dc)
            if (0 <= nxt[0] < drawn.shape[0] and 0 <= nxt[1] < drawn.shape[1]
                    and drawn[nxt] and nxt not in seen):
                seen.add(nxt)
                queue.append(nxt)
    return False


@pytest.fixture(scope="module")
def hard() -> object:
    return generate_pathfinder(2000, contour_length=14, seed=21)


def test_labels_agree_with_flood_fill_between_the_markers(hard):
    agree = [markers_joined(img, m) == bool(y)
             for img, m, y in zip(hard.images, hard.markers, hard.labels, strict=True)]
    assert np.mean(agree) >= 0.95


def test_labels_agree_with_connected_components_for_easier_splits():
    for contour_length in (6, 9):
        data = generate_pathfinder(300, contour_length=contour_length, seed=contour_length)
        agree = []
        for img, m, y in zip(data.images, data.markers, data.labels, strict=True):
            # 4-connectivity is the stricter notion of "joined"
            components, _ = ndimage.label(img / 255 >= DRAW_THRESHOLD)
            a, b = (components[tuple(np.floor(p).astype(int))] for p in m)
            agree.append((a != 0 and a == b) == bool(y))
        assert np.mean(agree) >= 0.95


def test_classes_are_balanced(hard):
    assert hard.labels.sum() == len(hard.labels) // 2


def test_pixel_count_carries_no_label(hard):
    ink = (hard.images / 255 >= DRAW_THRESHOLD).sum(axis=(1, 2))
    positive, negative = ink[hard.labels == 1].mean(), ink[hard.labels == 0].mean()
    assert abs(positive - negative) / negative < 0.05


def test_images_are_32_by_32_uint8_with_drawn_markers(hard):
    assert hard.images.shape == (2000, 32, 32) and hard.images.dtype == np.uint8
    rows = np.arange(2000)
    for k in range(2):
        centre = np.floor(hard.markers[:, k]).astype(int)
        assert (hard.images[rows, centre[:, 0], centre[:, 1]] == 255).all()


def test_same_seed_same_images_other_seed_other_images():
    first = generate_pathfinder(64, contour_length=9, seed=5)
    again = generate_pathfinder(64, contour_length=9, seed=5)
    other = generate_pathfinder(64, contour_length=9, seed=6)
    assert np.array_equal(first.images, again.images)
    assert np.array_equal(first.labels, again.labels)
    assert not np.array_equal(first.images, other.images)


def test_contour_length_is_validated():
    with pytest.raises(ValueError, match=r"\(6, 9, 14\)"):
        generate_pathfinder(4, contour_length=7)


def test_task_gives_token_ids_or_values_of_the_same_pixels(tmp_path):
    options = dict(contour_length=6, num_train=40, num_validation=8, num_test=8,
                   cache_dir=tmp_path, seed=2)
    tokens = load_task("pathfinder", **options)
    values = load_task("pathfinder", pixel_format="values", **options)
    assert tokens.vocab_size == 257 and tokens.input_dim is None and tokens.max_len == 1024
    assert values.vocab_size is None and values.input_dim == 1
    batch = tokens.collate([tokens.train[i] for i in range(8)])
    value_batch = values.collate([values.train[i] for i in range(8)])
    assert batch["input_ids"].shape == (8, 1024) and batch["padding_mask"].all()
    assert batch["input_ids"].min() >= 1 and batch["input_ids"].max() <= 256
    assert value_batch["inputs"].shape == (8, 1024, 1)
    recovered = (value_batch["inputs"][..., 0] * 255).round().long() + 1
    assert (recovered == batch["input_ids"]).all()
    assert (batch["labels"] == value_batch["labels"]).all()
    labels = [int(tokens.train[i]["labels"]) for i in range(40)]
    assert sum(labels) == 20


def test_bad_pixel_format_lists_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"tokens.*values"):
        load_task("pathfinder", pixel_format="rgb", num_train=2, cache_dir=tmp_path)
