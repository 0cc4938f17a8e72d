"""The methods the CUDA tier runs, as changes to a tiny model's configuration."""

from __future__ import annotations

from typing import Any

from filterformer.methods import METHOD_PRESETS, apply_method, method_changes

#: SAMSA's k: below the test sequences' length, so that sampling really chooses.
SAMSA_SAMPLES = 4

#: Every preset of ``filterformer compare`` (SAMSA with a small k), the GFSA variants and gate
#: fusion: :class:`~filterformer.models.TransformerConfig` fields.
METHODS: dict[str, dict[str, Any]] = {
    **{name: method_changes(name) for name in METHOD_PRESETS},
    "samsa_soft": apply_method({"attention_options": {"num_samples": SAMSA_SAMPLES}}, "samsa_soft"),
    "samsa_hard": apply_method({"attention_options": {"num_samples": SAMSA_SAMPLES}}, "samsa_hard"),
    "gfsa_exact_power": apply_method({"attention_options": {"exact_power": True}}, "gfsa"),
    "gfsa_efficient": apply_method({"attention_options": {"base": "efficient"}}, "gfsa"),
    "gfsa+neutreno": method_changes("gfsa+neutreno"),
    "fusion_gate": {"fusion": "gate"},
}

#: The methods a causal model can use (AGF, SAMSA and GFSA's efficient base are non-causal).
CAUSAL_METHODS: tuple[str, ...] = (
    "softmax", "gfsa", "gfsa_exact_power", "neutreno", "gfsa+neutreno", "fusion", "fusion_gate",
)

#: Methods whose training forward draws random noise (SAMSA's Gumbel noise).
NOISY_METHODS: tuple[str, ...] = ("samsa_soft", "samsa_hard")
