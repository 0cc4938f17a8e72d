"""Run configs: files, overrides, typing, precedence, and errors that list the valid choices."""

from __future__ import annotations

import dataclasses

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
    expected = dataclasses.asdict(TransformerConfig(**METHOD_PRESETS[method]))
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
