"""ListOps: labels, length bounds, distinctness, LRA's label skew, determinism and the task."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from filterformer.data import evaluate_listops, generate_listops, load_task
from filterformer.data.listops import (
    OPERATORS,
    VOCAB,
    decode_listops,
    encode_listops,
    sample_tree,
    tree_tokens,
)

LRA_MIN, LRA_MAX = 500, 2000


@pytest.fixture(scope="module")
def lra_samples() -> list[tuple[tuple[str, ...], int]]:
    return generate_listops(2000, min_len=LRA_MIN, max_len=LRA_MAX, seed=11)


def test_labels_equal_the_independent_evaluator(lra_samples):
    assert all(evaluate_listops(tokens) == label for tokens, label in lra_samples)


def test_lengths_respect_the_bounds(lra_samples):
    lengths = [len(tokens) for tokens, _ in lra_samples]
    assert min(lengths) > LRA_MIN and max(lengths) < LRA_MAX


def test_no_duplicates(lra_samples):
    assert len({tokens for tokens, _ in lra_samples}) == len(lra_samples)


def test_label_distribution_is_skewed_towards_0_and_9_as_in_lra(lra_samples):
    counts = Counter(label for _, label in lra_samples)
    top_two = {label for label, _ in counts.most_common(2)}
    assert top_two == {0, 9}
    others = [counts[d] for d in range(1, 9)]
    assert min(counts[0], counts[9]) > 1.3 * max(others)


def test_same_seed_same_data_and_other_seed_other_data():
    first = generate_listops(50, min_len=20, max_len=100, seed=3)
    assert first == generate_listops(50, min_len=20, max_len=100, seed=3)
    assert first != generate_listops(50, min_len=20, max_len=100, seed=4)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("[MIN 3 8 1 ]", 1),
        ("[MAX 3 8 1 ]", 8),
        ("[MED 1 2 3 4 ]", 2),  # median 2.5, integer part
        ("[MED 9 0 4 ]", 4),
        ("[SM 9 9 5 ]", 3),
        ("[MAX 2 [MIN 7 [SM 4 4 ] 9 ] [MED 0 0 6 ] ]", 7),
        ("5", 5),
    ],
)
def test_evaluator_on_hand_worked_expressions(expression, value):
    assert evaluate_listops(expression.split()) == value


@pytest.mark.parametrize("expression", ["[MIN 3 4", "3 4", "[MIN 3 ] ]", "[FOO 1 2 ]", ""])
def test_evaluator_rejects_malformed_expressions(expression):
    with pytest.raises(ValueError):
        evaluate_listops(expression.split())


def test_tree_sampler_follows_the_lra_node_rule():
    # at depth 1, a node is a leaf with probability 0.75; an operator has randint(2, 10) children
    rng = random.Random(5)
    trees = [sample_tree(rng)[0] for _ in range(2000)]
    leaves = sum(isinstance(t, int) for t in trees)
    assert abs(leaves / len(trees) - 0.75) < 0.03  # 3 standard errors
    arities = [len(t[1]) for t in trees if not isinstance(t, int)]
    assert min(arities) == 2 and max(arities) == 10
    assert abs(np.mean(arities) - 6.0) < 0.35  # 3 standard errors
    operators = Counter(t[0] for t in trees if not isinstance(t, int))
    assert set(operators) == set(OPERATORS)


def test_reported_length_is_the_token_count():
    rng = random.Random(2)
    for _ in range(200):
        tree, length = sample_tree(rng)
        assert len(tree_tokens(tree)) == length


def test_encoding_round_trips_and_uses_15_symbols_plus_padding():
    assert len(VOCAB) == 16 and VOCAB[0] == "<pad>"
    tokens = ["[SM", "1", "[MED", "2", "3", "]", "9", "]"]
    ids = encode_listops(tokens)
    assert 0 not in ids and decode_listops([*ids, 0, 0]) == tokens


def test_tiny_task_splits_are_disjoint_bounded_and_cached(tmp_path):
    options = dict(preset="tiny", num_train=300, num_validation=60, num_test=60,
                   cache_dir=tmp_path, seed=1)
    task = load_task("listops", **options)
    assert (len(task.train), len(task.validation), len(task.test)) == (300, 60, 60)
    assert task.num_classes == 10 and task.vocab_size == 16 and task.kind == "classification"
    splits = {}
    for name in ("train", "validation", "test"):
        dataset = getattr(task, name)
        items = [dataset[i] for i in range(len(dataset))]
        splits[name] = {tuple(item["input_ids"].tolist()) for item in items}
        for item in items:
            ids = item["input_ids"]
            assert 20 < len(ids) < 100 and len(ids) <= task.max_len
            assert evaluate_listops(decode_listops(ids.tolist())) == int(item["labels"])
    assert not splits["train"] & splits["test"] and not splits["validation"] & splits["test"]
    assert not splits["train"] & splits["validation"]
    cached = list((tmp_path / "listops").glob("*.npz"))
    assert len(cached) == 1
    again = load_task("listops", **options)
    assert again.test[7]["input_ids"].tolist() == task.test[7]["input_ids"].tolist()


def test_test_split_does_not_depend_on_num_train(tmp_path):
    small = load_task("listops", preset="tiny", num_train=20, num_validation=5, num_test=10,
                      cache_dir=tmp_path)
    large = load_task("listops", preset="tiny", num_train=40, num_validation=5, num_test=10,
                      cache_dir=tmp_path)
    assert [small.test[i]["input_ids"].tolist() for i in range(10)] == [
        large.test[i]["input_ids"].tolist() for i in range(10)
    ]


def test_bad_preset_lists_the_choices(tmp_path):
    with pytest.raises(ValueError, match=r"lra.*small.*tiny"):
        load_task("listops", preset="huge", cache_dir=tmp_path)
