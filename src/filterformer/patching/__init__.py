"""Patch pretrained Hugging Face and timm models in place with GFSA, NeuTRENO or layer fusion.

``patch(model, "gfsa")`` turns every attention layer into a graph filter that starts as the
layer's own attention; ``unpatch(model)`` restores the original; ``patched_parameters(model)``
lists what the patch added; ``save_pretrained(model, directory)`` saves the model with its patch
and ``from_pretrained(directory)`` rebuilds it.
"""

from .api import patch, unpatch
from .options import PATCH_OPTIONS, PATCHABLE_PRESETS, PatchSpec
from .saving import from_pretrained, save_pretrained
from .state import patched_parameters

__all__ = [
    "PATCHABLE_PRESETS",
    "PATCH_OPTIONS",
    "PatchSpec",
    "from_pretrained",
    "patch",
    "patched_parameters",
    "save_pretrained",
    "unpatch",
]
