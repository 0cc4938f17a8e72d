"""The method spec: parsed once from a preset and its options or from config fields; every bad
method, option or value is named, with the valid choices."""

import json

import pytest

from filterformer.attention import GraphFilterAttention
from filterformer.method_spec import MethodSpec, parse_patch, preset_options
from filterformer.methods import method_changes
from filterformer.models import TransformerConfig


def test_defaults_follow_the_papers():
    spec = MethodSpec.parse("gfsa+neutreno")
    gfsa = spec.graph_filter_options()
    assert (gfsa["K"], gfsa["learn"], spec.neutreno_lambda, spec.layers) == (
        3, ("w0", "w1", "wK"), 0.6, None
    )
    assert (gfsa["exact_power"], gfsa["base"], spec.neutreno_learnable) == (
        False, "softmax", False
    )
    assert spec.uses_gfsa and spec.uses_neutreno and not spec.uses_fusion


@pytest.mark.parametrize("method", ["gfsa", "neutreno", "fusion", "gfsa+neutreno+fusion"])
def test_a_patch_takes_its_defaults_from_the_method_presets(method):
    changes = method_changes(method)
    spec = parse_patch(method)
    assert spec.attention == changes.get("attention", "softmax")
    assert spec.neutreno_lambda == changes.get("neutreno_lambda", 0.0)
    assert spec.fusion == changes.get("fusion")
    if spec.uses_gfsa:
        assert spec.graph_filter_options()["K"] == GraphFilterAttention(8, 2).K


def test_layers_select_by_zero_based_index():
    spec = MethodSpec.parse("gfsa", layers=[3, 1, 1])
    assert spec.layers == (1, 3)
    assert [spec.selects(i) for i in range(5)] == [False, True, False, True, False]
    spec.check_layers(4)
    with pytest.raises(ValueError, match=r"layers \[3\] do not exist.*0\.\.2"):
        spec.check_layers(3)
    assert all(MethodSpec.parse("neutreno", layers=None).selects(i) for i in range(4))


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
    spec = parse_patch(method, **options)
    saved = spec.patch_options()
    assert spec.name == method
    assert list(saved) == list(preset_options(method))  # every option of the method, no other
    assert json.loads(json.dumps(saved)) == saved  # plain JSON values
    assert parse_patch(method, **saved) == spec


def test_learn_keeps_the_coefficients_order():
    assert MethodSpec.parse("gfsa", learn=["wK", "w0"]).graph_filter_options()["learn"] == (
        "w0", "wK"
    )
    assert GraphFilterAttention(8, 2, learn="wK").learn == ("wK",)


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
        ("gfsa", {"neutreno_warmup": 3}, r"unknown option\(s\) 'neutreno_warmup'"),
        ("neutreno", {"neutreno_lambda": 0.0, "neutreno_warmup": 3},
         "neutreno_lambda is 0 .not learned."),
        ("fusion", {"fusion": "mean"}, r"fusion must be one of \('concat', 'max', 'gate'\)"),
    ],
)
def test_bad_requests_raise_naming_the_valid_choices(method, options, message):
    with pytest.raises(ValueError, match=message):
        parse_patch(method, **options)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("gfsa+neutreno", {"K": 4, "learn": ["wK"], "neutreno_lambda": 0.3, "layers": [2, 0]}),
        ("agf+fusion", {"layers": [1]}),
        ("samsa_hard+neutreno", {"neutreno_learnable": True}),
        ("softmax", {}),
    ],
)
def test_config_fields_and_a_preset_make_the_same_spec(method, options):
    spec = MethodSpec.parse(method, **options)
    assert MethodSpec.from_config(spec.to_config()) == spec
    config = TransformerConfig(dim=16, num_heads=2, **spec.to_config())
    assert config.method == spec == TransformerConfig(dim=16, num_heads=2, spec=spec).method
    assert config == TransformerConfig(dim=16, num_heads=2, spec=spec)


def test_a_config_holds_its_method_once():
    config = TransformerConfig(dim=16, num_heads=2, attention="gfsa", attention_layers=[3, 1])
    assert config.method.layers == config.attention_layers == (1, 3)
    with pytest.raises(AttributeError, match=r"dataclasses.replace\(config, attention="):
        config.attention = "agf"
    with pytest.raises(ValueError, match=r"either as spec= or as the fields \['attention'\]"):
        TransformerConfig(attention="agf", spec="gfsa")
    with pytest.raises(ValueError, match=r"layers \[5\] do not exist"):
        TransformerConfig(depth=4, spec=MethodSpec.parse("gfsa", layers=[5]))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attention_layers": [1]}, "this method has none"),
        ({"attention": "agf", "attention_options": {"learn": "wK"}},
         r"unknown option\(s\) 'learn' for attention 'agf'; valid options: K, basis"),
        ({"attention_options": {"K": 3}}, "unknown option.s. 'K' for attention 'softmax'"),
        ({"attention": "gfsa", "attention_options": {"base": "fast"}}, "base must be one of"),
        ({"fusion": "sum"}, "fusion must be one of"),
    ],
)
def test_bad_config_fields_raise_naming_them(fields, message):
    with pytest.raises(ValueError, match=message):
        MethodSpec.from_config(fields)

