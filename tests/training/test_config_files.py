"""Files of model fields: YAML, JSON and TOML read alike; a task fills in a missing input size."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace

import pytest
import yaml

from filterformer.models import TransformerConfig
from filterformer.training.config_files import (
    CONFIG_SUFFIXES,
    MODEL_CONFIG_SUFFIXES,
    load_transformer_config,
    read_config_file,
)


def _fields() -> dict:
    heads = random.choice([1, 2, 4])
    return {"dim": 8 * heads, "depth": random.randint(1, 6), "num_heads": heads,
            "norm": random.choice(["pre", "post"]), "attention": "gfsa",
            "attention_layers": [0]}


def _write(path, fields: dict) -> None:
    if path.suffix == ".json":
        path.write_text(json.dumps(fields, indent="\t"))  # tabs: JSON, but no YAML indentation
    elif path.suffix == ".toml":
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items()))
    else:
        path.write_text(yaml.safe_dump(fields))


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".toml"])
def test_every_format_gives_the_config_of_its_fields(tmp_path, suffix):
    fields = _fields()
    _write(tmp_path / f"model{suffix}", fields)
    assert read_config_file(tmp_path / f"model{suffix}", MODEL_CONFIG_SUFFIXES) == fields
    assert load_transformer_config(tmp_path / f"model{suffix}") == TransformerConfig(**fields)


def test_json_is_read_only_where_the_suffixes_allow_it(tmp_path):
    _write(tmp_path / "model.json", _fields())
    with pytest.raises(ValueError, match=r"must end in one of .yaml, .yml, .toml; got '.json'"):
        read_config_file(tmp_path / "model.json", CONFIG_SUFFIXES)
    (tmp_path / "broken.json").write_text('{"dim": 8,}')
    with pytest.raises(ValueError, match=r"cannot parse JSON config .*broken.json"):
        read_config_file(tmp_path / "broken.json", MODEL_CONFIG_SUFFIXES)
    with pytest.raises(ValueError, match=r"must end in one of .yaml, .yml, .toml, .json; got "
                                         r"'.ini'"):
        load_transformer_config(tmp_path / "model.ini")


def _load(tmp_path, fields: dict, task) -> TransformerConfig:
    _write(tmp_path / "model.yaml", fields)
    return load_transformer_config(tmp_path / "model.yaml", task)


def test_a_model_without_an_input_size_takes_the_tasks(tmp_path):
    features = SimpleNamespace(vocab_size=None, input_dim=random.randint(2, 9),
                               max_len=random.randint(10, 99))
    tokens = SimpleNamespace(vocab_size=random.randint(10, 99), input_dim=None,
                             max_len=random.randint(10, 99))
    fields = _fields()
    for task in (features, tokens):
        assert _load(tmp_path, fields, task) == TransformerConfig(
            **fields, vocab_size=task.vocab_size, input_dim=task.input_dim, max_len=task.max_len
        )
    # the file's own max_len stays; so does its own input size, with the default max_len
    longer = _load(tmp_path, {**fields, "max_len": 200}, tokens)
    assert (longer.vocab_size, longer.input_dim, longer.max_len) == (tokens.vocab_size, None, 200)
    own = _load(tmp_path, {**fields, "vocab_size": 5}, features)
    assert (own.vocab_size, own.input_dim, own.max_len) == (5, None, TransformerConfig().max_len)
    alone = _load(tmp_path, fields, None)
    assert (alone.vocab_size, alone.input_dim) == (None, None)


def test_unknown_fields_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"unknown TransformerConfig field\(s\) \['depht'\]; "
                                         r"valid: \['dim', 'depth'"):
        _load(tmp_path, {**_fields(), "depht": 3}, None)


def test_a_yaml_key_given_twice_is_refused_naming_the_file_key_and_lines(tmp_path):
    key = random.choice(["lr", "eps", "weight_decay"])
    between = ["  betas: [0.9, 0.99]"] if random.random() < 0.5 else []
    lines = ["task: listops", "optimizer:", f"  {key}: 0.1", *between, f"  {key}: 0.5"]
    path = tmp_path / "run.yaml"
    path.write_text("\n".join(lines) + "\n")
    second = len(lines)
    with pytest.raises(ValueError, match=rf"cannot parse YAML config {re.escape(str(path))}: "
                                         rf"key '{key}' is given twice, on line 3 and on line "
                                         rf"{second}"):
        read_config_file(path)
    path.write_text("task: listops\ntask: mnist\n")
    with pytest.raises(ValueError, match=r"key 'task' is given twice, on line 1 and on line 2"):
        read_config_file(path)
    # Keys may repeat across mappings, and a merge ("<<") overrides on purpose.
    path.write_text("defaults: &d {lr: 0.1, eps: 0.001}\noptimizer:\n  <<: *d\n  lr: 0.5\n"
                    "schedule: {lr: 1}\n")
    assert read_config_file(path)["optimizer"] == {"lr": 0.5, "eps": 0.001}
