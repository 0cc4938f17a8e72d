"""Patch pretrained Hugging Face and timm models in place with GFSA, NeuTRENO or layer fusion.

``patch(model, "gfsa")`` turns every attention layer into a graph filter that starts as the
layer's own attention; ``unpatch(model)`` restores the original; ``patched_parameters(model)``
lists what the patch added.
"""

from .api import patch, unpatch
from .options import PATCH_OPTIONS, PATCHABLE_PRESETS, PatchSpec
from .state import patched_parameters

__all__ = [
    "PATCHABLE_PRESETS",
    "PATCH_OPTIONS",
    "PatchSpec",
    "patch",
    "patched_parameters",
    "unpatch",
]
