"""The shared argument checks: what passes, and the one wording of what does not."""

import random

import pytest

from filterformer.checks import check_choice, check_integer, check_positive, check_probability


def test_integers_at_or_above_the_minimum_pass_unchanged():
    minimum = random.randint(-3, 5)
    value = minimum + random.randint(0, 100)
    assert check_integer("n", value, minimum=minimum) == value
    assert check_integer("n", None, optional=True) is None


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (0, {}, r"^n must be a positive integer; got 0$"),
        (True, {}, r"^n must be a positive integer; got True$"),
        (2.0, {}, r"^n must be a positive integer; got 2\.0$"),
        (1, {"minimum": 2, "hint": " (at least a pair)"},
         r"^n must be an integer >= 2 \(at least a pair\); got 1$"),
        (None, {}, r"^n must be a positive integer; got None$"),
        (-1, {"optional": True}, r"^n must be a positive integer or None; got -1$"),
    ],
)
def test_bad_integers_are_named_with_what_was_expected(value, kwargs, message):
    with pytest.raises(ValueError, match=message):
        check_integer("n", value, **kwargs)


def test_probabilities_are_in_the_half_open_unit_interval():
    p = random.random()
    assert check_probability("dropout", p) == p
    for bad in (1.0, -0.1, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\); got "):
            check_probability("dropout", bad)


def test_choices_list_the_valid_values():
    assert check_choice("mode", "soft", ("soft", "hard")) == "soft"
    with pytest.raises(ValueError, match=r"^mode must be one of \('soft', 'hard'\); got 'x'$"):
        check_choice("mode", "x", ["soft", "hard"])


def test_positive_numbers_are_finite_and_above_zero():
    assert check_positive("eps", 3) == 3.0 and check_positive("eps", 1e-12) == 1e-12
    for bad in (0, -1.0, float("nan"), float("inf"), "1", True, None):
        with pytest.raises(ValueError, match=r"^eps must be a positive finite number; got "):
            check_positive("eps", bad)
