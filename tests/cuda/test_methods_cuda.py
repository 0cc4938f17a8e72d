"""Every attention method in a tiny Transformer, float32 on CUDA against its float64 copy on the
CPU: hidden states at real tokens, the auxiliary loss and every parameter's gradient, with
padding masks and filters moved away from their identity start."""

import pytest

from filterformer.attention import attention_names, get_attention_class
from filterformer.methods import METHOD_PRESETS
from filterformer.models import Transformer

from ..models.helpers import config
from .batches import padding_mask, token_ids
from .methods import CAUSAL_METHODS, METHODS, NOISY_METHODS
from .parity import assert_matches_float64, fix_gumbel_noise, perturb_filters, weighted_sum

pytestmark = pytest.mark.cuda


def _reference(method: str, *, causal: bool, train: bool) -> Transformer:
    model = Transformer(config(causal=causal, **METHODS[method]))
    perturb_filters(model)
    return model.double().train(train)


def _outputs(model, inputs):
    out = model(inputs["input_ids"], padding_mask=inputs["padding_mask"])
    loss = weighted_sum(out.last_hidden_state, inputs["padding_mask"])
    result = {"hidden": out.last_hidden_state}
    if out.aux_loss is not None:
        result["aux_loss"] = out.aux_loss
        loss = loss + out.aux_loss
    return {**result, "loss": loss}


def _check(method, *, causal, train, device, monkeypatch):
    if train and method in NOISY_METHODS:
        fix_gumbel_noise(monkeypatch)
    mask = padding_mask(left=causal)
    inputs = {"input_ids": token_ids(), "padding_mask": mask}
    reference = _reference(method, causal=causal, train=train)
    assert_matches_float64(reference, inputs, _outputs, device, real={"hidden": mask})


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("method", METHODS)
def test_bidirectional_method_matches_float64(method, train, cuda_device, monkeypatch):
    _check(method, causal=False, train=train, device=cuda_device, monkeypatch=monkeypatch)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("method", CAUSAL_METHODS)
def test_causal_method_matches_float64(method, train, cuda_device, monkeypatch):
    _check(method, causal=True, train=train, device=cuda_device, monkeypatch=monkeypatch)


def test_the_tier_runs_every_preset_and_registered_method():
    assert set(METHOD_PRESETS) <= set(METHODS)
    used = {changes.get("attention", "softmax") for changes in METHODS.values()}
    assert used == set(attention_names())
    for method in set(METHODS) - set(CAUSAL_METHODS):  # the others really are non-causal
        with pytest.raises(ValueError, match="non-causal"):
            Transformer(config(causal=True, **METHODS[method]))
    assert all(get_attention_class(METHODS[m].get("attention", "softmax")).supports_causal
               for m in CAUSAL_METHODS)
