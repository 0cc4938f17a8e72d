"""Fused regions: a kernel's chain of elementwise operations compiled into a few GPU kernels.

A method's eager function stays the reference (Triton's tutorials' habit: the fused kernel lives
beside the code it must equal). :func:`fused` wraps it so that calls on CUDA tensors run it through
:func:`torch.compile` with dynamic shapes: one graph serves every sequence length and batch size,
so nothing recompiles as N changes. Elsewhere, or where the compiler cannot be used (no Triton,
no C++ compiler, an error while compiling), the eager function runs; a compiler failure is
reported once with a warning and the region stays eager for the rest of the process. Inside a
model that is itself being compiled, the eager function is traced into that graph instead.

``FILTERFORMER_FUSED`` chooses where the compiled path is used: ``cuda`` (default: CUDA inputs
large enough to gain, see :func:`fused`), ``always`` (every device and size: the tests
compare it with the eager function on the CPU) or ``never``.
:data:`BACKEND` is the compiler (inductor, PyTorch's own); :func:`reset_fused_regions` drops what
was compiled, so that a change of either takes effect.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor

__all__ = [
    "BACKEND", "FUSED_CHOICES", "FUSED_MIN_ELEMENTS", "fused", "fused_mode", "reset_fused_regions",
    "runs_compiled",
]

#: The values ``FILTERFORMER_FUSED`` accepts.
FUSED_CHOICES = ("cuda", "always", "never")
#: The :func:`torch.compile` backend of every fused region.
BACKEND: Any = "inductor"
#: Every region's state: its compiled function (None until first used) and whether it failed.
_REGIONS: list[dict[str, Any]] = []

F = TypeVar("F", bound=Callable[..., Any])


def fused_mode() -> str:
    """Where compiled regions run: the ``FILTERFORMER_FUSED`` setting (one of
    :data:`FUSED_CHOICES`, ``cuda`` when unset)."""
    mode = os.environ.get("FILTERFORMER_FUSED", "cuda").strip().lower() or "cuda"
    if mode not in FUSED_CHOICES:
        raise ValueError(
            f"FILTERFORMER_FUSED must be one of {', '.join(FUSED_CHOICES)}; got {mode!r}"
        )
    return mode


#: The default size from which a region compiles on CUDA (``FILTERFORMER_FUSED=cuda``), in
#: elements of its first tensor argument: below it a compiled call's host overhead (guards, the
#: autograd wrapper) exceeds the GPU time fusing saves (a decoding step's few tokens).
FUSED_MIN_ELEMENTS = 2**16


def _first_tensor(args: tuple[Any, ...]) -> Tensor | None:
    return next((arg for arg in args if isinstance(arg, Tensor)), None)


def runs_compiled(first: Tensor, min_elements: int = FUSED_MIN_ELEMENTS) -> bool:
    """Whether :func:`fused_mode` compiles a call whose first tensor argument is ``first``: on
    every call (``always``), none (``never``), or on CUDA from ``min_elements`` elements
    (``cuda``)."""
    mode = fused_mode()
    if mode == "cuda":
        return first.device.type == "cuda" and first.numel() >= min_elements
    return mode == "always"


def fused(fn: F | None = None, *, min_elements: int = FUSED_MIN_ELEMENTS) -> Any:
    """``fn`` compiled with dynamic shapes where :func:`fused_mode` allows, ``fn`` itself
    elsewhere; ``@fused`` or ``@fused(min_elements=...)``.

    ``fn`` must be a pure function of its arguments (no randomness: eager and compiled random
    streams differ); its first tensor argument decides the device and, on CUDA, whether the call
    is large enough to gain: ``min_elements`` or more elements. Float arguments are compiled as
    the constants they are (AGF's a and b, a norm's eps): dynamic shapes would make them symbols,
    and the first check of their value would split the region into several graphs."""
    if fn is None:
        return functools.partial(fused, min_elements=min_elements)
    state: dict[str, Any] = {"compiled": None, "failed": False}
    _REGIONS.append(state)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        first = _first_tensor(args)
        use = (
            not state["failed"]
            and first is not None
            and runs_compiled(first, min_elements)
            and not torch.compiler.is_compiling()
        )
        if not use:
            return fn(*args, **kwargs)
        if state["compiled"] is None:
            state["compiled"] = torch.compile(fn, dynamic=True, backend=BACKEND)
        try:
            with torch._dynamo.config.patch(specialize_float=True):
                return state["compiled"](*args, **kwargs)
        except Exception as err:  # the compiler is unavailable or failed: stay eager
            if not _is_compiler_error(err):
                raise
            state["failed"] = True
            warnings.warn(
                f"filterformer: compiling {fn.__qualname__} failed ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}); it runs eagerly from now on",
                RuntimeWarning, stacklevel=2,
            )
            return fn(*args, **kwargs)

    wrapper.eager = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def reset_fused_regions() -> None:
    """Forget every region's compiled function and failure: the next call compiles anew with
    :data:`BACKEND`."""
    for state in _REGIONS:
        state.update(compiled=None, failed=False)


def _is_compiler_error(err: Exception) -> bool:
    """Whether ``err`` comes from TorchDynamo or Inductor (not from the function's own checks,
    which the eager call would raise as well)."""
    module = type(err).__module__
    return module.startswith(("torch._dynamo", "torch._inductor", "torch.fx")) or isinstance(
        err, (ImportError, OSError, NotImplementedError)
    )
