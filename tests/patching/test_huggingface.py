"""Patching Hugging Face models: unchanged at init, undone exactly, saved and loaded, and refused
clearly where unsupported."""

import io

import pytest
import torch
import transformers

from filterformer import patch, patched_parameters, unpatch
from filterformer.optim import no_weight_decay, parameter_groups
from filterformer.patching import huggingface

from .helpers import (
    DECODERS,
    ENCODERS,
    hf_inputs,
    hf_model,
    hidden,
    randomise_patch,
    real_tokens,
)

ALL_KINDS = ENCODERS + DECODERS
#: NeuTRENO's λ·(V⁰ − V) acts from the start: only λ = 0 leaves a model unchanged at init.
AT_INIT = {
    "gfsa": {"K": 3},
    "neutreno": {"neutreno_lambda": 0.0},
    "gfsa+neutreno": {"K": 4, "neutreno_lambda": 0.0},
}


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("method", list(AT_INIT))
def test_patched_model_equals_original_at_init(kind, method):
    model = hf_model(kind)
    inputs = hf_inputs(kind)
    real = real_tokens(kind, inputs)
    before = hidden(model, inputs)
    patch(model, method, **AT_INIT[method])
    after = hidden(model, inputs)
    torch.testing.assert_close(after[real], before[real], rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["bert", "albert", "gpt2", "llama"])
def test_neutreno_changes_every_layer_after_the_first(kind):
    model = hf_model(kind, dtype=torch.float64)
    inputs = hf_inputs(kind, torch.float64)
    real = real_tokens(kind, inputs)
    before = model(**inputs, output_hidden_states=True).hidden_states
    patch(model, "neutreno", neutreno_lambda=0.6)
    after = model(**inputs, output_hidden_states=True).hidden_states
    # hidden_states[1] is layer 0's output: V⁰ − V⁰ = 0 there.
    torch.testing.assert_close(after[1][real], before[1][real])
    assert (after[2] - before[2])[real].abs().max() > 1e-3


@pytest.mark.parametrize("kind", ["bert", "vit", "llama"])
def test_unpatch_restores_outputs_exactly(kind):
    model = hf_model(kind)
    inputs = hf_inputs(kind)
    implementation = model.config._attn_implementation
    names = set(model.state_dict())
    before = hidden(model, inputs)
    patch(model, "gfsa+neutreno", K=3, neutreno_lambda=0.5)
    randomise_patch(patched_parameters(model))
    assert not torch.equal(hidden(model, inputs), before)
    assert unpatch(model) is model
    assert torch.equal(hidden(model, inputs), before)
    assert model.config._attn_implementation == implementation
    assert set(model.state_dict()) == names
    assert patched_parameters(model) == []


def test_patch_survives_a_round_trip_through_state_dict():
    model = hf_model("llama", head=True)
    patch(model, "gfsa", K=3)
    randomise_patch(patched_parameters(model))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)

    fresh = patch(hf_model("llama", head=True), "gfsa", K=3)  # other random weights
    fresh.load_state_dict(torch.load(buffer), strict=True)
    for (name, loaded), (_, saved) in zip(
        patched_parameters(fresh), patched_parameters(model), strict=True
    ):
        assert torch.equal(loaded, saved), name
    inputs = hf_inputs("llama")
    torch.testing.assert_close(fresh(**inputs).logits, model(**inputs).logits)


def test_new_parameters_are_registered_listed_and_never_decayed():
    model = hf_model("bert", head=True)
    patch(model, "gfsa", learn=("w1", "wK"))
    names = [name for name, _ in patched_parameters(model)]
    prefix = "bert.encoder.layer.{}.attention.self.filterformer.{}"
    assert names == [prefix.format(i, w) for i in (0, 1) for w in ("w1", "wK")]
    # w0 is not learned: a buffer, still saved with the model.
    assert "bert.encoder.layer.0.attention.self.filterformer.w0" in model.state_dict()
    assert set(names) <= no_weight_decay(model)
    decayed = {id(p) for p in parameter_groups(model, 0.1)[0]["params"]}
    assert not decayed & {id(p) for _, p in patched_parameters(model)}

    optimiser = torch.optim.AdamW(model.parameters(), lr=0.1)
    inputs = hf_inputs("bert")
    model(**inputs, labels=torch.tensor([0, 2])).loss.backward()
    optimiser.step()
    moved = [name for name, param in patched_parameters(model) if not torch.all(param == 1)]
    assert any(name.endswith("wK") for name in moved)


def test_layers_selects_which_layers_get_coefficients():
    model = hf_model("gpt2")
    patch(model, "gfsa", layers=[1])
    assert [name for name, _ in patched_parameters(model)] == [
        f"h.1.attn.filterformer.{w}" for w in ("w0", "w1", "wK")
    ]
    with pytest.raises(ValueError, match=r"layers \[2\] do not exist.*0\.\.1"):
        patch(hf_model("gpt2"), "gfsa", layers=[0, 2])


def test_unsupported_models_raise_clear_errors(monkeypatch):
    t5 = transformers.T5Model(transformers.T5Config(
        vocab_size=20, d_model=16, d_kv=4, d_ff=16, num_layers=1, num_heads=4
    ))
    with pytest.raises(ValueError, match="cross-attention; patching supports self-attention"):
        patch(t5, "gfsa")
    with pytest.raises(ValueError, match="fusion is for encoders"):
        patch(hf_model("gpt2"), "fusion")
    monkeypatch.setattr(huggingface, "transformers_version", lambda: "4.50.0")
    floor = huggingface.MIN_TRANSFORMERS_VERSION
    with pytest.raises(ImportError, match=rf"transformers>={floor}.*found 4\.50\.0"):
        patch(hf_model("bert"), "gfsa")


def test_gradient_checkpointing_is_refused_where_layers_share_state():
    model = hf_model("gpt2", head=True)
    getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    with pytest.raises(ValueError, match="gradient checkpointing"):
        patch(model, "neutreno")
    patch(model, "gfsa").train()  # a layer-local method recomputes fine
    ids = torch.randint(3, 50, (2, 6))
    model(ids, labels=ids).loss.backward()
    assert all(p.grad is not None for _, p in patched_parameters(model))

