"""A method, spelled once: :class:`MethodSpec`, the frozen value a model is built or patched with.

A spec is parsed once, from a preset name of :mod:`filterformer.methods` and its options
(:meth:`MethodSpec.parse`, what ``patch(model, "gfsa+neutreno", layers=[1, 3])`` calls) or from a
configuration's method fields (:meth:`MethodSpec.from_config`, what
:class:`~filterformer.models.TransformerConfig` and config files use). Native models
(:class:`~filterformer.models.Transformer`) and patches read the same spec, and both ask it what
each layer runs (:meth:`MethodSpec.for_layer`).

The layer list has one meaning everywhere: ``layers`` restricts every per-layer part of a method,
the attention method (GFSA, AGF, SAMSA) and NeuTRENO's λ; a layer outside it runs plain softmax
attention without NeuTRENO's term. The first layer always provides NeuTRENO's V⁰, selected or
not. Layer fusion acts on the whole model.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple

from .attention.base import AttentionBase
from .attention.graph_filter import GRAPH_FILTER_OPTIONS, check_graph_filter_options
from .attention.registry import get_attention_class
from .checks import check_finite_numbers, check_integer, check_known_options
from .functional.neutreno import check_neutreno_lambda
from .jsonsafe import plain_data
from .methods import METHOD_PRESETS, method_changes
from .nn.fusion import FUSION_MODES

__all__ = [
    "CONFIG_FIELDS",
    "PATCHABLE_PRESETS",
    "LayerMethod",
    "MethodSpec",
    "parse_patch",
    "preset_options",
]

#: The presets a patch applies to a pretrained model (joined by ``+``, e.g. ``gfsa+fusion``):
#: those that keep the model's own attention.
PATCHABLE_PRESETS = ("gfsa", "neutreno", "fusion")
#: A configuration's method fields (:class:`~filterformer.models.TransformerConfig`, config
#: files, saved ``config.json``) and the spec field each one sets.
CONFIG_FIELDS = {
    "attention": "attention",
    "attention_options": "attention_options",
    "attention_layers": "layers",
    "neutreno_lambda": "neutreno_lambda",
    "neutreno_learnable": "neutreno_learnable",
    "neutreno_warmup": "neutreno_warmup",
    "fusion": "fusion",
}
#: Options that set a spec field; every other option of :meth:`MethodSpec.parse` is the
#: attention method's own.
_SPEC_OPTIONS = ("neutreno_lambda", "neutreno_learnable", "neutreno_warmup", "fusion", "layers")
_NEUTRENO_OPTIONS = ("neutreno_lambda", "neutreno_learnable", "neutreno_warmup", "layers")


def preset_options(method: str) -> tuple[str, ...]:
    """The options a method name (presets joined by ``+``) takes, in a fixed order; unknown
    presets take none. GFSA's: ``K, learn, exact_power, base, layers``; NeuTRENO's:
    ``neutreno_lambda, neutreno_learnable, neutreno_warmup, layers``; fusion's: ``fusion``; AGF's
    and SAMSA's: their module's own options and ``layers``."""
    names: list[str] = []
    for part in method.split("+"):
        changes = METHOD_PRESETS.get(part)
        if changes is None or part == "softmax":
            continue
        if "neutreno_lambda" in changes:
            names += _NEUTRENO_OPTIONS
        elif "fusion" in changes:
            names.append("fusion")
        else:
            names += [*_own_options(changes["attention"]), "layers"]
    return tuple(dict.fromkeys(names))


class LayerMethod(NamedTuple):
    """What one layer runs (:meth:`MethodSpec.for_layer`)."""

    attention: str
    options: dict[str, Any]
    neutreno_lambda: float
    neutreno_learnable: bool


@dataclass(frozen=True, eq=False)
class MethodSpec:
    """A method: its attention and options, NeuTRENO's λ, fusion and the layers it acts on.

    Attributes:
        attention: the attention method (a registry name: ``softmax``, ``gfsa``, ``agf``, …).
        attention_options: that method's own options (e.g. ``{"K": 3}`` for GFSA), checked
            here; read-only.
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2), finite and >= 0; 0 without NeuTRENO.
        neutreno_learnable: learn λ per head, initialised to ``neutreno_lambda``.
        neutreno_warmup: ``W``, for a patch: the optimiser steps over which λ rises linearly
            from 0 (:mod:`~filterformer.patching.neutreno_warmup`); 0: λ from the start.
        fusion: fuse the layers' outputs (METHODS.md §5): None, ``concat``, ``max`` or ``gate``;
            model-level, so ``layers`` does not restrict it.
        layers: sorted 0-based indices of the layers whose attention method and λ apply; None
            for every layer. Other layers run softmax attention without λ (module docstring).

    Two specs are equal when they mean the same method: GFSA's options are compared with their
    defaults filled in.
    """

    attention: str = "softmax"
    attention_options: Mapping[str, Any] = field(default_factory=dict)
    neutreno_lambda: float = 0.0
    neutreno_learnable: bool = False
    neutreno_warmup: int = 0
    fusion: str | None = None
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        get_attention_class(self.attention)  # raises with the valid names
        options = self.attention_options
        if not isinstance(options, Mapping):
            raise ValueError(f"attention_options must be a mapping; got {options!r}")
        options = check_finite_numbers("attention_options", dict(options))
        check_known_options(options, _own_options(self.attention), f"attention {self.attention!r}")
        if self.attention == "gfsa":
            check_graph_filter_options(options)
        object.__setattr__(self, "attention_options", MappingProxyType(options))
        object.__setattr__(self, "neutreno_lambda", check_neutreno_lambda(self.neutreno_lambda))
        _check_flag("neutreno_learnable", self.neutreno_learnable)
        check_integer("neutreno_warmup", self.neutreno_warmup, minimum=0,
                      hint=" (optimiser steps over which λ rises from 0; 0: λ from the start)")
        if self.neutreno_warmup and not self.uses_neutreno:
            raise ValueError(
                f"neutreno_warmup={self.neutreno_warmup} raises NeuTRENO's λ from 0 to "
                "neutreno_lambda, and neutreno_lambda is 0 (not learned): give neutreno_lambda > 0 "
                "or neutreno_learnable=True, or leave neutreno_warmup out"
            )
        if self.fusion is not None and self.fusion not in FUSION_MODES:
            raise ValueError(f"fusion must be one of {FUSION_MODES} or None; got {self.fusion!r}")
        if self.layers is not None:
            object.__setattr__(self, "layers", _layer_indices(self.layers))

    def _meaning(self) -> tuple[Any, ...]:
        options = self.graph_filter_options() if self.uses_gfsa else self.attention_options
        return (self.attention, _frozen(options), self.neutreno_lambda, self.neutreno_learnable,
                self.neutreno_warmup, self.fusion, self.layers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MethodSpec):
            return NotImplemented
        return self._meaning() == other._meaning()

    def __hash__(self) -> int:
        return hash(self._meaning())

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only options view cannot be pickled (worker processes receive specs).
        return _rebuild, (self.attention, dict(self.attention_options), self.neutreno_lambda,
                          self.neutreno_learnable, self.neutreno_warmup, self.fusion, self.layers)

    # -- reading a spec from its spellings --------------------------------------------------

    @classmethod
    def parse(cls, method: str | MethodSpec, **options: Any) -> MethodSpec:
        """The spec of a preset name (presets joined by ``+``) and its options.

        Options have the names of :func:`preset_options` (GFSA's ``K``, NeuTRENO's
        ``neutreno_lambda``, ``layers``, …); their defaults are the presets'. A spec is returned
        as it is (it takes no options).

        Raises:
            ValueError: for an unknown or repeated preset, presets that disagree, an option the
                method does not take (listing those it does) or a bad value.
        """
        if isinstance(method, MethodSpec):
            if options:
                raise ValueError(f"a MethodSpec carries its options; got {sorted(options)} too")
            return method
        changes = method_changes(method)  # unknown or repeated presets fail here
        check_known_options(options, preset_options(method), f"method {method!r}")
        fields = {CONFIG_FIELDS[key]: value for key, value in changes.items()}
        attention_options = dict(fields.pop("attention_options", {}))
        for name, value in options.items():
            if name in _SPEC_OPTIONS:
                fields[name] = value
            else:
                attention_options[name] = value
        return cls(**fields, attention_options=attention_options)

    @classmethod
    def from_config(cls, fields: Mapping[str, Any], preset: str | None = None) -> MethodSpec:
        """The spec of a configuration's method fields (:data:`CONFIG_FIELDS`: ``attention``,
        ``attention_options``, ``attention_layers``, ``neutreno_lambda``, …) over ``preset``'s
        (explicit fields win; ``attention_options`` merge key by key).

        Raises:
            ValueError: for a key that is not a method field (listing them) or a bad value.
        """
        from .methods import apply_method

        unknown = sorted(set(fields) - set(CONFIG_FIELDS))
        if unknown:
            raise ValueError(f"unknown method field(s) {unknown}; valid: {list(CONFIG_FIELDS)}")
        merged = apply_method(dict(fields), preset)
        spec = cls(**{CONFIG_FIELDS[key]: value for key, value in merged.items()
                      if key != "attention_layers"})
        layers = merged.get("attention_layers")
        if layers is None:
            return spec
        # Checked here first, so that errors name the config's field.
        layers = _layer_indices(layers, "attention_layers")
        _check_per_layer(layers, spec.changes_attention, "attention_layers")
        return replace(spec, layers=layers)

    def to_config(self) -> dict[str, Any]:
        """The configuration fields of this spec, as plain data (:meth:`from_config`'s
        inverse; the spelling of config files and saved ``config.json``)."""
        return {
            "attention": self.attention,
            "attention_options": plain_data(dict(self.attention_options)),
            "attention_layers": None if self.layers is None else list(self.layers),
            "neutreno_lambda": self.neutreno_lambda,
            "neutreno_learnable": self.neutreno_learnable,
            "neutreno_warmup": self.neutreno_warmup,
            "fusion": self.fusion,
        }

    # -- what the method does ---------------------------------------------------------------

    @property
    def name(self) -> str:
        """The presets this spec is made of, joined by ``+`` (``gfsa+neutreno``; ``softmax``
        for none); the attention's registry name stands for AGF and SAMSA."""
        parts = [self.attention] if self.attention != "softmax" else []
        parts += ["neutreno"] * self.uses_neutreno + ["fusion"] * self.uses_fusion
        return "+".join(parts) or "softmax"

    @property
    def uses_gfsa(self) -> bool:
        return self.attention == "gfsa"

    @property
    def uses_neutreno(self) -> bool:
        return self.neutreno_lambda != 0.0 or self.neutreno_learnable

    @property
    def uses_fusion(self) -> bool:
        return self.fusion is not None

    @property
    def changes_attention(self) -> bool:
        """Whether some layer's attention changes (its method, or NeuTRENO's term)."""
        return self.attention != "softmax" or self.uses_neutreno

    def graph_filter_options(self) -> dict[str, Any]:
        """GFSA's options, completed with their defaults (GFSA specs only)."""
        if not self.uses_gfsa:
            raise ValueError(f"method {self.name!r} has no GFSA")
        return check_graph_filter_options(self.attention_options)

    def selects(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) runs the method's per-layer parts."""
        return self.layers is None or layer in self.layers

    def for_layer(self, layer: int) -> LayerMethod:
        """What layer ``layer`` runs: the attention, its options, λ and whether λ is learned;
        softmax without λ where :meth:`selects` is false."""
        if not self.selects(layer):
            return LayerMethod("softmax", {}, 0.0, False)
        return LayerMethod(self.attention, dict(self.attention_options), self.neutreno_lambda,
                           self.neutreno_learnable)

    def check_layers(self, num_layers: int, name: str = "layers") -> None:
        """Raise ValueError if ``layers`` names a layer a model of ``num_layers`` lacks (the
        message calls the list ``name``)."""
        outside = [i for i in self.layers or () if i >= num_layers]
        if outside:
            raise ValueError(
                f"{name} {outside} do not exist: the model has {num_layers} layers, so valid "
                f"indices are 0..{num_layers - 1}"
            )

    # -- as a patch ---------------------------------------------------------------------------

    def check_patchable(self) -> None:
        """Raise ValueError unless a patch can apply this spec to a pretrained model: it keeps
        the model's attention (GFSA, NeuTRENO, fusion and their combinations; a spec that
        changes nothing, such as NeuTRENO with λ = 0, is named ``softmax``)."""
        if self.attention not in ("softmax", "gfsa"):
            raise ValueError(_not_patchable(self.name, self.attention))

    def patch_options(self) -> dict[str, Any]:
        """Every option of :attr:`name` as plain JSON values, defaults filled in:
        ``MethodSpec.parse(spec.name, **spec.patch_options())`` gives this spec back (saved
        patches hold them)."""
        values: dict[str, Any] = {}
        if self.uses_gfsa:
            values.update(plain_data(self.graph_filter_options()))
        values.update(neutreno_lambda=self.neutreno_lambda,
                      neutreno_learnable=self.neutreno_learnable,
                      neutreno_warmup=self.neutreno_warmup, fusion=self.fusion,
                      layers=None if self.layers is None else list(self.layers))
        return {name: values[name] for name in preset_options(self.name)}


