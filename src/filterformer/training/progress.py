"""What a run shows while it trains, and what a comparison shows between runs.

:class:`TrainProgress` follows one training run: a tqdm bar when its stream is a terminal, else a
plain line every ``interval_s`` seconds, when an evaluation starts and after it ends (a log file
or a pipe gets lines it can keep, not carriage returns)::

    softmax seed 0: step 92/138 (67%), evaluating on the validation split (250 items)
    softmax seed 0: step 92/138 (67%), epoch 2/3, loss 2.1136, validation accuracy 0.3000,
    21.0 steps/s, about 2 s left
    softmax seed 0: testing the best checkpoint (step 92) on the test split (250 items)
    softmax seed 0: test accuracy 0.3120 (evaluated in 1 s)

:class:`RunsProgress` follows a comparison: runs done of all runs and the time left, estimated
from the durations of the runs trained so far.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm.auto import tqdm

__all__ = ["RunsProgress", "TrainProgress", "format_duration", "print_line"]

#: Seconds between two plain progress lines of a training run.
LINE_INTERVAL_S = 10.0


def print_line(line: str, stream: TextIO | None = None) -> None:
    """Write ``line`` and its newline to ``stream`` (``sys.stdout`` when None) in one write,
    then flush.

    A comparison's worker processes and the comparison itself write lines to one log or pipe.
    ``print`` writes a line and its newline separately, and with unbuffered streams
    (``PYTHONUNBUFFERED=1``, common under Docker or a job scheduler) that is two writes, between
    which another process's line can land: ``run A: evaluating…run B: testing…`` on one line.
    One write of a line shorter than the pipe's atomic size (4096 bytes on Linux) is never
    split.
    """
    stream = sys.stdout if stream is None else stream
    stream.write(line + "\n")
    stream.flush()


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``: a duration as a person reads it."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class TrainProgress:
    """Progress of one training run (rank 0's): a bar on a terminal, plain lines otherwise.

    Args:
        label: names the run in every line and on the bar (``gfsa seed 0``).
        total: the run's optimiser steps.
        initial: steps already done (a resumed run).
        steps_per_epoch: optimiser steps per pass over the training split.
        enabled: False shows nothing (``--quiet``, processes other than rank 0).
        bar: False writes plain lines even to a terminal (a comparison's worker processes,
            whose bars would overwrite each other).
        stream: where the bar or lines go; ``sys.stderr`` (at construction) when None.
        interval_s: seconds between two plain lines.
        clock: monotonic seconds (``time.monotonic``; replaceable in tests).
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        initial: int = 0,
        steps_per_epoch: int,
        enabled: bool = True,
        bar: bool = True,
        stream: TextIO | None = None,
        interval_s: float = LINE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.step = label, total, initial
        self.steps_per_epoch = steps_per_epoch
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s, self.clock = interval_s, clock
        self.lines = enabled and not (bar and _is_terminal(self.stream))
        self.bar = None
        if enabled and not self.lines:
            self.bar = tqdm(total=total, initial=initial, desc=label, file=self.stream,
                            dynamic_ncols=True)
        self.start_step, self.start_time = initial, clock()
        self.last_line_time = self.start_time
        self.loss_sum, self.loss_count = 0.0, 0
        self.validation: tuple[str, float] | None = None
        self.evaluation_started: float | None = None
        if self.lines:
            resumed = f", resumed at step {initial}" if initial else ""
            self._write(f"{label}: {total} steps, {self.epochs} epoch(s){resumed}")

    @property
    def epochs(self) -> int:
        return math.ceil(self.total / self.steps_per_epoch)

    @property
    def epoch(self) -> int:
        """The epoch the latest step belongs to, from 1 (its last step still counts in it)."""
        return max(1, math.ceil(self.step / self.steps_per_epoch))

    def advance(self, loss: float) -> None:
        """One optimiser step done, with its training loss."""
        self.step += 1
        self.loss_sum += loss
        self.loss_count += 1
        if self.bar is not None:
            self.bar.update()
            self.bar.set_postfix(self._postfix(loss), refresh=False)
        elif self.lines and self.clock() - self.last_line_time >= self.interval_s:
            self._write_status()

    def evaluating(self, split: str, items: int, best_step: int | None = None) -> None:
        """An evaluation of ``split`` (``items`` sequences or graphs) starts; ``best_step`` is
        the step of the checkpoint tested, for the final test."""
        self.evaluation_started = self.clock()
        if self.bar is not None:
            self.bar.set_postfix({**self._postfix(None), "evaluating": split}, refresh=True)
        elif self.lines:
            what = (f"testing the best checkpoint (step {best_step}) on" if best_step is not None
                    else f"step {self.step}/{self.total} ({100 * self.step / self.total:.0f}%), "
                         "evaluating on")
            self._write(f"{self.label}: {what} the {split} split ({items} items)")

    def validated(self, metric: str, value: float) -> None:
        """A validation finished: ``metric`` (the one that selects checkpoints) is ``value``."""
        self.validation = (metric, value)
        if self.bar is not None:
            self.bar.set_postfix(self._postfix(None), refresh=True)
        elif self.lines:
            self._write_status()

    def tested(self, metric: str, value: float) -> None:
        """The final test finished: ``metric`` is ``value``."""
        if self.bar is not None:
            self.bar.set_postfix({**self._postfix(None), f"test_{metric}": f"{value:.4f}"},
                                 refresh=True)
        elif self.lines:
            took = ("" if self.evaluation_started is None else
                    f" (evaluated in {format_duration(self.clock() - self.evaluation_started)})")
            self._write(f"{self.label}: test {metric} {value:.4f}{took}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> TrainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def status(self) -> str:
        """The plain line: step, epoch, mean loss since the last line, last validation metric,
        steps per second and the estimated time left (at this session's mean rate; at the last
        step, the session's time)."""
        parts = [f"step {self.step}/{self.total} ({100 * self.step / self.total:.0f}%)",
                 f"epoch {self.epoch}/{self.epochs}"]
        if self.loss_count:
            parts.append(f"loss {self.loss_sum / self.loss_count:.4f}")
        if self.validation is not None:
            parts.append(f"validation {self.validation[0]} {self.validation[1]:.4f}")
        elapsed, done = self.clock() - self.start_time, self.step - self.start_step
        if done and elapsed > 0:
            rate = done / elapsed
            parts.append(f"{rate:.1f} steps/s")
            left = self.total - self.step
            parts.append(f"about {format_duration(left / rate)} left" if left
                         else f"done in {format_duration(elapsed)}")
        return f"{self.label}: " + ", ".join(parts)

    def _postfix(self, loss: float | None) -> dict[str, str]:
        postfix = {} if loss is None else {"loss": f"{loss:.4f}"}
        if self.validation is not None:
            postfix[f"val_{self.validation[0]}"] = f"{self.validation[1]:.4f}"
        return postfix

    def _write_status(self) -> None:
        self._write(self.status())
        self.last_line_time = self.clock()
        self.loss_sum, self.loss_count = 0.0, 0

    def _write(self, line: str) -> None:
        print_line(line, self.stream)


class RunsProgress:
    """Progress of a comparison: runs done of ``total``, and the time left.

    The estimate is the mean duration of the runs trained (or resumed) so far, times the runs
    left, divided by the runs that go at once (``jobs``, or fewer when fewer are left). Reused
    runs count as done but not in the mean.

    Args:
        total: every run of the comparison.
        jobs: runs trained at once.
    """

    def __init__(self, total: int, jobs: int = 1) -> None:
        self.total, self.jobs = total, jobs
        self.done = 0
        self.durations: list[float] = []

    def finished(self, duration_s: float | None = None) -> None:
        """One more run done; ``duration_s`` is its wall time when it was trained now, None when
        it was reused."""
        self.done += 1
        if duration_s is not None:
            self.durations.append(duration_s)

    def seconds_left(self) -> float | None:
        """The estimated wall time left; None before the first trained run."""
        left = self.total - self.done
        if not left:
            return 0.0
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        return mean * left / min(self.jobs, left)

    def line(self, text: str) -> str:
        """``text`` (what happened to the latest run) between the count of runs done and the
        estimate: ``[3/21] gfsa seed 1 (trained): …; 18 runs left, about 2 min 10 s``."""
        left, seconds = self.total - self.done, self.seconds_left()
        estimate = "" if not left or seconds is None else (
            f"; {left} run{'s' if left > 1 else ''} left, about {format_duration(seconds)}"
        )
        return f"[{self.done}/{self.total}] {text}{estimate}"


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False
