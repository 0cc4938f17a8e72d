"""Long Range Arena ListOps: nested list operations in prefix notation, labelled by their value.

Generated from the LRA rules (Tay et al., 2021, after Nangia & Bowman, 2018; ``DATA.md``): a tree
at depth t < 10 is a digit leaf with probability 0.75, else an operator (MIN, MAX, MED = integer
median, SM = sum mod 10) over randint(2, 10) subtrees at depth t + 1; at depth 10 it is a leaf.
Trees whose token count (operator and closing bracket included) lies strictly between the length
bounds are kept, each distinct tree once, and labelled with their value (10 classes).

Two independent computations of the label exist on purpose: :func:`tree_value` reads the sampled
tree recursively (the generator's label), :func:`evaluate_listops` parses the token string with a
stack (a check that the tokens say what the label claims).
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from .cache import cache_key, cache_root, cached_arrays
from .datasets import PAD_ID, SequenceDataset, as_long, collate_sequences
from .task import TaskData

__all__ = [
    "CLOSE",
    "DIGITS",
    "LISTOPS_PRESETS",
    "OPERATORS",
    "VOCAB",
    "decode_listops",
    "encode_listops",
    "evaluate_listops",
    "generate_listops",
    "load_listops",
    "sample_tree",
    "tree_tokens",
    "tree_value",
]

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
CLOSE = "]"
DIGITS = tuple(str(d) for d in range(10))
# Padding first so that its id is 0; then the 15 ListOps symbols.
VOCAB = ("<pad>", *OPERATORS, CLOSE, *DIGITS)
_TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}

OPERATOR_PROBABILITY = 0.25  # LRA's VALUE_P: a node is a leaf when its draw exceeds this
MAX_DEPTH = 10
MAX_ARGS = 10

LISTOPS_PRESETS: dict[str, dict[str, int]] = {
    "lra": dict(min_len=500, max_len=2000, num_train=96_000, num_validation=2_000, num_test=2_000),
    "small": dict(min_len=100, max_len=500, num_train=10_000, num_validation=1_000, num_test=1_000),
    "tiny": dict(min_len=20, max_len=100, num_train=2_000, num_validation=500, num_test=500),
}

Tree = int | tuple[str, list["Tree"]]


class _TooLong(Exception):
    """Raised mid-sampling once a tree is certain to reach the maximum length."""


def sample_tree(
    rng: random.Random,
    max_len: int | None = None,
    max_depth: int = MAX_DEPTH,
    max_args: int = MAX_ARGS,
) -> tuple[Tree, int] | None:
    """Sample one ListOps tree by the LRA rules.

    Args:
        rng: the random stream.
        max_len: give up (return None) as soon as the tree has ``max_len`` tokens, since it can
            then never be kept; this saves time without changing which trees are kept or how often.
        max_depth: depth at which every node is a leaf.
        max_args: most subtrees of an operator.

    Returns:
        ``(tree, length)``: the tree is a digit (leaf) or ``(operator, subtrees)``, the length its
        token count; None when cut short by ``max_len``.
    """
    count = [0]

    def grow(depth: int) -> Tree:
        count[0] += 1
        if max_len is not None and count[0] >= max_len:
            raise _TooLong
        r = rng.random() if depth < max_depth else 1.0
        if r > OPERATOR_PROBABILITY:
            return rng.choice(range(10))
        count[0] += 1  # the closing bracket
        num_args = rng.randint(2, max_args)
        children = [grow(depth + 1) for _ in range(num_args)]
        # LRA draws the operator after the subtrees; the same order uses the stream the same way.
        return (rng.choice(OPERATORS), children)

    try:
        tree = grow(1)
    except _TooLong:
        return None
    return tree, count[0]


def tree_tokens(tree: Tree) -> list[str]:
    """The prefix-notation tokens of a tree, e.g. ``['[MAX', '2', '9', ']']``."""
    if isinstance(tree, int):
        return [DIGITS[tree]]
    operator, children = tree
    tokens = [operator]
    for child in children:
        tokens.extend(tree_tokens(child))
    tokens.append(CLOSE)
    return tokens


def tree_value(tree: Tree) -> int:
    """The value of a tree, computed recursively as LRA's ``to_value`` does."""
    if isinstance(tree, int):
        return tree
    operator, children = tree
    values = [tree_value(child) for child in children]
    if operator == "[MIN":
        return min(values)
    if operator == "[MAX":
        return max(values)
    if operator == "[MED":
        return int(statistics.median(values))  # LRA: int(np.median(values)), the same number
    return sum(values) % 10


def evaluate_listops(tokens: Sequence[str]) -> int:
    """Evaluate a ListOps token string with an explicit stack (independent of the tree sampler).

    Raises:
        ValueError: the tokens are not one well-formed expression.
    """
    stack: list[tuple[str, list[int]]] = []
    result: int | None = None
    for token in tokens:
        if token in OPERATORS:
            stack.append((token, []))
            continue
        if token == CLOSE:
            if not stack:
                raise ValueError("tokens has an unmatched ']'")
            operator, args = stack.pop()
            ordered = sorted(args)
            if operator == "[MIN":
                value = ordered[0]
            elif operator == "[MAX":
                value = ordered[-1]
            elif operator == "[MED":
                # integer median: the mean of the two middle values, rounded down
                value = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) // 2
            else:
                value = sum(ordered) % 10
        elif token in DIGITS:
            value = DIGITS.index(token)
        else:
            raise ValueError(f"tokens contains {token!r}; valid tokens: {VOCAB[1:]}")
        if stack:
            stack[-1][1].append(value)
        elif result is None:
            result = value
        else:
            raise ValueError("tokens holds more than one expression")
    if stack or result is None:
        raise ValueError("tokens is not a complete expression")
    return result


