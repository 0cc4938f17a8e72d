"""What ``patch(model, method, **options)`` may ask for, validated once for every backend.

A patch method is a preset of :mod:`filterformer.methods` (or presets joined by ``+``) that keeps
the model's own attention: ``gfsa``, ``neutreno``, ``fusion`` and their combinations. Its options
have the names of :class:`~filterformer.models.TransformerConfig`'s fields and of GFSA's module
options, and their defaults come from the same presets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..attention.gfsa import GFSA_COEFFICIENTS
from ..checks import check_integer
from ..functional.gfsa import GFSA_BASES, check_order
from ..functional.neutreno import check_neutreno_lambda
from ..methods import GFSA_ORDER, METHOD_PRESETS, method_changes
from ..nn.fusion import FUSION_MODES

__all__ = [
    "PATCHABLE_PRESETS",
    "PATCH_OPTIONS",
    "PatchSpec",
    "method_options",
    "parse_patch_spec",
]

#: The presets a patch applies (any of them may be joined with ``+``, e.g. ``gfsa+fusion``).
PATCHABLE_PRESETS = ("gfsa", "neutreno", "fusion")
#: The options each part of a patch takes.
PATCH_OPTIONS: dict[str, tuple[str, ...]] = {
    "gfsa": ("K", "learn", "exact_power", "base", "layers"),
    "neutreno": ("neutreno_lambda", "neutreno_learnable", "neutreno_warmup", "layers"),
    "fusion": ("fusion",),
}


@dataclass(frozen=True)
class PatchSpec:
    """A validated patch request.

    Attributes:
        method: the preset name(s), e.g. ``"gfsa+neutreno"``.
        attention: ``"gfsa"`` or ``"softmax"`` (the model's own attention, perhaps with NeuTRENO).
        K: GFSA's filter order (METHODS.md §1).
        learn: the GFSA coefficients that are learned; the others are fixed buffers.
        exact_power: GFSA's true ``Ā^K`` instead of the Taylor stand-in.
        base: GFSA's base attention, ``"softmax"`` or ``"efficient"`` (non-causal models).
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2), finite and >= 0; 0 without NeuTRENO.
        neutreno_learnable: learn λ per head, initialised to ``neutreno_lambda``.
        neutreno_warmup: ``W``, the optimiser steps over which NeuTRENO's λ rises linearly
            from 0 (the pretrained model's outputs at step 0) to its value; 0: λ from the start
            (:mod:`~filterformer.patching.neutreno_warmup`).
        fusion: the layer-fusion mode (METHODS.md §5), or None.
        layers: 0-based indices of the layers that use GFSA and NeuTRENO; None for all.
    """

    method: str
    attention: str = "softmax"
    K: int = GFSA_ORDER
    learn: tuple[str, ...] = tuple(GFSA_COEFFICIENTS)
    exact_power: bool = False
    base: str = "softmax"
    neutreno_lambda: float = 0.0
    neutreno_learnable: bool = False
    neutreno_warmup: int = 0
    fusion: str | None = None
    layers: frozenset[int] | None = None

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
        """Whether the patch changes attention layers (GFSA and/or NeuTRENO)."""
        return self.uses_gfsa or self.uses_neutreno

    def selects(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) uses GFSA and NeuTRENO."""
        return self.layers is None or layer in self.layers

    def options(self) -> dict[str, Any]:
        """The options of ``method`` as plain JSON values: ``parse_patch_spec(spec.method,
        spec.options())`` gives this spec back."""
        values = {name: getattr(self, name) for name in method_options(self.method)}
        if "learn" in values:
            values["learn"] = list(self.learn)
        if "layers" in values:
            values["layers"] = None if self.layers is None else sorted(self.layers)
        return values

    def check_layers(self, num_layers: int) -> None:
        """Raise ValueError if ``layers`` names a layer the model does not have."""
        if self.layers is None:
            return
        outside = sorted(i for i in self.layers if i >= num_layers)
        if outside:
            raise ValueError(
                f"layers {outside} do not exist: the model has {num_layers} layers, so valid "
                f"indices are 0..{num_layers - 1}"
            )


def method_options(method: str) -> tuple[str, ...]:
    """The options that ``method`` (presets joined by ``+``) takes, in :data:`PATCH_OPTIONS`'
    order; unknown presets take none."""
    parts = method.split("+")
    return tuple(dict.fromkeys(o for part in parts for o in PATCH_OPTIONS.get(part, ())))


def parse_patch_spec(method: str, options: Mapping[str, Any]) -> PatchSpec:
    """Validate ``method`` (presets joined by ``+``) and its options.

    Raises:
        ValueError: naming the bad argument and listing the valid choices.
    """
    parts = method.split("+") if isinstance(method, str) else []
    if not parts or any(part not in PATCHABLE_PRESETS for part in parts):
        raise ValueError(
            f"method must be one of {PATCHABLE_PRESETS} or several joined by '+' (e.g. "
            f"'gfsa+neutreno+fusion'); got {method!r}"
            + _replacement_hint(parts)
        )
    changes = method_changes(method)  # a preset named twice fails here
    valid = method_options(method)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for method {method!r}; "
            f"valid options: {', '.join(valid) or 'none'}"
        )
    values: dict[str, Any] = {
        "attention": changes.get("attention", "softmax"),
        "neutreno_lambda": changes.get("neutreno_lambda", 0.0),
        "fusion": changes.get("fusion"),
        **changes.get("attention_options", {}),
    }
    if "K" in options:
        values["K"] = check_order(options["K"])
    if "learn" in options:
        values["learn"] = _parse_learn(options["learn"])
    for flag in ("exact_power", "neutreno_learnable"):
        if flag in options:
            values[flag] = _parse_flag(flag, options[flag])
    if "base" in options:
        if options["base"] not in GFSA_BASES:
            raise ValueError(f"base must be one of {GFSA_BASES}; got {options['base']!r}")
        values["base"] = options["base"]
    if "neutreno_lambda" in options:
        values["neutreno_lambda"] = check_neutreno_lambda(options["neutreno_lambda"])
    if "neutreno_warmup" in options:
        values["neutreno_warmup"] = check_integer(
            "neutreno_warmup", options["neutreno_warmup"], minimum=0,
            hint=" (optimiser steps over which λ rises from 0; 0: λ from the start)",
        )
    if options.get("layers") is not None:
        values["layers"] = _parse_layers(options["layers"])
    if "fusion" in options:
        if options["fusion"] not in FUSION_MODES:
            raise ValueError(f"fusion must be one of {FUSION_MODES}; got {options['fusion']!r}")
        values["fusion"] = options["fusion"]
    spec = PatchSpec(method=method, **values)
    if spec.neutreno_warmup and not spec.uses_neutreno:
        raise ValueError(
            f"neutreno_warmup={spec.neutreno_warmup} raises NeuTRENO's λ from 0 to "
            "neutreno_lambda, and neutreno_lambda is 0 (not learned): give neutreno_lambda > 0 "
            "or neutreno_learnable=True, or leave neutreno_warmup out"
        )
    return spec


