"""What the comparison's defaults give up for a pretrained model the user names.

The built-in comparison trains a 4-layer, width-64 model with 7 methods. With ``pretrained`` the
architecture is the pretrained model's and only methods a patch expresses apply, so the defaults
the user did not set give way: the built-in ``model`` fields are dropped, and the default
methods no patch expresses (AGF, SAMSA) are left out, each with a warning that names them. What
the user set (``model.depth=4``, ``--methods agf``) is kept, and refused as before.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ...methods import DEFAULT_METHODS
from ..pretrained import pretrained_method

__all__ = ["drop_default_architecture", "patchable_default_methods"]


def drop_default_architecture(
    data: dict[str, Any], defaults: Mapping[str, Any], user: Mapping[str, Any]
) -> dict[str, Any]:
    """``data`` (a config as a dict) without the ``model`` fields of ``defaults`` that ``user``
    (the fields the user set) does not set, when ``data`` names a pretrained model."""
    if data.get("pretrained") is None or not isinstance(data.get("model"), dict):
        return data
    own = user.get("model") if isinstance(user.get("model"), Mapping) else {}
    dropped = [key for key in defaults.get("model", {})
               if key in data["model"] and key not in own and data["model"][key] ==
               defaults["model"][key]]
    if dropped:
        warnings.warn(
            f"pretrained={data['pretrained']}: the built-in comparison's "
            f"{', '.join(f'model.{key}' for key in dropped)} are left out (the architecture is "
            "the pretrained model's)", stacklevel=3,
        )
    return {**data, "model": {k: v for k, v in data["model"].items() if k not in dropped}}


def patchable_default_methods(pretrained: str, model: Mapping[str, Any]) -> Sequence[str]:
    """The default methods (:data:`~filterformer.methods.DEFAULT_METHODS`) a patch of
    ``pretrained`` expresses with the base's ``model`` fields; a warning names the others."""
    kept, left_out = [], []
    for method in DEFAULT_METHODS:
        try:
            pretrained_method(model, method)
        except ValueError:
            left_out.append(method)
        else:
            kept.append(method)
    if left_out:
        warnings.warn(
            f"pretrained={pretrained}: the default methods {', '.join(left_out)} cannot be "
            f"patched into a pretrained model and are left out; comparing {', '.join(kept)} "
            "(--methods chooses)", stacklevel=3,
        )
    return kept
