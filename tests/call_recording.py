"""Counting the calls of chosen functions, to check that a path goes through one implementation."""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def recorded_calls(*functions: Callable) -> Iterator[collections.Counter]:
    """Count the calls of ``functions`` (by code object) made in this thread meanwhile."""
    codes = {function.__code__: function for function in functions}
    calls: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)
