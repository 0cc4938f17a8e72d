"""Measure in a fresh process (the CPU peak-memory figure is process-wide), forked from a fork
server that has imported torch and this package but run nothing (spawned where there is none).

By hand: ``python -m filterformer.bench.fresh_process '{"method": "gfsa", "N": 4096, "mode":
"train"}'`` measures one configuration in this process and prints its record as JSON.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .measurement import BenchConfig, BenchRecord, measure_config, skipped_record

__all__ = ["WorkerFailed", "main", "run_in_worker", "run_isolated"]


class WorkerFailed(RuntimeError):
    """The worker raised, died or overran its time; the message says which."""


def _call_and_send(function: Callable[[Any], Any], argument: Any, sender: Connection) -> None:
    gc.freeze()  # what the process held before the call stays out of the call's collections
    try:
        sender.send(("result", function(argument)))
    except Exception as err:
        sender.send(("error", f"{type(err).__name__}: {err}"))
    finally:
        sender.close()


def run_isolated(function: Callable[[Any], Any], argument: Any, timeout_s: float) -> Any:
    """``function(argument)`` (module-level, picklable) in a fresh process; its result.

    Raises:
        WorkerFailed: when the worker raises, is killed (e.g. out of memory) or overruns.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "filterformer.bench.measurement"])
    else:
        context = multiprocessing.get_context("spawn")
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


def _measure_to_dict(argument: tuple[dict[str, Any], Callable[[BenchConfig], BenchRecord]]):
    config, measure = argument
    return measure(BenchConfig.from_dict(config)).to_dict()


def run_in_worker(
    config: BenchConfig, timeout_s: float,
    measure: Callable[[BenchConfig], BenchRecord] = measure_config,
) -> BenchRecord:
    """``measure(config)`` (module-level) in a fresh process; a worker that raises, dies or
    overruns ``timeout_s`` gives a skipped record saying so."""
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
        print("usage: python -m filterformer.bench.fresh_process CONFIG_JSON", file=sys.stderr)
        return 2
    gc.freeze()
    print(json.dumps(measure_config(BenchConfig.from_dict(json.loads(argv[0]))).to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
