"""A run's task options are typed by its loader's signature, so a wrong type is named, not a
TypeError from deep inside the loader."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from filterformer.data.task_registry import task_option_hints
from filterformer.training.model_building import load_task_data


@pytest.mark.parametrize(("option", "value", "expected"), [
    ("max_len", ":", "an integer or null"),
    ("num_train", 2.5, "an integer or null"),
    ("num_train", True, "an integer or null"),
    ("preset", ["tiny"], "a string"),
    ("seed", "one", "an integer"),
    ("cache_dir", 3, "a string"),
])
def test_an_option_of_the_wrong_type_is_named(option, value, expected):
    with pytest.raises(ValueError, match=rf"task_options\.{option} must be {expected}"):
        load_task_data("listops", {"preset": "tiny", option: value})


def test_options_of_the_right_types_load(tmp_path):
    count = int(torch.randint(8, 20, ()))
    task = load_task_data("listops", {"preset": "tiny", "num_train": count, "num_validation": 4,
                                      "num_test": 4, "max_len": 40, "cache_dir": Path(tmp_path)})
    assert len(task.train) == count
    assert task_option_hints("listops")["num_train"] == int | None