def parse_patch(method: str | MethodSpec, **options: Any) -> MethodSpec:
    """:meth:`MethodSpec.parse` for a patch: only :data:`PATCHABLE_PRESETS` and their options.

    Raises:
        ValueError: naming the bad argument and the valid choices.
    """
    if isinstance(method, str):
        parts = method.split("+")
        # "softmax" alone: the name of a patch that changes nothing (NeuTRENO with λ = 0).
        if method != "softmax" and not all(part in PATCHABLE_PRESETS for part in parts):
            replacing = [p for p in parts if p in METHOD_PRESETS and p not in PATCHABLE_PRESETS
                         and p != "softmax"]
            raise ValueError(_not_patchable(method, *replacing[:1]))
    spec = MethodSpec.parse(method, **options)
    spec.check_patchable()
    return spec


def _not_patchable(name: str, replacing: str | None = None) -> str:
    text = (f"method must be one of {PATCHABLE_PRESETS} or several joined by '+' (e.g. "
            f"'gfsa+neutreno+fusion'); got {name!r}")
    if replacing is not None:
        text += (f"; {replacing!r} replaces the attention itself, so it is trained from scratch "
                 "with TransformerConfig rather than patched into a pretrained model")
    return text


def _rebuild(*fields: Any) -> MethodSpec:
    return MethodSpec(*fields)


