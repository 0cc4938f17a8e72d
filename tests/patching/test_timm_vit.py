"""Patching timm ViT and DeiT: the original weights shared, an explicit reference, undo."""

import copy
import io

import pytest
import timm
import torch
from torch import nn

from filterformer import patch, patched_parameters, unpatch
from filterformer.attention import GraphFilterAttention, SoftmaxAttention
from filterformer.optim import no_weight_decay

from .helpers import images, randomise_patch, timm_model

NAMES = ("deit_tiny_patch16_224", "deit_tiny_distilled_patch16_224")


class ExplicitFilterAttention(nn.Module):
    """timm's attention recomputed with the explicit ``Ā``, ``H̃`` of METHODS.md §1 and
    NeuTRENO's ``+ λ(V⁰ − V)`` (§2): the reference."""

    def __init__(self, attn, layer, coefficients, K, lam, shared):
        super().__init__()
        self.qkv, self.proj, self.heads = attn.qkv, attn.proj, attn.num_heads
        self.layer, self.coefficients, self.K, self.lam, self.shared = (
            layer, coefficients, K, lam, shared
        )

    def forward(self, x, attn_mask=None, is_causal=False):
        batch, length, dim = x.shape
        head_dim = dim // self.heads
        qkv = self.qkv(x).reshape(batch, length, 3, self.heads, head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-1, -2) * head_dim**-0.5).softmax(dim=-1)
        filt = attn
        if self.coefficients is not None:
            w0, w1, wK = (c.view(1, -1, 1, 1) for c in self.coefficients)
            eye = torch.eye(length, dtype=x.dtype)
            filt = w0 * eye + w1 * attn + wK * (attn + (self.K - 1) * (attn @ attn - attn))
        out = filt @ v
        if self.layer == 0:
            self.shared["first_values"] = v
        elif self.lam:
            out = out + self.lam * (self.shared["first_values"] - v)
        return self.proj(out.transpose(1, 2).reshape(batch, length, dim))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("method", "options"),
    [("gfsa", {"K": 3}), ("neutreno", {"neutreno_lambda": 0.0}),
     ("gfsa+neutreno", {"neutreno_lambda": 0.0}),
     ("fusion", {"fusion": "concat"})],
)
def test_patched_model_equals_original_at_init(name, method, options):
    model = timm_model(name)
    x = images()
    before = model(x)
    patch(model, method, **options)
    torch.testing.assert_close(model(x), before, rtol=0, atol=1e-5)


def explicit_reference(reference: nn.Module, model: nn.Module, method: str, options: dict):
    """``reference`` (an unpatched copy of ``model``) with :class:`ExplicitFilterAttention` in
    every block, using the coefficients of ``model`` patched with ``method`` and ``options``."""
    shared = {}
    for index, (block, patched) in enumerate(zip(reference.blocks, model.blocks, strict=True)):
        attn = patched.attn
        selected = options.get("layers") is None or index in options["layers"]
        # Which layers filter is the test's options' to say; a skipped one has no coefficients.
        coefficients = (attn.w0, attn.w1, attn.wK) if "gfsa" in method and selected else None
        lam = options.get("neutreno_lambda", 0.0) if selected else 0.0
        block.attn = ExplicitFilterAttention(
            block.attn, index, coefficients, options["K"], lam, shared
        )
    return reference


#: Patches checked against :func:`explicit_reference`.
REFERENCE_CASES = [
    ("gfsa", {"K": 4}), ("gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.6, "layers": [1, 2]}),
    ("gfsa", {"K": 2, "layers": [0, 2]}),
]


@pytest.mark.parametrize(("method", "options"), REFERENCE_CASES)
def test_filtered_model_equals_explicit_reference(method, options):
    model = timm_model(dtype=torch.float64)
    reference = copy.deepcopy(model)
    x = images(torch.float64)
    before = model(x)
    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    after = model(x)
    assert (after - before).abs().max() > 1e-3
    expected = explicit_reference(reference, model, method, options)(x)
    torch.testing.assert_close(after, expected, rtol=1e-10, atol=1e-10)


def test_patch_keeps_the_original_weights_and_names():
    model = timm_model()
    originals = [block.attn for block in model.blocks]
    names = set(model.state_dict())
    patch(model, "gfsa+neutreno", layers=[2])
    attns = [block.attn for block in model.blocks]
    # Layer 0 provides V⁰; layer 1 is left as it is; layer 2 filters.
    assert type(attns[0]) is SoftmaxAttention and attns[1] is originals[1]
    assert type(attns[2]) is GraphFilterAttention
    for new, old in zip(attns, originals, strict=True):
        assert new.qkv is old.qkv and new.proj is old.proj
    added = {name for name, _ in patched_parameters(model)}
    assert added == {f"blocks.2.attn.{w}" for w in ("w0", "w1", "wK")}
    assert set(model.state_dict()) == names | added
    assert added <= no_weight_decay(model)


def test_unpatch_restores_modules_and_keeps_what_the_weights_learned():
    model = timm_model()
    originals = [block.attn for block in model.blocks]
    x = images()
    before = model(x)
    patch(model, "gfsa", K=3)
    randomise_patch(patched_parameters(model))
    assert not torch.allclose(model(x), before)
    unpatch(model)
    assert [block.attn for block in model.blocks] == originals
    assert torch.equal(model(x), before)
    assert patched_parameters(model) == []

    patch(model, "gfsa").train()
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    model(x).square().mean().backward()
    optimiser.step()
    tuned = model.blocks[0].attn.qkv.weight.detach().clone()
    unpatch(model)
    assert torch.equal(model.blocks[0].attn.qkv.weight, tuned)


def test_patch_survives_a_round_trip_through_state_dict():
    model = patch(timm_model(), "gfsa", K=3)
    randomise_patch(patched_parameters(model))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = patch(timm_model(), "gfsa", K=3)
    fresh.load_state_dict(torch.load(buffer), strict=True)
    x = images()
    torch.testing.assert_close(fresh(x), model(x))


def test_unsupported_timm_models_raise_clear_errors():
    with pytest.raises(ValueError, match=r"uses \['qk_norm'\].*without qk_norm"):
        patch(timm_model("vit_tiny_patch16_224", qk_norm=True), "gfsa")
    with pytest.raises(ValueError, match="timm VisionTransformer"):
        patch(timm.layers.Mlp(8), "gfsa")
    model = patch(timm_model(), "neutreno")
    with pytest.raises(ValueError, match="non-causal"):
        model.forward_features(images(), is_causal=True)
    model = timm_model()
    model.set_grad_checkpointing(True)
    with pytest.raises(ValueError, match="gradient checkpointing"):
        patch(model, "fusion")
