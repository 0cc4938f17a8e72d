"""Run configs: files, overrides, typing, precedence, and errors that list the valid choices."""

from __future__ import annotations

import dataclasses
import math
import random
import re
import typing

import pytest

from filterformer.models import TransformerConfig
from filterformer.training import (
    DEFAULT_TASK_OPTIONS,
    METHOD_PRESETS,
    TrainConfig,
    apply_overrides,
    load_config,
    save_config,
)
from filterformer.training.batches import make_loader, training_batches
from filterformer.training.checkpoint import seed_everything
from filterformer.training.config_values import field_hints
from filterformer.training.run_config import SEED_RANGE

YAML_TEXT = """
task: listops
task_options: {preset: tiny, num_train: 64}
method: gfsa
model:
  dim: 32
  depth: 3
  attention_options: {K: 4}
optimizer: {lr: 0.0005, betas: [0.8, 0.95]}
schedule: {warmup_steps: 7, decay: linear}
batch_size: 8
grad_clip: null
"""

TOML_TEXT = """
task = "listops"
method = "gfsa"
batch_size = 8
grad_clip = 1.0e300
task_options = { preset = "tiny", num_train = 64 }

[model]
dim = 32
depth = 3
attention_options = { K = 4 }

[optimizer]
lr = 0.0005
betas = [0.8, 0.95]

[schedule]
warmup_steps = 7
decay = "linear"
"""


def test_yaml_and_toml_read_the_same_config(tmp_path):
    (tmp_path / "run.yaml").write_text(YAML_TEXT)
    (tmp_path / "run.toml").write_text(TOML_TEXT)
    from_yaml = load_config(tmp_path / "run.yaml")
    # TOML has no null: set grad_clip through an override, which must parse "null" as None.
    from_toml = load_config(tmp_path / "run.toml", ["grad_clip=null"])
    assert from_yaml == from_toml
    assert from_yaml.optimizer.betas == (0.8, 0.95)
    assert from_yaml.model == {"dim": 32, "depth": 3, "attention_options": {"K": 4}}


def test_overrides_are_typed_by_the_field_they_set(tmp_path):
    config = load_config(None, [
        "model.depth=6", "optimizer.lr=1e-3", "model.attention_layers=[1, 3]", "method=gfsa",
        "model.qkv_bias=false", "epochs=2", "schedule.min_lr_ratio=0", "output_dir=123",
    ])
    assert config.model["depth"] == 6 and type(config.model["depth"]) is int
    # YAML 1.1 reads 1e-3 as text; a learning rate is a number.
    assert config.optimizer.lr == 1e-3 and type(config.optimizer.lr) is float
    assert config.model["attention_layers"] == (1, 3)
    assert config.model["qkv_bias"] is False
    assert config.schedule.min_lr_ratio == 0.0 and type(config.schedule.min_lr_ratio) is float
    assert config.output_dir == "123"  # a string field keeps the text as typed
    assert config.method == "gfsa"


def test_saved_config_reads_back_equal(tmp_path):
    config = load_config(None, ["method=samsa_hard", "model.dim=48", "optimizer.betas=[0.7,0.9]"])
    path = save_config(config, tmp_path / "config.yaml")
    assert load_config(path) == config


def test_overrides_leave_the_input_alone():
    data = {"model": {"dim": 32}}
    result = apply_overrides(data, ["model.depth=2"])
    assert data == {"model": {"dim": 32}}
    assert result == {"model": {"dim": 32, "depth": 2}}


def test_default_task_options_belong_to_the_default_task(tmp_path):
    assert load_config().task_options == DEFAULT_TASK_OPTIONS
    # An option set on the default task keeps its other defaults ...
    assert load_config(None, ["task_options.num_train=5"]).task_options == {
        **DEFAULT_TASK_OPTIONS, "num_train": 5}
    # ... but another task starts from its own loader's defaults.
    assert load_config(None, ["task=digits"]).task_options == {}
    assert load_config(None, ["task=digits", "task_options.patch_size=4"]).task_options == {
        "patch_size": 4}
    (tmp_path / "run.yaml").write_text("task: listops\ntask_options: {preset: small}\n")
    assert load_config(tmp_path / "run.yaml", ["task=digits"]).task_options == {}


