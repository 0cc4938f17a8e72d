"""The cache root's precedence and atomic, create-once storage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from filterformer.data.cache import (
    CACHE_ENV_VAR,
    atomic_write,
    cache_key,
    cache_root,
    cached_arrays,
    sources_dir,
)


def test_root_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV_VAR, raising=False)
    assert cache_root() == Path.home() / ".cache" / "filterformer"
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "explicit") == tmp_path / "explicit"
    assert sources_dir() == tmp_path / "env" / "sources"


def test_arrays_are_created_once_then_read(tmp_path):
    calls = []
    arrays = {"a": np.random.default_rng(0).normal(size=(3, 4)), "b": np.arange(5)}

    def create():
        calls.append(1)
        return arrays

    path = tmp_path / "sub" / "data.npz"
    first = cached_arrays(path, create)
    second = cached_arrays(path, create)
    assert len(calls) == 1 and path.exists()
    for name in arrays:
        np.testing.assert_array_equal(first[name], arrays[name])
        np.testing.assert_array_equal(second[name], arrays[name])
    assert [p.name for p in path.parent.iterdir()] == ["data.npz"]  # no temporary left over


def test_failed_write_leaves_nothing_behind(tmp_path):
    def write(tmp):
        tmp.write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "file.txt", write)
    assert list(tmp_path.iterdir()) == []


def test_cache_key_depends_on_every_parameter():
    assert cache_key(a=1, b=2) == cache_key(b=2, a=1)
    assert cache_key(a=1, b=2) != cache_key(a=1, b=3)


@pytest.mark.parametrize("damage", ["truncate", "garble", "empty"])
def test_a_damaged_cache_file_is_created_again_with_a_warning(tmp_path, damage):
    rng = np.random.default_rng(int(torch.randint(0, 2**31, ())))
    arrays = {"a": rng.normal(size=(int(rng.integers(50, 200)), 8)), "b": rng.integers(0, 9, 30)}
    path = tmp_path / "data.npz"
    cached_arrays(path, lambda: arrays)
    data = path.read_bytes()
    cut = int(rng.integers(1, len(data) - 1))
    noise = bytes(rng.integers(0, 256, 64, dtype=np.uint8))
    path.write_bytes({"truncate": data[:cut], "empty": b"", "garble": data[:cut] + noise}[damage])
    calls = []

    def create():
        calls.append(1)
        return arrays

    with pytest.warns(UserWarning, match=rf"the cached data {path} is damaged .*creating it again"):
        again = cached_arrays(path, create)
    assert calls == [1]
    for name in arrays:
        np.testing.assert_array_equal(again[name], arrays[name])
    stored = cached_arrays(path, create)  # the file was replaced by a whole one
    assert calls == [1]
    np.testing.assert_array_equal(stored["a"], arrays["a"])