def _replacement_hint(parts: list[str]) -> str:
    replacing = [p for p in parts if p in METHOD_PRESETS and p not in PATCHABLE_PRESETS]
    if not replacing:
        return ""
    return (
        f"; {replacing[0]!r} replaces the attention itself, so it is trained from scratch with "
        "TransformerConfig rather than patched into a pretrained model"
    )


def _parse_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return value


def _parse_learn(learn: str | Iterable[str]) -> tuple[str, ...]:
    names = (learn,) if isinstance(learn, str) else tuple(learn)
    unknown = sorted(set(names) - set(GFSA_COEFFICIENTS))
    if unknown:
        raise ValueError(
            f"learn must name coefficients among {tuple(GFSA_COEFFICIENTS)}; got {unknown}"
        )
    return tuple(name for name in GFSA_COEFFICIENTS if name in names)


def _parse_layers(layers: Any) -> frozenset[int]:
    if isinstance(layers, (int, str)) or not isinstance(layers, Iterable):
        raise ValueError(f"layers must be a list of 0-based layer indices; got {layers!r}")
    indices = list(layers)
    bad = [i for i in indices if isinstance(i, bool) or not isinstance(i, int) or i < 0]
    if bad or not indices:
        raise ValueError(
            f"layers must be a non-empty list of 0-based layer indices (ints >= 0); got {layers!r}"
        )
    return frozenset(indices)
