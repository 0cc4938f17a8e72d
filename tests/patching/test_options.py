"""Patch requests: every bad method, option or value is named, with the valid choices."""

import pytest

from filterformer.patching.options import parse_patch_spec


def test_defaults_follow_the_papers():
    spec = parse_patch_spec("gfsa+neutreno", {})
    assert (spec.K, spec.learn, spec.lam, spec.layers) == (3, ("w0", "w1", "wK"), 0.6, None)
    assert spec.uses_gfsa and spec.uses_neutreno and not spec.uses_fusion
    assert parse_patch_spec("fusion", {}).mode == "gate"


def test_layers_select_by_zero_based_index():
    spec = parse_patch_spec("gfsa", {"layers": [3, 1, 1]})
    assert [spec.selects(i) for i in range(5)] == [False, True, False, True, False]
    spec.check_layers(4)
    with pytest.raises(ValueError, match=r"layers \[3\] do not exist.*0\.\.2"):
        spec.check_layers(3)
    assert all(parse_patch_spec("neutreno", {"layers": None}).selects(i) for i in range(4))


def test_learn_keeps_the_coefficients_order():
    assert parse_patch_spec("gfsa", {"learn": ["wK", "w0"]}).learn == ("w0", "wK")
    assert parse_patch_spec("gfsa", {"learn": "wK"}).learn == ("wK",)


@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("gfsa2", {}, r"method must be one of \('gfsa', 'neutreno', 'gfsa\+neutreno', 'fusion'\)"),
        ("gfsa", {"lam": 0.5}, r"unknown option\(s\) 'lam' for method 'gfsa'.*K, learn, layers"),
        ("fusion", {"layers": [0]}, r"valid options: mode"),
        ("gfsa", {"K": 1}, "K must be an integer >= 2"),
        ("gfsa", {"K": 2.5}, "K must be an integer >= 2"),
        ("gfsa", {"learn": ["w2"]}, r"learn must name coefficients among \('w0', 'w1', 'wK'\)"),
        ("neutreno", {"lam": "0.6"}, "lam must be a finite number"),
        ("neutreno", {"lam": float("nan")}, "lam must be a finite number"),
        ("gfsa", {"layers": 1}, "layers must be a list of 0-based layer indices"),
        ("gfsa", {"layers": [-1]}, r"ints >= 0"),
        ("gfsa", {"layers": []}, "non-empty"),
        ("fusion", {"mode": "mean"}, r"mode must be one of \('concat', 'max', 'gate'\)"),
    ],
)
def test_bad_requests_raise_naming_the_valid_choices(method, options, message):
    with pytest.raises(ValueError, match=message):
        parse_patch_spec(method, options)

