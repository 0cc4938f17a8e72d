"""The weight files of a saved model: one ``model.safetensors``, or shards named by an index
(patched models, :mod:`filterformer.patching.saving`; filterformer's own,
:mod:`filterformer.models.saved_model`).

A directory holds exactly one of the two layouts. A save removes the files of an earlier save
first, of either layout, so that a loader can never pick an earlier model's weights; a directory
holding both layouts (or an index naming shards that are missing or hold other weights) is
refused when loading, with the files named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor, nn

__all__ = [
    "WEIGHTS_FILE",
    "WEIGHTS_INDEX",
    "read_weights",
    "remove_weight_files",
    "take_saved_dtype",
]

#: The single-file layout.
WEIGHTS_FILE = "model.safetensors"
#: The sharded layout's index, whose ``weight_map`` names the shard of every weight.
WEIGHTS_INDEX = "model.safetensors.index.json"
#: A shard's name, as ``transformers`` writes it (``model-00001-of-00003.safetensors``).
SHARD_NAME = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")


def remove_weight_files(directory: str | Path) -> list[Path]:
    """Delete ``directory``'s weight files of either layout (before a save writes its own).

    Returns:
        The files deleted.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    stale = [
        path for path in directory.iterdir()
        if path.is_file()
        and (path.name in (WEIGHTS_FILE, WEIGHTS_INDEX) or SHARD_NAME.fullmatch(path.name))
    ]
    for path in stale:
        path.unlink()
    return stale


def read_weights(directory: str | Path) -> dict[str, Tensor]:
    """Every tensor of ``directory/model.safetensors``, or of the shards its index names.

    Raises:
        FileNotFoundError: when the directory has neither layout, or a shard the index names
            is missing.
        ValueError: when the directory holds both layouts, or the index is malformed or does
            not match its shards' contents (naming the file).
    """
    from safetensors.torch import load_file

    directory = Path(directory)
    single, index = directory / WEIGHTS_FILE, directory / WEIGHTS_INDEX
    if single.is_file() and index.is_file():
        raise ValueError(
            f"{directory} holds two sets of weights, {WEIGHTS_FILE} and the shards of "
            f"{WEIGHTS_INDEX}, so which model it holds is unknown; save the model again into an "
            "empty directory (a save replaces both), or delete the set that is not the model's"
        )
    if single.is_file():
        return load_file(single)
    if not index.is_file():
        raise FileNotFoundError(f"{directory} has no {WEIGHTS_FILE} (nor {WEIGHTS_INDEX})")
    shards = _weight_map(index)
    weights: dict[str, Tensor] = {}
    for name, expected in sorted(shards.items()):
        shard = directory / name
        if not shard.is_file():
            raise FileNotFoundError(f"{index} names the shard {name}, which is missing")
        tensors = load_file(shard)
        if set(tensors) != expected:
            differ = sorted(set(tensors) ^ expected)
            raise ValueError(
                f"{shard} does not hold the weights {index} assigns to it (they differ in "
                f"{differ[:5]}{' …' if len(differ) > 5 else ''}); save the model again"
            )
        weights.update(tensors)
    return weights


def take_saved_dtype(model: nn.Module, weights: Mapping[str, Tensor]) -> None:
    """Give ``model`` the dtype of ``weights``' floating-point tensors, when they have one."""
    dtypes = {t.dtype for t in weights.values() if t.is_floating_point()}
    if len(dtypes) == 1:
        model.to(dtypes.pop())


def _weight_map(index: Path) -> dict[str, set[str]]:
    """Each shard's file name and the weight names ``index`` assigns to it."""
    try:
        weight_map = json.loads(index.read_text()).get("weight_map")
    except (json.JSONDecodeError, AttributeError) as err:
        raise ValueError(f"{index} is not a JSON object with a weight_map: {err}") from err
    if not isinstance(weight_map, dict) or not all(
        isinstance(v, str) and "/" not in v and "\\" not in v for v in weight_map.values()
    ):
        raise ValueError(
            f"{index}: weight_map must map each weight name to a shard file in the same "
            f"directory; got {weight_map!r:.200}"
        )
    shards: dict[str, set[str]] = {}
    for weight, shard in weight_map.items():
        shards.setdefault(shard, set()).add(weight)
    return shards
