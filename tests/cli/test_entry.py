"""The ``filterformer`` command itself: ``--version`` and the usage a mistyped option prints."""

from __future__ import annotations

import random
import string
import sys
from pathlib import Path

import pytest

from filterformer.cli import COMMANDS, main

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    version = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert capsys.readouterr().out == f"filterformer {version}\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_mistyped_option_prints_its_commands_usage_and_error(capsys, command):
    mistyped = "--" + "".join(random.choices(string.ascii_lowercase, k=8))
    required = {"generate": ["--run", "runs/lm", "--prompt", "once"]}.get(command, [])
    with pytest.raises(SystemExit) as exit_:
        main([command, *required, mistyped, "x"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: filterformer {command} [-h]")
    assert err.endswith(f"filterformer {command}: error: unrecognized arguments: {mistyped} x\n")


def test_a_mistyped_option_before_any_command_prints_the_top_level_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--debgu"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: filterformer [-h] [--version]")
    assert err.endswith("filterformer: error: unrecognized arguments: --debgu\n")
