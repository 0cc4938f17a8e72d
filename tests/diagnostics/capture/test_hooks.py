import pytest
import torch
from torch import nn

from filterformer.diagnostics import capture, diagnose, model_kind

from .helpers import assert_hidden_metric_by_hand, token_batch


class TinyEncoder(nn.Module):
    """A model of no known kind: PyTorch's own encoder layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True) for _ in range(3)
        )
        self.unused = nn.Linear(16, 16)  # a submodule the forward pass never runs

    def forward(self, input_ids: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=~padding_mask)
        return x


LAYERS = ["layers.0", "layers.1", "layers.2"]


def test_hooks_on_named_layers_match_a_manual_forward():
    model = TinyEncoder().eval()
    tokens = token_batch()
    mask = tokens["attention_mask"].bool()
    batch = {"input_ids": tokens["input_ids"], "padding_mask": mask}
    with pytest.raises(ValueError, match="layers="):
        model_kind(model)
    with torch.no_grad():
        captured = capture(model, batch, layers=LAYERS)
        expected = [model.embed(tokens["input_ids"])]
        for layer in model.layers:
            expected.append(layer(expected[-1], src_key_padding_mask=~mask))
    for got, want in zip(captured.hidden_states, expected, strict=True):
        # PyTorch's fast path may leave padded positions as its nested tensors return them.
        torch.testing.assert_close(got[mask], want[mask])
    assert len(captured.norm_stds) == 3 and all(len(s) == 2 for s in captured.norm_stds)
    assert_hidden_metric_by_hand(captured, mask)
    report = diagnose(model, [batch], layers=LAYERS)
    assert report.model_kind == "hooks" and report.frequency_response is None


def test_bad_layer_names_and_attention_requests_raise():
    model = TinyEncoder()
    batch = {"input_ids": torch.randint(1, 50, (2, 4)), "padding_mask": torch.ones(2, 4).bool()}
    with pytest.raises(ValueError, match="not submodules"):
        capture(model, batch, layers=["layers.7"])
    with pytest.raises(ValueError, match="attentions"):
        capture(model, batch, layers=["layers.0"], attentions=True)
    with pytest.raises(ValueError, match="exactly once"):
        capture(model, batch, layers=["layers.0", "unused"])
