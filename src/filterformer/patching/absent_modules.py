"""Submodules a saved Hugging Face model went without, so that the rebuilt model goes without them.

A model's class builds some parts that a model may lack: BERT's pooler is None when built with
``add_pooling_layer=False``, or set to None for fine-tuning (``pretrained:`` runs pool the tokens
themselves). The config does not say so, and the class rebuilt from it would have the part again
and no saved weights for it. The names of such parts are saved in ``filterformer.json``
(``without_modules``) and set to None again on loading.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["absent_modules", "remove_modules"]

_MISSING = object()


def absent_modules(model: nn.Module) -> tuple[str, ...]:
    """The dotted names of the submodules that ``model``'s class builds from ``model.config``
    and that are None on ``model`` (outermost only: ``"pooler"``, ``"bert.pooler"``).

    The class is built on the meta device (no memory, no initialisation); a class that cannot be
    built there is taken to lack nothing, and loading then names any weights that differ.
    """
    try:
        with torch.device("meta"):
            fresh = type(model)(copy.deepcopy(model.config))
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return ()
    absent: list[str] = []
    for name, _ in fresh.named_modules():
        if not name or any(name.startswith(f"{outer}.") for outer in absent):
            continue
        if _attribute(model, name) is None:
            absent.append(name)
    return tuple(absent)


def remove_modules(model: nn.Module, names: Iterable[str], source: Path) -> None:
    """Set each submodule ``names`` lists to None on the freshly built ``model``.

    Raises:
        ValueError: naming ``source`` (the file that lists them) for a name that is not a
            submodule of ``model``.
    """
    for name in names:
        parent_name, _, attribute = name.rpartition(".")
        parent = _attribute(model, parent_name) if parent_name else model
        if not isinstance(parent, nn.Module) or not isinstance(
            parent._modules.get(attribute), nn.Module
        ):
            raise ValueError(
                f"{source}: without_modules names {name!r}, which is not a submodule of a "
                f"{type(model).__name__}; it lists parts of the saved model's class that the "
                "saved model went without (e.g. 'pooler')"
            )
        setattr(parent, attribute, None)


def _attribute(model: nn.Module, name: str) -> Any:
    """``model.<name>`` for a dotted ``name``; a placeholder where a part is missing."""
    value: Any = model
    for part in name.split("."):
        value = getattr(value, part, _MISSING)
        if value is None or value is _MISSING:
            return value
    return value
