"""Each model goes to its family's adapter: patching, unpatching and capture call the adapter's
own methods, and a model of no family is refused naming what each family takes."""

import pytest
import torch

from filterformer import patch, unpatch
from filterformer.diagnostics import capture, model_kind
from filterformer.families import (
    FAMILIES,
    HUGGING_FACE,
    TIMM,
    HuggingFaceFamily,
    TimmFamily,
    family_named,
    family_of,
    patchable_family,
)
from filterformer.patching.state import get_patch_state

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")


def bert() -> torch.nn.Module:
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=24)
    return transformers.BertModel(config).eval()


def vit() -> torch.nn.Module:
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=16, patch_size=8,
                             depth=2, num_classes=0).eval()


def eva() -> torch.nn.Module:
    return timm.create_model("eva02_tiny_patch14_224", pretrained=False, img_size=28, depth=2,
                             num_classes=0).eval()


def recorded(monkeypatch, cls: type, name: str) -> list:
    """Record every call of ``cls.name`` (the model or state it is given), then make it."""
    calls = []
    original = getattr(cls, name)

    def record(self, target, *args, **kwargs):
        calls.append(target)
        return original(self, target, *args, **kwargs)

    monkeypatch.setattr(cls, name, record)
    return calls


def test_each_model_belongs_to_its_family():
    hf, vision, other_timm = bert(), vit(), eva()
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert (family_of(hf), family_of(vision), family_of(other_timm), family_of(plain)) == (
        HUGGING_FACE, TIMM, TIMM, None)
    assert patchable_family(hf) is HUGGING_FACE and patchable_family(vision) is TIMM
    assert HUGGING_FACE.layers(hf) == list(hf.encoder.layer)
    assert TIMM.layers(vision) == list(vision.blocks)
    assert [family_named(f.backend) for f in FAMILIES] == list(FAMILIES)
    with pytest.raises(ValueError, match=r"backend must be one of \('transformers', 'timm'\)"):
        family_named("onnx")


def test_a_model_no_family_patches_is_refused_naming_what_each_takes():
    for model in (eva(), torch.nn.Sequential(torch.nn.Linear(4, 4))):
        with pytest.raises(ValueError) as refusal:
            patch(model, "gfsa")
        message = str(refusal.value)
        assert message.startswith(f"cannot patch a {type(model).__name__}; supported: ")
        assert all(family.patchable in message for family in FAMILIES)


def test_patch_unpatch_and_capture_go_through_the_models_adapter(monkeypatch):
    calls = {(cls.__name__, name): recorded(monkeypatch, cls, name)
             for cls in (HuggingFaceFamily, TimmFamily) for name in ("patch", "unpatch", "capture")}
    hf, vision = bert(), vit()
    tokens = {"input_ids": torch.randint(1, 50, (2, 7)),
              "attention_mask": torch.ones(2, 7, dtype=torch.long)}
    images = torch.randn(2, 3, 16, 16)
    for model, batch, family in ((hf, tokens, HuggingFaceFamily), (vision, images, TimmFamily)):
        before = capture(model, batch, attentions=True)
        patch(model, "gfsa")
        state = get_patch_state(model)
        after = capture(model, batch, attentions=True)
        unpatch(model)
        name = family.__name__
        assert calls[(name, "patch")] == [model]
        assert calls[(name, "capture")] == [model, model]
        assert calls[(name, "unpatch")] == [state]
        assert model_kind(model) == family_of(model).name
        # GFSA starts as the layer's own attention: the adapter's capture sees the same states.
        for first, second in zip(before.hidden_states, after.hidden_states, strict=True):
            torch.testing.assert_close(first, second, atol=1e-5, rtol=1e-5)
