"""``diagnose(model, batches)``: every over-smoothing metric per layer, over a stream of batches.

Memory stays bounded by one batch: each batch's intermediates are reduced to per-layer sums and
counts (and one ``D × D`` Gram matrix) before the next batch runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..checks import check_integer
from .accumulate import MeanAccumulator, MinAccumulator, SumAccumulator
from .capture import CapturedForward, call_model, capture, model_kind
from .frequency import filter_frequency_response, frequency_grid
from .learned_filters import LearnedFilter, agf_filter_responses, gfsa_filter_responses
from .report import DiagnosticsReport, LearnedFilterCurves
from .similarity import attention_map_similarity, token_cosine_similarity
from .spectrum import (
    effective_rank_from_singular_values,
    gram_singular_values,
    normalized_spectrum,
    singular_values,
)
from .subspace import frequency_energy
from .tokens import masked_tokens

__all__ = ["DiagnosticsAccumulator", "diagnose"]

_HIDDEN_METRICS = (
    "token_cosine_similarity",
    "identical_token_distance",
    "relative_identical_token_distance",
    "high_low_frequency_ratio",
    "effective_rank",
    "singular_spectrum",
)
_NORM_METRICS = ("layer_norm_sigma1", "layer_norm_sigma2", "layer_norm_product")


class DiagnosticsAccumulator:
    """Per-layer running statistics of captured forward passes.

    Args:
        num_frequencies: the grid of the frequency responses; the first batch's longest real
            length when None.
    """

    def __init__(self, num_frequencies: int | None = None) -> None:
        self.num_frequencies = num_frequencies
        self.num_samples = 0
        self.num_layers: int | None = None
        self.hidden: dict[str, list[MeanAccumulator]] = {}
        self.gram = SumAccumulator()
        self.response: list[MeanAccumulator] = []
        self.attention_similarity: list[MeanAccumulator] = []
        self.norms: dict[str, list[MeanAccumulator]] = {}
        self.product_min: list[MinAccumulator] = []
        self.measured: set[str] = set()

    def _start(self, num_layers: int) -> None:
        self.num_layers = num_layers
        self.hidden = {k: [MeanAccumulator() for _ in range(num_layers + 1)]
                       for k in _HIDDEN_METRICS}
        self.response = [MeanAccumulator() for _ in range(num_layers)]
        self.attention_similarity = [MeanAccumulator() for _ in range(num_layers - 1)]
        self.norms = {k: [MeanAccumulator() for _ in range(num_layers)] for k in _NORM_METRICS}
        self.product_min = [MinAccumulator() for _ in range(num_layers)]

    def update(self, captured: CapturedForward) -> None:
        """Reduce one batch's intermediates into the running statistics."""
        if self.num_layers is None:
            self._start(captured.num_layers)
        elif captured.num_layers != self.num_layers:
            raise ValueError(
                f"every batch must give the same number of layers; got {captured.num_layers} "
                f"after {self.num_layers}"
            )
        mask = captured.mask
        self.num_samples += mask.shape[0]
        for index, hidden in enumerate(captured.hidden_states):
            self._update_hidden(index, hidden.detach().double(), mask)
        if captured.filters is not None:
            self.measured.add("filters")
            self._update_responses(captured.filters, mask)
        if captured.attentions is not None:
            self.measured.add("attentions")
            pairs = itertools.pairwise(captured.attentions)
            for index, (first, second) in enumerate(pairs):
                similarity = attention_map_similarity(first.double(), second.double(), mask)
                self.attention_similarity[index].update(similarity)
        for index, stds in enumerate(captured.norm_stds or ()):
            if len(stds) >= 2:
                self.measured.add("norms")
                sigma1, sigma2 = (s.double() for s in stds[:2])
                self.norms["layer_norm_sigma1"][index].update(sigma1)
                self.norms["layer_norm_sigma2"][index].update(sigma2)
                self.norms["layer_norm_product"][index].update(sigma1 * sigma2)
                self.product_min[index].update(sigma1 * sigma2)

    def _update_hidden(self, index: int, hidden: Tensor, mask: Tensor) -> None:
        metrics = self.hidden
        metrics["token_cosine_similarity"][index].update(token_cosine_similarity(hidden, mask))
        # d_M(H) is the high-frequency energy: one split gives all three metrics.
        high, low, total = frequency_energy(hidden, mask)
        metrics["identical_token_distance"][index].update(high)
        metrics["relative_identical_token_distance"][index].update(high / total)
        metrics["high_low_frequency_ratio"][index].update(high / low)
        values = singular_values(hidden, mask)
        metrics["effective_rank"][index].update(effective_rank_from_singular_values(values))
        metrics["singular_spectrum"][index].update(normalized_spectrum(values))
        if index == self.num_layers:
            tokens = masked_tokens(hidden, mask).flatten(0, 1)
            self.gram.update(tokens.T @ tokens)

    def _update_responses(self, filters: Sequence[Tensor], mask: Tensor) -> None:
        if self.num_frequencies is None:
            self.num_frequencies = max(int(mask.sum(dim=-1).max()), 1)
        empty = ~mask.any(dim=-1)
        for index, layer_filter in enumerate(filters):
            response = filter_frequency_response(
                layer_filter.detach().double(), mask, num_frequencies=self.num_frequencies,
                reduce=False,
            ).magnitude.mean(dim=1)
            self.response[index].update(response.masked_fill(empty[:, None], float("nan")))

    def report(
        self,
        label: str,
        model_kind: str,
        gfsa_filters: Sequence[LearnedFilterCurves] = (),
        agf_filters: Sequence[LearnedFilterCurves] = (),
    ) -> DiagnosticsReport:
        """The averages so far as a :class:`DiagnosticsReport`."""
        if self.num_layers is None:
            raise ValueError("no batch was seen: batches must yield at least one batch")

        def scalars(accumulators: list[MeanAccumulator]) -> list[float]:
            return [a.scalar() for a in accumulators]

        hidden = {k: scalars(v) for k, v in self.hidden.items() if k != "singular_spectrum"}
        pooled = normalized_spectrum(gram_singular_values(self.gram.total))
        with_filters, with_norms = "filters" in self.measured, "norms" in self.measured
        norms = {k: scalars(v) if with_norms else None for k, v in self.norms.items()}
        return DiagnosticsReport(
            label=label,
            model_kind=model_kind,
            num_samples=self.num_samples,
            num_layers=self.num_layers,
            **hidden,
            singular_spectrum=[a.mean().tolist() for a in self.hidden["singular_spectrum"]],
            pooled_singular_spectrum=pooled.tolist(),
            frequencies=frequency_grid(self.num_frequencies).tolist() if with_filters else None,
            frequency_response=[a.mean().tolist() for a in self.response]
            if with_filters else None,
            attention_similarity=scalars(self.attention_similarity)
            if "attentions" in self.measured else None,
            **norms,
            layer_norm_product_min=[m.value for m in self.product_min] if with_norms else None,
            gfsa_filters=list(gfsa_filters),
            agf_filters=list(agf_filters),
        )