def _own_options(attention: str) -> tuple[str, ...]:
    """An attention method's own options (not those every attention module takes)."""
    if attention == "gfsa":
        return tuple(GRAPH_FILTER_OPTIONS)
    cls = get_attention_class(attention)
    return tuple(o for o in cls.options if o not in AttentionBase.options)


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")


def _layer_indices(layers: Any, name: str = "layers") -> tuple[int, ...]:
    """``layers`` as a sorted tuple of distinct ints >= 0 (numpy integers included); errors
    call it ``name``."""
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
        raise ValueError(f"{name} must be a list of 0-based layer indices; got {layers!r}")
    indices = list(layers)
    bad = [i for i in indices if isinstance(i, bool) or not _is_index(i) or i < 0]
    if bad or not indices:
        raise ValueError(
            f"{name} must be a non-empty list of 0-based layer indices (ints >= 0; leave it out "
            f"for every layer); got {indices!r}"
        )
    return tuple(sorted({operator.index(i) for i in indices}))


def _check_per_layer(layers: tuple[int, ...], per_layer: bool, name: str) -> None:
    """Refuse a config's layer list for a method without per-layer parts: it would select
    nothing. (A preset's options take ``layers`` only where the preset has such parts.)"""
    if not per_layer:
        raise ValueError(
            f"{name} {list(layers)} select the layers of a per-layer method (an attention other "
            "than softmax, or NeuTRENO), and this method has none"
        )


def _is_index(value: Any) -> bool:
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _frozen(value: Any) -> Any:
    """``value`` as hashable data: mappings as sorted items, lists as tuples."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value

