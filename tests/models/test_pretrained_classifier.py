"""A pretrained backbone with a head: tiny Hugging Face and timm models built from configs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from filterformer.data.images import patchify
from filterformer.models.pretrained_classifier import (
    TimmClassifier,
    TransformersClassifier,
    patches_to_images,
)
from filterformer.nn import masked_mean


def _bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    return BertModel(config, add_pooling_layer=False).eval()


def _vit() -> torch.nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=8, patch_size=2, in_chans=1, num_classes=0, embed_dim=16,
                             depth=2, num_heads=2).eval()


def test_images_are_rebuilt_from_the_task_patches():
    images = torch.rand(3, 8, 12)
    assert torch.equal(patches_to_images(patchify(images, 4), (8, 12), 4), images[:, None])


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_a_text_model_classifies_its_pooled_real_tokens(pooling):
    torch.manual_seed(0)
    model = TransformersClassifier(_bert(), 16, 3, pooling).eval()
    input_ids = torch.randint(1, 50, (2, 7))
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    input_ids[~mask] = 0
    labels = torch.tensor([2, 0])
    with torch.no_grad():
        out = model(input_ids, padding_mask=mask, labels=labels)
        hidden = model.backbone(input_ids=input_ids, attention_mask=mask.long()).last_hidden_state
        # More padding after a sentence changes nothing about it.
        longer = torch.cat([input_ids[1:], torch.zeros(1, 5, dtype=torch.long)], dim=1)
        alone = model(longer, padding_mask=longer != 0).logits
    pooled = masked_mean(hidden, mask) if pooling == "mean" else hidden[:, 0]
    torch.testing.assert_close(out.logits, model.head(pooled))
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))
    torch.testing.assert_close(alone, out.logits[1:], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="takes input_ids"):
        model(inputs=torch.rand(2, 7, 4))


def test_a_vit_embeds_each_task_patch_linearly_in_order():
    torch.manual_seed(0)
    model = TimmClassifier(_vit(), 10, "first", (8, 8), 2).eval()
    patches = torch.rand(3, 16, 4)  # (B, (8/2)², 2²), as the digits task gives them
    embed = model.backbone.patch_embed
    with torch.no_grad():
        tokens = embed(model.backbone_inputs({"inputs": patches})["images"])
        logits = model(inputs=patches, padding_mask=torch.ones(3, 16, dtype=torch.bool)).logits
        features = model.backbone.forward_features(patches_to_images(patches, (8, 8), 2))
    weight = embed.proj.weight.flatten(1)  # (D, 1·p·p)
    torch.testing.assert_close(tokens, patches @ weight.T + embed.proj.bias)
    torch.testing.assert_close(logits, model.head(features[:, 0]))
    with pytest.raises(ValueError, match="takes image patches"):
        model(torch.randint(0, 5, (3, 16)))
