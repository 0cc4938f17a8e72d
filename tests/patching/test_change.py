"""``patch_change``: what a patch changes in the real all-MiniLM-L6-v2 before training, against
NeuTRENO (METHODS.md §2) written out layer by layer on the model's own weights."""

import copy
import math

import pytest
import torch
from torch import Tensor, nn

from filterformer import patch
from filterformer.patching import patch_change

from .helpers import hf_inputs, hf_model, load_minilm, sentences


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


def _heads(x: Tensor, num_heads: int) -> Tensor:
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def neutreno_bert(model: nn.Module, batch: dict[str, Tensor], lam: float) -> Tensor:
    """BERT's final hidden states ``(B, N, D)`` with ``λ·(V⁰ − V)`` added to every attention
    output after the first layer's, computed from the weights (eval mode: no dropout)."""
    heads = model.config.num_attention_heads
    h = model.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])
    padding = ~batch["attention_mask"].bool()[:, None, None, :]
    first_values = None
    for layer in model.encoder.layer:
        attention = layer.attention.self
        q, k, v = (_heads(lin(h), heads) for lin in (attention.query, attention.key,
                                                      attention.value))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        out = scores.masked_fill(padding, -math.inf).softmax(-1) @ v
        if first_values is None:
            first_values = v
        else:
            out = out + lam * (first_values - v)
        out = out.transpose(1, 2).flatten(2)
        dense = layer.attention.output
        h = dense.LayerNorm(dense.dense(out) + h)
        inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h))
        h = layer.output.LayerNorm(layer.output.dense(inner) + h)
    return h


def test_the_change_of_a_neutreno_patch_is_the_written_out_change(minilm):
    pretrained, tokenizer = minilm
    batch, _ = sentences(tokenizer, 8)
    assert (batch["attention_mask"] == 0).any()  # padding is left out
    lam = 0.1 + 0.8 * torch.rand(()).item()
    with torch.no_grad():
        before = neutreno_bert(pretrained, batch, 0.0)
        after = neutreno_bert(pretrained, batch, lam)
    real = batch["attention_mask"].bool()
    expected = (after - before)[real].norm() / before[real].norm()
    weights = real.unsqueeze(-1).float()
    pooled_after, pooled_before = ((x * weights).sum(1) / weights.sum(1) for x in (after, before))
    expected_cosine = nn.functional.cosine_similarity(pooled_after, pooled_before, dim=-1).mean()

    model = patch(copy.deepcopy(pretrained), "neutreno", neutreno_lambda=lam)
    change = patch_change(pretrained, model, batch)

    assert change.tokens == int(real.sum())
    assert change.relative_change == pytest.approx(expected.item(), rel=1e-4)
    assert change.pooled_cosine == pytest.approx(expected_cosine.item(), abs=1e-5)
    assert change.relative_change > 0.1  # NeuTRENO acts from the start on a pretrained model


def test_gfsa_reports_no_change_and_modes_are_kept(minilm):
    pretrained, tokenizer = minilm
    batch, _ = sentences(tokenizer, 6)
    model = patch(copy.deepcopy(pretrained), "gfsa", K=3).train()
    model.encoder.layer[2].eval()
    modes = [m.training for m in model.modules()]
    change = patch_change(pretrained, model, batch)
    assert change.relative_change <= 1e-5
    assert change.pooled_cosine == pytest.approx(1.0, abs=1e-6)
    assert [m.training for m in model.modules()] == modes
    assert not pretrained.training


def test_what_cannot_be_measured_is_refused():
    model = hf_model("bert")
    inputs = hf_inputs("bert")
    with pytest.raises(ValueError, match=r"one model: patch\(\) changes a model in place"):
        patch_change(model, model, inputs)
    with pytest.raises(ValueError, match="must be its keyword arguments"):
        patch_change(model, copy.deepcopy(model), inputs["input_ids"])
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.encoder.layer[0].output.dense.bias.fill_(math.nan)
    with pytest.raises(ValueError, match="patched model's final hidden states are not finite"):
        patch_change(model, broken, inputs)
