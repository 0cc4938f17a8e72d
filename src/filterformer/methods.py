"""The methods ``filterformer compare`` puts side by side, as changes to a model's configuration.

A method name is a preset (``gfsa``, ``samsa_hard``, …) or several joined by ``+``
(``gfsa+neutreno``): the presets' changes are merged, and two presets that set the same field to
different values are rejected. Each preset leaves every option it does not name at the attention
module's own default, so the presets and the modules never disagree. A name and its options are
parsed into one :class:`~filterformer.method_spec.MethodSpec`, which models and patches read.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_METHODS",
    "GFSA_ORDER",
    "METHOD_PRESETS",
    "NEUTRENO_LAMBDA",
    "apply_method",
    "method_changes",
    "method_names",
]

#: GFSA's filter order K wherever none is given (METHODS.md §1; the papers search 2..10).
GFSA_ORDER = 3
#: NeuTRENO's λ wherever none is given: the paper's vision value (its language value is 0.4).
NEUTRENO_LAMBDA = 0.6

#: Configuration changes of each method, as :class:`~filterformer.models.TransformerConfig`
#: fields. ``compare``, ``patch`` and ``bench`` all read their methods from this table.
METHOD_PRESETS: dict[str, dict[str, Any]] = {
    "softmax": {},
    "gfsa": {"attention": "gfsa"},
    "neutreno": {"neutreno_lambda": NEUTRENO_LAMBDA},
    "agf": {"attention": "agf"},
    "samsa_soft": {"attention": "samsa", "attention_options": {"mode": "soft"}},
    "samsa_hard": {"attention": "samsa", "attention_options": {"mode": "hard"}},
    "fusion": {"fusion": "concat"},
}

#: What ``filterformer compare`` runs when no methods are named.
DEFAULT_METHODS: tuple[str, ...] = (
    "softmax", "gfsa", "neutreno", "agf", "samsa_soft", "samsa_hard", "fusion",
)

_SEPARATOR = "+"


def method_names() -> tuple[str, ...]:
    """The preset names (any of them may be joined with ``+``)."""
    return tuple(METHOD_PRESETS)


def method_changes(name: str) -> dict[str, Any]:
    """The configuration changes of method ``name`` (a preset or presets joined by ``+``).

    Raises:
        ValueError: for an unknown preset (listing the valid ones), a preset named twice, or
            presets that set one field to different values.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"method must be a non-empty string; valid methods: {_valid()}")
    parts = name.split(_SEPARATOR)
    unknown = [p for p in parts if p not in METHOD_PRESETS]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown method {names}; valid methods: {_valid()}")
    if len(set(parts)) != len(parts):
        raise ValueError(f"method {name!r} names a preset twice")
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for part in parts:
        for key, value in _flatten(METHOD_PRESETS[part]).items():
            if key in merged and merged[key] != value:
                raise ValueError(
                    f"method {name!r} combines presets that disagree: {owner[key]!r} sets "
                    f"{key}={merged[key]!r}, {part!r} sets {key}={value!r}"
                )
            merged[key], owner[key] = value, part
    return _unflatten(merged)


def apply_method(model_fields: dict[str, Any], method: str | None) -> dict[str, Any]:
    """Model fields with ``method``'s changes underneath: fields given explicitly win.

    ``attention_options`` merge key by key, so ``{"attention_options": {"K": 5}}`` tunes the
    GFSA that ``method="gfsa"`` selects.

    Args:
        model_fields: explicitly set :class:`~filterformer.models.TransformerConfig` fields.
        method: a method name, or None for the fields as they are.

    Returns:
        A new dict of fields.
    """
    if method is None:
        return dict(model_fields)
    changes = method_changes(method)
    merged = {**changes, **model_fields}
    options = {**changes.get("attention_options", {}), **model_fields.get("attention_options", {})}
    if options:
        merged["attention_options"] = options
    return merged


def _valid() -> str:
    return f"{', '.join(METHOD_PRESETS)} (join several with '{_SEPARATOR}', e.g. gfsa+neutreno)"


def _flatten(changes: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in changes.items() if k != "attention_options"}
    options = changes.get("attention_options", {})
    flat.update({f"attention_options.{k}": v for k, v in options.items()})
    return flat


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    for key, value in flat.items():
        if key.startswith("attention_options."):
            changes.setdefault("attention_options", {})[key.split(".", 1)[1]] = value
        else:
            changes[key] = value
    return changes
