"""A saved model without a part its class builds (BERT's pooler) comes back without it."""

import json

import pytest
import torch
import transformers

from filterformer import from_pretrained, patch, patched_parameters, save_pretrained
from filterformer.patching.saved_patch import PATCH_FILE
from filterformer.training.pretrained import PretrainedModelConfig, build_pretrained

from .helpers import hf_config, hf_inputs, hf_model, randomise_patch


def assert_same_outputs(loaded, model, inputs):
    with torch.no_grad():
        ours, theirs = loaded(**inputs), model(**inputs)
    torch.testing.assert_close(ours.last_hidden_state, theirs.last_hidden_state, rtol=0, atol=0)
    assert ours.pooler_output is None and theirs.pooler_output is None


def test_the_backbone_of_a_pretrained_run_comes_back_without_its_pooler(tmp_path):
    source = tmp_path / "bert"
    hf_model("bert").save_pretrained(source)
    config = PretrainedModelConfig(pretrained=str(source), backend="transformers",
                                   patch="gfsa+neutreno", patch_options={})
    backbone = build_pretrained(config).backbone.eval()  # as `pretrained:` fine-tuning builds it
    assert backbone.pooler is None
    randomise_patch(patched_parameters(backbone))
    save_pretrained(backbone, tmp_path / "saved")
    loaded = from_pretrained(tmp_path / "saved")
    assert loaded.pooler is None
    assert json.loads((tmp_path / "saved" / PATCH_FILE).read_text())["without_modules"] == [
        "pooler"
    ]
    assert_same_outputs(loaded, backbone, hf_inputs("bert"))


def test_a_model_built_without_its_pooling_layer_comes_back(tmp_path):
    model = transformers.BertModel(hf_config("bert"), add_pooling_layer=False).eval()
    patch(model, "gfsa")
    randomise_patch(patched_parameters(model))
    model.save_pretrained(tmp_path)  # the model's own save writes the patch too
    assert_same_outputs(from_pretrained(tmp_path), model, hf_inputs("bert"))


@pytest.mark.parametrize(("value", "message"), [
    (["encoder.nothing"], r"without_modules names 'encoder\.nothing', which is not a submodule"),
    (["pooler.dense.weight"], r"names 'pooler\.dense\.weight', which is not a submodule"),
    ("pooler", r"without_modules must be a list of submodule names"),
])
def test_a_without_modules_entry_that_names_no_submodule_is_refused(tmp_path, value, message):
    model = patch(hf_model("bert"), "gfsa")
    save_pretrained(model, tmp_path)
    path = tmp_path / PATCH_FILE
    data = json.loads(path.read_text())
    assert "without_modules" not in data  # nothing to say for a model with every part
    path.write_text(json.dumps({**data, "without_modules": value}))
    with pytest.raises(ValueError, match=message) as raised:
        from_pretrained(tmp_path)
    assert PATCH_FILE in str(raised.value)
