import random

from filterformer.evidence.setup_text import (
    method_text,
    provenance_text,
    setup_lines,
    training_end_text,
)

from .results_fixture import comparison, make_results


def _results(**changes):
    seeds = {s: 0.5 for s in range(2)}
    results = make_results({"softmax": {"test_accuracy": seeds},
                            "gfsa-even": {"test_accuracy": seeds}},
                           method_entries={"gfsa-even": {"name": "gfsa-even", "method": "gfsa",
                                                         "set": {"model.attention_layers":
                                                                 [1, 3, 5]}}})
    results.update(changes)
    return results


def test_the_setup_says_task_model_optimiser_budget_seeds_and_baseline():
    results = _results()
    results["budget"].update(max_steps=500, pretrained="all-MiniLM-L6-v2")
    task, model, optimiser, budget, made = setup_lines(comparison(results))
    assert task.startswith("task: `digits` (classification): 1000 train / 200 validation / "
                           "300 test") and "options num_train=1000" in task
    assert model == "model: pretrained `all-MiniLM-L6-v2`, fine-tuned; dim=32, depth=4, norm=post"
    assert "lr 0.003, weight decay 0.05" in optimiser and "cosine decay" in optimiser
    assert budget == "budget: 500 steps, batch size 32; seeds 0, 1; baseline softmax"
    assert made == "made by commit unknown, command unknown; wall time 1.6 min"


def test_provenance_and_method_entries():
    assert provenance_text(comparison(_results(provenance={
        "commit": "a" * 40, "modified": False, "command": "filterformer compare"}))) == \
        "commit `aaaaaaa`, command `filterformer compare`"
    assert provenance_text(comparison(_results(provenance={
        "commit": "b" * 40, "modified": True, "command": None}))) == \
        "commit `bbbbbbb` + local changes, command unknown"
    results = comparison(_results())
    assert method_text(results, "softmax") == "softmax"
    assert method_text(results, "gfsa-even") == "gfsa-even (gfsa; model.attention_layers=[1, 3, 5])"


def test_the_budget_counts_one_epoch_or_step_in_the_singular():
    for budget, expected in (({"max_steps": None, "epochs": 1}, "1 epoch,"),
                             ({"max_steps": None, "epochs": 3}, "3 epochs,"),
                             ({"max_steps": 1}, "1 step,"), ({"max_steps": 40}, "40 steps,")):
        results = _results()
        results["budget"].update(budget)
        assert setup_lines(comparison(results))[3].startswith(f"budget: {expected} batch size")


def test_the_training_end_counts_runs_best_at_their_last_step_and_those_patience_stopped():
    results = _results()
    steps = random.randint(50, 200)
    ends = [random.choice(("last", "earlier", "stopped")) for _ in results["runs"]]
    for run, end in zip(results["runs"], ends, strict=True):
        taken = steps // 2 if end == "stopped" else steps
        run.update(steps=taken, best_step=taken if end == "last" else taken - 10,
                   stopped_early=end == "stopped")
    # A diverged run says nothing of its length: it is not counted.
    results["runs"].append({**results["runs"][0], "diverged": {"step": 3}, "best_step": 3})
    text = training_end_text(comparison(results))
    at_end, stopped = ends.count("last"), ends.count("stopped")
    assert text.startswith(f"training length: {at_end} of {len(ends)} runs had their best "
                           "validation at their last step")
    assert (f"; {stopped} stopped early" in text) is (stopped > 0)
    assert text in setup_lines(comparison(results))


def test_untrained_runs_of_one_step_have_no_training_length_line():
    results = _results()
    for run in results["runs"]:
        run.update(steps=1, best_step=1)
    assert training_end_text(comparison(results)) is None
    assert len(setup_lines(comparison(results))) == 5
