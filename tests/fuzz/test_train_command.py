"""``filterformer train`` under generated configs: every config file and ``--set`` value either
trains (one step here) or ends in exit status 2 with a message naming what is wrong; never a
traceback, and never the catch-all message of a failure nothing explained.

Keys come from the real config schema (:class:`TrainConfig`, its optimiser and schedule, every
:class:`TransformerConfig` field under ``model.`` and the task's options), values from the edge
cases of every type: text, huge and negative integers, NaN and infinities, lists, mappings,
nothing at all.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import yaml
from hypothesis import event, example, given
from hypothesis import strategies as st

from filterformer.cli import main
from filterformer.data import task_options
from filterformer.models import TransformerConfig
from filterformer.training import OptimizerConfig, ScheduleConfig, TrainConfig

from .strategies import budget

#: Keys whose valid values do something slow or outside the test's directory, for reasons of
#: their own: compiling (tens of seconds), starting worker processes, writing elsewhere, or
#: pointing at another cache.
SKIPPED_KEYS = {"compile", "num_workers", "output_dir", "task_options.cache_dir"}
#: The run budget the test appends unless a drawn key sets it (one step, then stop).
BUDGET = {"max_steps": "1", "stop_after": "1"}
#: Task options that size the generated data: huge values would generate for hours.
DATA_SIZES = {"num_train", "num_validation", "num_test", "min_len", "max_len"}


def _schema_keys() -> list[str]:
    nested = {"optimizer": OptimizerConfig, "schedule": ScheduleConfig}
    keys = []
    for field in dataclasses.fields(TrainConfig):
        if field.name in nested:
            keys += [f"{field.name}.{f.name}" for f in dataclasses.fields(nested[field.name])]
        elif field.name == "model":
            keys += [f"model.{f.name}" for f in dataclasses.fields(TransformerConfig)]
        elif field.name == "task_options":
            keys += [f"task_options.{name}" for name in task_options("listops")]
        else:
            keys.append(field.name)
    return sorted(set(keys) - SKIPPED_KEYS)


KEYS = _schema_keys()
EDGE_VALUES = [
    "", "null", "~", "true", "false", "0", "-1", "1", "2", "3", "17", "64", "2147483648",
    "9223372036854775808", "1000000000", "1e9", "1e30", "-1e30", "0.5", "-0.5", "1e-12",
    ".nan", ".inf", "-.inf", "nan", "inf", "1e308", "[]", "[1, 2]", "[0.5, 0.9]", "[a, b]", "{}",
    "{a: 1}", "{K: 2}", "abc", "'1'", "gfsa", "softmax", "listops", "cls", "pre", "cuda", "cpu",
    "bf16", "fp16", "cosine", "learned", "concat", "[[1]]", "-0", "0x10", "1_000",
]
HUGE = {"2147483648", "9223372036854775808", "1000000000", "1e9", "1e30", "1e308"}
values = st.sampled_from(EDGE_VALUES) | st.text(
    st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=6
)
assignments = st.lists(
    st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=2,
    unique_by=lambda pair: pair[0],
).filter(lambda pairs: not (
    # Valid but slow: a data set of millions of items, or millions of steps.
    any(key.startswith("task_options.") and key.split(".")[-1] in DATA_SIZES and text in HUGE
        for key, text in pairs)
    or set(BUDGET) <= {key for key, _ in pairs}
))

_counter = itertools.count()


def _base_config(cache: Path) -> dict:
    return {
        "task": "listops",
        "task_options": {"preset": "tiny", "max_len": 40, "num_train": 32, "num_validation": 8,
                         "num_test": 8, "cache_dir": str(cache)},
        "model": {"dim": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2.0},
        "batch_size": 8,
        "progress": False,
    }


def _yaml_value(text: str):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _set_nested(config: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    for parent in parents:
        if not isinstance(config.get(parent), dict):
            config[parent] = {}
        config = config[parent]
    config[last] = value


@given(pairs=assignments, through_file=st.booleans())
@example(pairs=[("model.dim", "1e9")], through_file=False)
@example(pairs=[("optimizer.lr", ".inf")], through_file=False)
@example(pairs=[("model.attention_layers", "[a, b]")], through_file=True)
@example(pairs=[("task_options.max_len", ":")], through_file=False)
@example(pairs=[("model.mlp_ratio", "1e308")], through_file=True)
@budget(1.0)
def test_every_config_trains_or_is_refused_by_name(tmp_path_factory, capsys, pairs,
                                                   through_file):
    tmp = tmp_path_factory.getbasetemp() / "train-command"
    run = tmp / f"run-{next(_counter)}"
    config = _base_config(tmp / "cache")
    overrides = []
    if through_file:
        for key, text in pairs:
            _set_nested(config, key, _yaml_value(text))
    else:
        overrides = [f"{key}={text}" for key, text in pairs]
    drawn = {key for key, _ in pairs}
    overrides += [f"{key}={value}" for key, value in BUDGET.items() if key not in drawn]
    tmp.mkdir(parents=True, exist_ok=True)
    path = run.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config))
    capsys.readouterr()
    code = main(["train", "--config", str(path), "--output-dir", str(run), "--set", *overrides])
    err = capsys.readouterr().err
    event(f"exit status {code}")
    assert code in (0, 2), (code, err)
    if code == 0:
        assert (run / "checkpoints" / "last.pt").is_file()
        return
    assert err.startswith("filterformer train: error: "), err
    assert "run with --debug" not in err, f"an unexplained failure for {pairs}: {err}"
    # An option's name (the drawn one, or another it conflicts with, as batch_size with a
    # smaller training split), the family it belongs to ("attention" for attention_options),
    # or the file.
    named = {part for key in KEYS for part in (key.split(".")[-1], key.split(".")[-1]
                                               .split("_")[0])} | {str(path), str(run)}
    assert any(name in err for name in named), f"{pairs}: the message names no option: {err}"
