"""What ``patch(model, method, **options)`` may ask for, validated once for every backend."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..attention.gfsa import GFSA_COEFFICIENTS
from ..functional.gfsa import check_order
from ..nn.fusion import FUSION_MODES

__all__ = ["PATCH_METHODS", "PatchSpec", "parse_patch_spec"]

#: The methods :func:`~filterformer.patching.patch` applies, and the options each takes.
PATCH_METHODS: dict[str, tuple[str, ...]] = {
    "gfsa": ("K", "learn", "layers"),
    "neutreno": ("lam", "layers"),
    "gfsa+neutreno": ("K", "learn", "lam", "layers"),
    "fusion": ("mode",),
}


@dataclass(frozen=True)
class PatchSpec:
    """A validated patch request.

    Attributes:
        method: one of :data:`PATCH_METHODS`.
        K: GFSA's filter order (METHODS.md §1).
        learn: the GFSA coefficients that are learned; the others are fixed buffers.
        lam: NeuTRENO's λ (METHODS.md §2).
        layers: 0-based indices of the layers that use the method; None for all.
        mode: the layer-fusion mode (METHODS.md §5).
    """

    method: str
    K: int = 3
    learn: tuple[str, ...] = tuple(GFSA_COEFFICIENTS)
    lam: float = 0.6
    layers: frozenset[int] | None = None
    mode: str = "gate"

    @property
    def uses_gfsa(self) -> bool:
        return self.method in ("gfsa", "gfsa+neutreno")

    @property
    def uses_neutreno(self) -> bool:
        return self.method in ("neutreno", "gfsa+neutreno")

    @property
    def uses_fusion(self) -> bool:
        return self.method == "fusion"

    def selects(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) uses the method."""
        return self.layers is None or layer in self.layers

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


def parse_patch_spec(method: str, options: Mapping[str, Any]) -> PatchSpec:
    """Validate ``method`` and its options.

    Raises:
        ValueError: naming the bad argument and listing the valid choices.
    """
    if method not in PATCH_METHODS:
        raise ValueError(f"method must be one of {tuple(PATCH_METHODS)}; got {method!r}")
    valid = PATCH_METHODS[method]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for method {method!r}; "
            f"valid options: {', '.join(valid)}"
        )
    values: dict[str, Any] = {}
    if "K" in options:
        values["K"] = check_order(options["K"])
    if "learn" in options:
        values["learn"] = _parse_learn(options["learn"])
    if "lam" in options:
        values["lam"] = _parse_lambda(options["lam"])
    if options.get("layers") is not None:
        values["layers"] = _parse_layers(options["layers"])
    if "mode" in options:
        if options["mode"] not in FUSION_MODES:
            raise ValueError(f"mode must be one of {FUSION_MODES}; got {options['mode']!r}")
        values["mode"] = options["mode"]
    return PatchSpec(method=method, **values)


def _parse_learn(learn: str | Iterable[str]) -> tuple[str, ...]:
    names = (learn,) if isinstance(learn, str) else tuple(learn)
    unknown = sorted(set(names) - set(GFSA_COEFFICIENTS))
    if unknown:
        raise ValueError(
            f"learn must name coefficients among {tuple(GFSA_COEFFICIENTS)}; got {unknown}"
        )
    return tuple(name for name in GFSA_COEFFICIENTS if name in names)


def _parse_lambda(lam: Any) -> float:
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam):
        raise ValueError(f"lam must be a finite number (0.6 vision, 0.4 language); got {lam!r}")
    return float(lam)


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
