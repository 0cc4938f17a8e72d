"""Images as patch sequences for ViT-style models: Fashion-MNIST and scikit-learn's digits.

An image becomes a sequence of non-overlapping ``patch_size × patch_size`` patches in row-major
order, each flattened: ``inputs`` ``(num_patches, patch_size²)``, intensities scaled to ``[0, 1]``.

Fashion-MNIST (60k train / 10k test, 28×28) is read from IDX files: a directory given as ``root``,
or the Debian package ``dataset-fashion-mnist`` (installed, or unpacked by ``scripts/setup.sh``).
Its validation split is carved from training. The digits (1,797 8×8 images, values 0–16) have no
splits at all: test and validation are carved with the fixed split seed, stratified by class.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .datasets import SequenceDataset, collate_sequences
from .idx import read_idx
from .sources import (
    MissingSourceError,
    debian_fetch_command,
    require_debian_path,
    require_module,
)
from .splits import carve_validation, subsample, three_way_split
from .task import TaskData

__all__ = [
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DIR",
    "PatchSequence",
    "load_digits_task",
    "load_fashion_mnist",
    "patchify",
    "read_fashion_mnist",
]

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
_FASHION_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into flattened non-overlapping patches, row by row.

    Args:
        images: ``(..., H, W)``; H and W divisible by ``patch_size``.
        patch_size: patch side in pixels.

    Returns:
        ``(..., (H/p)·(W/p), p²)``.
    """
    height, width = images.shape[-2:]
    if patch_size < 1 or height % patch_size or width % patch_size:
        valid = [p for p in range(1, min(height, width) + 1) if height % p == 0 and width % p == 0]
        raise ValueError(f"patch_size must divide the {height}×{width} image; valid: {valid}")
    rows, cols = height // patch_size, width // patch_size
    patches = images.reshape(*images.shape[:-2], rows, patch_size, cols, patch_size)
    patches = patches.transpose(-3, -2)  # (..., rows, cols, p, p)
    return patches.reshape(*images.shape[:-2], rows * cols, patch_size * patch_size)


class PatchSequence:
    """Picklable transform: one stored integer image ``(H, W)`` to scaled patches ``(P, p²)``."""

    def __init__(self, patch_size: int, max_value: float) -> None:
        self.patch_size = patch_size
        self.max_value = max_value

    def __call__(self, image: Tensor) -> Tensor:
        return patchify(image.float() / self.max_value, self.patch_size)


def _image_task(
    name: str,
    images: np.ndarray,
    labels: np.ndarray,
    indices: dict[str, np.ndarray],
    patch_size: int,
    max_value: float,
    metadata: dict,
) -> TaskData:
    patchify(torch.zeros(images.shape[1:]), patch_size)  # validates patch_size up front
    transform = PatchSequence(patch_size, max_value)
    stored = torch.from_numpy(np.ascontiguousarray(images))
    splits = {
        split: SequenceDataset(stored[idx], labels[idx], "inputs", transform=transform)
        for split, idx in indices.items()
    }
    height, width = images.shape[1:]
    return TaskData(
        name=name,
        kind="classification",
        train=splits["train"],
        validation=splits["validation"],
        test=splits["test"],
        collate=collate_sequences,
        num_classes=int(labels.max()) + 1,
        vocab_size=None,
        input_dim=patch_size * patch_size,
        max_len=(height // patch_size) * (width // patch_size),
        metadata={"patch_size": patch_size, "image_size": (height, width), **metadata},
    )


def _fashion_dir(root: str | os.PathLike | None, cache_dir: str | os.PathLike | None) -> Path:
    if root is not None:
        return Path(root).expanduser()
    return require_debian_path(
        FASHION_MNIST_DIR, "Fashion-MNIST", "dataset-fashion-mnist", cache_dir,
        alternative=", or a directory of the four IDX files passed as root",
    )


def read_fashion_mnist(
    root: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Fashion-MNIST's official splits: ``{"train": (images, labels), "test": (...)}``.

    Images are ``(N, 28, 28)`` uint8 and labels ``(N,)``; each file may be gzipped or not.
    """
    folder = _fashion_dir(root, cache_dir)
    splits = {}
    for split, names in _FASHION_FILES.items():
        arrays = []
        for name in names:
            candidates = [folder / f"{name}.gz", folder / name]
            path = next((p for p in candidates if p.is_file()), None)
            if path is None:
                raise MissingSourceError(
                    f"the Fashion-MNIST file {name}[.gz] in {folder}",
                    "the Debian package dataset-fashion-mnist",
                    debian_fetch_command("dataset-fashion-mnist", cache_dir),
                )
            arrays.append(read_idx(path))
        images, labels = arrays
        if len(images) != len(labels):
            raise ValueError(f"Fashion-MNIST {split}: {len(images)} images, {len(labels)} labels")
        splits[split] = (images, labels.astype(np.int64))
    return splits


def load_fashion_mnist(
    *,
    root: str | os.PathLike | None = None,
    patch_size: int = 4,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """Fashion-MNIST as patch sequences (10 classes; 49 patches of 16 pixels at ``patch_size=4``).

    Args:
        root: a directory with ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``; default the
            Debian package's files.
        patch_size: patch side, a divisor of 28.
        seed: draws the ``num_train`` subset.
        num_train: keep only this many training images (CPU-sized runs); None keeps all.
        validation_fraction: share of the training images held out for model selection.
        cache_dir: cache root, where an unpacked Debian package is looked for.
    """
    splits = read_fashion_mnist(root, cache_dir)
    train_images, train_labels = splits["train"]
    test_images, test_labels = splits["test"]
    train_idx, validation_idx = carve_validation(len(train_labels), validation_fraction,
                                                 labels=train_labels)
    train_idx = subsample(train_idx, num_train, seed)
    offset = len(train_labels)
    images = np.concatenate([train_images, test_images])
    labels = np.concatenate([train_labels, test_labels])
    indices = {"train": train_idx, "validation": validation_idx,
               "test": offset + np.arange(len(test_labels))}
    return _image_task("fashion_mnist", images, labels, indices, patch_size, 255.0,
                       {"class_names": FASHION_MNIST_CLASSES, "seed": seed})


def load_digits_task(
    *,
    patch_size: int = 2,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.2,
) -> TaskData:
    """scikit-learn's 8×8 digits as patch sequences (10 classes; 16 patches of 4 by default).

    Args:
        patch_size: patch side, a divisor of 8.
        seed: draws the ``num_train`` subset; the splits use the fixed split seed.
        num_train: keep only this many training images; None keeps all.
        validation_fraction: share of all images held out for model selection.
        test_fraction: share of all images held out for the final test.
    """
    require_module("sklearn", "scikit-learn")
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.uint8)  # integers 0..16 stored as floats
    labels = digits.target.astype(np.int64)
    train, validation, test = three_way_split(
        labels, validation_fraction, test_fraction, num_train, seed
    )
    return _image_task("digits", images, labels, {"train": train, "validation": validation,
                                                   "test": test}, patch_size, 16.0,
                       {"class_names": [str(d) for d in range(10)], "seed": seed})
