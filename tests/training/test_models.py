"""Models built for a run: the method's modules, the task's head, parameter counting."""

from __future__ import annotations

import json

import pytest
import torch

from filterformer.attention import (
    AttentiveGraphFilterAttention,
    GraphFilterAttention,
    SamplingAttention,
    SoftmaxAttention,
)
from filterformer.data.task import TaskData
from filterformer.graphs import Graph, collate_graphs
from filterformer.models import CausalLM, SequenceClassifier, TransformerConfig
from filterformer.models.graph_bridge import GraphBridgeClassifier
from filterformer.nn import LayerFusion
from filterformer.training import TrainConfig
from filterformer.training.model_building import (
    build_model,
    count_parameters,
    model_config_from_dict,
    resolve_model_config,
)
from filterformer.training.pretrained import PretrainedModelConfig

from .helpers import NUM_CLASSES, VOCAB, majority_task

SMALL = {"dim": 16, "depth": 2, "num_heads": 2}


def _build(config: TrainConfig, task: TaskData):
    return build_model(resolve_model_config(config, task), task, config.pooling)

#: What each preset must put in every block: (attention class, extra check on the module).
EXPECTED = {
    "softmax": (SoftmaxAttention, lambda a: a.neutreno_lambda == 0.0),
    "gfsa": (GraphFilterAttention, lambda a: a.neutreno_lambda == 0.0),
    "neutreno": (SoftmaxAttention, lambda a: a.neutreno_lambda == 0.6),
    "agf": (AttentiveGraphFilterAttention, lambda a: True),
    "samsa_soft": (SamplingAttention, lambda a: a.mode == "soft"),
    "samsa_hard": (SamplingAttention, lambda a: a.mode == "hard"),
    "fusion": (SoftmaxAttention, lambda a: True),
    "gfsa+neutreno": (GraphFilterAttention, lambda a: a.neutreno_lambda == 0.6),
}


@pytest.mark.parametrize("method", EXPECTED)
def test_each_method_builds_its_modules(method):
    task = majority_task(num_train=16, num_eval=4)
    model = _build(TrainConfig(model=SMALL, method=method), task)
    assert isinstance(model, SequenceClassifier)
    assert model.transformer.config.vocab_size == VOCAB
    assert model.head.out_features == NUM_CLASSES
    cls, check = EXPECTED[method]
    for block in model.transformer.blocks:
        assert type(block.attn) is cls
        assert check(block.attn)
    assert isinstance(model.transformer.fusion, LayerFusion) == (method == "fusion")


def _lm_task() -> TaskData:
    return TaskData(name="lm", kind="language_modeling", train=[], validation=[], test=[],
                    collate=list, num_classes=None, vocab_size=VOCAB, input_dim=None, max_len=8)


def test_language_modelling_gets_a_causal_lm():
    model = _build(TrainConfig(model=SMALL, method="gfsa"), _lm_task())
    assert isinstance(model, CausalLM)
    assert model.config.causal
    # The output projection is tied to the embedding: counted once.
    unique = {p.data_ptr(): p.numel() for p in model.parameters()}
    assert count_parameters(model) == sum(unique.values())
    assert count_parameters(model) < sum(p.numel() for p in model.state_dict().values())


def test_non_causal_methods_refuse_language_modelling():
    with pytest.raises(ValueError, match="causal"):
        _build(TrainConfig(model=SMALL, method="agf"), _lm_task())


def test_graph_classification_gets_graph_bridge_tokens():
    generator = torch.Generator().manual_seed(0)
    graphs = [
        Graph(torch.randn(n, 5, generator=generator), torch.tensor([[0, 1], [1, 0]]),
              torch.randn(2, 3, generator=generator), label=n % 2)
        for n in (3, 4)
    ]
    task = TaskData(name="graphs", kind="graph_classification", train=graphs,
                    validation=graphs, test=graphs, collate=collate_graphs, num_classes=2,
                    vocab_size=None, input_dim=None, max_len=12)
    model = _build(TrainConfig(model=SMALL, method="samsa_soft"), task)
    assert isinstance(model, GraphBridgeClassifier)
    logits = model(collate_graphs(graphs)).logits
    assert logits.shape == (2, 2)
    with pytest.raises(ValueError, match=r"model\.position must be 'none'"):
        _build(TrainConfig(model={**SMALL, "position": "learned"}), task)


def test_unsupported_task_kinds_are_named():
    task = majority_task(num_train=16, num_eval=4)
    task.kind = "regression"
    with pytest.raises(ValueError, match="training supports classification, language_modeling"):
        _build(TrainConfig(model=SMALL), task)


def test_a_checkpoint_model_config_reads_back_as_its_kind():
    task = majority_task(num_train=16, num_eval=4)
    scratch = resolve_model_config(TrainConfig(model=SMALL, method="gfsa"), task)
    assert isinstance(scratch, TransformerConfig)
    assert model_config_from_dict(json.loads(json.dumps(scratch.to_dict()))) == scratch
    pretrained = PretrainedModelConfig(
        pretrained="timm:vit_tiny_patch16_224", backend="timm", patch="gfsa+neutreno",
        patch_options={"K": 2, "neutreno_lambda": 0.4, "layers": [1]}, num_classes=10,
        image_size=(8, 8),
        patch_size=2,
    )
    assert model_config_from_dict(json.loads(json.dumps(pretrained.to_dict()))) == pretrained
    with pytest.raises(ValueError, match=r"unknown PretrainedModelConfig field\(s\) \['depth'\]"):
        model_config_from_dict({**pretrained.to_dict(), "depth": 2})
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'fusion' for method 'gfsa'"):
        model_config_from_dict({**pretrained.to_dict(), "patch": "gfsa",
                                "patch_options": {"fusion": "gate"}})
