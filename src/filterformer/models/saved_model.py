"""``model.save_pretrained(directory)`` and ``Class.from_pretrained(directory)`` for the models
filterformer builds (:class:`Transformer`, :class:`CausalLM`, :class:`SequenceClassifier`, ...).

A saved directory holds two files:

- ``config.json``: ``{"format", "model", "config", "arguments"}``: the class's name, its
  :class:`TransformerConfig` and its other constructor arguments, as JSON;
- ``model.safetensors``: the weights, a tensor shared by several names (a causal LM's tied
  embedding and head) under the first of them only.

Both are written atomically; weights that are NaN or infinite are refused when saving and when
loading (:mod:`filterformer.strict_loading`), and so is a file that does not fit the model it
describes, naming the file.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from torch import Tensor, nn

from ..atomic_files import atomic_write
from ..strict_loading import first_names, load_weights, non_finite_parameters
from ..weight_files import (
    WEIGHTS_FILE,
    read_weights,
    remove_weight_files,
    take_saved_dtype,
)
from .config import TransformerConfig

__all__ = [
    "MODEL_CONFIG_FILE",
    "SAVED_MODEL_FORMAT",
    "SavesPretrained",
    "is_saved_model_directory",
    "load_saved_model",
    "model_description",
    "model_from_description",
]

#: The file that says which model a directory holds (the weights are ``model.safetensors``).
MODEL_CONFIG_FILE = "config.json"
#: Marks (and versions) the layout of :data:`MODEL_CONFIG_FILE`.
SAVED_MODEL_FORMAT = "filterformer-model-1"
_FIELDS = ("format", "model", "config", "arguments")

Model = TypeVar("Model", bound="SavesPretrained")


class SavesPretrained:
    """What a filterformer model needs to be saved and rebuilt: its constructor's arguments.

    A subclass of ``nn.Module`` with a ``config`` (:class:`TransformerConfig`) mixes this in and
    says, in :meth:`pretrained_arguments`, which other arguments rebuild it.
    """

    #: Every class that mixes this in, by name: what ``config.json``'s ``model`` may name.
    classes: ClassVar[dict[str, type]] = {}
    config: TransformerConfig

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            SavesPretrained.classes[cls.__name__] = cls

    def pretrained_arguments(self) -> dict[str, Any]:
        """The constructor's keyword arguments besides ``config``, as JSON values."""
        return {}

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created if
        needed); :meth:`from_pretrained` rebuilds the model from them.

        Raises:
            ValueError: when a parameter is NaN or infinite (naming it), or the model cannot be
                rebuilt from its arguments (e.g. a classifier around a foreign backbone).
        """
        from safetensors.torch import save_file

        assert isinstance(self, nn.Module)
        directory = Path(directory)
        description = model_description(self)
        weights = self.state_dict()
        non_finite = non_finite_parameters(self, weights)
        if non_finite:
            raise ValueError(
                f"{type(self).__name__} not saved to {directory}: its weights hold NaN or "
                f"infinity (in {first_names(non_finite)}); its training diverged"
            )
        directory.mkdir(parents=True, exist_ok=True)
        remove_weight_files(directory)  # an earlier save's shards would stay beside the new file
        unique = {name: tensor.detach().cpu().contiguous()
                  for name, tensor in _one_name_per_tensor(self, weights).items()}
        atomic_write(directory / WEIGHTS_FILE,
                     lambda tmp: save_file(unique, tmp, metadata={"format": "pt"}))
        text = json.dumps(description, indent=2, allow_nan=False) + "\n"
        atomic_write(directory / MODEL_CONFIG_FILE, lambda tmp: tmp.write_text(text))
        return directory

    @classmethod
    def from_pretrained(cls: type[Model], directory: str | os.PathLike) -> Model:
        """The model :meth:`save_pretrained` saved in ``directory``, every weight loaded, in
        eval mode, with the dtype of its saved floating-point weights.

        Raises:
            FileNotFoundError: when ``directory`` lacks ``config.json`` or the weights.
            ValueError: naming the file when ``config.json`` is malformed or names a model that
                is not a ``cls``, or when the weights do not fit the model or are not finite.
        """
        model = load_saved_model(directory)
        if not isinstance(model, cls):
            raise ValueError(
                f"{Path(directory) / MODEL_CONFIG_FILE} holds a {type(model).__name__}, not a "
                f"{cls.__name__}; load it with {type(model).__name__}.from_pretrained or "
                "filterformer.from_pretrained"
            )
        return model


def model_description(model: SavesPretrained) -> dict[str, Any]:
    """What ``config.json`` holds for ``model``: its class, config and other arguments.

    Raises:
        ValueError: when the model's arguments are no JSON values.
    """
    arguments = model.pretrained_arguments()
    try:
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"the {type(model).__name__}'s arguments {arguments!r} cannot be saved as JSON: {err}"
        ) from None
    return {"format": SAVED_MODEL_FORMAT, "model": type(model).__name__,
            "config": model.config.to_dict(), "arguments": arguments}


def model_from_description(description: Any, source: Any) -> nn.Module:
    """A freshly initialised model as :func:`model_description` describes it.

    Args:
        description: the description (read from ``source``).
        source: where it was read, as messages name it.

    Raises:
        ValueError: naming ``source`` for a malformed description, an unknown model or
            arguments the model does not take.
    """
    if not isinstance(description, dict) or description.get("format") != SAVED_MODEL_FORMAT:
        found = description.get("format") if isinstance(description, dict) else description
        raise ValueError(f"{source} is not a saved filterformer model (format {found!r}, "
                         f"expected {SAVED_MODEL_FORMAT!r})")
    missing = [field for field in _FIELDS if field not in description]
    if missing:
        raise ValueError(f"{source} lacks the field(s) {missing}; it has {list(_FIELDS)}")
    name, arguments = description["model"], description["arguments"]
    cls = SavesPretrained.classes.get(name)
    if cls is None:
        raise ValueError(f"{source}: model {name!r} is not one of "
                         f"{sorted(SavesPretrained.classes)}")
    if not isinstance(arguments, dict) or not isinstance(description["config"], dict):
        raise ValueError(f"{source}: config and arguments must be JSON objects")
    try:
        config = TransformerConfig.from_dict(description["config"])
        return cls(config, **arguments)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{source} does not describe a {name}: {err}") from None


def is_saved_model_directory(directory: str | os.PathLike) -> bool:
    """Whether ``directory``'s ``config.json`` is a saved filterformer model's."""
    path = Path(directory) / MODEL_CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == SAVED_MODEL_FORMAT


def load_saved_model(directory: str | os.PathLike) -> nn.Module:
    """The model :meth:`SavesPretrained.save_pretrained` saved in ``directory``, whatever its
    class, in eval mode (see :meth:`SavesPretrained.from_pretrained`)."""
    directory = Path(directory)
    path = directory / MODEL_CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} has no {MODEL_CONFIG_FILE}: it holds no saved model")
    try:
        description = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is corrupt ({type(err).__name__}: {err})") from None
    model = model_from_description(description, path)
    try:
        weights = read_weights(directory)
    except Exception as err:
        if isinstance(err, (FileNotFoundError, ValueError)):
            raise
        raise ValueError(f"{directory / WEIGHTS_FILE} is corrupt ({type(err).__name__}: "
                         f"{err})") from None
    take_saved_dtype(model, weights)
    load_weights(model, _with_tied_names(model, weights), str(directory / WEIGHTS_FILE))
    return model.eval()


def _tied_names(model: nn.Module) -> list[list[str]]:
    """The names of each tensor of ``model``'s state dict, in state-dict order."""
    names: dict[int, list[str]] = defaultdict(list)
    for name, tensor in model.state_dict(keep_vars=True).items():
        names[id(tensor)].append(name)
    return list(names.values())


def _one_name_per_tensor(model: nn.Module, weights: Mapping[str, Tensor]) -> dict[str, Tensor]:
    # safetensors refuses a tensor under two names; the first one keeps it.
    return {names[0]: weights[names[0]] for names in _tied_names(model)}


def _with_tied_names(model: nn.Module, weights: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``weights`` with each tensor the model shares under several names given all of them."""
    filled = dict(weights)
    for names in _tied_names(model):
        if names[0] in filled:
            filled.update({name: filled[names[0]] for name in names[1:]})
    return filled