def _fields_through_config(**model) -> dict:
    """The TransformerConfig a TrainConfig resolves, as a dict, minus task-set fields."""
    return TrainConfig(model=model.pop("explicit", {}), **model).transformer_config().to_dict()


@pytest.mark.parametrize("method", list(METHOD_PRESETS))
def test_method_presets_resolve_to_their_changes(method):
    expected = TransformerConfig(**METHOD_PRESETS[method]).to_dict()
    expected["attention_layers"] = None
    assert _fields_through_config(method=method) == expected


def test_explicit_model_fields_win_over_the_method():
    fields = _fields_through_config(
        method="gfsa+neutreno",
        explicit={"neutreno_lambda": 0.4, "attention_options": {"K": 5}, "dim": 48},
    )
    assert fields["attention"] == "gfsa"
    assert fields["neutreno_lambda"] == 0.4
    assert fields["attention_options"] == {"K": 5}
    assert fields["dim"] == 48
    samsa = _fields_through_config(method="samsa_hard", explicit={
        "attention_options": {"num_samples": 4}})
    assert samsa["attention_options"] == {"mode": "hard", "num_samples": 4}


def test_task_values_fill_the_model_and_are_checked():
    config = TrainConfig(model={"max_len": 50})
    assert config.transformer_config(vocab_size=16, max_len=40).vocab_size == 16
    with pytest.raises(ValueError, match=r"model.max_len \(50\) is shorter .* \(60\)"):
        config.transformer_config(max_len=60)
    with pytest.raises(ValueError, match=r"model\.causal must be True"):
        TrainConfig(model={"causal": False}).transformer_config(required={"causal": True})
    with pytest.raises(ValueError, match=r"model\.vocab_size is set by the task"):
        TrainConfig(model={"vocab_size": 10})


@pytest.mark.parametrize(
    ("overrides", "pattern"),
    [
        (["modle.depth=2"], r"unknown config key 'modle'; valid keys of the config: task, "),
        (["optimizer.momentum=0.9"], r"'optimizer.momentum'; valid keys of optimizer: lr, "),
        (["model.width=8"], r"unknown config key 'model.width'; valid keys of model: dim, depth"),
        (["method=gfsaa"], r"unknown method 'gfsaa'; valid methods: softmax, gfsa, neutreno, "),
        (["method=gfsa+agf"], r"presets that disagree: 'gfsa' sets attention='gfsa', 'agf' sets"),
        (["precision=fp8"], r"precision must be one of auto, fp32, bf16, fp16; got 'fp8'"),
        (["schedule.decay=step"], r"schedule.decay must be one of cosine, linear, constant"),
        (["pooling=max"], r"pooling must be one of mean, first, attention; got 'max'"),
        (["device=tpu"], r"device must be one of auto, cpu, cuda"),
        (["model.attention=flash"], r"unknown attention 'flash'; valid choices: agf, gfsa, "),
        (["model.norm=middle"], r"norm must be one of \('pre', 'post'\)"),
        (["batch_size=0"], r"batch_size must be positive; got 0"),
        (["batch_size=many"], r"batch_size must be an integer; got 'many'"),
        (["optimizer.lr=-1"], r"optimizer.lr must be >= 0 \(0 freezes the weights\); got -1.0"),
        (["optimizer.betas=[0.9]"], r"optimizer.betas must be a list; got \[0.9\]"),
        (["max_steps=2.5"], r"max_steps must be an integer or null; got 2.5"),
        (["progress=maybe"], r"progress must be true/false; got 'maybe'"),
        (["compile=inductor"], r"compile must be true/false; got 'inductor'"),
        (["epochs"], r"override 'epochs' must look like key=value"),
        (["epochs.total=3"], r"config key 'epochs' takes no sub-keys"),
    ],
)
def test_bad_keys_and_values_name_the_valid_choices(overrides, pattern):
    with pytest.raises(ValueError, match=pattern):
        load_config(None, overrides)


