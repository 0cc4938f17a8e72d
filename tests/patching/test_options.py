"""Patch requests: every bad method, option or value is named, with the valid choices."""

import json

import pytest

from filterformer.attention import GraphFilterAttention
from filterformer.methods import method_changes
from filterformer.patching.options import method_options, parse_patch_spec


def test_defaults_follow_the_papers():
    spec = parse_patch_spec("gfsa+neutreno", {})
    assert (spec.K, spec.learn, spec.neutreno_lambda, spec.layers) == (
        3, ("w0", "w1", "wK"), 0.6, None
    )
    assert (spec.exact_power, spec.base, spec.neutreno_learnable) == (False, "softmax", False)
    assert spec.uses_gfsa and spec.uses_neutreno and not spec.uses_fusion


@pytest.mark.parametrize("method", ["gfsa", "neutreno", "fusion", "gfsa+neutreno+fusion"])
def test_a_patch_takes_its_defaults_from_the_method_presets(method):
    changes = method_changes(method)
    spec = parse_patch_spec(method, {})
    assert spec.attention == changes.get("attention", "softmax")
    assert spec.neutreno_lambda == changes.get("neutreno_lambda", 0.0)
    assert spec.fusion == changes.get("fusion")
    assert spec.K == GraphFilterAttention(8, 2).K


def test_layers_select_by_zero_based_index():
    spec = parse_patch_spec("gfsa", {"layers": [3, 1, 1]})
    assert [spec.selects(i) for i in range(5)] == [False, True, False, True, False]
    spec.check_layers(4)
    with pytest.raises(ValueError, match=r"layers \[3\] do not exist.*0\.\.2"):
        spec.check_layers(3)
    assert all(parse_patch_spec("neutreno", {"layers": None}).selects(i) for i in range(4))


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("gfsa", {"K": 5, "learn": ["wK"], "exact_power": True, "layers": [2, 0]}),
        ("neutreno", {"neutreno_lambda": 0.25, "neutreno_learnable": True}),
        ("fusion", {"fusion": "max"}),
        ("gfsa+neutreno+fusion", {"base": "efficient", "fusion": "gate", "layers": [1]}),
    ],
)
def test_a_spec_gives_back_the_options_that_make_it(method, options):
    spec = parse_patch_spec(method, options)
    saved = spec.options()
    assert list(saved) == list(method_options(method))  # every option of the method, no other
    assert json.loads(json.dumps(saved)) == saved  # plain JSON values
    assert parse_patch_spec(method, saved) == spec


def test_learn_keeps_the_coefficients_order():
    assert parse_patch_spec("gfsa", {"learn": ["wK", "w0"]}).learn == ("w0", "wK")
    assert parse_patch_spec("gfsa", {"learn": "wK"}).learn == ("wK",)


@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("gfsa2", {}, r"method must be one of \('gfsa', 'neutreno', 'fusion'\) or several joined"),
        ("agf", {}, r"'agf' replaces the attention itself"),
        ("gfsa+gfsa", {}, "names a preset twice"),
        ("gfsa", {"neutreno_lambda": 0.5},
         r"unknown option\(s\) 'neutreno_lambda' for method 'gfsa'.*K, learn, exact_power, base, "
         "layers"),
        ("fusion", {"layers": [0]}, r"valid options: fusion$"),
        ("gfsa", {"K": 1}, "K must be an integer >= 2"),
        ("gfsa", {"K": 2.5}, "K must be an integer >= 2"),
        ("gfsa", {"learn": ["w2"]}, r"learn must name coefficients among \('w0', 'w1', 'wK'\)"),
        ("gfsa", {"exact_power": 1}, "exact_power must be True or False"),
        ("gfsa", {"base": "linear"}, r"base must be one of \('softmax', 'efficient'\)"),
        ("neutreno", {"neutreno_learnable": "yes"}, "neutreno_learnable must be True or False"),
        ("neutreno", {"neutreno_lambda": "0.6"}, "neutreno_lambda must be a finite number"),
        ("neutreno", {"neutreno_lambda": float("nan")}, "neutreno_lambda must be a finite number"),
        ("neutreno", {"neutreno_lambda": float("-inf")}, "neutreno_lambda must be a finite number"),
        ("neutreno", {"neutreno_lambda": -0.4}, r">= 0 \(the papers use λ in \(0, 1\]"),
        ("gfsa", {"layers": 1}, "layers must be a list of 0-based layer indices"),
        ("gfsa", {"layers": [-1]}, r"ints >= 0"),
        ("gfsa", {"layers": []}, "non-empty"),
        ("fusion", {"fusion": "mean"}, r"fusion must be one of \('concat', 'max', 'gate'\)"),
    ],
)
def test_bad_requests_raise_naming_the_valid_choices(method, options, message):
    with pytest.raises(ValueError, match=message):
        parse_patch_spec(method, options)

