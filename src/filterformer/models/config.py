"""The configuration of a :class:`~filterformer.models.Transformer`."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import Any

from ..checks import check_choice, check_integer, check_positive, check_probability
from ..jsonsafe import reject_unknown_fields
from ..method_spec import CONFIG_FIELDS, MethodSpec
from ..nn import NORM_POSITIONS, POSITIONS

__all__ = ["TransformerConfig"]


@dataclass
class TransformerConfig:
    """Everything that shapes a Transformer; one dataclass, checked on construction.

    The method is one :class:`~filterformer.method_spec.MethodSpec`, :attr:`method`, made once
    when the config is: from ``spec=`` (a spec, or a preset name such as ``"gfsa+neutreno"``)
    or from the method fields below (the spelling of config files and saved ``config.json``),
    which then mirror the spec and are fixed (make another config with
    :func:`dataclasses.replace`). The model reads only the spec.

    Attributes:
        dim: model width D.
        depth: number of blocks L.
        num_heads: attention heads h (D divisible by h).
        mlp_ratio: MLP inner width over D.
        dropout: dropout in embeddings, MLPs and after attention projections.
        attn_dropout: dropout on attention probabilities.
        qkv_bias: bias on the q/k/v projection.
        norm: ``"pre"`` or ``"post"`` LayerNorm.
        norm_eps: LayerNorm epsilon.
        causal: causal (decoder) or bidirectional (encoder).
        attention: the attention method (a registry name: ``softmax``, ``gfsa``, ``agf``, …).
        attention_options: keyword options of that method (e.g. ``{"K": 3}`` for GFSA).
        attention_layers: 0-based indices of the blocks that run the method's per-layer parts,
            ``attention`` and NeuTRENO's λ alike; the others run softmax without λ. None means
            every block (GFSA's "even-numbered layers" are ``(1, 3, 5, …)``). The spec's
            ``layers``, with the same meaning in a patch.
        neutreno_lambda: NeuTRENO's λ on the selected layers, a finite number >= 0 (the papers
            use (0, 1]; 0 disables it).
        neutreno_learnable: learn λ per head, initialised to ``neutreno_lambda``.
        neutreno_warmup: for a pretrained run's NeuTRENO patch only: the optimiser steps over
            which λ rises from 0, so that the patched model starts as the pretrained one
            (:mod:`~filterformer.patching.neutreno_warmup`). A model trained from scratch has
            no earlier outputs to keep and refuses any value but 0.
        fusion: fuse every layer's output before the head: None, ``concat``, ``max`` or ``gate``.
        fusion_include_embeddings: also fuse the embedding output H_0.
        vocab_size: token vocabulary, for ``input_ids`` inputs.
        input_dim: features per token, for continuous ``inputs``.
        max_len: the longest sequence.
        position: ``"learned"``, ``"sinusoidal"`` or ``"none"`` positional encoding.
        spec: (constructor only) the method as a spec or preset name, instead of the method
            fields; read it back as :attr:`method`.
    """

    dim: int = 128
    depth: int = 4
    num_heads: int = 4
    mlp_ratio: float = 4.0
    dropout: float = 0.0
    attn_dropout: float = 0.0
    qkv_bias: bool = True
    norm: str = "pre"
    norm_eps: float = 1e-5
    causal: bool = False
    attention: str = "softmax"
    attention_options: dict[str, Any] = field(default_factory=dict)
    attention_layers: tuple[int, ...] | None = None
    neutreno_lambda: float = 0.0
    neutreno_learnable: bool = False
    neutreno_warmup: int = 0
    fusion: str | None = None
    fusion_include_embeddings: bool = False
    vocab_size: int | None = None
    input_dim: int | None = None
    max_len: int = 512
    position: str = "learned"
    spec: InitVar[MethodSpec | str | None] = None

    def __post_init__(self, spec: MethodSpec | str | None) -> None:
        for name in ("dim", "depth", "num_heads", "max_len"):
            check_integer(name, getattr(self, name))
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
        for name in ("dropout", "attn_dropout"):
            check_probability(name, getattr(self, name))
        for name in ("mlp_ratio", "norm_eps"):
            check_positive(name, getattr(self, name))
        if not 1 <= self.dim * self.mlp_ratio < 2**63:
            raise ValueError(f"mlp_ratio × dim is the MLP's inner width, a whole number from 1 "
                             f"to 2**63; got {self.mlp_ratio} × {self.dim}")
        check_choice("norm", self.norm, NORM_POSITIONS)
        check_choice("position", self.position, POSITIONS)
        for name in ("vocab_size", "input_dim"):
            check_integer(name, getattr(self, name), optional=True)
        spec = self._method_spec(spec)
        spec.check_layers(self.depth, "attention_layers")
        if spec.neutreno_warmup:
            raise ValueError(
                f"neutreno_warmup={spec.neutreno_warmup} raises λ from 0 in a pretrained model's "
                "NeuTRENO patch (a run with pretrained set); a model trained from scratch has no "
                "pretrained outputs to keep: leave neutreno_warmup at 0"
            )
        mirrored = {**spec.to_config(), "attention_layers": spec.layers}
        for name, value in mirrored.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_method", spec)

    @property
    def method(self) -> MethodSpec:
        """The config's method, made once on construction."""
        return self.__dict__["_method"]

    def _method_spec(self, method: MethodSpec | str | None) -> MethodSpec:
        """The spec of ``method``, or of the method fields when it is None."""
        fields = {name: getattr(self, name) for name in CONFIG_FIELDS}
        if method is None:
            return MethodSpec.from_config(fields)
        defaults = {f.name: f.default for f in dataclasses.fields(self) if f.name in fields}
        defaults["attention_options"] = {}
        given = sorted(name for name, value in fields.items() if value != defaults[name])
        if given:
            raise ValueError(f"give the method either as spec= or as the fields {given}, "
                             "not both")
        return MethodSpec.parse(method)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in CONFIG_FIELDS and "_method" in self.__dict__:
            raise AttributeError(
                f"{name} is part of the config's method, fixed when it was made; make another "
                f"config with dataclasses.replace(config, {name}=...)"
            )
        super().__setattr__(name, value)

    def layer_attention(self, index: int) -> tuple[str, dict[str, Any]]:
        """The attention method and options of block ``index``
        (:meth:`~filterformer.method_spec.MethodSpec.for_layer`)."""
        layer = self.method.for_layer(index)
        return layer.attention, layer.options

    def to_dict(self) -> dict[str, Any]:
        """Plain data (for checkpoints and config files)."""
        data = dataclasses.asdict(self)
        # Always 0 here (pretrained runs only): left out, so configs written before the field
        # existed (checkpoints being resumed) read the same.
        del data["neutreno_warmup"]
        return {**data, **{k: v for k, v in self.method.to_config().items() if k in data}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransformerConfig:
        """Inverse of :meth:`to_dict`; unknown keys raise ValueError listing the valid ones."""
        reject_unknown_fields(cls, data)
        return cls(**data)

