"""Progress of a training run (bar or lines) and of a comparison (runs done, time left)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from filterformer.training.progress import (
    RunsProgress,
    TrainProgress,
    format_duration,
    print_line,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class UnbufferedStream:
    """A stream as ``PYTHONUNBUFFERED=1`` makes them: each ``write`` reaches the pipe on its
    own, where another process's write can land between two of them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        self.calls.append("<flush>")

    def isatty(self) -> bool:
        return False


def test_every_line_is_one_write_with_its_newline_then_a_flush(monkeypatch):
    rng = np.random.default_rng()
    stream = UnbufferedStream()
    progress = TrainProgress(f"gfsa seed {rng.integers(100)}", 6, steps_per_epoch=3,
                             stream=stream, interval_s=0.0, clock=FakeClock())
    for loss in rng.uniform(0.5, 2.5, size=6):
        progress.advance(float(loss))
    progress.evaluating("validation", 16)
    progress.validated("accuracy", float(rng.uniform()))
    progress.evaluating("test", 16, best_step=6)
    progress.tested("accuracy", float(rng.uniform()))
    monkeypatch.setattr("sys.stdout", stream)
    print_line("[1/2] gfsa seed 0 (trained): test accuracy 0.5000, 1.0 s")  # sys.stdout's
    writes, flushes = stream.calls[::2], stream.calls[1::2]
    # The start, a status a step, 2 evaluations announced, their 2 results, the echoed line.
    assert len(writes) == 1 + 6 + 2 + 2 + 1
    assert flushes == ["<flush>"] * len(writes)
    for text in writes:
        assert text.endswith("\n") and text.count("\n") == 1, text
    assert writes[-1].startswith("[1/2] gfsa")


def test_plain_lines_every_interval_and_after_each_validation():
    clock, stream = FakeClock(), io.StringIO()
    losses = np.random.default_rng().uniform(0.5, 2.5, size=20)
    progress = TrainProgress("gfsa seed 3", 20, steps_per_epoch=8, stream=stream,
                             interval_s=10.0, clock=clock)
    for loss in losses[:5]:
        clock.now += 1.0
        progress.advance(float(loss))
    lines = stream.getvalue().splitlines()
    assert lines == ["gfsa seed 3: 20 steps, 3 epoch(s)"]  # 5 s < the interval: no status yet
    clock.now += 7.0  # 12 s after the start, 6 steps done
    progress.advance(float(losses[5]))
    line = stream.getvalue().splitlines()[-1]
    # 0.5 steps/s, 14 steps left: 28 s.
    assert line == (f"gfsa seed 3: step 6/20 (30%), epoch 1/3, loss {losses[:6].mean():.4f}, "
                    "0.5 steps/s, about 28 s left")
    for loss in losses[6:8]:
        clock.now += 1.0
        progress.advance(float(loss))
    progress.validated("accuracy", 0.625)
    line = stream.getvalue().splitlines()[-1]
    # Step 8 ends epoch 1; the loss is the mean since the previous line; 8 steps in 14 s.
    assert line == (f"gfsa seed 3: step 8/20 (40%), epoch 1/3, loss {losses[6:8].mean():.4f}, "
                    f"validation accuracy 0.6250, {8 / 14:.1f} steps/s, about 21 s left")
    clock.now += 1.0
    progress.advance(float(losses[8]))
    assert "epoch 2/3" in progress.status() and "validation accuracy 0.6250" in progress.status()
    progress.close()
    assert "\r" not in stream.getvalue()


def test_a_resumed_run_counts_its_rate_from_where_it_resumed():
    clock, stream = FakeClock(), io.StringIO()
    progress = TrainProgress("softmax seed 0", 100, initial=60, steps_per_epoch=25,
                             stream=stream, interval_s=5.0, clock=clock)
    for _ in range(10):
        clock.now += 1.0
        progress.advance(1.0)
    first, *rest = stream.getvalue().splitlines()
    assert first == "softmax seed 0: 100 steps, 4 epoch(s), resumed at step 60"
    # The line after 5 s: 5 steps in 5 s, 35 left; the one after 10 s: 1 step/s, 30 left.
    assert rest == [
        "softmax seed 0: step 65/100 (65%), epoch 3/4, loss 1.0000, 1.0 steps/s, about 35 s left",
        "softmax seed 0: step 70/100 (70%), epoch 3/4, loss 1.0000, 1.0 steps/s, about 30 s left",
    ]


