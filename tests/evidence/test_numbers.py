import pytest

from filterformer.evidence.numbers import (
    format_difference,
    format_half_width,
    format_interval,
    format_mean_std,
    format_ratio,
    format_value,
    format_wall_time,
    metric_label,
)


@pytest.mark.parametrize(("call", "expected"), [
    # Accuracies: percentages with 2 decimals, differences in percentage points.
    (lambda: format_mean_std("test_accuracy", 0.98654, 0.003211), "98.65 ± 0.32 %"),
    (lambda: format_value("validation_accuracy", 0.5), "50.00 %"),
    (lambda: format_difference("test_accuracy", 0.00804, -0.00591, 0.02192),
     "+0.80 [-0.59, +2.19] pp"),
    (lambda: format_half_width("test_accuracy", 0.008412), "±0.84 pp"),
    (lambda: format_interval("test_accuracy", -0.0059, 0.0139), "[-0.59, +1.39] pp"),
    # Other metrics: 4 significant digits of the largest number written together.
    (lambda: format_mean_std("last_layer_cosine_similarity", 0.262431, 0.0463271),
     "0.2624 ± 0.0463"),
    (lambda: format_mean_std("test_perplexity", 19.5137, 0.2081), "19.51 ± 0.21"),
    (lambda: format_mean_std("test_perplexity", 1234.56, 12.34), "1235 ± 12"),
    (lambda: format_difference("last_layer_cosine_similarity", -0.081461, -0.224913, 0.061969),
     "-0.0815 [-0.2249, +0.0620]"),
    (lambda: format_difference("test_rmse", 0.0123449), "+0.01234"),
    (lambda: format_half_width("test_perplexity", 0.4213), "±0.4213"),
    # Times per step in milliseconds.
    (lambda: format_mean_std("step_time_s", 0.0413127, 0.000333), "41.31 ± 0.33 ms"),
    (lambda: format_difference("step_time_s", 0.017675, 0.016339, 0.019011),
     "+17.68 [+16.34, +19.01] ms"),
    # A tiny negative value is written 0, never -0.
    (lambda: format_difference("test_accuracy", -1e-18, -1e-18, 0.0), "+0.00 [+0.00, +0.00] pp"),
    # Missing values.
    (lambda: format_mean_std("test_accuracy", None, None), "–"),
    (lambda: format_mean_std("test_accuracy", 0.5, None), "50.00 %"),
    (lambda: format_difference("test_accuracy", None), "–"),
    (lambda: format_interval("test_accuracy", None, None), "no interval"),
    (lambda: format_mean_std("last_layer_cosine_similarity", 0.0, 0.0), "0 ± 0"),
    (lambda: format_ratio(1.4237), "1.42×"),
    (lambda: format_ratio(None), "–"),
    (lambda: format_wall_time(42.4), "42 s"),
    (lambda: format_wall_time(115.03), "1.9 min"),
    (lambda: format_wall_time(None), "unknown"),
    (lambda: metric_label("last_layer_cosine_similarity"), "last-layer cosine similarity"),
    (lambda: metric_label("test_rmse"), "test RMSE"),
    (lambda: metric_label("test_some_metric"), "test some metric"),
])
def test_numbers_are_written_by_one_rule_per_kind_of_metric(call, expected):
    assert call() == expected
