"""IDX files written here byte by byte read back exactly."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from filterformer.data import parse_idx, read_idx


def idx_bytes(array: np.ndarray, type_code: int, big_endian_dtype: str) -> bytes:
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(big_endian_dtype).tobytes()


@pytest.mark.parametrize("compress", [False, True])
def test_uint8_images_round_trip(tmp_path, compress):
    images = np.random.default_rng(0).integers(0, 256, size=(5, 4, 3), dtype=np.uint8)
    data = idx_bytes(images, 0x08, "u1")
    path = tmp_path / ("images.gz" if compress else "images")
    path.write_bytes(gzip.compress(data) if compress else data)
    np.testing.assert_array_equal(read_idx(path), images)


@pytest.mark.parametrize(("code", "dtype"), [(0x0C, ">i4"), (0x0D, ">f4"), (0x0B, ">i2")])
def test_big_endian_types_are_decoded(code, dtype):
    values = (np.random.default_rng(1).normal(size=(7,)) * 1000).astype(dtype)
    np.testing.assert_array_equal(parse_idx(idx_bytes(values, code, dtype)), values)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x07", "two zero bytes"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x07", "type byte"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x03\x07", "bytes follow"),
    ],
)
def test_malformed_idx_is_rejected(data, message):
    with pytest.raises(ValueError, match=message):
        parse_idx(data)
