"""Training a comparison's runs: one after another in this process, or ``jobs`` at a time in
worker processes.

A run's weights are a function of its configuration: the trainer seeds initialisation and
dropout from the run's seed, and the data order is a function of (seed, epoch). A run trained in
a worker therefore ends with the same weights, bit for bit, as in this process: workers are
started with ``spawn`` (no state copied from this process, safe with CUDA and threads) and use
this process's number of torch threads, on which the order of floating-point sums depends. A
worker ends when this process dies, even when killed outright (:mod:`.parent_watch`).

Workers receive the task itself, serialised once here and loaded once by each worker when it
starts (not once per run). Loading it again from the config in each worker would repeat its
generation or tokenisation, and could not work for a ``TaskData`` handed to :func:`compare` in
memory; a task's splits are tensors and its ``collate`` a module-level function, which pickle.
The task goes through ``torch.save``, which writes a storage shared by many tensors once:
plain pickle writes it again for every view (ListOps' 10,000 sequences, views of one 3 MB
buffer, became 30 GB).

Finished runs stay finished: each one's ``summary.json`` is written as it ends, so when a run
fails the others are kept, and running the comparison again reuses them. A run that diverges
(:mod:`filterformer.training.divergence`) ends too: its ``summary.json`` records the step and
the reason, the comparison goes on with the others, and running it again reuses the record.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import pickle
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...checks import check_integer
from ..checkpoint import check_same_config, load_checkpoint
from ..divergence import TrainingDiverged
from ..model_building import ModelConfig
from ..progress import RunsProgress, print_line
from ..run_config import TrainConfig, run_identity
from ..run_files import CorruptRunFileError, read_json
from ..trainer import Trainer
from .comparison_config import CompareConfig
from .parent_watch import end_with_parent
from .run_plans import RunPlan

__all__ = [
    "OTHER_COMPARISON_HINT",
    "FinishedRun",
    "PlannedRun",
    "RunFailedError",
    "check_stopped_run",
    "default_jobs",
    "finished_summary",
    "train_runs",
]


@dataclass(frozen=True)
class PlannedRun:
    """A run still to train: what a worker receives.

    Attributes:
        plan: the run (:class:`~.run_plans.RunPlan`, made when the comparison was loaded).
        model_config: its model's configuration, resolved once for the method.
        resume: continue it from its last checkpoint (a run a previous comparison stopped).
    """

    plan: RunPlan
    model_config: ModelConfig
    resume: bool

    @property
    def name(self) -> str:
        return self.plan.label


@dataclass(frozen=True)
class FinishedRun:
    """A finished run (or a diverged one: its summary's ``diverged`` says at which step and
    why).

    Attributes:
        method: the compared method's name.
        seed: the run's seed.
        summary: its ``summary.json``.
        state: ``trained``, ``resumed`` (continued from a checkpoint) or ``reused`` (finished by
            an earlier comparison).
        duration_s: wall time of its training here (model building, training, test); None when
            reused.
    """

    method: str
    seed: int
    summary: dict[str, Any]
    state: str
    duration_s: float | None


class RunFailedError(RuntimeError):
    """One or more runs failed; the message names each with its error. The first error is the
    exception's ``__cause__`` (from a worker, with the worker's traceback).

    Attributes:
        failures: ``(run name, run directory, error)`` of each failed run.
    """

    def __init__(self, failures: list[tuple[PlannedRun, BaseException]]) -> None:
        self.failures = [(run.name, run.plan.config.output_dir, error)
                         for run, error in failures]
        lines, shared = [], {}  # one error may stop several runs (a worker that died)
        for name, run_dir, error in self.failures:
            shared.setdefault(id(error), (error, []))[1].append((name, run_dir))
        for error, runs in shared.values():
            where = (f"run {runs[0][0]} failed ({runs[0][1]})" if len(runs) == 1 else
                     f"runs {', '.join(name for name, _ in runs)} did not finish")
            lines.append(f"{where}: {type(error).__name__}: {error}")
        super().__init__(
            "\n".join(lines) + "\nfinished runs are kept: running the comparison again reuses "
            "them and resumes the others from their last checkpoints"
        )


def available_cpus() -> int:
    """CPU cores this process may run on (its affinity where the system says, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


#: What becomes of a run whose ``summary.json`` cannot be read.
SUMMARY_RECOVERY = ("the comparison resumes the run from its last checkpoint (or trains it "
                    "again) to write it anew")


def default_jobs(device: str, threads: int) -> int:
    """Runs that fit the machine at once: one per ``threads`` CPU cores, at least one; one when
    the runs train on a GPU (they would share it, and their timings would mix).

    Args:
        device: the runs' ``device`` (``auto``, ``cpu`` or ``cuda``).
        threads: torch threads of each run.
    """
    if device != "cpu" and torch.cuda.is_available():
        return 1
    return max(1, available_cpus() // max(threads, 1))


#: The way out of a comparison directory that holds runs with another budget.
OTHER_COMPARISON_HINT = ("; a comparison with another budget (task, model, training) needs a "
                         "directory of its own: give it one with --output-dir DIR (output_dir)")


def finished_summary(config: TrainConfig) -> dict[str, Any] | None:
    """A finished run's summary when it was trained with ``config``; None when unfinished.

    Raises:
        CorruptRunFileError: naming the run's ``summary.json`` when it cannot be read (the
            comparison then finishes the run again: :func:`train_runs`).
        ValueError: when the run directory holds a run trained with another configuration
            (naming the keys, and ``--output-dir`` as the way out).
    """
    path = Path(config.output_dir) / "summary.json"
    if not path.exists():
        return None
    summary = read_json(path, recovery=SUMMARY_RECOVERY)
    if not isinstance(summary.get("config"), dict):
        raise CorruptRunFileError(path, "it holds no run configuration", SUMMARY_RECOVERY)
    check_same_config(run_identity(summary["config"]), run_identity(config.to_dict()), path,
                      hint=OTHER_COMPARISON_HINT)
    return summary


def check_stopped_run(config: TrainConfig) -> None:
    """Refuse a stopped run (its ``last.pt``) saved with another configuration than ``config``,
    as :func:`finished_summary` refuses a finished one: before any run of the comparison trains.
    A checkpoint that cannot be read is left to the run, which fails naming it
    (:class:`RunFailedError`) while the other runs go on."""
    path = Path(config.output_dir) / "checkpoints" / "last.pt"
    try:
        saved = load_checkpoint(path, required=("config",))["config"]
    except ValueError:
        return
    check_same_config(run_identity(saved), run_identity(config.to_dict()), path,
                      hint=OTHER_COMPARISON_HINT)


def train_runs(
    config: CompareConfig,
    task: Any,
    model_configs: dict[str, ModelConfig],
    *,
    jobs: int | None = 1,
    echo: Callable[[str], None] = print_line,
) -> list[FinishedRun]:
    """Train every run of ``config`` that has not finished yet; one line per finished run.

    Args:
        config: the comparison.
        task: the ``TaskData`` every run trains on.
        model_configs: each method's resolved model configuration.
        jobs: runs trained at once. 1 trains them one after another in this process (with the
            trainer's progress bar on a terminal); more train in as many ``spawn`` worker
            processes, each with this process's torch threads (a script that asks for them
            calls this under ``if __name__ == "__main__":``, as each worker imports it); None
            picks :func:`default_jobs`.
        echo: where the line of each finished run goes (``[done/total]``, its test metric, its
            wall time and the estimated time left), in the order the runs finish, and a line
            for each run whose ``summary.json`` is damaged (that run is finished again).

    Returns:
        Every run, finished, in the order of ``config`` (methods, then seeds), whatever the
        order they finished in.

    Raises:
        RunFailedError: when a run fails (naming it). Runs already finished are kept; with
            ``jobs > 1`` no further run starts, and those under way are trained to the end.
        ValueError: for a bad ``jobs``, a task that cannot be sent to workers, or a run
            directory that holds a run, finished or stopped, trained with another configuration
            (before any run trains).
    """
    threads = torch.get_num_threads()
    if jobs is None:
        jobs = default_jobs(config.base.device, threads)
    check_integer(
        "jobs", jobs, hint=" (runs trained at once) or None (as many as fit the cores)"
    )
    order = [(plan.name, plan.seed) for plan in config.plans]
    progress = RunsProgress(len(order), jobs)
    finished: dict[tuple[str, int], FinishedRun] = {}

    def finish(run: FinishedRun) -> None:
        finished[run.method, run.seed] = run
        progress.finished(run.duration_s)
        echo(progress.line(f"{run.method} seed {run.seed} ({run.state}): "
                           f"{_outcome(run.summary)}"))

    pending = []
    for plan in config.plans:
        try:
            summary = finished_summary(plan.config)
        except CorruptRunFileError as error:
            echo(f"{plan.label}: {error}")
            summary = None
        if summary is not None:
            finish(FinishedRun(plan.name, plan.seed, summary, "reused", None))
            continue
        resume = (plan.run_dir / "checkpoints" / "last.pt").exists()
        if resume:
            check_stopped_run(plan.config)
        pending.append(PlannedRun(plan, model_configs[plan.name], resume))
    workers = min(jobs, len(pending))
    if workers <= 1:
        trained = _train_here(pending, task)
    else:
        trained = _train_in_workers(pending, task, workers, threads)
    for run, duration in trained:
        state = "resumed" if run.resume else "trained"
        summary = finished_summary(run.plan.config)
        finish(FinishedRun(run.plan.name, run.plan.seed, summary, state, duration))
    return [finished[key] for key in order]


def _outcome(summary: dict[str, Any]) -> str:
    """A run's test metric (and the step ``patience`` stopped it at) and train time, or where
    and why it diverged."""
    diverged = summary.get("diverged")
    if diverged:
        return f"diverged at step {diverged['step']} ({diverged['reason']}), left out"
    metric, seconds = summary["selection_metric"], summary["train_time_s"]
    early = f", stopped early at step {summary['steps']}" if summary.get("stopped_early") else ""
    return (f"test {metric} {summary['test'][metric]:.4f}{early}, "
            + ("train time unknown" if seconds is None else f"{seconds:.1f} s"))


def _train(run: PlannedRun, task: Any, *, bar: bool) -> float:
    """Train one run to its end (or to its divergence, which its ``summary.json`` records),
    showing its progress as its config says (``bar=False``: plain lines, never a bar); its wall
    time in seconds."""
    started = time.perf_counter()
    # A divergence is recorded in the run's summary.json; the comparison goes on with the others.
    with contextlib.suppress(TrainingDiverged):
        Trainer(run.plan.config, task=task, resume=run.resume, model_config=run.model_config,
                progress_bar=bar).fit()
    return time.perf_counter() - started


def _train_here(pending: list[PlannedRun], task: Any) -> Iterator[tuple[PlannedRun, float]]:
    """Train the runs one after another in this process; yields ``(run, seconds)``."""
    for run in pending:
        try:
            duration = _train(run, task, bar=True)
        except Exception as error:
            raise RunFailedError([(run, error)]) from error
        yield run, duration


#: The task of a worker process, received once when the worker starts.
_worker_task: Any = None


def task_to_bytes(task: Any) -> bytes:
    """``task`` serialised for worker processes, each tensor storage written once."""
    buffer = io.BytesIO()
    torch.save(task, buffer)
    return buffer.getvalue()


def task_from_bytes(data: bytes) -> Any:
    """Inverse of :func:`task_to_bytes` (the bytes come from this process, so they are trusted)."""
    return torch.load(io.BytesIO(data), weights_only=False)


def _start_worker(task_bytes: bytes, threads: int, parent_pid: int) -> None:
    global _worker_task
    end_with_parent(parent_pid)  # a killed comparison must not leave its runs training
    torch.set_num_threads(threads)
    _worker_task = task_from_bytes(task_bytes)


def _train_in_worker(run: PlannedRun) -> float:
    # Bars from several processes would overwrite each other: each run writes plain lines,
    # which name the run.
    return _train(run, _worker_task, bar=False)


def _train_in_workers(
    pending: list[PlannedRun], task: Any, workers: int, threads: int
) -> Iterator[tuple[PlannedRun, float]]:
    """Train the runs in ``workers`` spawned processes; yields ``(run, seconds)`` as each ends."""
    try:
        task_bytes = task_to_bytes(task)
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise ValueError(
            f"jobs={workers} sends the task to worker processes, but it cannot be pickled "
            f"({error}); use jobs=1, or give the task module-level collate functions"
        ) from None
    failures: list[tuple[PlannedRun, BaseException]] = []
    died = RuntimeError("a worker process died abruptly (killed, or out of memory?)")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker,
                               initargs=(task_bytes, threads, os.getpid()))
    try:
        futures = {pool.submit(_train_in_worker, run): run for run in pending}
        for future in as_completed(futures):
            run = futures[future]
            try:
                duration = future.result()
            except CancelledError:
                continue
            except BrokenProcessPool:
                failures.append((run, died))
                continue
            except Exception as error:
                failures.append((run, error))
                for other in futures:  # no new run starts; those under way finish
                    other.cancel()
                continue
            yield run, duration
    except BaseException:
        # Interrupted (Ctrl-C) or abandoned: stop now; runs under way resume from their last
        # checkpoints next time.
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failures:
        raise RunFailedError(failures) from failures[0][1]


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's processes, runs under way included."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14
        pool.terminate_workers()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
