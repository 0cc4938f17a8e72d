"""What a patch keeps on the model: its own parameters, and a state that copies with it."""

import copy

import torch

from filterformer import patch, patched_parameters, unpatch

from .helpers import hf_inputs, hf_model, hidden, randomise_patch, timm_model


def test_an_unpatched_model_has_no_patched_parameters():
    model = hf_model("bert")
    assert patched_parameters(model) == []
    patch(model, "gfsa", layers=[0])
    assert [name for name, _ in patched_parameters(model)] == [
        f"encoder.layer.0.attention.self.filterformer.{w}" for w in ("w0", "w1", "wK")
    ]
    unpatch(model)
    assert patched_parameters(model) == []


def test_a_deep_copy_of_a_patched_model_is_independent():
    model = patch(hf_model("bert"), "gfsa")
    randomise_patch(patched_parameters(model))
    inputs = hf_inputs("bert")
    patched_out = hidden(model, inputs)
    twin = copy.deepcopy(model)
    torch.testing.assert_close(hidden(twin, inputs), patched_out)
    unpatch(twin)
    assert patched_parameters(model) and torch.equal(hidden(model, inputs), patched_out)
    assert not torch.allclose(hidden(twin, inputs), patched_out)


def test_patched_parameters_follow_the_model_to_another_dtype():
    model = patch(timm_model(), "gfsa")
    model.double()
    assert all(param.dtype == torch.float64 for _, param in patched_parameters(model))
    assert len(patched_parameters(model)) == 3 * len(model.blocks)
