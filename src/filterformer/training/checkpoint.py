"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``, checked.

A checkpoint is a dict of tensors and plain Python data with a ``format`` marker. Writing goes
to a temporary file in the same directory, is flushed to disk, then renamed over the target, so
a crash leaves the previous checkpoint intact, never half a new one; the temporary file a killed
write leaves behind is removed by :func:`remove_interrupted_writes` when the run next starts.
Every way a checkpoint can be unusable (missing, corrupt, another kind of file, another
configuration, other shapes) is a ValueError that names the file and what is wrong. The random
streams a run draws from are saved with it (:func:`rng_state`), so a resumed run continues
exactly.
"""

from __future__ import annotations

import os
import random
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..data.cache import atomic_write, atomic_write_leftovers
from ..models import Transformer, TransformerConfig
from ..strict_loading import load_weights

__all__ = [
    "CHECKPOINT_FORMAT",
    "check_same_config",
    "config_differences",
    "load_backbone",
    "load_checkpoint",
    "load_model_state",
    "remove_interrupted_writes",
    "rng_state",
    "save_checkpoint",
    "seed_everything",
    "set_rng_state",
]

#: Marks (and versions) the layout of a filterformer training checkpoint.
CHECKPOINT_FORMAT = "filterformer-checkpoint-1"


def save_checkpoint(path: str | os.PathLike, state: Mapping[str, Any]) -> Path:
    """Write ``state`` (tensors and plain data) to ``path`` atomically and durably."""
    path = Path(path)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            torch.save({"format": CHECKPOINT_FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, write)
    _fsync_directory(path.parent)
    return path


def remove_interrupted_writes(*paths: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that killed :func:`save_checkpoint` calls for ``paths`` left.

    Only ``.<name>.<random>.tmp`` files beside each path are touched
    (:func:`~filterformer.data.cache.atomic_write_leftovers`); call it only where no other
    process is writing these checkpoints (rank 0, as a run starts or resumes).

    Returns:
        The files removed.
    """
    removed = []
    for path in paths:
        for leftover in atomic_write_leftovers(Path(path)):
            leftover.unlink(missing_ok=True)
            removed.append(leftover)
    return removed


def _fsync_directory(directory: Path) -> None:
    # The rename itself is durable only once the directory entry is on disk (POSIX only).
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_checkpoint(
    path: str | os.PathLike,
    map_location: str | torch.device = "cpu",
    required: Collection[str] = (),
) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint` (tensors and plain data only).

    Args:
        path: the checkpoint file.
        map_location: where its tensors are loaded.
        required: the entries the caller reads; a checkpoint lacking any is refused.

    Raises:
        ValueError: when the file is missing, corrupt, not a filterformer checkpoint, or lacks
            a ``required`` entry (naming the file and the entries).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises many kinds for a damaged or foreign file
        raise ValueError(
            f"checkpoint {path} is corrupt or not a safe filterformer checkpoint "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"checkpoint {path} is not a filterformer training checkpoint "
            f"(format {found!r}, expected {CHECKPOINT_FORMAT!r})"
        )
    missing = [key for key in required if key not in state]
    if missing:
        raise ValueError(f"checkpoint {path} lacks {', '.join(map(repr, missing))}; it is damaged "
                         "or was not written by this version of filterformer")
    return state


def load_model_state(model: nn.Module, state_dict: Mapping[str, torch.Tensor], path: Any) -> None:
    """Load ``state_dict`` into ``model``; missing, unexpected, reshaped or non-finite
    parameters raise (:func:`~filterformer.strict_loading.load_weights`).

    Raises:
        ValueError: naming the checkpoint file and the first mismatching or non-finite
            parameters.
    """
    load_weights(model, state_dict, f"checkpoint {path}")


def check_same_config(
    saved: Mapping[str, Any], current: Mapping[str, Any], path: Any, prefix: str = "",
    hint: str = "",
) -> None:
    """Raise ValueError naming the file and every key where two config dicts differ.

    Args:
        saved: the configuration the file was saved with.
        current: the configuration asked for now.
        path: the file, named in the message.
        prefix: put before every key (``model.``).
        hint: appended to the message: what the reader can do about it.
    """
    differences = config_differences(saved, current, prefix)
    if differences:
        shown = "; ".join(differences[:5]) + ("; …" if len(differences) > 5 else "")
        raise ValueError(f"{path} was saved with another configuration: {shown}{hint}")


def config_differences(
    saved: Any, current: Any, prefix: str = "", labels: tuple[str, str] = ("checkpoint", "now")
) -> list[str]:
    """Every key where two (nested) config dicts differ, as ``key: <label> value, <label>
    value``, in sorted key order; ``labels`` name the two sides."""
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        found = []
        for key in sorted(set(saved) | set(current), key=str):
            found.extend(config_differences(saved.get(key), current.get(key), f"{prefix}{key}.",
                                            labels))
        return found
    if saved != current:
        return [f"{prefix.rstrip('.')}: {labels[0]} {saved!r}, {labels[1]} {current!r}"]
    return []


# -- random streams ------------------------------------------------------------------------
# Kept as tensors and plain Python data, so checkpoints load with ``torch.load(weights_only=True)``.

def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CPU and every GPU)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The state of Python's, NumPy's and torch's global generators (CPU and CUDA)."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position), "has_gauss": int(has_gauss), "cached": float(cached),
        },
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore generators saved by :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((
        numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"],
        numpy["has_gauss"], numpy["cached"],
    ))
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# -- the backbone of a training checkpoint -------------------------------------------------------

#: A parameter of every filterformer Transformer: its prefix in a checkpoint is the backbone's.
_BACKBONE_ANCHOR = "blocks.0.norm1.weight"


def load_backbone(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Transformer:
    """The :class:`~filterformer.models.Transformer` inside a training checkpoint, without the
    task head around it, as its ``model_config`` describes it.

    Task heads hold the backbone under a prefix (``transformer.``, ``classifier.transformer.``);
    the one prefix of ``blocks.0.norm1.weight`` in the saved weights is the backbone's.

    Raises:
        ValueError: naming the file when it is no training checkpoint (:func:`load_checkpoint`),
            holds no single filterformer Transformer (e.g. a pretrained model), or its weights do
            not fit its model configuration (:func:`load_model_state`).
    """
    state = load_checkpoint(path, map_location)
    config, weights = state.get("model_config"), state.get("model")
    prefixes = [
        key[: -len(_BACKBONE_ANCHOR)] for key in (weights or {}) if key.endswith(_BACKBONE_ANCHOR)
    ]
    if not isinstance(config, dict) or "pretrained" in config or len(prefixes) != 1:
        raise ValueError(f"checkpoint {path} holds no single filterformer Transformer backbone")
    prefix = prefixes[0]
    model = Transformer(TransformerConfig.from_dict(config))
    backbone = {key[len(prefix):]: value for key, value in weights.items()
                if key.startswith(prefix)}
    load_model_state(model, backbone, path)
    return model
