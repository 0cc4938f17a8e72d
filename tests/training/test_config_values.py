"""``KEY=VALUE`` texts: split once, each value typed as a command-line value."""

from __future__ import annotations

import random

import pytest

from filterformer.training.config_values import parse_assignments, parse_text


def test_values_are_typed_like_any_command_line_value():
    size = random.randint(1, 99)
    items = [f"patch_size={size}", "sizes=[1, 3]", "lr=1e-3", "name=digits", "limit=null",
             "flag=true", "expr=a=b", " spaced =2"]
    assert parse_assignments(items) == {
        "patch_size": size, "sizes": [1, 3], "lr": 0.001, "name": "digits", "limit": None,
        "flag": True, "expr": "a=b", "spaced": 2,
    }
    # one typing rule for both: each value is what parse_text makes of the text after "="
    for item in items:
        key, _, text = item.partition("=")
        assert parse_assignments([item])[key.strip()] == parse_text(text)


def test_a_repeated_key_keeps_its_last_value():
    first, last = random.sample(range(100), 2)
    assert parse_assignments([f"n={first}", f"n={last}"]) == {"n": last}
    assert parse_assignments([]) == {}


@pytest.mark.parametrize("item", ["patch_size", "=4", " =4"])
def test_text_without_a_key_names_the_option(item):
    with pytest.raises(ValueError, match=rf"--task-option must be KEY=VALUE; got '{item}'"):
        parse_assignments(["ok=1", item])
    with pytest.raises(ValueError, match=r"--option must be KEY=VALUE"):
        parse_assignments([item], what="--option")
