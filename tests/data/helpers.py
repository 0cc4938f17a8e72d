"""What the data tests share: finding a Debian data source, or saying why the test cannot run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from filterformer.data.sources import debian_path


def debian_source(path: str, package: str) -> Path:
    """Where the Debian package ``package`` put ``path`` on this machine.

    ``scripts/setup.sh`` fetches the package; a machine without it skips the test, except in CI
    (``CI=true``), where a missing source fails the test so that it cannot pass unnoticed.
    """
    found = debian_path(path)
    if found is not None:
        return found
    reason = f"needs the Debian package {package} ({path}), which scripts/setup.sh fetches"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true, so a missing data source fails rather than skips")
    pytest.skip(reason)
