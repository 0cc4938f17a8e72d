"""Let a CUDA-built torchvision wheel import on a CPU-only torch.

PyPI's Linux torchvision wheels are CUDA builds. Installed beside a CPU build of torch, their
compiled operators cannot load, and torchvision (0.28 and later) then fails at import on an
unguarded fake-tensor registration for ``torchvision::nms``. timm and Hugging Face
``transformers`` import torchvision's pure-Python parts, so that one failure takes both down.

``scripts/setup.sh`` installs this module with a ``.pth`` line only where that failure happens.
It adds a meta-path finder that, the first time ``torchvision`` is imported, defines the schemas
of the two operators the registration expects (if torchvision's library did not define them) and
then steps aside. Nothing else changes: detection, NMS and the other compiled operators stay
unavailable, as they are on such a machine anyway.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIBRARIES: list = []  # keep the Library objects alive: dropping them removes the schemas


class _DefineMissingTorchvisionOps(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchvision":
            return None
        sys.meta_path.remove(self)
        import torch

        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            return None
        try:
            torch.ops.load_library(f"{spec.submodule_search_locations[0]}/_C.so")
            return spec  # the compiled operators load: nothing to do
        except OSError:
            pass
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS.values():
            with contextlib.suppress(RuntimeError):  # already defined
                lib.define(schema)
        _LIBRARIES.append(lib)
        return spec


def install() -> None:
    """Register the finder once per interpreter."""
    if not any(isinstance(f, _DefineMissingTorchvisionOps) for f in sys.meta_path):
        sys.meta_path.insert(0, _DefineMissingTorchvisionOps())


install()
