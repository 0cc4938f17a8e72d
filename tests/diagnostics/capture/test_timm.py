import pytest
import torch

from filterformer.diagnostics import capture, model_kind

from .helpers import assert_hidden_metric_by_hand

timm = pytest.importorskip("timm")


def test_vit_hidden_states_and_attention_by_hand():
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2,
        num_classes=0,
    ).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        captured = capture(model, {"images": images}, attentions=True)
        x = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(images))))
        expected = [x]
        for block in model.blocks:
            expected.append(block(expected[-1]))
        attn = model.blocks[0].attn
        q, k, _ = attn.qkv(model.blocks[0].norm1(x)).view(2, 17, 3, 3, 64).permute(2, 0, 3, 1, 4)
        expected_attention = ((q @ k.transpose(-1, -2)) * attn.scale).softmax(-1)
    assert model_kind(model) == "timm"
    assert attn.fused_attn == timm.layers.use_fused_attn()  # restored after the pass
    assert captured.num_layers == 2 and captured.hidden_states[0].shape == (2, 17, 192)
    for got, want in zip(captured.hidden_states, expected, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(captured.attentions[0], expected_attention)
    assert captured.mask.all()
    assert_hidden_metric_by_hand(captured, captured.mask)
    assert len(captured.norm_stds) == 2


def test_images_must_be_found():
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=16,
                              patch_size=8, depth=1)
    with pytest.raises(ValueError, match="images"):
        capture(model, {"pixels": torch.randn(1, 3, 16, 16)})


def test_patched_vit_records_the_gfsa_filter():
    from filterformer.functional import gfsa_filter
    from filterformer.patching import patch

    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=16,
                              patch_size=8, depth=3, num_classes=0).eval()
    patch(model, "gfsa", layers=[1, 2], K=3)
    for block in model.blocks[1:]:
        with torch.no_grad():
            block.attn.wK.normal_()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        captured = capture(model, images, attentions=True)
        expected = model.forward_intermediates(images, intermediates_only=True, output_fmt="NLC",
                                               return_prefix_tokens=True)
    assert len(captured.attentions) == 3
    torch.testing.assert_close(captured.filters[0], captured.attentions[0])  # timm's own block
    for index in (1, 2):
        attn = model.blocks[index].attn
        filt = gfsa_filter(captured.attentions[index], attn.w0, attn.w1, attn.wK, K=3)
        torch.testing.assert_close(captured.filters[index], filt)
        spatial, prefix = expected[index]
        torch.testing.assert_close(captured.hidden_states[index + 1],
                                   torch.cat([prefix, spatial], dim=1))
