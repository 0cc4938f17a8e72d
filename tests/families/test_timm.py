"""timm Vision Transformers are told apart and their blocks found."""

import pytest
import torch

from filterformer.families import (
    has_timm_blocks,
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


def test_other_timm_families_have_the_block_stack_that_diagnostics_reads():
    eva = timm.create_model(
        "eva02_tiny_patch14_224", pretrained=False, img_size=28, patch_size=14, depth=2,
        num_classes=0,
    )
    assert has_timm_blocks(eva) and not is_timm_vision_transformer(eva)
    assert has_timm_blocks(vit())
    module = torch.nn.Module()
    module.blocks = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    assert not has_timm_blocks(module)  # no forward_intermediates
