"""``patch`` / ``unpatch``: one entry point, clear refusals."""

import pytest
import torch

from filterformer import patch, patched_parameters, unpatch

from .helpers import hf_inputs, hf_model, images, timm_model


def test_patch_returns_the_model_it_changed_in_place():
    model = timm_model()
    assert patch(model, "gfsa") is model
    assert unpatch(model) is model


def test_misuse_raises_clear_errors():
    with pytest.raises(ValueError, match="supported: Hugging Face transformers models"):
        patch(torch.nn.Linear(3, 3), "gfsa")
    with pytest.raises(ValueError, match=r"method must be one of"):
        patch(hf_model("bert"), "agf")
    model = patch(hf_model("bert"), "gfsa")
    with pytest.raises(ValueError, match="already patched with 'gfsa'; call unpatch"):
        patch(model, "neutreno")
    with pytest.raises(ValueError, match="not patched"):
        unpatch(hf_model("bert"))


@pytest.mark.parametrize("kind", ["bert", "timm"])
@pytest.mark.parametrize(("method", "options"),
                         [("gfsa", {}), ("gfsa+neutreno+fusion", {"neutreno_learnable": True})])
def test_a_model_on_the_meta_device_is_refused_and_patches_once_materialised(
    kind, method, options
):
    build = (lambda: timm_model()) if kind == "timm" else (lambda: hf_model("bert"))
    with torch.device("meta"):
        empty = build()
    with pytest.raises(ValueError, match=r"whose weights are on the meta device .*Materialise "
                                         r"the model first \(model\.to_empty"):
        patch(empty, method, **options)
    # What the message says to do: materialise, load the weights, then patch.
    real = build()
    empty.to_empty(device="cpu")
    with torch.no_grad():  # every tensor: BERT's position ids are buffers outside its state dict
        for ours, theirs in zip([*empty.parameters(), *empty.buffers()],
                                [*real.parameters(), *real.buffers()], strict=True):
            ours.copy_(theirs)
    patch(empty.eval(), method, **options)
    x = images() if kind == "timm" else hf_inputs("bert")
    with torch.no_grad():
        ours = empty(x) if kind == "timm" else empty(**x).last_hidden_state
        theirs = real(x) if kind == "timm" else real(**x).last_hidden_state
    # GFSA and fusion start as the model itself; NeuTRENO's λ = 0.6 acts from the start.
    if method == "gfsa":
        torch.testing.assert_close(ours, theirs)
    assert torch.isfinite(ours).all()
    patched = patch(build(), method, **options)
    for (name, value), (_, expected) in zip(patched_parameters(empty),
                                            patched_parameters(patched), strict=True):
        assert torch.equal(value, expected), name
