import pytest
import torch

from filterformer.evidence.verdicts import OUTCOMES, claim_verdict, detectable_difference

from .results_fixture import reference_difference

S, C, I, N = "supports", "contradicts", "inconclusive at this scale", "not run yet"
#: compare's verdict → the verdict for each claim (better, worse, same, not worse).
EXPECTS = ("better", "worse", "same", "not worse")
RULES = {
    "better": (S, C, C, S),
    "worse": (C, S, C, C),
    "no significant difference": (I, I, S, S),
    "too few seeds": (I, I, I, I),
    None: (N, N, N, N),
}


@pytest.mark.parametrize("compare_verdict", list(RULES))
@pytest.mark.parametrize("expect", EXPECTS)
def test_verdicts_follow_the_rules(compare_verdict, expect):
    expected = RULES[compare_verdict][EXPECTS.index(expect)]
    assert claim_verdict(compare_verdict, expect) == expected
    assert expected in OUTCOMES


def test_unknown_inputs_are_refused_with_the_valid_choices():
    with pytest.raises(ValueError, match="better, worse, same, not worse"):
        claim_verdict("better", "improves")
    with pytest.raises(ValueError, match="no significant difference"):
        claim_verdict("significant", "better")


def test_the_detectable_difference_is_the_half_width_beyond_which_a_mean_is_significant():
    differences = torch.randn(5).tolist()
    zeros = dict.fromkeys(range(5), 0.0)
    first = reference_difference(dict(enumerate(differences)), zeros, higher=True)
    half = detectable_difference(first["ci_low"], first["ci_high"])
    assert half == pytest.approx((first["ci_high"] - first["ci_low"]) / 2)
    # The same spread of seeds around a mean just beyond ±h is significant, just within is not.
    centred = [d - first["mean"] for d in differences]
    for factor, verdict in ((1.01, "better"), (0.99, "no significant difference")):
        moved = {s: d + factor * half for s, d in enumerate(centred)}
        assert reference_difference(moved, zeros, higher=True)["verdict"] == verdict
    assert detectable_difference(None, None) is None
