"""A comparison's ``method_activity`` as compare writes it, with random distances."""

from __future__ import annotations

import random
from typing import Any


def random_activity(runs: int) -> dict[str, Any]:
    """``method_activity`` of a comparison of softmax (the baseline), gfsa (coefficients and a
    filter response), neutreno (a fixed λ: nothing of its own), fusion (weights, one run
    resumed without its start) and agf (every run diverged)."""
    def moved(response: bool) -> dict[str, float | None]:
        return {"max_abs_change": random.uniform(1e-4, 0.5),
                "response_max_abs_change": random.uniform(1e-4, 0.5) if response else None}

    return {
        "softmax": {"runs_measured": runs, "runs_unmeasured": 0, "parameters": {}},
        "gfsa": {"runs_measured": runs, "runs_unmeasured": 0,
                 "parameters": {"gfsa": moved(response=True)}},
        "neutreno": {"runs_measured": runs, "runs_unmeasured": 0, "parameters": {}},
        "fusion": {"runs_measured": runs - 1, "runs_unmeasured": 1,
                   "parameters": {"fusion": moved(response=False)}},
        "agf": {"runs_measured": 0, "runs_unmeasured": 0, "parameters": {}},
    }
