"""Checkpoints: atomic writes, safe loading, and clear errors for every unusable file."""

from __future__ import annotations

import pytest
import torch

from filterformer.models import CausalLM, SequenceClassifier, Transformer, TransformerConfig
from filterformer.models.graph_bridge import GraphBridgeClassifier
from filterformer.training import load_checkpoint, load_model_state, save_checkpoint
from filterformer.training.checkpoint import check_same_config, load_backbone


def _state() -> dict:
    return {"model": {"w": torch.randn(3, 4)}, "step": 7, "best": {"value": 0.5, "step": None},
            "rng": [torch.get_rng_state()], "betas": (0.9, 0.99)}


def test_round_trip_keeps_tensors_and_plain_data(tmp_path):
    state = _state()
    path = save_checkpoint(tmp_path / "ckpt" / "last.pt", state)
    loaded = load_checkpoint(path)
    assert torch.equal(loaded["model"]["w"], state["model"]["w"])
    assert torch.equal(loaded["rng"][0], state["rng"][0])
    assert (loaded["step"], loaded["best"], loaded["betas"]) == (7, state["best"], (0.9, 0.99))


def test_write_replaces_atomically_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1})

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    # A write that fails half-way leaves the previous checkpoint untouched.
    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(path, {"step": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["step"] == 1
    save_checkpoint(path, {"step": 3})
    assert load_checkpoint(path)["step"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_corrupt_file_names_the_file(tmp_path):
    path = save_checkpoint(tmp_path / "last.pt", _state())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"checkpoint .*last.pt is corrupt"):
        load_checkpoint(path)


class _Payload:
    """Not a tensor or plain data: weights_only loading must refuse to build it."""


def test_pickled_objects_are_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "filterformer-checkpoint-1", "obj": _Payload()}, path)
    with pytest.raises(ValueError, match=r"evil.pt is corrupt or not a safe"):
        load_checkpoint(path)


def test_foreign_and_missing_files_are_explained(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"other.pt is not a filterformer training checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"nothing.pt does not exist"):
        load_checkpoint(tmp_path / "nothing.pt")


def test_shape_and_key_mismatches_name_the_parameters():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    other = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Linear(5, 2))
    with pytest.raises(ValueError, match=r"run/best.pt does not fit this model \(shape mismatch "
                                         r"0.weight: checkpoint \(5, 4\) vs model \(3, 4\)"):
        load_model_state(model, other.state_dict(), "run/best.pt")
    missing = dict(model.state_dict())
    del missing["1.bias"]
    with pytest.raises(ValueError, match=r"missing 1.bias"):
        load_model_state(model, missing, "x.pt")
    fine = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    load_model_state(model, fine.state_dict(), "x.pt")
    assert torch.equal(model[0].weight, fine[0].weight)


def test_config_differences_are_listed():
    saved = {"epochs": 3, "model": {"dim": 16, "depth": 2}}
    check_same_config(saved, {"epochs": 3, "model": {"dim": 16, "depth": 2}}, "a.pt")
    with pytest.raises(ValueError, match=r"a.pt was saved with another configuration: "
                                         r"epochs: checkpoint 3, now 4; model.dim: checkpoint 16"):
        check_same_config(saved, {"epochs": 4, "model": {"dim": 32, "depth": 2}}, "a.pt")


# -- the backbone of a training checkpoint -------------------------------------------------------

_BACKBONE = {"dim": 16, "depth": 2, "num_heads": 2, "vocab_size": 30, "max_len": 8}


def _head(kind: str) -> tuple[torch.nn.Module, TransformerConfig, torch.nn.Module]:
    """A task model, its backbone's config, and the backbone inside it."""
    if kind == "graph":
        config = TransformerConfig(**{**_BACKBONE, "vocab_size": None, "position": "none"})
        model = GraphBridgeClassifier(config, node_dim=3, edge_dim=2, num_classes=2)
        return model, config, model.classifier.transformer
    config = TransformerConfig(**_BACKBONE, attention="gfsa")
    if kind == "classifier":
        model = SequenceClassifier(config, num_classes=3)
    elif kind == "lm":
        model = CausalLM(TransformerConfig(**_BACKBONE, causal=True))
        config = model.transformer.config
    else:
        model = Transformer(config)
        return model, config, model
    return model, config, model.transformer


@pytest.mark.parametrize("kind", ["classifier", "lm", "graph", "bare"])
def test_load_backbone_gives_the_trained_backbone_without_its_head(tmp_path, kind):
    model, config, backbone = _head(kind)
    with torch.no_grad():  # weights unlike a fresh model's, so a re-initialised one cannot pass
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    path = save_checkpoint(tmp_path / "best.pt", {
        "config": {}, "model_config": config.to_dict(), "model": model.state_dict(),
    })
    loaded = load_backbone(path)
    assert isinstance(loaded, Transformer) and loaded.config == config
    expected = backbone.state_dict()
    assert loaded.state_dict().keys() == expected.keys()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    if config.vocab_size is not None:
        ids = torch.randint(1, config.vocab_size, (2, 6))
        backbone.eval()
        loaded.eval()
        torch.testing.assert_close(loaded(ids).last_hidden_state,
                                   backbone(ids).last_hidden_state)


def test_load_backbone_explains_unusable_checkpoints(tmp_path):
    with pytest.raises(ValueError, match=r"missing.pt does not exist"):
        load_backbone(tmp_path / "missing.pt")
    model, config, _ = _head("classifier")
    weights = model.state_dict()
    twice = {**weights, **{f"copy.{key}": value for key, value in weights.items()}}
    pretrained = {**config.to_dict(), "pretrained": "all-MiniLM-L6-v2"}
    for name, model_config, state in (
        ("none.pt", config.to_dict(), {"head.weight": torch.zeros(2)}),
        ("twice.pt", config.to_dict(), twice),
        ("pretrained.pt", pretrained, weights),
        ("no_config.pt", None, weights),
    ):
        save_checkpoint(tmp_path / name, {"model_config": model_config, "model": state})
        with pytest.raises(ValueError, match=rf"{name} holds no single filterformer Transformer"):
            load_backbone(tmp_path / name)
    deeper = {**config.to_dict(), "depth": 3}
    save_checkpoint(tmp_path / "deeper.pt", {"model_config": deeper, "model": weights})
    with pytest.raises(ValueError, match=r"deeper.pt does not fit this model \(missing blocks.2"):
        load_backbone(tmp_path / "deeper.pt")
