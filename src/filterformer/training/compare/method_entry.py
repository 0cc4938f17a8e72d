"""One compared method: its name, its preset(s) and the overrides of its own runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...methods import method_changes

__all__ = ["ENTRY_KEYS", "SHARED_KEYS", "MethodEntry"]

#: Keys of a ``compare.methods`` entry given as a mapping.
ENTRY_KEYS = ("name", "method", "set")
#: Config keys a method's own ``set`` may not change: they make the runs one comparison
#: (``compile`` changes no result, but the time per step of every method).
SHARED_KEYS = ("task", "task_options", "method", "seed", "output_dir", "compile")
#: A method name is a run directory: letters, digits, ``_ . + -``, not starting with ``.``/``-``.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


@dataclass(frozen=True)
class MethodEntry:
    """One compared method: its name, its preset(s), and overrides of its own runs.

    Attributes:
        name: the label in tables and the run directory ``runs/<name>/``.
        method: a preset of :mod:`filterformer.methods` or presets joined by ``+``.
        overrides: dotted config keys and values set on this method's runs only (the entry's
            ``set``), e.g. ``{"optimizer.lr": 0}`` or ``{"model.attention_layers": [1, 3]}``;
            they may set the model fields the shared base may not (:data:`METHOD_FIELDS`).
    """

    name: str
    method: str
    overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, entry: str | dict[str, Any], where: str) -> MethodEntry:
        """An entry of ``compare.methods``: a method name, or a mapping ``{name, method, set}``
        (``name`` defaults to ``method``). ``where`` names it in errors."""
        if isinstance(entry, str):
            entry = {"method": entry}
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} in {where}; valid keys: "
                             f"{', '.join(ENTRY_KEYS)}")
        if "method" not in entry:
            raise ValueError(f"{where} needs a 'method' (a preset or presets joined by '+')")
        method = entry["method"]
        method_changes(method)  # raises with the valid names
        name = entry.get("name", method)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(
                f"{where}.name must be usable as a directory name (letters, digits, '_', '.', "
                f"'+', '-'; not starting with '.' or '-'); got {name!r}"
            )
        overrides = entry.get("set") or {}
        if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
            raise ValueError(f"{where}.set must map dotted config keys to values, e.g. "
                             f"{{optimizer.lr: 0}}; got {overrides!r}")
        shared = sorted(k for k in overrides if k.split(".")[0] in SHARED_KEYS)
        if shared:
            raise ValueError(f"{where}.set may not set {', '.join(shared)}: every run of a "
                             f"comparison shares {', '.join(SHARED_KEYS)}")
        return cls(name, method, dict(overrides))

    def to_dict(self) -> dict[str, Any]:
        """Plain data, in the form of a ``compare.methods`` mapping entry."""
        return {"name": self.name, "method": self.method, "set": dict(self.overrides)}
