"""The sentences that put a comparison in context state the numbers its results hold."""

from __future__ import annotations

import random

import pytest

from filterformer.training.compare.comparison_results import ComparisonResults
from filterformer.training.compare.context_sentences import (
    findings_paragraph,
    machine_sentence,
    oversmoothing_sentence,
    reference_sentence,
)


def _results(*, metric: str = "accuracy", scores: dict | None = None,
             cosines: list[float] | None = None, environment: dict | None = None,
             elapsed_s: float | None = 100.0) -> ComparisonResults:
    accuracy = random.uniform(0.2, 0.9)
    summary = ({"method": "softmax", f"test_{metric}_mean": accuracy, "difference": None},)
    task = {"name": "digits", "kind": "classification"}
    if scores is not None:
        task["reference_scores"] = scores
    return ComparisonResults(
        task=task, metric=metric, methods=("softmax",), baseline="softmax", summary=summary,
        runs=(), environment=environment or {}, elapsed_s=elapsed_s,
        diagnostics={"softmax": {"token_cosine_similarity": cosines}} if cosines else {})


def test_the_reference_sentence_states_chance_the_majority_class_and_the_baseline() -> None:
    chance, majority = 1 / random.randint(2, 12), random.uniform(0.1, 0.6)
    results = _results(scores={"chance_accuracy": chance, "majority_class": 7,
                               "majority_accuracy": majority})
    sentence = reference_sentence(results)
    reached = results.summary[0]["test_accuracy_mean"]
    assert sentence is not None
    assert f"Chance level is {100 * chance:.1f} %" in sentence
    assert f"(class 7) scores {100 * majority:.1f} %" in sentence
    assert f"softmax reaches {100 * reached:.1f} %" in sentence


def test_no_reference_sentence_without_scores_or_for_another_metric() -> None:
    assert reference_sentence(_results()) is None
    scores = {"chance_accuracy": 0.1, "majority_class": 0, "majority_accuracy": 0.1}
    assert reference_sentence(_results(metric="perplexity", scores=scores)) is None


@pytest.mark.parametrize("rising", [True, False])
def test_the_oversmoothing_sentence_reads_the_baselines_first_and_last_layer(rising: bool) -> None:
    cosines = sorted(random.uniform(0.1, 0.99) for _ in range(random.randint(3, 9)))
    cosines = cosines if rising else cosines[::-1]
    sentence = oversmoothing_sentence(_results(cosines=cosines))
    assert sentence is not None
    assert f"from {cosines[0]:.2f} after the embeddings to {cosines[-1]:.2f}" in sentence
    assert f"the last of its {len(cosines) - 1} layers" in sentence
    assert ("over-smoothing, which" in sentence) is rising
    assert oversmoothing_sentence(_results()) is None


def test_the_machine_sentence_names_the_cpu_its_cores_and_the_time() -> None:
    elapsed = random.uniform(30, 900)
    env = {"device": "cpu", "cpu": "Some CPU @ 2.0GHz", "cpu_count": 2, "cpu_threads": 1}
    sentence = machine_sentence(_results(environment=env, elapsed_s=elapsed))
    assert sentence == (f"The comparison ran on Some CPU @ 2.0GHz (2 cores), 1 torch thread per "
                        f"run and took {elapsed / 60:.1f} minutes.")
    assert "NVIDIA H100" in machine_sentence(_results(environment={"device": "NVIDIA H100"}))


def test_the_findings_paragraph_joins_the_sentences_in_order() -> None:
    scores = {"chance_accuracy": 0.1, "majority_class": 3, "majority_accuracy": 0.11}
    results = _results(scores=scores, cosines=[0.5, 0.9], environment={"device": "cpu"})
    paragraph = findings_paragraph(results)
    order = [reference_sentence(results), oversmoothing_sentence(results),
             machine_sentence(results)]
    positions = [paragraph.index(sentence) for sentence in order if sentence]
    assert positions == sorted(positions) and len(positions) == 3
