"""Small model builders shared by the model tests."""

from __future__ import annotations

import torch

from filterformer.models import CausalLM, TransformerConfig

VOCAB = 23

#: Attention set-ups every model-level property is checked on.
KINDS = {
    "softmax": {},
    "gfsa": {"attention": "gfsa", "attention_options": {"K": 3}},
    "gfsa_exact": {"attention": "gfsa", "attention_options": {"K": 4, "exact_power": True}},
    "neutreno": {"neutreno_lambda": 0.6},
    "gfsa+neutreno": {"attention": "gfsa", "attention_options": {"K": 3}, "neutreno_lambda": 0.4},
}


def config(**overrides) -> TransformerConfig:
    base = dict(dim=32, depth=3, num_heads=4, vocab_size=VOCAB, max_len=64)
    base.update(overrides)
    return TransformerConfig(**base)


def randomise_filters(model: torch.nn.Module) -> None:
    """Move GFSA coefficients away from their identity init so the filter really acts."""
    with torch.no_grad():
        for module in model.modules():
            for name in ("w0", "w1", "wK"):
                coefficient = getattr(module, name, None)
                if isinstance(coefficient, torch.Tensor):
                    coefficient.copy_(torch.randn_like(coefficient) * 0.5 + (name == "w1"))


def causal_lm(kind: str) -> CausalLM:
    """A float64 causal language model of ``KINDS[kind]`` in evaluation, its GFSA filters moved
    away from the identity."""
    model = CausalLM(config(causal=True, **KINDS[kind])).double().eval()
    randomise_filters(model)
    return model