def test_a_terminal_gets_a_bar_and_no_lines():
    stream = Terminal()
    with TrainProgress("agf seed 1", 12, steps_per_epoch=4, stream=stream) as progress:
        for _ in range(12):
            progress.advance(0.5)
        progress.validated("accuracy", 0.5)
    shown = stream.getvalue()
    assert "\r" in shown and "agf seed 1" in shown and "12/12" in shown
    assert "val_accuracy=0.5000" in shown
    assert "steps/s" not in shown  # tqdm shows its own rate (it/s), not the plain line


@pytest.mark.parametrize("stream", [io.StringIO(), Terminal()])
def test_disabled_progress_shows_nothing(stream):
    with TrainProgress("gfsa seed 0", 5, steps_per_epoch=5, stream=stream, enabled=False,
                       interval_s=0.0) as progress:
        for _ in range(5):
            progress.advance(1.0)
        progress.validated("accuracy", 1.0)
    assert stream.getvalue() == ""


def test_runs_progress_estimates_from_the_trained_runs():
    durations = np.random.default_rng().uniform(5.0, 50.0, size=3)
    progress = RunsProgress(7, jobs=2)
    progress.finished()  # reused: done, but no duration
    assert progress.seconds_left() is None
    assert progress.line("a seed 0 (reused)") == "[1/7] a seed 0 (reused)"
    for duration in durations:
        progress.finished(float(duration))
    # 3 runs left, 2 at once.
    assert progress.seconds_left() == pytest.approx(durations.mean() * 3 / 2)
    expected = format_duration(durations.mean() * 3 / 2)
    assert progress.line("b seed 1 (trained)") == \
        f"[4/7] b seed 1 (trained); 3 runs left, about {expected}"
    progress.finished(1.0)
    progress.finished(1.0)
    # One run left: it goes alone, whatever the jobs.
    mean = (durations.sum() + 2.0) / 5
    assert progress.seconds_left() == pytest.approx(mean)
    assert progress.line("x").endswith(f"; 1 run left, about {format_duration(mean)}")
    progress.finished(1.0)
    assert progress.seconds_left() == 0.0 and progress.line("y") == "[7/7] y"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.2, "0 s"), (42.4, "42 s"), (59.6, "1 min 00 s"), (185, "3 min 05 s"),
     (3599, "59 min 59 s"), (7620, "2 h 07 min")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text
    assert re.fullmatch(r"\d+ (s|min \d\d s|h \d\d min)", text)


def test_evaluations_are_announced_and_a_terminal_gets_lines_when_bars_are_off():
    clock, stream = FakeClock(), Terminal()
    metric = float(np.random.default_rng().uniform())
    progress = TrainProgress("samsa_hard seed 2", 10, steps_per_epoch=5, stream=stream,
                             bar=False, clock=clock)
    for _ in range(5):
        progress.advance(1.0)
    progress.evaluating("validation", 40)
    clock.now += 3.0
    progress.validated("accuracy", metric)
    progress.evaluating("test", 64, best_step=5)
    clock.now += 65.0
    progress.tested("accuracy", metric)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[1] == ("samsa_hard seed 2: step 5/10 (50%), evaluating on the validation split "
                        "(40 items)")
    assert lines[2].startswith(f"samsa_hard seed 2: step 5/10 (50%), epoch 1/2, loss 1.0000, "
                               f"validation accuracy {metric:.4f}")
    assert lines[3:] == [
        "samsa_hard seed 2: testing the best checkpoint (step 5) on the test split (64 items)",
        f"samsa_hard seed 2: test accuracy {metric:.4f} (evaluated in 1 min 05 s)",
    ]
    assert "\r" not in stream.getvalue()


def test_a_bar_shows_the_evaluation_under_way():
    stream = Terminal()
    with TrainProgress("gfsa seed 0", 4, steps_per_epoch=4, stream=stream) as progress:
        progress.advance(0.5)
        progress.evaluating("validation", 8)
        assert "evaluating=validation" in stream.getvalue().split("\r")[-1]
        progress.tested("accuracy", 0.25)
        assert "test_accuracy=0.2500" in stream.getvalue().split("\r")[-1]
    assert "evaluating on" not in stream.getvalue()
