"""``scripts/gpu_tune_agf.py``'s tables, run on the CPU in Triton's interpreter at tiny shapes
with a stand-in clock: each setting of AGF's launch table is in force while it is timed."""

from __future__ import annotations

import argparse
import itertools

from filterformer.functional import agf_triton as agf_triton_module

from ..scripts import load_script
from .triton_interpreter import interpreter_only

pytestmark = interpreter_only


def test_each_setting_is_in_force_while_it_is_timed(monkeypatch, capsys):
    script = load_script("gpu_tune_agf")
    current = dict(agf_triton_module.LAUNCH)
    monkeypatch.setattr(agf_triton_module, "LAUNCH", dict(current))  # the script writes to it
    taken = []
    clock = itertools.count(1.0)

    def timed(run, repeats):
        taken.append(dict(agf_triton_module.LAUNCH))
        run()
        return next(clock)

    real_inputs = script._inputs
    monkeypatch.setattr(script, "_inputs", lambda batch, length, masked: real_inputs(
        batch, length, masked, device="cpu", heads=2, dim=16))
    monkeypatch.setattr(script, "_time", timed)
    monkeypatch.setattr(script, "SHAPES", [(2, 40, True)])
    monkeypatch.setattr(script, "CANDIDATES", [(16, 4), (32, 8)])
    settings = {"current": current} | {f"{r}×{w}": dict.fromkeys(current, (r, w))
                                       for r, w in script.CANDIDATES}
    args = argparse.Namespace(repeats=1, rounds=2)
    for training in (False, True):
        script._table(settings, training, args)
    # Each round times every setting in turn, the current one first.
    assert taken == [table for _ in range(2 * args.rounds) for table in settings.values()]
    out = capsys.readouterr().out
    assert out.count("| current | 16×4 | 32×8 |") == 2
    assert out.count("| 2 | 40 | True | ") == 2
