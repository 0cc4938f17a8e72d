"""Save a patched model with its patch, and rebuild it: ``save_pretrained`` / ``from_pretrained``.

A saved directory holds what the model's own library would write (a Hugging Face model's
``config.json`` and ``model.safetensors``, written by ``transformers``; for timm, a ``config.json``
in timm's layout with the architecture and ``create_model`` arguments, and ``model.safetensors``)
plus ``filterformer.json``, which says how to patch the rebuilt model before its weights are
loaded (:mod:`~filterformer.patching.saved_patch`). What a family's files are, and the model they
rebuild, is its adapter's (:func:`~filterformer.families.family_named` of the patch's backend):
this module adds the patch, the marker weight and the strict load.

filterformer's own models (:class:`~filterformer.models.CausalLM`, ...) need no patch: both
functions save and rebuild them as their own ``save_pretrained`` / ``from_pretrained`` do
(:mod:`~filterformer.models.saved_model`).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..families import LaidOutFamily, family_named
from ..families.timm_saved import create_arguments
from ..method_spec import MethodSpec
from ..models.saved_model import SavesPretrained, is_saved_model_directory, load_saved_model
from ..weight_files import WEIGHTS_FILE, read_weights, remove_weight_files, take_saved_dtype
from .absent_modules import remove_modules
from .api import patch, patch_for_inspection
from .saved_patch import (
    MARKER_KEY,
    PATCH_FILE,
    read_patch_file,
    with_marker,
    write_patch_file,
)
from .state import PatchState, get_patch_state

__all__ = ["from_pretrained", "save_pretrained"]

CONFIG_FILE = "config.json"


def save_pretrained(
    model: nn.Module,
    directory: str | os.PathLike,
    *,
    create_kwargs: Mapping[str, Any] | None = None,
    **save_kwargs: Any,
) -> Path:
    """Save a patched model, its base model's config and its patch, for :func:`from_pretrained`.

    Hugging Face models are saved by their own ``save_pretrained`` (which, once the model is
    patched, also writes the patch: calling ``model.save_pretrained(directory)`` directly, or
    through ``transformers.Trainer``, saves the same directory). timm models get
    ``model.safetensors`` and a ``config.json`` in timm's layout naming the architecture and the
    ``timm.create_model`` keyword arguments that rebuild it. The weight files of an earlier save
    into ``directory`` (``model.safetensors``, or shards and their index) are removed first, so
    that it holds one set of weights, this model's.

    Args:
        model: a model patched by :func:`~filterformer.patching.patch`, or one of
            filterformer's own models (saved by its ``save_pretrained``).
        directory: where to save (created if needed).
        create_kwargs: timm only: the keyword arguments the model was created with
            (``timm.create_model(name, img_size=..., depth=..., ...)``), JSON values. Recent timm
            versions record them on the model they build, and they are taken from there when
            this is None; a timm that does not (or a model built another way) needs them here.
            They are checked: a model rebuilt with them must have this model's weight shapes.
        **save_kwargs: Hugging Face only: passed on to the model's ``save_pretrained``
            (``max_shard_size``, ``is_main_process``, ...).

    Returns:
        ``directory`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: for a model that is neither patched nor filterformer's own, an argument
            its library does not take (or ``variant``, whose file :func:`from_pretrained` would
            not read), or timm
            ``create_kwargs`` that do not rebuild the model (naming the weights that differ).
    """
    state = get_patch_state(model)
    if state is None and isinstance(model, SavesPretrained):
        extra = sorted(save_kwargs) + (["create_kwargs"] if create_kwargs is not None else [])
        if extra:
            raise ValueError(f"unknown argument(s) {extra} for a {type(model).__name__}: "
                             "it is saved with its config; save_pretrained(model, directory)")
        return model.save_pretrained(directory)
    if state is None:
        raise ValueError(
            f"save_pretrained saves a patched model with its patch, and this "
            f"{type(model).__name__} is not patched; patch(model, ...) it first, or save an "
            "unpatched model with its library's own save function"
        )
    if state.model is not model:
        raise ValueError(
            f"this {type(model).__name__} was patched as part of a "
            f"{type(state.model).__name__}; save that model"
        )
    directory = Path(directory)
    family = family_named(state.backend)
    if family.saves_itself:  # its save writes the patch too (saved_patch.keep_patch_on_save)
        if create_kwargs is not None:
            raise ValueError(
                "create_kwargs is for timm models; a Hugging Face model is rebuilt from its config"
            )
        model.save_pretrained(directory, **save_kwargs)
    else:
        if save_kwargs:
            raise ValueError(
                f"unknown argument(s) {sorted(save_kwargs)} for a timm model; valid: create_kwargs"
            )
        _save_layout(model, state, family, directory, create_kwargs)
    return directory


def from_pretrained(directory: str | os.PathLike) -> nn.Module:
    """Rebuild a model saved by :func:`save_pretrained`: the base model, patched, every weight
    loaded, in eval mode (or filterformer's own model, as its ``from_pretrained`` does).

    The family the patch's backend names rebuilds the model (its adapter's ``rebuild``): Hugging
    Face models as the class that was saved (``BertModel``, ``LlamaForCausalLM``,
    ``BertForSequenceClassification``, ...) from the saved config; timm models by
    ``timm.create_model`` with the saved architecture and arguments. Parts of the class
    that the saved model went without (BERT's pooler, as ``pretrained:`` runs drop it) are left
    out again. The model takes the dtype of its saved floating-point weights.

    Raises:
        FileNotFoundError: when ``directory`` lacks ``filterformer.json`` or the weights.
        ValueError: for a ``filterformer.json`` that is malformed or names an unknown method,
            option or value, a directory holding two sets of weights (``model.safetensors``
            and shards) or shards that do not match their index, or weights that do not fit the
            patched model exactly (the missing, unexpected and mis-shaped keys are named).
    """
    directory = Path(directory)
    if not (directory / PATCH_FILE).is_file() and is_saved_model_directory(directory):
        return load_saved_model(directory)
    saved = read_patch_file(directory)
    family = family_named(saved.backend)
    model = family.rebuild(directory, saved.model, named_in=directory / PATCH_FILE)
    remove_modules(model, saved.without_modules, directory / PATCH_FILE)
    weights = read_weights(directory)
    take_saved_dtype(model, weights)
    patch(model, saved.spec)
    _load_strictly(model, weights, directory, saved.spec)
    return model.eval()


# ----- a family without a save of its own (timm) -------------------------------------------


def _save_layout(
    model: nn.Module,
    state: PatchState,
    family: LaidOutFamily,
    directory: Path,
    create_kwargs: Mapping[str, Any] | None,
) -> None:
    """Write the family's ``config.json``, the weights with :data:`MARKER_KEY` and the patch."""
    from safetensors.torch import save_file

    config = family.saved_config(model, create_kwargs)
    _check_rebuilds(model, state.spec, family, config)
    directory.mkdir(parents=True, exist_ok=True)
    remove_weight_files(directory)  # an earlier save's shards would stay beside the new file
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(with_marker(weights), directory / WEIGHTS_FILE, metadata={"format": "pt"})
    write_patch_file(directory, state, config["architecture"])


def _check_rebuilds(
    model: nn.Module, spec: MethodSpec, family: LaidOutFamily, config: Mapping[str, Any]
) -> None:
    """Raise ValueError unless the model ``config`` describes, patched with ``spec``, has
    ``model``'s weight names and shapes (built on the meta device: no memory, no init)."""
    try:
        with torch.device("meta"):
            reference = family.from_saved_config(config)
    except (RuntimeError, NotImplementedError):  # a constructor that reads tensor values
        reference = family.from_saved_config(config)
    patch_for_inspection(reference, spec)
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    rebuilt = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    differ = sorted(k for k in ours.keys() | rebuilt.keys() if ours.get(k) != rebuilt.get(k))
    if differ:
        shown = [f"{k}: {ours.get(k, 'absent')} here, {rebuilt.get(k, 'absent')} rebuilt"
                 for k in differ[:5]]
        kwargs = create_arguments(config)
        raise ValueError(
            f"timm.create_model({config['architecture']!r}, **{kwargs}) does not rebuild this "
            f"model ({len(differ)} weights differ: {'; '.join(shown)}); pass the keyword "
            "arguments it was created with: save_pretrained(model, directory, create_kwargs="
            "{'img_size': ..., 'depth': ..., ...})"
        )


# ----- weights ------------------------------------------------------------------------------


def _load_strictly(
    model: nn.Module, weights: Mapping[str, Tensor], directory: Path, spec: MethodSpec
) -> None:
    """Load ``weights`` into the patched ``model``, or raise ValueError naming every missing,
    unexpected or mis-shaped key. Tied weights (one tensor under several names) need one name."""
    weights = dict(weights)
    marked = weights.pop(MARKER_KEY, None) is not None
    expected = model.state_dict(keep_vars=True)
    tied: dict[int, list[str]] = defaultdict(list)
    for name, tensor in expected.items():
        tied[id(tensor)].append(name)
    missing = [names[0] for names in tied.values() if not any(n in weights for n in names)]
    missing += [] if marked else [MARKER_KEY]
    unexpected = sorted(set(weights) - set(expected))
    mismatched = [
        f"{k}: {tuple(weights[k].shape)} saved, {tuple(expected[k].shape)} in the model"
        for k in sorted(set(weights) & set(expected))
        if weights[k].shape != expected[k].shape
    ]
    problems = [
        f"{what} {_some(keys)}"
        for what, keys in (("missing", missing), ("unexpected", unexpected),
                           ("mis-shaped", mismatched))
        if keys
    ]
    if problems:
        raise ValueError(
            f"{directory}: the saved weights do not fit the {type(model).__name__} patched with "
            f"{spec.name!r}: {'; '.join(problems)}"
        )
    model.load_state_dict(weights, strict=False)


def _some(keys: Iterable[str], limit: int = 20) -> str:
    keys = list(keys)
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return f"{keys[:limit]}{more}"
