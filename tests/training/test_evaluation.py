"""Model selection: the validation metric decides, a tie goes to the lower validation loss."""

from __future__ import annotations

import pytest
import torch

from filterformer.training import Trainer, load_checkpoint
from filterformer.training.evaluation import is_better

from .helpers import majority_task, tiny_config


def _uniform(low: float, high: float) -> float:
    return float(torch.empty((), dtype=torch.float64).uniform_(low, high))


def test_the_metric_decides_and_a_tie_goes_to_the_lower_loss():
    accuracy, loss = _uniform(0.2, 0.8), _uniform(0.5, 2.0)
    best = {"accuracy": accuracy, "loss": loss}
    assert is_better("classification", best, None)
    assert is_better("classification", {"accuracy": accuracy + 0.01, "loss": loss + 1.0}, best)
    assert not is_better("classification", {"accuracy": accuracy - 0.01, "loss": loss - 0.4},
                         best)
    assert is_better("classification", {"accuracy": accuracy, "loss": loss - 0.01}, best)
    assert not is_better("classification", {"accuracy": accuracy, "loss": loss + 0.01}, best)
    assert not is_better("classification", dict(best), best)  # a full tie keeps the first
    assert not is_better("classification", {"accuracy": float("nan"), "loss": 0.0}, best)
    assert is_better("classification", best, {"accuracy": float("nan"), "loss": 0.0})


def test_perplexity_selects_the_lower_and_a_tie_goes_to_the_lower_loss():
    perplexity, loss = _uniform(2.0, 50.0), _uniform(0.5, 4.0)
    best = {"perplexity": perplexity, "loss": loss, "accuracy": 0.1}
    lm = "language_modeling"
    assert is_better(lm, {"perplexity": perplexity - 0.5, "loss": loss + 1.0, "accuracy": 0.0},
                     best)
    assert not is_better(lm, {"perplexity": perplexity + 0.5, "loss": loss - 1.0,
                              "accuracy": 0.9}, best)
    assert is_better(lm, {"perplexity": perplexity, "loss": loss - 1e-3, "accuracy": 0.0}, best)
    assert not is_better(lm, {"perplexity": perplexity, "loss": loss + 1e-3, "accuracy": 0.9},
                         best)


def _scripted_validation(monkeypatch, script: dict[int, dict[str, float]]) -> None:
    """Make every validation of a Trainer return ``script[step]`` (and a fixed test result)."""

    def evaluate(self, split):
        if split == "test":
            return {"loss": 1.0, "accuracy": 0.5}
        return dict(script[self.step])

    monkeypatch.setattr(Trainer, "_evaluate", evaluate)


def _script() -> dict[int, dict[str, float]]:
    """Validations at steps 6, 12, 18, 24: the top accuracy first at 12, tied at 18 with a lower
    loss, tied at 24 with a loss between the two."""
    top = _uniform(0.6, 0.9)
    low, high = sorted(_uniform(0.2, 1.5) for _ in range(2))
    return {
        6: {"loss": high + 0.5, "accuracy": top - 0.25},
        12: {"loss": high, "accuracy": top},
        18: {"loss": low, "accuracy": top},
        24: {"loss": (low + high) / 2, "accuracy": top},
    }


def test_a_tie_in_validation_accuracy_keeps_the_checkpoint_with_the_lower_loss(
        tmp_path, monkeypatch):
    script = _script()
    _scripted_validation(monkeypatch, script)
    # 96 items in batches of 16: 6 steps an epoch, a validation after each of 4 epochs.
    result = Trainer(tiny_config(tmp_path, epochs=4), task=majority_task()).fit()
    assert result.best_step == 18
    assert result.best_validation == script[18]
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert best["step"] == 18 and best["validation"] == script[18]


# Stopped before the tie at 18, and after it: the resumed run must then weigh 24 against the
# restored best's loss.
@pytest.mark.parametrize("stop", [14, 18, 20])
def test_a_resumed_run_breaks_the_tie_the_same_way(tmp_path, monkeypatch, stop):
    script = _script()
    _scripted_validation(monkeypatch, script)
    task = majority_task()
    part = Trainer(tiny_config(tmp_path, epochs=4, stop_after=stop), task=task).fit()
    assert not part.completed and part.best_step == (12 if stop < 18 else 18)
    result = Trainer(tiny_config(tmp_path, epochs=4), task=task, resume=True).fit()
    assert result.best_step == 18 and result.best_validation == script[18]
    assert load_checkpoint(tmp_path / "checkpoints" / "best.pt")["step"] == 18
