"""The registry and the batch contract every task keeps."""

from __future__ import annotations

import pytest
import torch

from filterformer.data import TASKS, TaskData, load_task, task_options
from filterformer.graphs import GraphBatch

REQUIRED = {"listops", "pathfinder", "uea", "fashion_mnist", "digits", "sentiment",
            "sentiment_bytes", "text_lm", "b3db"}


def test_all_tasks_are_registered_and_take_a_seed_and_a_size():
    assert set(TASKS) >= REQUIRED
    for name in TASKS:
        options = task_options(name)
        assert "seed" in options
        assert {"num_train", "max_tokens"} & set(options)


def test_unknown_task_lists_the_valid_names():
    with pytest.raises(ValueError, match=r"listops.*pathfinder.*b3db"):
        load_task("imagenet")


def test_unknown_option_lists_the_valid_options():
    with pytest.raises(ValueError, match=r"\['bogus'\].*contour_length"):
        load_task("pathfinder", bogus=1)


def test_bad_option_value_lists_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"\(6, 9, 14\)"):
        load_task("pathfinder", contour_length=7, cache_dir=tmp_path)


@pytest.fixture(scope="module")
def small_tasks(tmp_path_factory) -> dict[str, TaskData]:
    cache = tmp_path_factory.mktemp("cache")
    text = cache / "corpus.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 40)
    return {
        "listops": load_task("listops", preset="tiny", num_train=32, num_validation=8,
                             num_test=8, cache_dir=cache),
        "pathfinder": load_task("pathfinder", contour_length=6, num_train=16, num_validation=4,
                                num_test=4, cache_dir=cache),
        "uea": load_task("uea"),
        "digits": load_task("digits"),
        "sentiment_bytes": load_task("sentiment_bytes", num_train=64),
        "text_lm": load_task("text_lm", path=text, max_len=32),
    }


@pytest.mark.parametrize("name", ["listops", "pathfinder", "uea", "digits", "sentiment_bytes",
                                  "text_lm"])
def test_batches_keep_the_contract(small_tasks, name):
    task = small_tasks[name]
    assert task.name == name
    for split in (task.train, task.validation, task.test):
        assert len(split) > 0
        batch = task.collate([split[i] for i in range(min(8, len(split)))])
        mask = batch["padding_mask"]
        assert mask.dtype == torch.bool and mask.shape[1] <= task.max_len
        if "input_ids" in batch:
            ids = batch["input_ids"]
            assert ids.dtype == torch.long and ids.shape == mask.shape
            assert (ids[~mask] == 0).all() and (ids[mask] > 0).all()
            assert ids.max() < task.vocab_size
        else:
            inputs = batch["inputs"]
            assert inputs.dtype == torch.float32 and inputs.shape[:2] == mask.shape
            assert inputs.shape[2] == task.input_dim
        labels = batch["labels"]
        assert labels.dtype == torch.long
        if task.kind == "classification":
            assert labels.shape == (mask.shape[0],)
            assert labels.min() >= 0 and labels.max() < task.num_classes
        else:
            assert labels.shape == mask.shape and (labels[~mask] == -100).all()


def test_graph_task_batches_are_graph_batches(tmp_path):
    path = tmp_path / "mols.tsv"
    path.write_text("SMILES\tBBB+/BBB-\n" + "".join(
        f"{s}\t{y}\n" for s, y in [("CCO", "BBB+"), ("CCN", "BBB-"), ("CCC", "BBB+"),
                                   ("OCO", "BBB-"), ("CCCl", "BBB+"), ("NCN", "BBB-"),
                                   ("CC=O", "BBB+"), ("CC#N", "BBB-"), ("CO", "BBB+"),
                                   ("CS", "BBB-")]))
    task = load_task("b3db", path=path, cache_dir=tmp_path, validation_fraction=0.2,
                     test_fraction=0.2)
    batch = task.collate([task.train[i] for i in range(len(task.train))])
    assert isinstance(batch, GraphBatch) and task.num_classes == 2
    assert batch.node_features.shape[-1] == task.input_dim
