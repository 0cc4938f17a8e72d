"""A missing Debian data source skips its test on a user's machine and fails it in CI."""

from __future__ import annotations

import pytest

from . import helpers

MISSING = "/usr/share/filterformer-test/no-such-source"


@pytest.fixture
def no_source(monkeypatch):
    monkeypatch.setattr(helpers, "debian_path", lambda path: None)


def test_a_missing_source_fails_under_ci(no_source, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"dataset-example.*CI=true"):
        helpers.debian_source(MISSING, "dataset-example")


@pytest.mark.parametrize("ci", [None, "false", "1"])
def test_a_missing_source_skips_outside_ci(no_source, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="needs the Debian package dataset-example"):
        helpers.debian_source(MISSING, "dataset-example")


def test_a_present_source_is_returned(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(helpers, "debian_path", lambda path: tmp_path)
    assert helpers.debian_source(MISSING, "dataset-example") == tmp_path
