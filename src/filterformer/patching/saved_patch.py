"""What a saved patched model carries beside its own files, and the hooks that keep it there.

A directory written by :func:`~filterformer.patching.save_pretrained`, or by a patched Hugging Face
model's own ``save_pretrained`` (which ``transformers.Trainer`` calls), holds:

- ``filterformer.json`` (:data:`PATCH_FILE`): the patch (method and options), the backend, the
  model to rebuild, the filterformer version that wrote it and, where the model went without
  parts its class builds (BERT's pooler), their names
  (:mod:`~filterformer.patching.absent_modules`);
- beside the model's weights, one more entry, :data:`MARKER_KEY` (``filterformer.from_pretrained``).
  A loader that knows nothing of the patch reports it among the unexpected keys, next to the
  patch's own weights, so ``transformers``' load report names the function that loads the
  directory; a patched model drops it when it loads a state dict.
"""

from __future__ import annotations

import inspect
import json
import os
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..families import family_named
from ..jsonsafe import read_json_object
from ..method_spec import MethodSpec, parse_patch, preset_options
from ..weight_files import remove_weight_files
from .absent_modules import absent_modules
from .state import PatchState, get_patch_state

__all__ = [
    "MARKER_KEY",
    "PATCH_FILE",
    "PATCH_FORMAT",
    "SavedPatch",
    "keep_patch_on_save",
    "read_patch_file",
    "with_marker",
    "write_patch_file",
]

#: The file that describes the patch of a saved model.
PATCH_FILE = "filterformer.json"
#: The version of :data:`PATCH_FILE`'s layout (the value stored under :data:`MARKER_KEY` too).
PATCH_FORMAT = 1
#: The weight entry that names, in any loader's report of unexpected keys, the loader to use.
MARKER_KEY = "filterformer.from_pretrained"
#: The fields of :data:`PATCH_FILE`, all required.
FIELDS = ("format", "filterformer_version", "backend", "model", "method", "options")
#: The fields written only when they have something to say.
OPTIONAL_FIELDS = ("without_modules",)
#: Options added after the format was fixed: a file written before them lacks them and meant
#: their default (``neutreno_warmup``: 0, λ from the start).
LATER_OPTIONS = ("neutreno_warmup",)


@dataclass(frozen=True)
class SavedPatch:
    """The contents of a ``filterformer.json``.

    Attributes:
        backend: the model family's library (:func:`~filterformer.families.family_named`):
            ``"transformers"`` or ``"timm"``.
        model: the ``transformers`` class to rebuild (``"BertForSequenceClassification"``), or
            the timm architecture (``"deit_tiny_patch16_224"``).
        spec: the patch.
        version: the filterformer version that saved the model.
        without_modules: dotted names of the submodules the model's class builds and the saved
            model went without (``("pooler",)``); set to None when it is rebuilt.
    """

    backend: str
    model: str
    spec: MethodSpec
    version: str
    without_modules: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": PATCH_FORMAT,
            "filterformer_version": self.version,
            "backend": self.backend,
            "model": self.model,
            "method": self.spec.name,
            "options": self.spec.patch_options(),
        }
        if self.without_modules:
            data["without_modules"] = list(self.without_modules)
        return data


def write_patch_file(
    directory: str | os.PathLike,
    state: PatchState,
    model: str,
    without_modules: tuple[str, ...] = (),
) -> Path:
    """Write ``directory/filterformer.json`` for a model patched as ``state`` says.

    Args:
        directory: the saved model's directory (created if needed).
        state: the model's patch state.
        model: the ``transformers`` class name or timm architecture that rebuilds the model.
        without_modules: the submodules of ``model``'s class that the saved model went without.
    """
    from .. import __version__

    saved = SavedPatch(state.backend, model, state.spec, __version__, tuple(without_modules))
    path = Path(directory) / PATCH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved.to_json(), indent=2) + "\n")
    return path


