"""filterformer's own models saved with ``save_pretrained`` and rebuilt with ``from_pretrained``:
the same outputs, class, dtype and tied weights; damaged or non-finite files refused by name."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import filterformer
from filterformer.graphs import Graph, collate_graphs
from filterformer.models import (
    CausalLM,
    GraphBridgeClassifier,
    GraphBridgeRegressor,
    SequenceClassifier,
    SequenceRegressor,
    Transformer,
    TransformerConfig,
)

from .helpers import VOCAB, config, randomise_filters


def _graphs() -> object:
    graphs = []
    for nodes, edges in ((4, 5), (6, 3)):
        index = torch.stack([torch.randint(0, nodes, (edges,)), torch.randint(0, nodes, (edges,))])
        graphs.append(Graph(torch.randn(nodes, 5), index, torch.randn(edges, 3), 0))
    return collate_graphs(graphs)


def _tokens() -> dict:
    return {"input_ids": torch.randint(1, VOCAB, (2, 9))}


def _graph_config() -> TransformerConfig:
    return TransformerConfig(dim=16, depth=2, num_heads=2, position="none", attention="gfsa",
                             attention_options={"K": 3})


CASES = {
    "transformer": (lambda: Transformer(config(attention="gfsa")), _tokens,
                    lambda out: out.last_hidden_state),
    "causal_lm": (lambda: CausalLM(config(causal=True, neutreno_lambda=0.5)), _tokens,
                  lambda out: out.logits),
    "classifier": (lambda: SequenceClassifier(config(), 4, pooling="attention"), _tokens,
                   lambda out: out.logits),
    "regressor": (lambda: SequenceRegressor(config(), "first", target_mean=-3.5, target_std=2.5),
                  _tokens, lambda out: out.predictions),
    "graph_classifier": (lambda: GraphBridgeClassifier(_graph_config(), 5, 3, 3, position_dim=8,
                                                       hidden_dim=12, eval_seed=7),
                         lambda: {"batch": _graphs()}, lambda out: out.logits),
    "graph_regressor": (lambda: GraphBridgeRegressor(_graph_config(), 5, 3, target_mean=1.5,
                                                     target_std=0.5, pooling="attention"),
                        lambda: {"batch": _graphs()}, lambda out: out.predictions),
}


def _trained_looking(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every parameter moved off its initial value (as training would)."""
    randomise_filters(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model.eval()


@pytest.mark.parametrize("case", list(CASES))
def test_a_saved_model_comes_back_with_the_same_outputs(tmp_path, case):
    build, inputs, output = CASES[case]
    model = _trained_looking(build())
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path)
    assert type(loaded) is type(model) and not loaded.training
    batch = inputs()
    assert torch.equal(output(loaded(**batch)), output(model(**batch)))
    assert loaded.pretrained_arguments() == model.pretrained_arguments()
    assert loaded.config == model.config


def test_the_causal_lm_keeps_its_tied_head_and_its_dtype(tmp_path):
    model = _trained_looking(CausalLM(config(causal=True))).double()
    model.save_pretrained(tmp_path)
    # One tensor under two names is stored once.
    assert "lm_head.weight" not in load_file(tmp_path / "model.safetensors")
    loaded = CausalLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is loaded.transformer.embed.tokens.weight
    assert loaded.lm_head.weight.dtype == torch.float64
    prompt = torch.randint(1, VOCAB, (2, 4))
    assert torch.equal(loaded.generate(prompt, 6), model.generate(prompt, 6))
    untied = _trained_looking(CausalLM(config(causal=True), tie_weights=False))
    untied.save_pretrained(tmp_path / "untied")
    again = CausalLM.from_pretrained(tmp_path / "untied")
    assert again.lm_head.weight is not again.transformer.embed.tokens.weight
    assert torch.equal(again.lm_head.weight, untied.lm_head.weight)


def test_the_package_functions_save_and_load_native_models(tmp_path):
    model = _trained_looking(SequenceClassifier(config(), 3))
    assert filterformer.save_pretrained(model, tmp_path) == tmp_path
    loaded = filterformer.from_pretrained(tmp_path)
    batch = _tokens()
    assert isinstance(loaded, SequenceClassifier)
    assert torch.equal(loaded(**batch).logits, model(**batch).logits)
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['max_shard_size'\]"):
        filterformer.save_pretrained(model, tmp_path, max_shard_size="1GB")


def test_a_save_replaces_the_earlier_one(tmp_path):
    first = _trained_looking(CausalLM(config(causal=True)))
    first.save_pretrained(tmp_path)
    second = _trained_looking(CausalLM(config(causal=True, depth=2)))
    second.save_pretrained(tmp_path)
    loaded = CausalLM.from_pretrained(tmp_path)
    assert loaded.config.depth == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_non_finite_weights_are_refused_on_save_and_on_load(tmp_path):
    model = _trained_looking(CausalLM(config(causal=True)))
    block = model.transformer.blocks[1].mlp
    name = next(n for n, _ in model.named_parameters() if n.startswith("transformer.blocks.1.mlp"))
    with torch.no_grad():
        next(block.parameters()).view(-1)[3] = float("nan")
    with pytest.raises(ValueError, match=rf"CausalLM not saved to .*NaN or infinity \(in {name}"):
        model.save_pretrained(tmp_path)
    assert not (tmp_path / "model.safetensors").exists()
    healthy = _trained_looking(CausalLM(config(causal=True)))
    healthy.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    weights["transformer.norm.weight"][0] = float("inf")
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"model.safetensors holds non-finite weights .*"
                                         r"transformer.norm.weight"):
        CausalLM.from_pretrained(tmp_path)


def test_damaged_or_foreign_directories_are_refused_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path} has no config.json"):
        CausalLM.from_pretrained(tmp_path)
    _trained_looking(SequenceClassifier(config(), 3)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"config.json holds a SequenceClassifier, not a CausalLM"):
        CausalLM.from_pretrained(tmp_path)
    description = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**description, "model": "Mystery"}))
    with pytest.raises(ValueError, match=r"config.json: model 'Mystery' is not one of \["):
        filterformer.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**description,
                                                      "arguments": {"num_classes": 5}}))
    with pytest.raises(ValueError, match=r"model.safetensors does not fit this model "
                                         r"\(shape mismatch head"):
        SequenceClassifier.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(description))
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match=r"model.safetensors is corrupt"):
        SequenceClassifier.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{cut short")
    with pytest.raises(ValueError, match=r"config.json is corrupt"):
        SequenceClassifier.from_pretrained(tmp_path)
