"""Image tasks: patch sequences, a Fashion-MNIST fixture directory, the real data, digits."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from filterformer.data import load_task, patchify, read_fashion_mnist
from filterformer.data.images import FASHION_MNIST_DIR

from .helpers import debian_source


def reference_patches(image: np.ndarray, p: int) -> np.ndarray:
    height, width = image.shape
    return np.stack([image[r : r + p, c : c + p].ravel()
                     for r in range(0, height, p) for c in range(0, width, p)])


def test_patchify_matches_a_loop_over_patches():
    images = torch.randn(3, 12, 8)
    patches = patchify(images, 4)
    assert patches.shape == (3, 6, 16)
    for k in range(3):
        np.testing.assert_array_equal(patches[k].numpy(), reference_patches(images[k].numpy(), 4))


def test_patch_size_must_divide_the_image():
    with pytest.raises(ValueError, match=r"\[1, 2, 4\]"):
        patchify(torch.zeros(4, 4), 3)


def write_idx(path, array):
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_fashion_mnist_fixture_directory(tmp_path):
    rng = np.random.default_rng(0)
    train_images = rng.integers(0, 256, (50, 28, 28))
    test_images = rng.integers(0, 256, (20, 28, 28))
    train_labels = np.arange(50) % 10
    test_labels = rng.integers(0, 10, 20)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", train_images)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", train_labels)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", test_images)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", test_labels)
    task = load_task("fashion_mnist", root=tmp_path, patch_size=7, validation_fraction=0.2)
    assert (len(task.train), len(task.validation), len(task.test)) == (40, 10, 20)
    assert task.max_len == 16 and task.input_dim == 49 and task.num_classes == 10
    batch = task.collate([task.test[i] for i in range(20)])
    assert batch["inputs"].shape == (20, 16, 49)
    assert batch["labels"].tolist() == test_labels.tolist()
    for k in (0, 13):
        expected = reference_patches(test_images[k] / 255.0, 7)
        np.testing.assert_allclose(batch["inputs"][k].numpy(), expected, rtol=1e-6)


def test_missing_fashion_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        read_fashion_mnist(tmp_path)


def test_real_fashion_mnist():
    debian_source(FASHION_MNIST_DIR, "dataset-fashion-mnist")
    splits = read_fashion_mnist()
    train_images, train_labels = splits["train"]
    test_images, test_labels = splits["test"]
    assert train_images.shape == (60000, 28, 28) and test_images.shape == (10000, 28, 28)
    assert np.bincount(train_labels).tolist() == [6000] * 10
    assert np.bincount(test_labels).tolist() == [1000] * 10


def test_digits_splits_partition_all_1797_images():
    task = load_task("digits")
    sizes = (len(task.train), len(task.validation), len(task.test))
    assert sum(sizes) == 1797 and task.max_len == 16 and task.input_dim == 4
    from sklearn.datasets import load_digits

    digits = load_digits()
    seen = []
    for split in (task.train, task.validation, task.test):
        batch = task.collate([split[i] for i in range(len(split))])
        seen.extend(tuple(x.ravel().tolist()) for x in (batch["inputs"] * 16).round().long())
    originals = {tuple(reference_patches(img, 2).ravel().astype(int).tolist())
                 for img in digits.images}
    assert set(seen) <= originals and len(seen) == 1797
    test_labels = [int(task.test[i]["labels"]) for i in range(len(task.test))]
    assert np.bincount(test_labels).min() >= 30  # stratified: every digit is tested
