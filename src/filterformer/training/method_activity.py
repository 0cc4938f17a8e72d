"""How far the parameters a method adds moved from where training started: whether a method had
any chance to take effect.

AdamW moves a parameter by at most about the summed learning rate, so a method whose coefficients
start at a no-op (GFSA's ``w0, w1, wK = 0, 1, 0``, AGF's ``p = 0``) can end a short run where it
began, and the run then compares softmax attention with itself. :func:`method_start` records the
start (kept in the run's checkpoint, so that a resumed run measures from the true start);
:func:`method_activity` measures the distance, per parameter
(:func:`~filterformer.method_parameters.method_parameters`), per method, and on the learned
filters' responses over graph frequencies where the layers compute one (GFSA's ``g(σ)``, AGF's
``G(σ)``, :mod:`filterformer.diagnostics.learned_filters`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ..diagnostics.learned_filters import agf_filter_responses, gfsa_filter_responses
from ..method_parameters import method_parameters

__all__ = ["LISTED_VALUES", "method_activity", "method_start"]

#: A parameter of at most this many values has its change listed value by value (GFSA's ``w0``
#: per head, λ per head, AGF's ``p``); a larger one only its largest change.
LISTED_VALUES = 64
#: The methods whose layers compute a filter response, and how to find them.
_RESPONSES = {"gfsa": gfsa_filter_responses, "agf": agf_filter_responses}


@torch.no_grad()
def method_start(model: nn.Module) -> dict[str, dict[str, Tensor]]:
    """What :func:`method_activity` measures from: the method parameters' values and the
    learned filters' responses now, as CPU tensors (a checkpoint entry).

    Returns:
        ``{"parameters": {name: values}, "responses": {"<method>:<layer>": (h, M) response}}``.
    """
    return {
        "parameters": {entry.name: entry.parameter.detach().cpu().clone()
                       for entry in method_parameters(model)},
        "responses": _responses(model),
    }


def _responses(model: nn.Module) -> dict[str, Tensor]:
    """``"<method>:<layer name>" -> (h, M)`` response of every layer that computes one."""
    return {f"{method}:{layer.name}": layer.response.cpu()
            for method, find in _RESPONSES.items() for layer in find(model)}


def _largest(change: Tensor) -> float:
    return change.abs().max().item() if change.numel() else 0.0


def _mismatch(what: str, name: str) -> ValueError:
    return ValueError(f"the recorded start of the method parameters has no {what} {name!r}: it "
                      "was recorded on another model")


@torch.no_grad()
def method_activity(
    model: nn.Module, start: dict[str, dict[str, Tensor]] | None
) -> dict[str, dict[str, Any]] | None:
    """How far ``model``'s method parameters and learned filters are from ``start``.

    Args:
        model: the model now.
        start: :func:`method_start` of the same model when training began; None when unknown
            (a checkpoint written before it was recorded), which gives None.

    Returns:
        Per method (``gfsa``, ``neutreno``, ``agf``, ``samsa``, ``fusion``; none for a plain
        softmax model): ``max_abs_change``, the largest ``|now − start|`` over its parameters;
        ``parameters``, per parameter name its ``max_abs_change`` and, for parameters of at most
        :data:`LISTED_VALUES` values, ``change`` (``now − start``, the parameter's shape as
        nested lists: GFSA's per head); and for methods with a filter response, ``response``:
        ``max_abs_change`` over layers, heads and 101 frequencies, and ``layers``, per layer.

    Raises:
        ValueError: when ``start`` lacks a parameter or layer of ``model`` or has another shape.
    """
    if start is None:
        return None
    activity: dict[str, dict[str, Any]] = {}
    for entry in method_parameters(model):
        initial = start["parameters"].get(entry.name)
        if initial is None or initial.shape != entry.parameter.shape:
            raise _mismatch("parameter", entry.name)
        change = entry.parameter.detach().cpu().double() - initial.double()
        record: dict[str, Any] = {"max_abs_change": _largest(change)}
        if change.numel() <= LISTED_VALUES:
            record["change"] = change.tolist()
        method = activity.setdefault(entry.method, {"max_abs_change": 0.0, "parameters": {}})
        method["parameters"][entry.name] = record
        method["max_abs_change"] = max(method["max_abs_change"], record["max_abs_change"])
    for key, response in _responses(model).items():
        initial = start["responses"].get(key)
        if initial is None or initial.shape != response.shape:
            raise _mismatch("filter response of", key)
        method, layer = key.split(":", 1)
        moved = _largest(response.double() - initial.double())
        summary = activity.setdefault(method, {"max_abs_change": 0.0, "parameters": {}})
        curves = summary.setdefault("response", {"max_abs_change": 0.0, "layers": {}})
        curves["layers"][layer] = moved
        curves["max_abs_change"] = max(curves["max_abs_change"], moved)
    return activity
