"""NeuTRENO's identity start on a pretrained model: λ raised from 0 over the first steps.

A NeuTRENO patch adds ``λ·(V⁰ − V)`` to every attention layer after the first (METHODS.md §2).
In a pretrained model ``V⁰ − V`` is as large as ``V`` itself, so the full λ changes what the
model computes before it has trained a step. With ``neutreno_warmup=W`` the patch applies
``λ·min(s / W, 1)`` after ``s`` optimiser steps: the pretrained model at ``s = 0``, λ from step
``W`` on. ``s`` is a buffer of the patched model (``filterformer_neutreno_warmup.steps_taken``),
so checkpoints, ``state_dict`` and :func:`~filterformer.patching.save_pretrained` keep it, and
the training loop advances it with :func:`advance_neutreno_warmup` after each optimiser step.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .state import PatchState

__all__ = [
    "WARMUP_ATTRIBUTE",
    "NeutrenoWarmup",
    "advance_neutreno_warmup",
    "attach_neutreno_warmup",
]

#: The child of the patched model that holds the warm-up's step count.
WARMUP_ATTRIBUTE = "filterformer_neutreno_warmup"


class NeutrenoWarmup(nn.Module):
    """The step count of NeuTRENO's warm-up and the fraction of λ it gives.

    Args:
        steps: ``W``, the optimiser steps over which λ rises linearly from 0 (>= 1).
        device: where the step count lives (the model's device).
    """

    def __init__(self, steps: int, device: torch.device | None = None) -> None:
        super().__init__()
        self.steps = steps
        self.register_buffer("steps_taken", torch.zeros((), dtype=torch.long, device=device))

    def scale(self) -> Tensor:
        """``min(s / W, 1)`` as a 0-dimensional float tensor on the step count's device (a
        tensor, not a Python number: no device sync per forward, no recompilation per step)."""
        return (self.steps_taken / self.steps).clamp(max=1.0)

    @torch.no_grad()
    def advance(self) -> None:
        """Count one optimiser step."""
        self.steps_taken += 1

    def extra_repr(self) -> str:
        return f"steps={self.steps}"


def attach_neutreno_warmup(state: PatchState) -> None:
    """Give the patched model its :class:`NeutrenoWarmup` (``state.spec.neutreno_warmup``
    steps) and have every forward pass scale NeuTRENO's λ by it."""
    like = next(state.model.parameters(), None)
    warmup = NeutrenoWarmup(state.spec.neutreno_warmup, None if like is None else like.device)
    state.add_submodule(state.model, WARMUP_ATTRIBUTE, warmup)
    state.neutreno_warmup = warmup


def advance_neutreno_warmup(model: nn.Module) -> int:
    """Count one optimiser step in every NeuTRENO warm-up inside ``model``; call it after each
    optimiser step (``filterformer train`` does).

    Args:
        model: a patched model, or a module holding one (a classifier around a patched
            backbone); a model without a warm-up is left as it is.

    Returns:
        How many warm-ups were advanced (0 for a model without one).
    """
    warmups = [module for module in model.modules() if isinstance(module, NeutrenoWarmup)]
    for warmup in warmups:
        warmup.advance()
    return len(warmups)
