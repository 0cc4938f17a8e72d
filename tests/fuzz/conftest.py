"""Hypothesis profiles for the fuzz suite.

``ci`` (the default) runs a bounded, reproducible number of examples per property, so that the
whole of ``tests/fuzz`` stays well inside the test suite's time budget; ``campaign`` runs a long
randomised search (see docs/testing.md)::

    HYPOTHESIS_PROFILE=campaign pytest tests/fuzz -p no:cacheprovider --hypothesis-show-statistics

A test that needs fewer examples than the profile's (building models is slower than calling a
kernel) asks for a fraction of them with :func:`tests.fuzz.strategies.budget`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Tensors are built from a drawn seed inside each example, so generation is cheap, but a single
# example can still take a few hundred milliseconds under load: no deadline, no slow-data check.
_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "ci", max_examples=20, derandomize=True, database=None,
    **_COMMON,
)
settings.register_profile("campaign", max_examples=3000, **_COMMON)
settings.register_profile("dev", max_examples=40, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
