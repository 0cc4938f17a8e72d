"""Over-smoothing diagnostics: measure it, plot it, on any model (METHODS.md §5–§6).

Metrics are pure functions of tensors (``(B, N, D)`` hidden states or ``(L, B, N, D)`` stacks,
``(B, N)`` bool masks with True at real tokens). :func:`capture` reads intermediates out of
filterformer, Hugging Face, timm or any hooked model; :func:`diagnose` streams batches through a
model and averages every metric per layer into a :class:`DiagnosticsReport`, which
:mod:`~filterformer.diagnostics.figures` draws; :func:`random_batches`, :func:`task_batches`,
:func:`text_batches` (with :func:`example_sentences`) and :func:`image_batches` make the batches
to diagnose on.
"""

from .capture import CapturedForward, capture, model_kind
from .diagnose import DiagnosticsAccumulator, diagnose
from .frequency import FrequencyResponse, filter_frequency_response, frequency_grid
from .inputs import (
    TASK_SPLITS,
    example_sentences,
    image_batches,
    random_batches,
    task_batches,
    text_batches,
)
from .layernorm import smallest_over_tokens, smallest_token_std, token_std
from .learned_filters import (
    LearnedFilter,
    agf_filter_responses,
    agf_polynomial_responses,
    frequency_points,
    gfsa_filter_responses,
)
from .report import DiagnosticsReport, LearnedFilterCurves, load_reports, save_reports
from .similarity import attention_map_similarity, token_cosine_similarity
from .spectrum import (
    effective_rank,
    effective_rank_from_singular_values,
    gram_singular_values,
    normalized_spectrum,
    singular_value_spectrum,
    singular_values,
)
from .subspace import frequency_energy, high_low_frequency_ratio, identical_token_distance

__all__ = [
    "TASK_SPLITS",
    "CapturedForward",
    "DiagnosticsAccumulator",
    "DiagnosticsReport",
    "FrequencyResponse",
    "LearnedFilter",
    "LearnedFilterCurves",
    "agf_filter_responses",
    "agf_polynomial_responses",
    "attention_map_similarity",
    "capture",
    "diagnose",
    "effective_rank",
    "effective_rank_from_singular_values",
    "example_sentences",
    "filter_frequency_response",
    "frequency_energy",
    "frequency_grid",
    "frequency_points",
    "gfsa_filter_responses",
    "gram_singular_values",
    "high_low_frequency_ratio",
    "identical_token_distance",
    "image_batches",
    "load_reports",
    "model_kind",
    "normalized_spectrum",
    "random_batches",
    "save_reports",
    "singular_value_spectrum",
    "singular_values",
    "smallest_over_tokens",
    "smallest_token_std",
    "task_batches",
    "text_batches",
    "token_cosine_similarity",
    "token_std",
]
