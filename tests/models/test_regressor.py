"""SequenceRegressor: one output, trained on the standardised target, predicting in its units."""

from __future__ import annotations

import pytest
import torch

from filterformer.models import SequenceRegressor, TransformerConfig

VOCAB = 20


def _config(attention: str = "softmax") -> TransformerConfig:
    return TransformerConfig(vocab_size=VOCAB, dim=16, depth=2, num_heads=2, mlp_ratio=2.0,
                             max_len=12, attention=attention)


def _batch(batch_size: int = 6) -> dict[str, torch.Tensor]:
    ids = torch.randint(1, VOCAB, (batch_size, 12))
    mask = torch.ones(batch_size, 12, dtype=torch.bool)
    mask[0, 7:] = False
    return {"input_ids": ids, "padding_mask": mask}


def _scale() -> tuple[float, float]:
    return float(torch.randn(()) * 3), float(torch.rand(()) * 4 + 0.2)


def test_the_loss_is_the_mean_squared_error_in_standard_units():
    mean, std = _scale()
    model = SequenceRegressor(_config(), target_mean=mean, target_std=std)
    batch = _batch()
    labels = torch.randn(6) * std + mean
    out = model(**batch, labels=labels)
    assert out.predictions.shape == (6,) and model.head.out_features == 1
    expected = (((out.predictions - labels) / std) ** 2).mean()
    torch.testing.assert_close(out.mse, expected, rtol=1e-5, atol=1e-6)
    assert torch.equal(out.loss, out.mse) and out.aux_loss is None
    assert model(**batch).loss is None


def test_the_target_scale_moves_predictions_and_not_the_loss():
    (mean, std), (other_mean, other_std) = _scale(), _scale()
    model = SequenceRegressor(_config(), target_mean=mean, target_std=std).eval()
    moved = SequenceRegressor(_config(), target_mean=other_mean, target_std=other_std).eval()
    weights = {k: v for k, v in model.state_dict().items() if not k.startswith("target_")}
    moved.load_state_dict(weights, strict=False)
    batch = _batch()
    z = (torch.randn(6) * 1.5).clamp(-3, 3)
    first = model(**batch, labels=z * std + mean)
    second = moved(**batch, labels=z * other_std + other_mean)
    torch.testing.assert_close((first.predictions - mean) / std,
                               (second.predictions - other_mean) / other_std,
                               rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(first.mse, second.mse, rtol=1e-4, atol=1e-6)


def test_the_scale_is_saved_with_the_weights():
    mean, std = _scale()
    model = SequenceRegressor(_config(), target_mean=mean, target_std=std).eval()
    fresh = SequenceRegressor(_config()).eval()
    fresh.load_state_dict(model.state_dict())
    batch = _batch()
    assert torch.equal(fresh(**batch).predictions, model(**batch).predictions)
    assert fresh.target_mean.item() == pytest.approx(mean)
    assert fresh.target_std.item() == pytest.approx(std)


def test_an_auxiliary_loss_is_added_to_the_mse():
    model = SequenceRegressor(_config("agf"))
    out = model(**_batch(), labels=torch.randn(6))
    assert out.aux_loss is not None and out.aux_loss.item() > 0
    torch.testing.assert_close(out.loss, out.mse + out.aux_loss)


@pytest.mark.parametrize("std", [0.0, -1.0, float("nan"), float("inf")])
def test_a_scale_that_is_not_positive_and_finite_is_rejected(std):
    with pytest.raises(ValueError, match="target_std positive and finite"):
        SequenceRegressor(_config(), target_std=std)
