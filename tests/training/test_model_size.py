"""A model too large to train is refused from its configuration, before any of it is allocated."""

from __future__ import annotations

import re

import pytest
import torch

from filterformer.models import SequenceClassifier, TransformerConfig
from filterformer.training.model_size import (
    BYTES_PER_TRAINED_PARAMETER,
    MAX_DEPTH,
    check_model_size,
    minimum_parameters,
)


def _random_config() -> TransformerConfig:
    heads = int(torch.randint(1, 4, ()))
    inputs = ({"vocab_size": int(torch.randint(2, 50, ()))} if torch.rand(()) < 0.5
              else {"input_dim": int(torch.randint(1, 20, ()))})
    return TransformerConfig(
        dim=heads * int(torch.randint(8, 24, ())), depth=int(torch.randint(1, 5, ())),
        num_heads=heads, mlp_ratio=float(torch.rand(()) * 3 + 0.5),
        max_len=int(torch.randint(1, 200, ())),
        position=["learned", "sinusoidal", "none"][int(torch.randint(0, 3, ()))],
        attention=["softmax", "gfsa", "agf"][int(torch.randint(0, 3, ()))], **inputs,
    )


@pytest.mark.parametrize("draw", range(8))
def test_the_bound_is_below_the_built_model_and_close_to_it(draw):
    config = _random_config()
    model = SequenceClassifier(config, num_classes=3)
    parameters = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers())
    trained, stored = minimum_parameters(config)
    assert trained <= parameters and stored <= buffers
    # What the bound leaves out (biases, norms, the head, a method's own weights) is smaller.
    assert trained >= parameters / 2


def test_a_model_that_does_not_fit_is_refused_naming_its_sizes():
    dim = 8 * int(torch.randint(64, 256, ()))
    config = TransformerConfig(dim=dim, depth=int(torch.randint(1, 9, ())), num_heads=8,
                               vocab_size=100, max_len=64)
    trained, _ = minimum_parameters(config)
    needed = trained * BYTES_PER_TRAINED_PARAMETER
    check_model_size(config, available=needed)
    count = re.escape(f"{trained:.3g}")
    with pytest.raises(ValueError, match=rf"model\.dim={dim}, model\.depth={config.depth}, .*: "
                                         rf"the model would hold at least {count} "
                                         r"parameters; training it needs at least .* GiB .*, and "
                                         r"this machine has .* GiB available"):
        check_model_size(config, available=needed - 1)
    check_model_size(config, training=False, available=needed // 4)
    with pytest.raises(ValueError, match="building it needs"):
        check_model_size(config, training=False, available=needed // 4 - 1)


def test_a_sinusoidal_table_counts_as_stored_values():
    length = int(torch.randint(10**6, 10**7, ()))
    config = TransformerConfig(dim=16, depth=1, num_heads=2, vocab_size=10, max_len=length,
                               position="sinusoidal")
    assert minimum_parameters(config)[1] == 16 * length
    with pytest.raises(ValueError, match=rf"model\.max_len={length}.*a sinusoidal position "
                                         "table of"):
        check_model_size(config, available=length * 16 * 4 - 1)


def test_depth_beyond_the_limit_is_refused_at_any_memory():
    config = TransformerConfig(dim=8, depth=MAX_DEPTH + int(torch.randint(1, 10**5, ())),
                               num_heads=2, vocab_size=10, max_len=8)
    with pytest.raises(ValueError, match=rf"model\.depth={config.depth}.*model\.depth may be at "
                                         rf"most {MAX_DEPTH}"):
        check_model_size(config, available=2**62)
