"""Layer fusion patched into pretrained encoders: the fused layers feed the model's own head."""

import copy

import pytest
import torch

from filterformer import patch, patched_parameters, unpatch
from filterformer.nn import LayerFusion
from filterformer.optim import no_weight_decay

from .helpers import hf_inputs, hf_model, images, randomise_patch, timm_model


def _layer_outputs(model, inputs):
    """Every layer's output ``H_1..H_L`` of an unpatched model."""
    return model(**inputs, output_hidden_states=True).hidden_states[1:]


@pytest.mark.parametrize("kind", ["bert", "roberta", "albert", "vit"])
def test_concat_fusion_leaves_the_model_unchanged_at_init(kind):
    model = hf_model(kind, head=True)
    inputs = hf_inputs(kind)
    before = model(**inputs).logits
    patch(model, "fusion", fusion="concat")
    torch.testing.assert_close(model(**inputs).logits, before, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", ["gate", "max", "concat"])
def test_bert_head_sees_the_fused_layers(mode):
    model = hf_model("bert", head=True, dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs("bert")
    patch(model, "fusion", fusion=mode)
    randomise_patch(patched_parameters(model))
    fusion = model.filterformer_fusion
    assert isinstance(fusion, LayerFusion) and fusion.mode == mode and fusion.num_layers == 2
    fused = fusion(_layer_outputs(unpatched.bert, inputs))
    expected = unpatched.classifier(unpatched.bert.pooler(fused))
    torch.testing.assert_close(model(**inputs).logits, expected)


def test_albert_fuses_the_calls_of_its_shared_layer():
    model = hf_model("albert", dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs("albert")
    patch(model, "fusion", fusion="gate")
    randomise_patch(patched_parameters(model))
    layers = _layer_outputs(unpatched, inputs)
    assert len(layers) == model.config.num_hidden_layers == 3
    expected = model.filterformer_fusion(layers)
    torch.testing.assert_close(model(**inputs).last_hidden_state, expected)


def test_vit_fuses_before_its_final_norm():
    model = hf_model("vit", head=True, dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    inputs = hf_inputs("vit", torch.float64)
    patch(model, "fusion", fusion="max")
    fused = model.filterformer_fusion(_layer_outputs(unpatched.vit, inputs))
    expected = unpatched.classifier(unpatched.vit.layernorm(fused)[:, 0])
    torch.testing.assert_close(model(**inputs).logits, expected)


def test_timm_fuses_blocks_before_the_final_norm():
    model = timm_model(dtype=torch.float64)
    unpatched = copy.deepcopy(model)
    patch(model, "fusion", fusion="gate")
    randomise_patch(patched_parameters(model))
    x = images(torch.float64)
    tokens = unpatched.norm_pre(unpatched._pos_embed(unpatched.patch_embed(x)))
    outputs = []
    for block in unpatched.blocks:
        tokens = block(tokens)
        outputs.append(tokens)
    fused = model.filterformer_fusion(outputs)
    expected = unpatched.forward_head(unpatched.norm(fused))
    torch.testing.assert_close(model(x), expected)


def test_fusion_parameters_train_undecayed_and_unpatch_removes_them():
    model = hf_model("bert", head=True)
    inputs = hf_inputs("bert")
    before = model(**inputs).logits
    patch(model, "fusion", fusion="gate")
    names = {name for name, _ in patched_parameters(model)}
    assert names == {"filterformer_fusion.gate.weight", "filterformer_fusion.gate.bias"}
    assert names <= no_weight_decay(model)
    model(**inputs, labels=torch.tensor([1, 2])).loss.backward()
    assert all(param.grad.abs().sum() > 0 for _, param in patched_parameters(model))
    unpatch(model)
    assert not hasattr(model, "filterformer_fusion")
    assert torch.equal(model(**inputs).logits, before)
