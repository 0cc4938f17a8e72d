"""The example configs under configs/ load, and the compare example is the built-in default."""

from __future__ import annotations

from pathlib import Path

import pytest

from filterformer.training import load_config
from filterformer.training.compare import CompareConfig, load_compare_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
TRAIN_CONFIGS = sorted(p for p in CONFIGS.iterdir() if not p.name.startswith("compare"))


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: p.name)
def test_train_examples_load_and_resolve(path):
    config = load_config(path)
    model = config.transformer_config(vocab_size=16, input_dim=None, max_len=8)
    assert model.depth == config.model["depth"]


def test_compare_example_is_the_built_in_comparison():
    assert load_compare_config(CONFIGS / "compare_builtin.yaml") == CompareConfig()
    assert load_compare_config() == CompareConfig()