@torch.no_grad()
def diagnose(
    model: nn.Module,
    batches: Iterable[Any],
    *,
    label: str | None = None,
    attentions: bool | None = None,
    norms: bool = True,
    layers: Sequence[str] | None = None,
    forward: Callable[[nn.Module, Any], Any] = call_model,
    max_batches: int | None = None,
    num_frequencies: int | None = None,
    filter_points: int = 101,
    progress: Callable[[int, int], None] | None = None,
) -> DiagnosticsReport:
    """Every over-smoothing metric of ``model``, per layer, averaged over a stream of batches.

    The model runs in eval mode without gradients (its mode is restored after). Only one
    batch's intermediates are alive at a time.

    Args:
        model: a filterformer model or task head, a Hugging Face model, a timm ViT, or any
            module with ``layers`` named (see :func:`~filterformer.diagnostics.capture`).
        batches: any iterable of the model's inputs (a DataLoader, a list, a generator).
        label: the model's name in reports and plots (the class name when None).
        attentions: capture N×N attention maps for the frequency responses and the similarity
            of successive maps; None captures them for filterformer, Hugging Face and timm
            models, not through hooks. Memory grows as ``B·h·N²`` per layer: lower the batch
            size, or pass False, for long inputs.
        norms: capture each layer's LayerNorm statistics (``σ1``, ``σ2``).
        layers: names of the layers to hook, for models of no known kind.
        forward: how the hook route calls the model on a batch.
        max_batches: stop after this many batches.
        num_frequencies: the frequency grid (the first batch's longest real length when None).
        filter_points: frequencies at which learned filters are evaluated.
        progress: called after each batch with the batches and the samples done so far (a
            long run can say how far it got).

    Returns:
        :class:`DiagnosticsReport`.

    Raises:
        ValueError: for an unsupported model, no batch, or ``max_batches < 1``.
    """
    check_integer("max_batches", max_batches, optional=True)
    kind = model_kind(model, layers)
    if attentions is None:
        attentions = kind != "hooks"
    accumulator = DiagnosticsAccumulator(num_frequencies)
    was_training = model.training
    model.eval()
    try:
        for index, batch in enumerate(batches):
            if max_batches is not None and index >= max_batches:
                break
            captured = capture(
                model, batch, attentions=attentions, norms=norms, layers=layers, forward=forward
            )
            accumulator.update(captured)
            if progress is not None:
                progress(index + 1, accumulator.num_samples)
    finally:
        model.train(was_training)
    return accumulator.report(
        label or type(model).__name__,
        kind,
        _curves(gfsa_filter_responses(model, filter_points)),
        _curves(agf_filter_responses(model, filter_points)),
    )


def _curves(filters: Sequence[LearnedFilter]) -> list[LearnedFilterCurves]:
    return [
        LearnedFilterCurves(name=f.name, sigma=f.sigma.tolist(), response=f.response.tolist())
        for f in filters
    ]
