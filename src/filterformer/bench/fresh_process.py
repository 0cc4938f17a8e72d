"""A call in a fresh process (the CPU peak-memory figure is process-wide).

On the CPU the process is forked from a server that has imported torch and this package but run
nothing; where CUDA is used or within reach it is spawned, so that CUDA initialises in the
worker alone: a fork of a process that has touched CUDA cannot use it ("Cannot re-initialize
CUDA in forked subprocess"), and torch's timer synchronises any CUDA device it finds.
"""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["WorkerFailed", "run_isolated", "start_method"]


class WorkerFailed(RuntimeError):
    """The worker raised, died or overran its time; the message says which."""


def _call_and_send(call: Callable[[], Any], sender: Any) -> None:
    gc.freeze()  # what the process held before the call stays out of the call's collections
    try:
        sender.send(call())
    except Exception as err:
        sender.send(WorkerFailed(f"the worker failed: {type(err).__name__}: {err}"))


def start_method(cuda: bool = False) -> str:
    """``spawn`` for a worker that uses CUDA (``cuda``), or wherever CUDA is initialised in this
    process or available to it; else ``forkserver`` where the platform has one."""
    if (cuda or torch.cuda.is_initialized() or torch.cuda.is_available()
            or "forkserver" not in multiprocessing.get_all_start_methods()):
        return "spawn"
    return "forkserver"


def run_isolated(call: Callable[[], Any], timeout_s: float, *, cuda: bool = False) -> Any:
    """``call()`` (picklable: a module-level function or a ``partial`` of one) in a fresh
    process started by :func:`start_method` (``cuda``: the call uses CUDA); its result.

    Raises:
        WorkerFailed: when the worker raises, is killed (e.g. out of memory) or overruns.
    """
    method = start_method(cuda)
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["torch", "filterformer.bench.measurement"])
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_call_and_send, args=(call, sender), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            process.kill()
            raise WorkerFailed(f"the worker ran past its {timeout_s:g} s limit")
        result = receiver.recv()
    except EOFError:
        process.join()
        code = process.exitcode
        how = f"killed by signal {-code} (out of memory?)" if code < 0 else f"exit code {code}"
        raise WorkerFailed(f"the worker died without a result ({how})") from None
    finally:
        process.join()
        receiver.close()
    if isinstance(result, WorkerFailed):
        raise result
    return result
