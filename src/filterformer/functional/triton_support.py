"""When filterformer's Triton kernels run, and what happens when they cannot.

The kernels run on CUDA tensors where Triton can be imported (a CUDA build of PyTorch ships it)
and ``FILTERFORMER_FUSED`` is not ``never``; on the CPU only under ``TRITON_INTERPRET=1``, called
directly (the tests). Each method's kernels have a :class:`KernelSwitch`: a Triton failure while
compiling or launching is reported once with a warning, and that method takes its other path
(compiled or eager) for the rest of the process.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch
from torch import Tensor
from torch.autograd import forward_ad

from .fused import fused_mode

T = TypeVar("T")

#: The dtypes of the tensors the kernels read and write.
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

__all__ = [
    "KERNEL_DTYPES",
    "KernelFailure",
    "KernelSwitch",
    "block_width",
    "dot_kind",
    "eager_gradients",
    "interpreted",
    "is_triton_error",
    "launch",
    "leading_strides",
    "on_kernel_device",
    "transformed",
    "triton_available",
    "unit_last_stride",
]


@functools.cache
def triton_available() -> bool:
    """Whether Triton can be imported (a CUDA build of PyTorch ships it; the CPU one does not)."""
    try:
        import triton
        import triton.language  # noqa: F401
    except Exception:  # any import failure means no kernels
        return False
    return True


def on_kernel_device(x: Tensor) -> bool:
    """Whether ``x`` lives where the kernels run compiled: a CUDA device."""
    return x.is_cuda


def transformed() -> bool:
    """Whether a :mod:`torch.func` transform (``vmap``, ``grad``, ``jacrev``, ``jvp``, …) or a
    forward-mode AD level (:func:`torch.autograd.forward_ad.dual_level`) is active.

    The kernels' autograd Functions have neither batching rules nor forward derivatives, and
    fail under these; the eager operations they stand for have both.
    """
    return (torch._C._functorch.maybe_current_level() is not None
            or getattr(forward_ad, "_current_level", -1) >= 0)


def block_width(n: int) -> int:
    """The block covering ``n`` features: the next power of two, at least 16 (``tl.dot``'s
    smallest)."""
    return max(16, 1 << (max(n, 1) - 1).bit_length())


def unit_last_stride(x: Tensor) -> Tensor:
    """``x`` itself where its last axis has unit stride (the kernels' loads assume it), else a
    contiguous copy."""
    return x if x.stride(-1) == 1 else x.contiguous()


def leading_strides(x: Tensor) -> tuple[int, int, int]:
    """The strides of a ``(B, h, N, ·)`` tensor's first three axes, as the kernels take them."""
    return x.stride(0), x.stride(1), x.stride(2)


def eager_gradients(
    inputs: Sequence[Tensor | None], forward: Callable[..., Tensor | Sequence[Tensor]],
    grads: Tensor | Sequence[Tensor],
) -> list[Tensor | None]:
    """The gradients of ``forward(*inputs)`` for ``grads``, by torch's autograd: a kernel
    Function's backward where its kernels cannot serve. Under ``create_graph`` (grad mode on in
    the backward) they are taken of ``inputs`` themselves, so that they have a graph; otherwise
    of detached copies. None for an input that is None (passed to ``forward`` as None), needs no
    gradient or that ``forward`` does not use."""
    create_graph = torch.is_grad_enabled()
    with torch.enable_grad():
        leaves = list(inputs) if create_graph else [
            None if x is None else x.detach().requires_grad_() for x in inputs]
        outputs = forward(*leaves)
        wanted = [i for i, x in enumerate(leaves) if x is not None and x.requires_grad]
        found = torch.autograd.grad(outputs, [leaves[i] for i in wanted], grads,
                                    allow_unused=True, create_graph=create_graph)
    result: list[Tensor | None] = [None] * len(leaves)
    for index, grad in zip(wanted, found, strict=True):
        result[index] = grad
    return result


def interpreted() -> bool:
    """Whether kernels run in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def dot_kind(dtype: torch.dtype | None) -> int:
    """The kernels' ``DOT_KIND`` for products in ``dtype``: 0 float32 (or None), 1 bfloat16,
    2 float16; 3 and 4 in the interpreter, whose half-precision products are wrong (the operands
    are rounded to the half precision and multiplied in float32 instead)."""
    kind = {torch.bfloat16: 1, torch.float16: 2}.get(dtype, 0)
    return kind + 2 if kind and interpreted() else kind


class KernelFailure(RuntimeError):
    """A Triton kernel failed to compile or launch (see :func:`launch`)."""


def launch(kernel, grid: tuple[int, ...], *args, **kwargs) -> None:
    """``kernel[grid](*args, **kwargs)``; any error while compiling or launching it (Triton's
    own, or a ``RuntimeError`` from the code generator or the driver) is raised as a
    :class:`KernelFailure`."""
    try:
        kernel[grid](*args, **kwargs)
    except Exception as err:
        raise KernelFailure(f"{getattr(kernel, '__name__', kernel)}: {type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else ''}") from err


def is_triton_error(err: Exception) -> bool:
    """Whether ``err`` is a kernel's failure (:class:`KernelFailure`, or an error of Triton's
    while importing the kernels), not an argument check's."""
    return isinstance(err, KernelFailure) or type(err).__module__.startswith("triton")


class KernelSwitch:
    """Whether one method's kernels may run on given tensors, and their failure record.

    Args:
        method: the method's name, for the warning.
    """

    def __init__(self, method: str) -> None:
        self.method = method
        self.failed = False

    def allows(self, x: Tensor) -> bool:
        """CUDA ``x`` in float32, bfloat16 or float16, Triton importable, not inside a model being
        compiled (there the eager path is traced) nor under a :mod:`torch.func` transform or
        forward-mode AD (:func:`transformed`), ``FILTERFORMER_FUSED`` not ``never``, and no
        earlier failure."""
        return (
            on_kernel_device(x)
            and x.dtype in KERNEL_DTYPES
            and not self.failed
            and fused_mode() != "never"
            and not torch.compiler.is_compiling()
            and not transformed()
            and triton_available()
        )

    def run(self, kernels: Callable[[], T], other: Callable[[], T]) -> T:
        """``kernels()``; on a kernel's failure (:func:`is_triton_error`) :meth:`fail` and
        ``other()`` instead. Any other error is raised."""
        try:
            return kernels()
        except Exception as err:
            if not is_triton_error(err):
                raise
            self.fail(err)
        return other()

    def run_backward(self, kernels: Callable[[], T], eager: Callable[[], T], *,
                     atomic: bool = False) -> T:
        """An autograd Function's backward by its kernels, or by ``eager`` under
        ``create_graph`` (the kernels' gradients have no graph of their own; the eager
        operations' have, so second derivatives stay exact) and after a kernel's failure.

        ``atomic``: the kernels add into shared sums with float32 atomics, whose order, and so
        whose last bits, vary from run to run; under
        :func:`torch.use_deterministic_algorithms` ``eager`` runs instead, whose operations torch
        makes deterministic (or refuses, as it does its own)."""
        if torch.is_grad_enabled() or (atomic and torch.are_deterministic_algorithms_enabled()):
            return eager()
        return self.run(kernels, eager)

    def fail(self, err: Exception) -> None:
        """Record a kernel failure: warn once; the method takes its other path from now on."""
        self.failed = True
        warnings.warn(
            f"filterformer: {self.method}'s Triton kernels failed ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); it runs its compiled or eager "
            f"path from now on", RuntimeWarning, stacklevel=3,
        )
