"""Pretrained models as the base of a run: the method as one patch call, what is refused up
front, the head, the optimiser's groups, a real all-MiniLM-L6-v2 comparison, a timm ViT.

No test skips when transformers, timm or the all-MiniLM-L6-v2 package is missing: the loaders'
messages say what to install.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from filterformer.data.task import TaskData
from filterformer.diagnostics import diagnose
from filterformer.method_spec import MethodSpec
from filterformer.nn import masked_mean
from filterformer.patching import patched_parameters
from filterformer.patching.state import get_patch_state
from filterformer.training import TrainConfig, Trainer, load_checkpoint
from filterformer.training.compare import CompareConfig, compare, load_compare_config
from filterformer.training.evaluation import model_inputs
from filterformer.training.model_building import (
    build_model,
    load_task_data,
    model_config_from_dict,
    resolve_model_config,
)
from filterformer.training.pretrained import (
    MINILM,
    PretrainedModelConfig,
    pretrained_directory,
    pretrained_method,
)

from .helpers import majority_task

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: A small sentiment task: 24 training sentences, about 30 each to validate and test.
SMALL_SENTIMENT = {"num_train": 24, "validation_fraction": 0.003, "test_fraction": 0.003}
VIT = "timm:vit_tiny_patch16_224"
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def sentiment() -> TaskData:
    return load_task_data("sentiment", dict(SMALL_SENTIMENT))


@pytest.fixture(scope="module")
def digits() -> TaskData:
    return load_task_data("digits", {"num_train": 32})


def _config(method: str | None = None, **fields) -> TrainConfig:
    base = {"task": "sentiment", "task_options": dict(SMALL_SENTIMENT), "pretrained": MINILM,
            "method": method, "batch_size": 8, "eval_batch_size": 32, "progress": False}
    return TrainConfig.from_dict({**base, **fields})


def _build(config: TrainConfig, task: TaskData, seed: int = 0):
    torch.manual_seed(seed)
    return build_model(resolve_model_config(config, task), task, config.pooling)


def _batch(task: TaskData, size: int = 4) -> dict:
    return model_inputs(task.collate([task.validation[i] for i in range(size)]), CPU)


# -- the method as one patch spec ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "model", "expected"),
    [
        (None, {}, (None, {})),
        ("softmax", {}, (None, {})),
        ("gfsa", {}, ("gfsa", {})),
        ("gfsa", {"attention_options": {"K": 2, "learn": ["wK", "w0"]},
                  "attention_layers": [3, 1]},
         ("gfsa", {"K": 2, "learn": ["wK", "w0"], "layers": [1, 3]})),
        ("neutreno", {}, ("neutreno", {"neutreno_lambda": 0.6})),
        ("neutreno", {"neutreno_lambda": 0.4}, ("neutreno", {"neutreno_lambda": 0.4})),
        ("gfsa+neutreno", {"attention_layers": [0]}, ("gfsa+neutreno", {"neutreno_lambda": 0.6,
                                                                        "layers": [0]})),
        (None, {"attention": "gfsa", "neutreno_lambda": 0.4},
         ("gfsa+neutreno", {"neutreno_lambda": 0.4})),
        ("fusion", {}, ("fusion", {"fusion": "concat"})),
        ("fusion", {"fusion": "gate"}, ("fusion", {"fusion": "gate"})),
        ("gfsa+fusion", {}, ("gfsa+fusion", {"fusion": "concat"})),
        ("gfsa+neutreno+fusion", {"attention_layers": [1]},
         ("gfsa+neutreno+fusion", {"neutreno_lambda": 0.6, "layers": [1], "fusion": "concat"})),
        ("neutreno", {"neutreno_learnable": True},
         ("neutreno", {"neutreno_lambda": 0.6, "neutreno_learnable": True})),
        ("neutreno", {"neutreno_lambda": 0.4, "neutreno_warmup": 5},
         ("neutreno", {"neutreno_lambda": 0.4, "neutreno_warmup": 5})),
        ("gfsa", {"attention_options": {"exact_power": True, "base": "efficient"}},
         ("gfsa", {"exact_power": True, "base": "efficient"})),
    ],
)
def test_method_fields_become_one_patch_spec(method, model, expected):
    name, options = expected
    spec = pretrained_method(model, method)
    assert spec == (None if name is None else MethodSpec.parse(name, **options))
    if spec is not None:
        assert spec == MethodSpec.from_config(model, method)  # as a native model reads them
    config = _config(method, model=model)  # accepted when the config is made
    assert config.pretrained == MINILM


@pytest.mark.parametrize(
    ("method", "model", "message"),
    [
        ("agf", {}, r"method 'agf' uses attention 'agf', which cannot be patched"),
        ("samsa_hard", {}, r"attention 'samsa', which cannot be patched"),
        ("agf+neutreno", {}, r"attention 'agf', which cannot be patched"),
        ("fusion", {"attention_layers": [1]}, r"attention_layers .* this method patches none"),
        ("gfsa", {"dim": 64}, r"model.dim cannot be used with pretrained .*architecture comes "),
        ("gfsa", {"attention_options": {"num_samples": 4}},
         r"attention_options.num_samples cannot be patched in .*a patched GFSA takes K, learn, "
         "exact_power, base"),
        ("softmax", {"attention_layers": [1]}, r"attention_layers .* this method patches none"),
        ("gfsa", {"neutreno_warmup": 5}, r"model.neutreno_warmup \(method 'gfsa'\) raises "
                                         r"NeuTRENO's λ from 0, and this method has no NeuTRENO"),
        ("gfsa", {"attention_options": {"K": 1}}, r"K must be an integer >= 2"),
    ],
)
def test_what_no_patch_expresses_is_refused_when_the_config_is_made(method, model, message):
    with pytest.raises(ValueError, match=message) as refusal:
        _config(method, model=model)
    if "K must" not in message:
        assert "softmax, gfsa, neutreno, fusion and their combinations" in str(refusal.value)


def test_a_comparison_refuses_an_unpatchable_method_before_any_run(tmp_path):
    base = _config(max_steps=3, output_dir=str(tmp_path / "compare"))
    with pytest.raises(ValueError, match=r"method 'agf' uses attention 'agf'.*takes: softmax, "
                                         r"gfsa, neutreno, fusion and their combinations"):
        CompareConfig(base=base, methods=("softmax", "agf"), seeds=(0,))
    assert not (tmp_path / "compare").exists()


@pytest.mark.parametrize("source", ["", "timm:", "/no/such/model/dir", "bert-base-uncased"])
def test_a_pretrained_source_is_a_known_name_or_a_local_directory(source):
    with pytest.raises(ValueError, match=r"pretrained must be 'all-MiniLM-L6-v2', "
                                         r"'timm:<model name>' or a local directory"):
        _config(pretrained=source)


def test_a_local_model_directory_tokenizes_its_text_task(tmp_path, sentiment):
    local = tmp_path / "minilm"
    local.symlink_to(pretrained_directory(MINILM), target_is_directory=True)
    config = _config(pretrained=str(local))
    assert config.task_options == {**SMALL_SENTIMENT, "tokenizer": str(local)}
    # Named explicitly, the tokenizer stays; the installed model's is the loader's default.
    assert _config(pretrained=str(local), task_options={"tokenizer": "x"}).task_options == {
        "tokenizer": "x"}
    assert _config().task_options == SMALL_SENTIMENT
    assert "tokenizer" not in _config(task="digits", pretrained=VIT, task_options={}).task_options
    # The same directory, reached through the link, is the tokenizer the task was made with.
    resolved = resolve_model_config(config, sentiment)
    assert resolved.pretrained == str(local) and resolved.backend == "transformers"


def test_tasks_a_pretrained_model_cannot_read_are_refused(sentiment, digits):
    lm = TaskData(name="lm", kind="language_modeling", train=[], validation=[], test=[],
                  collate=list, num_classes=None, vocab_size=30522, input_dim=None, max_len=8)
    cases = [
        (_config(), majority_task(num_train=8, num_eval=4),
         r"task 'majority' \(vocabulary 12, tokenizer None\) is not tokenized with the "
         r"tokenizer of pretrained='all-MiniLM-L6-v2'"),
        (_config(), digits, r"task 'digits' has no token ids \(for images: pretrained='timm:"),
        (_config(), lm, r"pretrained models are fine-tuned on classification tasks"),
        (_config(pretrained=VIT), sentiment, r"is a ViT for image tasks .* task 'sentiment' "
                                             r"has no images"),
        (_config(task="digits", pretrained="timm:no_such_vit", task_options={}), digits,
         r"timm has no model 'no_such_vit'"),
        (_config(task="digits", pretrained="timm:resnet18", task_options={}), digits,
         r"pretrained='timm:resnet18': resnet18 is not a timm VisionTransformer \(.*\); it must "
         r"be a ViT or DeiT model"),
        (_config("gfsa", task="digits", pretrained=VIT, task_options={},
                 model={"attention_layers": [12]}), digits, r"layers \[12\] do not exist"),
    ]
    for config, task, message in cases:
        with pytest.raises(ValueError, match=message):
            resolve_model_config(config, task)


def test_model_configs_read_back_as_what_they_were(sentiment, digits):
    for config, task in ((_config("gfsa+neutreno", model={"attention_layers": [1]}), sentiment),
                         (_config("fusion", task="digits", pretrained=VIT, task_options={}),
                          digits)):
        resolved = resolve_model_config(config, task)
        assert isinstance(resolved, PretrainedModelConfig)
        assert model_config_from_dict(json.loads(json.dumps(resolved.to_dict()))) == resolved
    assert resolved.image_size == (8, 8) and resolved.patch_size == 2
    assert resolved.num_classes == 10 and resolved.patch == "fusion"


# -- the models ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_the_model_is_the_pretrained_encoder_with_a_head(sentiment, pooling):
    from transformers import AutoModel

    softmax = _build(_config(pooling=pooling), sentiment).eval()
    gfsa = _build(_config("gfsa", pooling=pooling), sentiment).eval()
    reference = AutoModel.from_pretrained(str(pretrained_directory(MINILM)),
                                          local_files_only=True).eval()
    batch = _batch(sentiment)
    mask = batch["padding_mask"]
    assert not mask.all()  # the batch has padding
    with torch.no_grad():
        hidden = reference(input_ids=batch["input_ids"],
                           attention_mask=mask.long()).last_hidden_state
        pooled = masked_mean(hidden, mask) if pooling == "mean" else hidden[:, 0]
        out = softmax(**batch)
        patched = gfsa(**batch)
    expected = softmax.head(pooled)
    torch.testing.assert_close(out.logits, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, F.cross_entropy(expected, batch["labels"]))
    # GFSA starts as the layer's own attention, and one seed gives one head whatever the method.
    torch.testing.assert_close(patched.logits, expected, atol=1e-4, rtol=1e-4)
    assert get_patch_state(softmax.backbone) is None
    assert get_patch_state(gfsa.backbone).spec.name == "gfsa"


def test_patch_options_reach_the_patched_layers(sentiment):
    model = _build(_config("gfsa+neutreno", model={
        "attention_options": {"K": 2, "learn": ["w0", "wK"]}, "attention_layers": [1, 3],
        "neutreno_lambda": 0.4}), sentiment)
    spec = get_patch_state(model.backbone).spec
    assert (spec.name, spec.graph_filter_options()["K"], spec.neutreno_lambda, spec.layers) == (
        "gfsa+neutreno", 2, 0.4, (1, 3)
    )
    names = sorted(name for name, _ in patched_parameters(model.backbone))
    assert names == [f"encoder.layer.{i}.attention.self.filterformer.{w}"
                     for i in (1, 3) for w in ("w0", "wK")]


@pytest.mark.parametrize("method", ["gfsa", "fusion"])
def test_fine_tuning_trains_everything_and_never_decays_the_patch(tmp_path, sentiment, method):
    trainer = Trainer(_config(method, output_dir=str(tmp_path)), task=sentiment)
    model = trainer.model
    decayed, kept = (trainer.optimizer.param_groups[i]["params"] for i in (0, 1))
    assert trainer.optimizer.param_groups[1]["weight_decay"] == 0.0
    everything = list(model.parameters())
    assert all(p.requires_grad for p in everything)
    assert sorted(map(id, decayed + kept)) == sorted(map(id, everything))
    patched = [p for _, p in patched_parameters(model.backbone)]
    assert patched and {id(p) for p in patched} <= {id(p) for p in kept}
    if method == "fusion":  # a 2-D weight, kept out of decay only by the patch's mark
        assert any(p.ndim == 2 for p in patched)
    linear = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)
              and all(m.weight is not p for p in patched)]
    assert {id(p) for p in linear} <= {id(p) for p in decayed}
    norms = [p for m in model.modules() if isinstance(m, (torch.nn.LayerNorm, torch.nn.Embedding))
             for p in m.parameters()]
    assert {id(p) for p in norms} <= {id(p) for p in kept}


def test_training_advances_neutreno_warmup_once_per_optimiser_step(tmp_path, sentiment):
    config = _config("neutreno", model={"neutreno_lambda": 0.4, "neutreno_warmup": 5},
                     max_steps=3, output_dir=str(tmp_path), schedule={"warmup_steps": 0})
    trainer = Trainer(config, task=sentiment)
    warmup = trainer.model.backbone.filterformer_neutreno_warmup
    assert (warmup.steps, int(warmup.steps_taken)) == (5, 0)
    assert trainer.fit().steps == 3
    state = load_checkpoint(tmp_path / "checkpoints" / "last.pt")["model"]
    assert int(state["backbone.filterformer_neutreno_warmup.steps_taken"]) == 3


def test_a_timm_vit_fine_tunes_on_digits(tmp_path, digits):
    config = _config("gfsa", task="digits", pretrained=VIT, task_options={"num_train": 32},
                     max_steps=2, batch_size=8, output_dir=str(tmp_path),
                     optimizer={"lr": 1e-3}, schedule={"warmup_steps": 0})
    trainer = Trainer(config, task=digits)
    model = trainer.model
    assert model.backbone.patch_embed.proj.kernel_size == (2, 2)  # the task's patches
    result = trainer.fit()
    assert result.completed and result.steps == 2 and math.isfinite(result.test["loss"])
    state = load_checkpoint(tmp_path / "checkpoints" / "last.pt")["model"]
    coefficients = {k: v for k, v in state.items() if k.rsplit(".", 1)[-1] in ("w0", "w1", "wK")}
    assert len(coefficients) == 3 * 12
    initial = {"w0": 0.0, "w1": 1.0, "wK": 0.0}
    assert all((v - initial[k.rsplit(".", 1)[-1]]).abs().max() > 1e-6
               for k, v in coefficients.items())
    report = diagnose(model.backbone, [model.backbone_inputs(_batch(digits))], label="vit")
    assert len(report.token_cosine_similarity) == 12 + 1
    assert -1.0 <= report.token_cosine_similarity[-1] <= 1.0


# -- a real comparison ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_pretrained_comparison_fine_tunes_minilm_with_and_without_gfsa(tmp_path, sentiment):
    base = _config(optimizer={"lr": 1e-4, "weight_decay": 0.01},
                   schedule={"warmup_steps": 0, "decay": "linear"}, max_steps=3, batch_size=8,
                   output_dir=str(tmp_path))
    # One round of the paired time per step: the pretrained models go through it too.
    config = CompareConfig(base=base, methods=("softmax", "gfsa"), seeds=(0, 1),
                           diagnostics_batches=1, cost_rounds=1, cost_warmup_steps=1)
    lines: list[str] = []
    results = compare(config, task=sentiment, echo=lines.append)
    assert results.pretrained == MINILM
    assert json.loads((tmp_path / "results.json").read_text())["pretrained"] == MINILM
    assert f"pretrained model <b>{MINILM}</b>" in (tmp_path / "report.html").read_text()
    assert [(r["method"], r["seed"], r["steps"]) for r in results.runs] == [
        ("softmax", 0, 3), ("softmax", 1, 3), ("gfsa", 0, 3), ("gfsa", 1, 3)]
    for run in results.runs:
        assert len(run["cosine_similarity_per_layer"]) == 6 + 1
        assert -1.0 <= run["last_layer_cosine_similarity"] <= 1.0
        state = load_checkpoint(Path(run["run_dir"]) / "checkpoints" / "best.pt")
        model_config = model_config_from_dict(state["model_config"])
        weights = state["model"]
        patched = {k: v for k, v in weights.items() if ".filterformer." in k}
        if run["method"] == "softmax":
            assert model_config.patch is None and not patched
            model = build_model(model_config, sentiment, base.pooling)
            assert get_patch_state(model.backbone) is None
            assert sorted(model.state_dict()) == sorted(weights)
            continue
        assert model_config.patch == "gfsa"
        assert len(patched) == 3 * 6
        initial = {"w0": 0.0, "w1": 1.0, "wK": 0.0}
        for key, value in patched.items():
            assert (value - initial[key.rsplit(".", 1)[-1]]).abs().max() > 1e-6, key


def test_the_example_pretrained_comparison_loads():
    config = load_compare_config(CONFIGS / "compare_minilm_sentiment.yaml")
    assert config.base.pretrained == MINILM
    assert config.methods == ("softmax", "gfsa", "neutreno", "gfsa+neutreno", "fusion")
    assert config.base.schedule.decay == "linear"
