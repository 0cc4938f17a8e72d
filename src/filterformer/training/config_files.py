"""Reading a :class:`TrainConfig` from YAML or TOML, with ``key=value`` overrides on top, and a
:class:`TransformerConfig` from a file of its fields."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as a package, when installed
    try:
        import tomli as tomllib
    except ModuleNotFoundError:
        tomllib = None

from ..models import TransformerConfig
from .config_values import field_hints, parse_text
from .run_config import TrainConfig, default_task_options
from .run_files import write_text

__all__ = [
    "CONFIG_SUFFIXES",
    "MODEL_CONFIG_SUFFIXES",
    "DuplicateKeyError",
    "apply_overrides",
    "load_config",
    "load_transformer_config",
    "load_yaml",
    "read_config_file",
    "save_config",
    "set_values",
]

#: File suffixes read as YAML or TOML.
CONFIG_SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}
#: Suffixes of a file of model fields (:func:`load_transformer_config`): those above and JSON.
MODEL_CONFIG_SUFFIXES = {**CONFIG_SUFFIXES, ".json": "json"}
#: Mapping fields whose keys are the fields of a dataclass (typed overrides).
_KEYED_MAPPINGS = {"model": TransformerConfig}


class DuplicateKeyError(yaml.YAMLError):
    """A YAML mapping that gives one key twice (YAML keeps the last value without a word; TOML
    and JSON readers differ, so a config file must say what it means once)."""

    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(f"key {key!r} is given twice, on line {first_line} and on line {line}; "
                         "keep one")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that repeats a key."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<" merges, overriding on purpose
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = lines.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # unhashable: the safe loader says so itself
                continue
            if first != key_node.start_mark.line + 1:
                raise DuplicateKeyError(key, first, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """The plain data of YAML ``text`` (the safe loader: no tags that build objects), refusing a
    mapping that gives a key twice.

    Raises:
        ValueError: naming the key and both lines, or yaml.YAMLError for text that is no YAML.
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader


