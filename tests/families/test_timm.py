"""timm Vision Transformers are told apart and their blocks found."""

import pytest
import torch

from filterformer.families import (
    is_huggingface_model,
    is_timm_vision_transformer,
    vision_transformer_blocks,
)

timm = pytest.importorskip("timm")


def vit(depth: int = 2) -> torch.nn.Module:
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=16, patch_size=8, depth=depth,
        num_classes=0,
    )


def test_a_timm_vit_is_a_vision_transformer():
    model = vit()
    assert is_timm_vision_transformer(model)
    assert not is_huggingface_model(model)


def test_a_plain_module_with_blocks_is_not_a_vision_transformer():
    module = torch.nn.Module()
    module.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    assert not is_timm_vision_transformer(module)


def test_blocks_in_depth_order():
    model = vit(depth=3)
    assert vision_transformer_blocks(model) == list(model.blocks)
    assert len(vision_transformer_blocks(model)) == 3