def test_unknown_model_keys_in_a_file_list_the_settable_ones():
    with pytest.raises(ValueError, match=r"unknown model key\(s\) width; valid keys: dim, depth, "):
        TrainConfig.from_dict({"model": {"width": 8}})


def test_bad_files_are_reported(tmp_path):
    with pytest.raises(ValueError, match=r"must end in one of .yaml, .yml, .toml; got '.json'"):
        load_config(tmp_path / "run.json")
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "broken.toml").write_text("task = \n")
    with pytest.raises(ValueError, match="cannot parse TOML config"):
        load_config(tmp_path / "broken.toml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_config(tmp_path / "list.yaml")


def _float_fields(cls: type, prefix: str) -> list[str]:
    """The dotted names of every float field of config dataclass ``cls``, nested ones included."""
    names = []
    for name, hint in field_hints(cls).items():
        options = typing.get_args(hint) or (hint,)
        if float in options:
            names.append(prefix + name)
        elif dataclasses.is_dataclass(hint):
            names += _float_fields(hint, f"{prefix}{name}.")
    return names


FLOAT_FIELDS = _float_fields(TrainConfig, "") + [
    name for name in _float_fields(TransformerConfig, "model.")
    if name.split(".")[1] not in ("vocab_size", "input_dim")]


@pytest.mark.parametrize("field", FLOAT_FIELDS)
def test_no_float_option_may_be_nan_or_infinite(field):
    assert {"optimizer.lr", "optimizer.eps", "optimizer.weight_decay", "grad_clip",
            "schedule.min_lr_ratio", "model.dropout", "model.neutreno_lambda"} <= set(FLOAT_FIELDS)
    text = random.choice([".nan", ".inf", "-.inf", "nan", "inf", "-Infinity"])
    with pytest.raises(ValueError, match=rf"^{re.escape(field)} must be a finite number; got "):
        load_config(None, [f"{field}={text}"])
    # A file, or a dict from Python, says the same.
    bad = random.choice([math.nan, math.inf, -math.inf])
    *parents, last = field.split(".")
    data: dict = {}
    target = data
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = bad
    with pytest.raises(ValueError, match=rf"{re.escape(field)} must be a finite number"):
        TrainConfig.from_dict(data)


@pytest.mark.parametrize(("override", "name"), [
    ("optimizer.betas=[0.9, .nan]", "optimizer.betas[1]"),
    ("model.attention_options.a=nan", "model.attention_options.a"),
    ("model.attention_options.b=.inf", "model.attention_options.b"),
    ("model.attention_options.orthogonality_weight=inf",
     "model.attention_options.orthogonality_weight"),
    ("task_options.preset=.nan", "task_options.preset"),
])
def test_non_finite_numbers_in_lists_and_free_mappings_are_named(override, name):
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be a finite number; got "):
        load_config(None, ["method=agf", override])


@pytest.mark.parametrize("seed", ["1e20", str(2**63), str(-(2**63) - 1), "100000000000000000000"])
def test_a_seed_out_of_range_names_the_range(seed):
    with pytest.raises(ValueError, match=r"^seed must be an integer from -2\*\*63 to 2\*\*63 - 1 "):
        load_config(None, [f"seed={seed}"])
    # Every seed in the range seeds every generator a run uses.
    for good in (SEED_RANGE[0], SEED_RANGE[1], random.randint(*SEED_RANGE)):
        assert load_config(None, [f"seed={good}"]).seed == good
        seed_everything(good)
        epoch = random.randint(0, 100)
        assert len(training_batches(list(range(10)), 3, epoch=epoch, seed=good)) == 3
        make_loader(list(range(4)), [[0, 1]], list, seed=good + epoch)