def read_config_file(
    path: str | os.PathLike, suffixes: Mapping[str, str] = CONFIG_SUFFIXES
) -> dict[str, Any]:
    """The plain data of a YAML or TOML config file (or JSON, where ``suffixes`` allow it).

    Args:
        path: the file.
        suffixes: the file suffixes accepted, each with its format (``yaml``, ``toml`` or
            ``json``); :data:`CONFIG_SUFFIXES` or :data:`MODEL_CONFIG_SUFFIXES`.

    Raises:
        ValueError: for another suffix, a missing file, unparsable text, a YAML key given twice
            in one mapping (naming it and its lines) or a non-mapping.
    """
    path = Path(path)
    kind = suffixes.get(path.suffix.lower())
    if kind is None:
        raise ValueError(
            f"config {path} must end in one of {', '.join(suffixes)}; got {path.suffix!r}"
        )
    if not path.is_file():
        raise ValueError(f"config file {path} does not exist")
    if kind == "toml" and tomllib is None:
        raise ValueError(f"reading TOML config {path} needs Python >= 3.11 or the tomli package")
    text = path.read_text()
    try:
        if kind == "toml":
            data = tomllib.loads(text)
        elif kind == "json":
            data = json.loads(text)
        else:
            data = load_yaml(text)
    except (ValueError, yaml.YAMLError) as err:  # TOML's and JSON's decode errors are ValueErrors
        raise ValueError(f"cannot parse {kind.upper()} config {path}: {err}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ValueError(f"config {path} must hold a mapping of keys; got {type(data).__name__}")
    return data


def _hint_at(path: list[str]) -> Any:
    """The type hint of the config value at ``path`` (``Any`` inside free-form mappings)."""
    cls: Any = TrainConfig
    for depth, key in enumerate(path):
        if cls is Any:
            return Any
        hints = field_hints(cls)
        if key not in hints:
            where = ".".join(path[:depth]) or "the config"
            raise ValueError(
                f"unknown config key {'.'.join(path[: depth + 1])!r}; valid keys of {where}: "
                f"{', '.join(hints)}"
            )
        parent, hint = cls, hints[key]
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if depth < len(path) - 1 and len(options) == 1:  # walk into an optional mapping
            hint = options[0]
        if parent is TrainConfig and key in _KEYED_MAPPINGS:
            cls = _KEYED_MAPPINGS[key]
        elif dataclasses.is_dataclass(hint):
            cls = hint
        elif typing.get_origin(hint) is dict or hint is dict:
            cls = Any
        elif depth < len(path) - 1:
            raise ValueError(f"config key {'.'.join(path[: depth + 1])!r} takes no sub-keys")
        else:
            return hint
    return cls


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``data`` with ``key.sub=value`` overrides set (a new dict; ``data`` is unchanged).

    Values are read as YAML scalars or lists and typed by the field they set, so
    ``model.depth=6``, ``optimizer.lr=1e-3``, ``model.attention_layers=[1,3]`` and
    ``method=gfsa`` all do what they say. An override that changes ``task`` drops the options
    of the previous task: ``task_options`` start from the new task's defaults.

    Raises:
        ValueError: for text without ``=``, or a key the config does not have (listing the
            valid keys at that level).
    """
    parsed = []
    for override in overrides:
        key, sep, text = override.partition("=")
        path = key.strip().split(".")
        if not sep or not all(path):
            raise ValueError(f"override {override!r} must look like key=value or key.sub=value")
        parsed.append((path, parse_text(text, _hint_at(path))))
    return _set_paths(data, parsed)


def set_values(data: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with each dotted key of ``values`` set to its value (a new dict; ``data`` is
    unchanged), as :func:`apply_overrides` sets them, from values instead of text.

    A string where the field takes no string (YAML 1.1 reads ``1e-3`` as text) is typed as the
    command line types it (:func:`~filterformer.training.config_values.parse_text`).

    Raises:
        ValueError: for a key the config does not have (listing the valid keys at that level).
    """
    typed = []
    for key, value in values.items():
        path = key.strip().split(".")
        if not all(path):
            raise ValueError(f"config key {key!r} must look like key or key.sub")
        hint = _hint_at(path)
        typed.append((path, parse_text(value, hint) if isinstance(value, str) else value))
    return _set_paths(data, typed)


def _set_paths(data: dict[str, Any], values: Sequence[tuple[list[str], Any]]) -> dict[str, Any]:
    """``data`` (copied) with each ``(path, value)`` set, missing mappings on the way filled
    from the defaults; a changed ``task`` drops the previous task's options."""
    data = copy.deepcopy(data)
    defaults = TrainConfig().to_dict()
    task = data.get("task", defaults["task"])
    for path, value in values:
        if path == ["task"] and value != task:
            data.pop("task_options", None)
            task = value
    defaults["task_options"] = default_task_options(task)
    for path, value in values:
        target, level_defaults = data, defaults
        for part in path[:-1]:
            if target.get(part) is None:
                target[part] = copy.deepcopy(level_defaults.get(part, {}))
            if not isinstance(target[part], dict):
                raise ValueError(f"config key {part!r} is not a mapping; cannot set {path}")
            target, level_defaults = target[part], {}
        target[path[-1]] = value
    return data


def load_config(
    path: str | os.PathLike | None = None, overrides: Sequence[str] = ()
) -> TrainConfig:
    """A :class:`TrainConfig` from a YAML/TOML file (or the defaults) and overrides.

    Args:
        path: a ``.yaml``, ``.yml`` or ``.toml`` file; None starts from the defaults.
        overrides: ``key=value`` strings applied on top (see :func:`apply_overrides`).
    """
    data = {} if path is None else read_config_file(path)
    return TrainConfig.from_dict(apply_overrides(data, overrides))


def save_config(config: TrainConfig, path: str | os.PathLike) -> Path:
    """Write ``config`` as YAML (readable back by :func:`load_config`), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, yaml.safe_dump(config.to_dict(), sort_keys=False))
    return path


def load_transformer_config(path: str | os.PathLike, task: Any | None = None) -> TransformerConfig:
    """A :class:`TransformerConfig` from a YAML, JSON or TOML file of its fields.

    A model without an input size (neither ``vocab_size`` nor ``input_dim``) takes ``task``'s: its
    vocabulary or features per token and, unless the file sets it, its ``max_len``.

    Args:
        path: a file whose suffix is one of :data:`MODEL_CONFIG_SUFFIXES`.
        task: a ``TaskData`` (``filterformer.data.load_task``), or None.

    Raises:
        ValueError: for a file :func:`read_config_file` refuses, an unknown field (listing the
            valid ones) or a bad value.
    """
    data = read_config_file(path, MODEL_CONFIG_SUFFIXES)
    if task is not None and data.get("vocab_size") is None and data.get("input_dim") is None:
        data.update(vocab_size=task.vocab_size, input_dim=task.input_dim)
        data.setdefault("max_len", task.max_len)
    return TransformerConfig.from_dict(data)
