"""Reader for the IDX format of (Fashion-)MNIST, plain or gzipped.

IDX: two zero bytes, a type byte, the number of dimensions, each dimension as a big-endian uint32,
then the values, big-endian, in row-major order.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import numpy as np

__all__ = ["parse_idx", "read_idx"]

_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes) -> np.ndarray:
    """Decode the bytes of an IDX file (gunzipped first if they are gzip).

    Raises:
        ValueError: the bytes are not IDX (bad magic, unknown type, wrong size).
    """
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[:2] != b"\x00\x00":
        raise ValueError("not an IDX file: it must start with two zero bytes")
    type_code, ndim = data[2], data[3]
    if type_code not in _IDX_TYPES:
        raise ValueError(f"IDX type byte {type_code:#04x} is not one of "
                         f"{[f'{c:#04x}' for c in _IDX_TYPES]}")
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = _IDX_TYPES[type_code]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"IDX header says {shape} ({expected} bytes) but {len(data) - header} "
                         f"bytes follow")
    values = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (``.gz`` or not); see :func:`parse_idx`."""
    return parse_idx(Path(path).read_bytes())
