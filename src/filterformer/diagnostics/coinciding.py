"""Reports whose curves coincide, and why: a line hidden under another is said, not left unseen.

A model patched with GFSA starts as the attention it filters (``w1 = 1``, ``w0 = wK = 0``, so
``g(σ) = σ``): until trained, every curve of the patched model lies on the unpatched one's, and
a figure showing one line where two are labelled needs a sentence.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from .report import DiagnosticsReport

__all__ = ["coincidence_note", "coinciding_reports", "untrained_gfsa"]

#: The report fields the figures draw, compared to tell whether two models' lines coincide.
_DRAWN = (
    "token_cosine_similarity",
    "relative_identical_token_distance",
    "effective_rank",
    "attention_similarity",
    "layer_norm_product",
    "singular_spectrum",
    "frequency_response",
)


def _same(first: object, second: object, rtol: float, atol: float) -> bool:
    if first is None or second is None:
        return first is None and second is None
    a, b = torch.tensor(first, dtype=torch.float64), torch.tensor(second, dtype=torch.float64)
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def coinciding_reports(
    reports: Sequence[DiagnosticsReport], *, rtol: float = 1e-4, atol: float = 1e-6
) -> list[tuple[DiagnosticsReport, DiagnosticsReport]]:
    """Pairs ``(later, earlier)`` of reports whose drawn metrics agree within the tolerances.

    The defaults admit float32 round-off: GFSA at initialisation computes the attention its own
    way, so its numbers match the unpatched model's only to about 1e-5.

    Returns:
        Each later report paired with the first earlier one it coincides with.
    """
    pairs = []
    for later_index, later in enumerate(reports):
        for earlier in itertools.islice(reports, later_index):
            if later.num_layers == earlier.num_layers and all(
                _same(getattr(later, name), getattr(earlier, name), rtol, atol)
                for name in _DRAWN
            ):
                pairs.append((later, earlier))
                break
    return pairs


def untrained_gfsa(report: DiagnosticsReport, atol: float = 1e-6) -> bool:
    """Whether every GFSA filter of ``report`` is still ``g(σ) = σ``, the attention itself."""
    if not report.gfsa_filters:
        return False
    for curve in report.gfsa_filters:
        sigma = torch.tensor(curve.sigma, dtype=torch.float64)
        response = torch.tensor(curve.response, dtype=torch.float64)
        if not torch.allclose(response, sigma.expand_as(response), atol=atol, rtol=0.0):
            return False
    return True


def coincidence_note(later: DiagnosticsReport, earlier: DiagnosticsReport) -> str:
    """One sentence saying that ``later``'s lines lie under ``earlier``'s, and why when known."""
    note = f"{later.label} lies on {earlier.label}: the same values"
    if untrained_gfsa(later):
        note += (" (its GFSA filters are still g(σ) = σ, the attention they filter, as GFSA "
                 "starts until trained)")
    return note + "."
