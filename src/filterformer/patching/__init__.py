"""Patch pretrained Hugging Face and timm models in place with GFSA, NeuTRENO or layer fusion.

``patch(model, "gfsa")`` turns every attention layer into a graph filter that starts as the
layer's own attention; ``unpatch(model)`` restores the original; ``patched_parameters(model)``
lists what the patch added; ``save_pretrained(model, directory)`` saves the model with its patch
and ``from_pretrained(directory)`` rebuilds it. ``patch_change(original, patched, batch)``
measures how much a patch changes the model's outputs before training (NeuTRENO's term acts
from the start; ``neutreno_warmup`` raises its λ from 0, advanced by
``advance_neutreno_warmup(model)`` after each optimiser step).
"""

from .api import patch, unpatch
from .change import PatchChange, patch_change
from .neutreno_warmup import advance_neutreno_warmup
from .saving import from_pretrained, save_pretrained
from .state import patched_parameters

__all__ = [
    "PatchChange",
    "advance_neutreno_warmup",
    "from_pretrained",
    "patch",
    "patch_change",
    "patched_parameters",
    "save_pretrained",
    "unpatch",
]
