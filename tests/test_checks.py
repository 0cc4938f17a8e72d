"""The shared argument checks: what passes, and the one wording of what does not."""

import os
import random
import re
from pathlib import Path

import pytest

from filterformer.checks import (
    check_choice,
    check_integer,
    check_positive,
    check_probability,
    check_writable_directory,
)


def test_integers_at_or_above_the_minimum_pass_unchanged():
    minimum = random.randint(-3, 5)
    value = minimum + random.randint(0, 100)
    assert check_integer("n", value, minimum=minimum) == value
    assert check_integer("n", None, optional=True) is None


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (0, {}, r"^n must be a positive integer; got 0$"),
        (True, {}, r"^n must be a positive integer; got True$"),
        (2.0, {}, r"^n must be a positive integer; got 2\.0$"),
        (1, {"minimum": 2, "hint": " (at least a pair)"},
         r"^n must be an integer >= 2 \(at least a pair\); got 1$"),
        (None, {}, r"^n must be a positive integer; got None$"),
        (-1, {"optional": True}, r"^n must be a positive integer or None; got -1$"),
    ],
)
def test_bad_integers_are_named_with_what_was_expected(value, kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_integer("n", value, **kwargs)


def test_probabilities_are_in_the_half_open_unit_interval():
    p = random.random()
    assert check_probability("dropout", p) == p
    for bad in (1.0, -0.1, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\); got "):
            check_probability("dropout", bad)


def test_choices_list_the_valid_values():
    assert check_choice("mode", "soft", ("soft", "hard")) == "soft"
    with pytest.raises(ValueError, match=r"^mode must be one of \('soft', 'hard'\); got 'x'$"):
        check_choice("mode", "x", ["soft", "hard"])


def test_a_writable_directory_passes_whether_it_exists_or_not_and_nothing_is_created(tmp_path):
    missing = tmp_path / f"d{random.randrange(10**6)}" / "run"
    assert check_writable_directory("output_dir", str(missing)) == missing
    assert not missing.parent.exists()
    assert check_writable_directory("output_dir", tmp_path) == tmp_path


@pytest.mark.parametrize("case", ["existing file", "under a file", "under a file, deeper"])
def test_a_file_in_the_way_is_named_with_the_argument(tmp_path, case):
    blocker = tmp_path / f"f{random.randrange(10**6)}.txt"
    blocker.write_text("keep me")
    path = {"existing file": blocker, "under a file": blocker / "run",
            "under a file, deeper": blocker / "a" / "b"}[case]
    expected = (f"out {path} exists and is not a directory" if path == blocker
                else f"out {path} cannot be created: {blocker} is not a directory")
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}"):
        check_writable_directory("out", path)
    assert blocker.read_text() == "keep me"


def test_a_directory_without_write_permission_is_refused(tmp_path, monkeypatch):
    # What the system answers is simulated, so the case holds for root too (root may write
    # anywhere, whatever the permission bits say).
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access",
                        lambda p, mode, **kw: Path(p) != locked and real_access(p, mode, **kw))
    for path in (locked, locked / "run" / "x"):
        expected = f"output_dir {path} is not writable: no permission to write in {locked}"
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            check_writable_directory("output_dir", path)
    assert check_writable_directory("output_dir", tmp_path / "open") == tmp_path / "open"


def test_positive_numbers_are_finite_and_above_zero():
    assert check_positive("eps", 3) == 3.0 and check_positive("eps", 1e-12) == 1e-12
    for bad in (0, -1.0, float("nan"), float("inf"), "1", True, None):
        with pytest.raises(ValueError, match=r"^eps must be a positive finite number; got "):
            check_positive("eps", bad)