def read_patch_file(directory: str | os.PathLike) -> SavedPatch:
    """Read and validate ``directory/filterformer.json``.

    Raises:
        FileNotFoundError: when the directory has no ``filterformer.json``.
        ValueError: naming the file and the bad, missing or unknown field, with the valid
            choices (the patch's method and options are checked as :func:`patch` checks them).
    """
    path = Path(directory) / PATCH_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{Path(directory)} has no {PATCH_FILE}: it was not saved from a patched model by "
            "filterformer.save_pretrained (or a patched model's own save_pretrained); load an "
            "unpatched model with transformers' or timm's own loaders"
        )
    data = read_json_object(path, FIELDS)
    missing = [field for field in FIELDS if field not in data]
    unknown = sorted(set(data) - set(FIELDS) - set(OPTIONAL_FIELDS))
    if missing or unknown:
        raise ValueError(
            f"{path}: "
            + "; ".join(
                [f"missing field(s) {missing}"] * bool(missing)
                + [f"unknown field(s) {unknown}"] * bool(unknown)
            )
            + f"; a {PATCH_FILE} has exactly the fields {list(FIELDS)}, and optionally "
            f"{list(OPTIONAL_FIELDS)}"
        )
    if data["format"] != PATCH_FORMAT:
        raise ValueError(
            f"{path}: format {data['format']!r} is not one this filterformer reads "
            f"(supported: {PATCH_FORMAT}); it was written by filterformer "
            f"{data['filterformer_version']!r}"
        )
    try:
        family_named(data["backend"])
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    for field in ("model", "filterformer_version", "method"):
        if not isinstance(data[field], str) or not data[field]:
            raise ValueError(f"{path}: {field} must be a non-empty string; got {data[field]!r}")
    options = data["options"]
    if not isinstance(options, dict):
        raise ValueError(f"{path}: options must be a JSON object; got {options!r}")
    try:
        spec = parse_patch(data["method"], **options)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from err
    lacking = [
        name for name in preset_options(data["method"])
        if name not in options and name not in LATER_OPTIONS
    ]
    if lacking:
        raise ValueError(
            f"{path}: options lack {lacking}; method {data['method']!r} is saved with all its "
            f"options: {list(preset_options(data['method']))}"
        )
    without = data.get("without_modules", [])
    if not isinstance(without, list) or not all(isinstance(n, str) and n for n in without):
        raise ValueError(
            f"{path}: without_modules must be a list of submodule names (e.g. ['pooler']); "
            f"got {without!r}"
        )
    return SavedPatch(
        data["backend"], data["model"], spec, data["filterformer_version"], tuple(without)
    )


def marker() -> Tensor:
    """The value stored under :data:`MARKER_KEY`: the format of ``filterformer.json``."""
    return torch.tensor(PATCH_FORMAT)


def with_marker(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``state_dict`` and the :data:`MARKER_KEY` entry."""
    return {**state_dict, MARKER_KEY: marker()}


def keep_patch_on_save(state: PatchState) -> None:
    """Let the patched model's saves carry the patch, and its loads accept what they carry.

    Where the model's family saves its models themselves (``saves_itself``: Hugging Face),
    the model's own ``save_pretrained`` (the one ``transformers.Trainer`` calls) becomes one
    that also writes :data:`MARKER_KEY` and ``filterformer.json``; the model drops
    :data:`MARKER_KEY` from any state dict it loads (a Trainer resuming from such a checkpoint
    loads it with ``load_state_dict``). ``unpatch`` removes both.
    """
    model = state.model
    register = getattr(model, "register_load_state_dict_pre_hook", None)  # public from torch 2.5
    if register is None:
        state.add_hook(model._register_load_state_dict_pre_hook(_drop_marker, with_module=True))
    else:
        state.add_hook(register(_drop_marker))
    if family_named(state.backend).saves_itself:
        state.set_attribute(model, "save_pretrained", types.MethodType(_save_pretrained, model))


def _drop_marker(module: nn.Module, state_dict: dict, prefix: str, *args: Any) -> None:
    state_dict.pop(prefix + MARKER_KEY, None)


def _save_pretrained(
    self: nn.Module,
    save_directory: str | os.PathLike,
    is_main_process: bool = True,
    state_dict: Mapping[str, Tensor] | None = None,
    **kwargs: Any,
) -> None:
    """``transformers``' ``save_pretrained`` (same arguments), plus what loads the patch back:
    the :data:`MARKER_KEY` weight and ``filterformer.json`` (written by the main process), and
    the weight files of an earlier save into the same directory removed, of either layout
    (single file or shards), so that the directory holds one set of weights: this model's.

    The weights keep the names of the model's own ``state_dict``: transformers versions that
    rename some models' weights back to an older layout when saving (``save_original_format``)
    are asked not to, unless the caller says otherwise, so that ``from_pretrained`` and a
    ``Trainer`` resuming from the checkpoint find the names the model has (transformers' own
    loader reads either layout).
    """
    if kwargs.get("variant") is not None:
        raise ValueError(
            f"save_pretrained: variant={kwargs['variant']!r} names the weights file "
            f"model.{kwargs['variant']}.safetensors, which from_pretrained does not read; save "
            "without a variant (convert the dtype with model.to(...) first)"
        )
    if "save_original_format" in inspect.signature(type(self).save_pretrained).parameters:
        kwargs.setdefault("save_original_format", False)
    weights = with_marker(self.state_dict() if state_dict is None else state_dict)
    if is_main_process:
        # transformers removes only stale shards: an earlier single file (or an index) would
        # stay beside the new weights, and a loader could take the earlier model's.
        remove_weight_files(save_directory)
    type(self).save_pretrained(
        self, save_directory, is_main_process=is_main_process, state_dict=weights, **kwargs
    )
    if is_main_process:
        write_patch_file(
            save_directory, get_patch_state(self), type(self).__name__, absent_modules(self)
        )
