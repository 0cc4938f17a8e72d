import json
import math
import random
from dataclasses import dataclass

import pytest

from filterformer.jsonsafe import finite_json, first_non_finite, reject_unknown_fields


def test_finite_json_makes_every_non_finite_float_none_at_any_depth():
    finite = random.uniform(-1e6, 1e6)
    value = {"a": [finite, math.nan, {"b": (math.inf, -math.inf)}], "c": "text", "d": 3}
    out = finite_json(value)
    assert out == {"a": [finite, None, {"b": [None, None]}], "c": "text", "d": 3}
    json.loads(json.dumps(out, allow_nan=False))  # strict JSON accepts it


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_first_non_finite_gives_the_path_of_the_first_non_finite_float(bad):
    finite = [random.uniform(-1e6, 1e6) for _ in range(3)]
    assert first_non_finite({"a": finite, "b": {"c": finite[0], "d": "text"}}) is None
    value = {"a": finite, "b": [{"c": finite[1]}, {"d": [finite[2], bad]}], "e": math.nan}
    path, found = first_non_finite(value)
    assert path == "b[1].d[1]" and (found == bad or (math.isnan(found) and math.isnan(bad)))
    assert first_non_finite([bad], "root")[0] == "root[0]"


@dataclass
class _Fields:
    alpha: int = 0
    beta: str = ""


def test_reject_unknown_fields_names_the_unknown_and_the_valid_keys():
    reject_unknown_fields(_Fields, {"alpha": 1})
    expected = r"unknown _Fields field\(s\) \['gamma'\]; valid: \['alpha', 'beta'\]"
    with pytest.raises(ValueError, match=expected):
        reject_unknown_fields(_Fields, {"alpha": 1, "gamma": 2})
