"""Measure one configuration in a fresh process of its own.

The CPU peak-memory figure is a process-wide high-water mark, so each configuration runs in its
own process. :func:`run_in_worker` forks it from a ``multiprocessing`` fork server that has
imported torch and this package but run nothing: a fresh process without paying the import
again (seconds, per configuration). Where there is no fork server (not Unix) a spawned process
imports everything anew.

One configuration can also be measured by hand:
``python -m filterformer.bench.worker '{"method": "gfsa", "N": 4096, "mode": "train"}'``
prints its record as JSON.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .config import BenchConfig
from .measure import measure_config, skipped_record
from .records import BenchRecord

__all__ = ["WorkerFailed", "main", "run_in_worker", "run_isolated"]

Measure = Callable[[BenchConfig], BenchRecord]

_PRELOAD = ["torch", "filterformer.bench.measure"]


class WorkerFailed(RuntimeError):
    """The worker raised, died or overran its time; the message says which."""


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def _call_and_send(function: Callable[[Any], Any], argument: Any, sender: Connection) -> None:
    # What the process holds before the call lives until it exits: keep it out of the
    # collections the measurement makes, which then scan only what the call allocates.
    gc.freeze()
    try:
        result = function(argument)
    except Exception as err:
        sender.send(("error", f"{type(err).__name__}: {err}"))
    else:
        sender.send(("result", result))
    finally:
        sender.close()


def run_isolated(function: Callable[[Any], Any], argument: Any, timeout_s: float) -> Any:
    """``function(argument)`` in a fresh process; its (picklable) result.

    Args:
        function: a module-level function, so it can be sent.
        argument: its argument (picklable).
        timeout_s: the most the worker may take.

    Raises:
        WorkerFailed: when the worker raises, is killed (e.g. out of memory) or overruns.
    """
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_call_and_send, args=(function, argument, sender), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            process.kill()
            raise WorkerFailed(f"the worker ran past its {timeout_s:g} s limit")
        kind, payload = receiver.recv()
    except EOFError:
        process.join()
        code = process.exitcode
        how = f"killed by signal {-code} (out of memory?)" if code < 0 else f"exit code {code}"
        raise WorkerFailed(f"the worker died without a result ({how})") from None
    finally:
        process.join()
        receiver.close()
    if kind == "error":
        raise WorkerFailed(f"the worker failed: {payload}")
    return payload


def _measure_to_dict(argument: tuple[dict[str, Any], Measure]) -> dict[str, Any]:
    config, measure = argument
    return measure(BenchConfig.from_dict(config)).to_dict()


def run_in_worker(
    config: BenchConfig, timeout_s: float, measure: Measure = measure_config
) -> BenchRecord:
    """Measure ``config`` in a fresh process.

    A worker that raises, is killed (e.g. out of memory) or overruns ``timeout_s`` gives a skipped
    record saying so.

    Args:
        config: the configuration.
        timeout_s: the most the worker may take.
        measure: what the worker runs (a module-level function, so it can be sent).
    """
    try:
        return BenchRecord.from_dict(
            run_isolated(_measure_to_dict, (config.to_dict(), measure), timeout_s)
        )
    except WorkerFailed as err:
        return skipped_record(config, str(err))


def main(argv: list[str] | None = None) -> int:
    """Measure the configuration given as JSON in this process; print its record as JSON."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m filterformer.bench.worker CONFIG_JSON", file=sys.stderr)
        return 2
    config = BenchConfig.from_dict(json.loads(argv[0]))
    gc.freeze()
    print(json.dumps(measure_config(config).to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
