"""The result of :func:`~filterformer.diagnostics.diagnose`: per-layer metrics as plain data."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonsafe import finite_json, reject_unknown_fields

__all__ = ["DiagnosticsReport", "LearnedFilterCurves", "load_reports", "save_reports"]


@dataclass
class LearnedFilterCurves:
    """One layer's learned filter as curves over graph frequencies.

    Attributes:
        name: the module's qualified name.
        sigma: frequencies in ``[0, 1]``.
        response: one curve per head (or a single one for a filter shared by heads).
    """

    name: str
    sigma: list[float]
    response: list[list[float]]


@dataclass
class DiagnosticsReport:
    """Over-smoothing metrics of one model, averaged over every sample it was shown.

    Per-layer lists over hidden states have ``L + 1`` entries: index 0 is the embedding output,
    ``l`` the output of layer ``l``. Lists over attention layers have ``L`` entries (layers
    ``1..L``); ``attention_similarity`` has ``L − 1`` (layer ``l`` against ``l + 1``). NaN marks
    a value no sample defined (``null`` in JSON).

    Attributes:
        label: the model's name in plots.
        model_kind: how it was captured (``filterformer``, ``huggingface``, ``timm``, ``hooks``).
        num_samples: samples seen.
        num_layers: L.
        token_cosine_similarity: mean cosine over pairs of distinct tokens.
        identical_token_distance: ``d_M(H) = ‖H − 1·mean(H)ᵀ‖_F``.
        relative_identical_token_distance: ``d_M(H) / ‖H‖_F``.
        high_low_frequency_ratio: ``‖(I − 11ᵀ/N)H‖ / ‖(11ᵀ/N)H‖``.
        effective_rank: ``exp(entropy(σ/Σσ))`` of each sample's token matrix.
        singular_spectrum: per layer, the mean over samples of ``σ_i/σ_1`` (zero past a sample's
            rank).
        pooled_singular_spectrum: ``σ_i/σ_1`` of the last layer's tokens of every sample taken
            together (from their accumulated Gram matrix).
        frequencies: the frequency grid of ``frequency_response``, cycles per token.
        frequency_response: per attention layer, the normalised gain of the operator applied
            to the values (``Ā``, or GFSA's ``H̃``), averaged over heads and samples.
        attention_similarity: cosine similarity of successive layers' attention maps.
        layer_norm_sigma1, layer_norm_sigma2: per layer, the mean over samples of the smallest
            per-token input std of its first and second LayerNorm.
        layer_norm_product: the mean over samples of ``σ1σ2``.
        layer_norm_product_min: the smallest ``σ1σ2`` of any sample.
        gfsa_filters: ``g(σ)`` of each GFSA layer.
        agf_filters: ``Σ_k θ_k P_k(σ)`` of each AGF layer.
    """

    label: str
    model_kind: str
    num_samples: int
    num_layers: int
    token_cosine_similarity: list[float]
    identical_token_distance: list[float]
    relative_identical_token_distance: list[float]
    high_low_frequency_ratio: list[float]
    effective_rank: list[float]
    singular_spectrum: list[list[float]]
    pooled_singular_spectrum: list[float]
    frequencies: list[float] | None = None
    frequency_response: list[list[float]] | None = None
    attention_similarity: list[float] | None = None
    layer_norm_sigma1: list[float] | None = None
    layer_norm_sigma2: list[float] | None = None
    layer_norm_product: list[float] | None = None
    layer_norm_product_min: list[float] | None = None
    gfsa_filters: list[LearnedFilterCurves] = field(default_factory=list)
    agf_filters: list[LearnedFilterCurves] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data; NaN and infinities become None."""
        return finite_json(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DiagnosticsReport:
        """Inverse of :meth:`to_dict` (None reads back as NaN)."""
        reject_unknown_fields(cls, data)
        # Only values inside lists can be NaN; a field that is None was not measured.
        data = {key: value if isinstance(value, str | None) else _nan(value)
                for key, value in data.items()}
        for key in ("gfsa_filters", "agf_filters"):
            data[key] = [LearnedFilterCurves(**curve) for curve in data.get(key) or []]
        return cls(**data)

    def save(self, path: str | Path) -> Path:
        """Write the report as JSON; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> DiagnosticsReport:
        """Read a report written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))


def save_reports(reports: list[DiagnosticsReport], path: str | Path) -> Path:
    """Write several reports as one ``diagnostics.json`` (``{"reports": [...]}``); returns the
    path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"reports": [r.to_dict() for r in reports]}, indent=1))
    return path


def load_reports(path: str | Path) -> list[DiagnosticsReport]:
    """The reports of a ``diagnostics.json`` written by :func:`save_reports`.

    Raises:
        ValueError: when the file does not exist or holds no ``reports`` list.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"diagnostics file {str(path)!r} does not exist")
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("reports"), list):
        raise ValueError(f"{str(path)!r} is not a diagnostics.json (no 'reports' list)")
    return [DiagnosticsReport.from_dict(r) for r in data["reports"]]


def _nan(value: Any) -> Any:
    if value is None:
        return float("nan")
    if isinstance(value, dict):
        return {key: _nan(v) if key != "name" else v for key, v in value.items()}
    if isinstance(value, list):
        return [_nan(v) for v in value]
    return value
