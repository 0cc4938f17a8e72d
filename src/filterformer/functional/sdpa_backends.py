"""The SDPA kernels a call may use when its keys grow by a position every decoding step.

On CUDA, SDPA's cuDNN backend builds an execution plan per shape and keeps it: a decoding cache
that hands attention one more key every step (Hugging Face's ``DynamicCache``) makes it build one
per token, which dominates a first generation (a 1,024-token prompt and 64 new tokens on an
H100: 65 ms per token the first time, 4.5 ms once every length had run). The flash and
memory-efficient kernels build nothing per shape. Every decoding step runs on them: the patched
Hugging Face models' and our own models' (whose bucketed cache hands attention only the positions
held, see :func:`~filterformer.functional.attend`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

__all__ = [
    "GROWING_KEYS_BACKENDS", "decoding_kernels", "growing_keys_backends", "growing_keys_kernels",
]

#: The kernels for a decoding step over keys of a new length: every backend but cuDNN's, with
#: the math kernel last for what the fused kernels do not take (float64, unusual head sizes).
GROWING_KEYS_BACKENDS = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)


def growing_keys_backends(
    device: torch.device, query_len: int, key_len: int
) -> list[SDPBackend] | None:
    """The SDPA backends for ``query_len`` queries over ``key_len`` keys that a growing cache
    holds: :data:`GROWING_KEYS_BACKENDS` for a decoding step (fewer queries than keys) on CUDA,
    else None (SDPA chooses, as for a prompt, whose plan serves every step alike)."""
    if device.type != "cuda" or query_len >= key_len:
        return None
    return list(GROWING_KEYS_BACKENDS)


def growing_keys_kernels(query: Tensor, key: Tensor) -> AbstractContextManager:
    """A context in which SDPA calls use :func:`growing_keys_backends` of ``query``
    ``(B, h, L, d)`` and ``key`` ``(B, h_kv, S, d)`` (nothing changes where it is None)."""
    backends = growing_keys_backends(query.device, query.shape[-2], key.shape[-2])
    return nullcontext() if backends is None else sdpa_kernel(backends)


def decoding_kernels(query: Tensor) -> AbstractContextManager:
    """A context in which the SDPA calls of a step through our decoding cache, the prompt's
    included, use :data:`GROWING_KEYS_BACKENDS` on CUDA (nothing changes elsewhere).

    A step attends over the positions held, a new key length each token; and a prompt's length is
    new to each generation, for which cuDNN builds a plan per layer: on an H100 a fresh
    CausalLM's first generation after a 990-token prompt spent 736 ms of host time in its 12
    cuDNN calls, 20.8 ms per token against 8.2 for the same generation again, and 9.5 against 8.7
    without cuDNN (``benchmarks/results/h100/session-2/profile.log``)."""
    if query.device.type != "cuda":
        return nullcontext()
    return sdpa_kernel(list(GROWING_KEYS_BACKENDS))
