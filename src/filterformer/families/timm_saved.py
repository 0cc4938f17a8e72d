"""timm's saved layout: a ``config.json`` naming the architecture and the keyword arguments that
``timm.create_model`` rebuilds the model with (timm's own hub layout), beside its weights.

:meth:`~.timm.TimmFamily.saved_config` writes one, :meth:`~.timm.TimmFamily.rebuild` reads it;
the model itself is created in :mod:`.timm`, where every timm model is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from ..jsonsafe import read_json_object

__all__ = ["CONFIG_FILE", "TIMM_FIELDS", "create_arguments", "read_saved_config", "saved_config"]

CONFIG_FILE = "config.json"
#: The fields of a timm ``config.json`` that rebuild the model.
TIMM_FIELDS = ("architecture", "num_classes", "model_args")


def saved_config(model: nn.Module, create_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``config.json`` of a timm ``model``: its architecture, classes, ``create_kwargs``
    (default: timm's record of them on the model) and the JSON part of its ``pretrained_cfg``.

    Raises:
        ValueError: for a model without ``pretrained_cfg['architecture']``, or a keyword
            argument that is no JSON value (naming it).
    """
    architecture = (getattr(model, "pretrained_cfg", None) or {}).get("architecture")
    if not architecture:
        raise ValueError(
            f"the {type(model).__name__} has no pretrained_cfg['architecture'], so the timm model "
            "name that rebuilds it is unknown; build it with timm.create_model"
        )
    recorded = getattr(model, "_model_args", None)  # timm's record of create_model's arguments
    kwargs = dict(recorded or {}) if create_kwargs is None else dict(create_kwargs)
    for key, value in kwargs.items():
        if not _is_json(value):
            raise ValueError(
                f"create_kwargs[{key!r}] = {value!r} cannot be saved as JSON; pass create_kwargs "
                "with a JSON value for it (e.g. a layer's name instead of the layer)"
            )
    return {
        "architecture": architecture,
        "num_classes": model.num_classes,
        "model_args": kwargs,
        "pretrained_cfg": {k: v for k, v in model.pretrained_cfg.items() if _is_json(v)},
    }


def create_arguments(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``timm.create_model`` that a saved ``config`` records."""
    return {"num_classes": config["num_classes"], **config["model_args"]}


def read_saved_config(directory: Path, architecture: str, *, named_in: Path) -> dict[str, Any]:
    """``directory``'s timm ``config.json``, checked to name ``architecture`` (as ``named_in``
    does).

    Raises:
        FileNotFoundError: when ``directory`` has no ``config.json``.
        ValueError: for a file lacking a :data:`TIMM_FIELDS` entry, ``model_args`` that are not
            an object, or another architecture (naming the file).
    """
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} has no {CONFIG_FILE} for its timm model")
    config = read_json_object(path, TIMM_FIELDS)
    missing = [field for field in TIMM_FIELDS if field not in config]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}; timm's layout has {TIMM_FIELDS}")
    if not isinstance(config["model_args"], dict):
        raise ValueError(f"{path}: model_args must be a JSON object; got {config['model_args']!r}")
    if config["architecture"] != architecture:
        raise ValueError(
            f"{path} names architecture {config['architecture']!r} and {named_in.name} names "
            f"{architecture!r}; they must agree"
        )
    return config


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
