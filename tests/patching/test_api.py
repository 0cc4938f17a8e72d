"""``patch`` / ``unpatch``: one entry point, clear refusals."""

import pytest
import torch

from filterformer import patch, unpatch

from .helpers import hf_model, timm_model


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
