"""The report's activity sentences leave no compared method out silently: one without parameters
of its own says so, and one none of whose runs finished says that nothing was measured."""

from __future__ import annotations

import random

from filterformer.training.compare.activity import activity_sentences, activity_summary
from filterformer.training.compare.comparison_results import ComparisonResults


def _sentences(runs: list[dict], methods: tuple[str, ...]) -> list[str]:
    results = ComparisonResults(metric="accuracy", methods=methods, baseline=methods[0],
                                summary=(), runs=tuple(runs),
                                method_activity=activity_summary(runs, methods))
    return activity_sentences(results)


def _run(method: str, activity: dict | None, diverged: str | None = None) -> dict:
    return {"method": method, "seed": random.randint(0, 99), "diverged": diverged,
            "method_activity": activity}


def test_a_method_without_parameters_of_its_own_says_so_but_not_the_baseline():
    seeds = random.randint(1, 4)
    runs = [_run(m, {}) for m in ("softmax", "neutreno") for _ in range(seeds)]
    assert _sentences(runs, ("softmax", "neutreno")) == [
        f"neutreno: no parameters of its own that training moves ({seeds} "
        f"run{'' if seeds == 1 else 's'} measured)."]


def test_a_method_whose_every_run_diverged_says_nothing_was_measured():
    moved = random.uniform(0.001, 0.1)
    runs = [_run("softmax", {}), _run("gfsa", None, diverged="non-finite loss"),
            _run("agf", {"agf": {"max_abs_change": moved, "parameters": {}}})]
    assert _sentences(runs, ("softmax", "gfsa", "agf")) == [
        "gfsa: no run finished without diverging, so how far its parameters moved is not "
        "measured.",
        f"agf: AGF's filter coefficients (p) moved at most {moved:.2g} from their start "
        "(largest over 1 run).",
    ]