def generate_listops(
    num_samples: int,
    *,
    min_len: int = 500,
    max_len: int = 2000,
    seed: int | str = 0,
    exclude: Iterable[tuple[str, ...]] = (),
) -> list[tuple[tuple[str, ...], int]]:
    """Sample distinct ListOps expressions with ``min_len < length < max_len`` and their labels.

    Args:
        num_samples: how many to return.
        min_len: exclusive lower bound on the token count.
        max_len: exclusive upper bound on the token count.
        seed: seed of the random stream (any int or str).
        exclude: token tuples that must not be produced (e.g. another split's).

    Returns:
        ``(tokens, label)`` pairs, in the order sampled.
    """
    if not 0 <= min_len < max_len - 1:
        raise ValueError(
            f"min_len and max_len need 0 <= min_len < max_len - 1; got {min_len} and {max_len}"
        )
    rng = random.Random(seed)
    seen = set(exclude)
    samples: list[tuple[tuple[str, ...], int]] = []
    while len(samples) < num_samples:
        sampled = sample_tree(rng, max_len=max_len)
        if sampled is None or not min_len < sampled[1] < max_len:
            continue
        tree = sampled[0]
        tokens = tuple(tree_tokens(tree))
        if tokens not in seen:
            seen.add(tokens)
            samples.append((tokens, tree_value(tree)))
    return samples


def encode_listops(tokens: Sequence[str]) -> list[int]:
    """Token strings to ids (0 is padding, 1..15 the symbols)."""
    return [_TOKEN_ID[t] for t in tokens]


def decode_listops(ids: Iterable[int]) -> list[str]:
    """Ids back to token strings, padding dropped."""
    return [VOCAB[i] for i in ids if i != PAD_ID]


def _generate_splits(
    sizes: dict[str, int], min_len: int, max_len: int, seed: int
) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    seen: set[tuple[str, ...]] = set()
    # Test first, each split on its own stream: the test set does not depend on num_train.
    for split in ("test", "validation", "train"):
        samples = generate_listops(
            sizes[split], min_len=min_len, max_len=max_len, seed=f"{seed}/{split}", exclude=seen
        )
        seen.update(tokens for tokens, _ in samples)
        ids = [encode_listops(tokens) for tokens, _ in samples]
        arrays[f"{split}_ids"] = np.fromiter((i for s in ids for i in s), dtype=np.uint8)
        arrays[f"{split}_offsets"] = np.cumsum([0] + [len(s) for s in ids], dtype=np.int64)
        arrays[f"{split}_labels"] = np.array([label for _, label in samples], dtype=np.int64)
    return arrays


def load_listops(
    *,
    preset: str = "lra",
    seed: int = 0,
    min_len: int | None = None,
    max_len: int | None = None,
    num_train: int | None = None,
    num_validation: int | None = None,
    num_test: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """The ListOps task: token ids in ``[0, 16)``, 10 classes; generated once, then cached.

    Args:
        preset: ``"lra"`` (lengths 500–2000, 96k/2k/2k), ``"small"`` (100–500, 10k/1k/1k) or
            ``"tiny"`` (20–100, 2k/500/500); explicit options below override it.
        seed: generation seed.
        min_len: exclusive lower bound on sequence length.
        max_len: exclusive upper bound on sequence length.
        num_train: training expressions.
        num_validation: validation expressions.
        num_test: test expressions.
        cache_dir: cache root (default ``$FILTERFORMER_CACHE`` or ``~/.cache/filterformer``).
    """
    if preset not in LISTOPS_PRESETS:
        raise ValueError(f"preset must be one of {sorted(LISTOPS_PRESETS)}; got {preset!r}")
    overrides = dict(min_len=min_len, max_len=max_len, num_train=num_train,
                     num_validation=num_validation, num_test=num_test)
    config = {**LISTOPS_PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    sizes = {"train": config["num_train"], "validation": config["num_validation"],
             "test": config["num_test"]}
    if any(n < 1 for n in sizes.values()):
        raise ValueError(f"num_train, num_validation and num_test must be positive; got {sizes}")
    key = cache_key(seed=seed, min_len=config["min_len"], max_len=config["max_len"], **sizes)
    path = cache_root(cache_dir) / "listops" / f"listops-{key}.npz"
    arrays = cached_arrays(
        path, lambda: _generate_splits(sizes, config["min_len"], config["max_len"], seed)
    )
    splits = {}
    for split in sizes:
        ids = torch.from_numpy(arrays[f"{split}_ids"])
        offsets = arrays[f"{split}_offsets"]
        sequences = [ids[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        labels = arrays[f"{split}_labels"]
        splits[split] = SequenceDataset(sequences, labels, "input_ids", transform=as_long)
    longest = max(int(np.diff(arrays[f"{s}_offsets"]).max()) for s in sizes)
    return TaskData(
        name="listops",
        kind="classification",
        train=splits["train"],
        validation=splits["validation"],
        test=splits["test"],
        collate=collate_sequences,
        num_classes=10,
        vocab_size=len(VOCAB),
        input_dim=None,
        max_len=longest,
        metadata={"cache_path": str(path), "vocab": VOCAB, "seed": seed, **config},
    )
