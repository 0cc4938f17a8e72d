"""The parameters a method adds, native or patched, and the learning rate of their own that
``parameter_groups`` / ``set_coefficient_lr`` give them and nothing else."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from filterformer import patch, patched_parameters
from filterformer.attention import (
    AttentionBase,
    AttentiveGraphFilterAttention,
    GraphFilterAttention,
)
from filterformer.attention.samsa import SamplingAttention
from filterformer.method_parameters import method_parameters
from filterformer.models import Transformer, TransformerConfig
from filterformer.nn import LayerFusion
from filterformer.optim import parameter_groups, set_coefficient_lr

from .patching.helpers import hf_model, timm_model

NATIVE = {
    "gfsa": {"attention": "gfsa"},
    "gfsa_learning_two": {"attention": "gfsa", "attention_options": {"learn": ["w1", "wK"]}},
    "gfsa+neutreno": {"attention": "gfsa", "neutreno_lambda": 0.5, "neutreno_learnable": True},
    "agf": {"attention": "agf"},
    "samsa": {"attention": "samsa", "attention_options": {"num_samples": 4}},
    "fusion_gate": {"fusion": "gate"},
    "fusion_concat+neutreno": {"fusion": "concat", "neutreno_lambda": 0.3,
                               "neutreno_learnable": True, "attention_layers": [1]},
    "softmax": {},
}


def native_model(fields: dict) -> nn.Module:
    return Transformer(TransformerConfig(dim=16, depth=3, num_heads=2, vocab_size=11, **fields))


def coefficient_list(model: nn.Module) -> set[str]:
    """The native modules' own coefficient lists: GFSA's ``learn``, AGF's ``p``, SAMSA's support
    scores, a learnable λ, and every parameter of the layer fusion."""
    names = set()
    for prefix, module in model.named_modules():
        own: list[str] = []
        if isinstance(module, GraphFilterAttention):
            own += list(module.learn)
        if isinstance(module, AttentiveGraphFilterAttention):
            own.append("p")
        if isinstance(module, SamplingAttention):
            own.append("support_scores")
        if isinstance(module, AttentionBase) and isinstance(module.neutreno_lambda, nn.Parameter):
            own.append("neutreno_lambda")
        if isinstance(module, LayerFusion):
            own += [name for name, _ in module.named_parameters()]
        names.update(f"{prefix}.{name}" for name in own)
    return names


def patched_models() -> dict[str, nn.Module]:
    return {
        "bert gfsa+neutreno+fusion": patch(hf_model("bert", head=True), "gfsa+neutreno+fusion",
                                           neutreno_lambda=0.4, neutreno_learnable=True,
                                           fusion="gate"),
        "albert gfsa": patch(hf_model("albert"), "gfsa", learn=("wK",)),
        "gpt2 neutreno": patch(hf_model("gpt2"), "neutreno", neutreno_lambda=0.2,
                               neutreno_learnable=True),
        "timm gfsa+neutreno+fusion": patch(timm_model(), "gfsa+neutreno+fusion",
                                           neutreno_lambda=0.4, neutreno_learnable=True,
                                           fusion="concat"),
    }


@pytest.mark.parametrize("fields", NATIVE.values(), ids=NATIVE.keys())
def test_native_method_parameters_are_the_modules_coefficient_lists(fields):
    model = native_model(fields)
    listed = [entry.name for entry in method_parameters(model)]
    assert len(listed) == len(set(listed))
    assert set(listed) == coefficient_list(model)
    assert bool(listed) == bool(fields)


def test_patched_method_parameters_are_exactly_patched_parameters():
    for label, model in patched_models().items():
        listed = [(entry.name, entry.parameter) for entry in method_parameters(model)]
        patched = patched_parameters(model)
        assert [name for name, _ in listed] == [name for name, _ in patched], label
        assert all(a is b for (_, a), (_, b) in zip(listed, patched, strict=True)), label
        # The same model inside another module (under a task head) keeps the list.
        wrapper = nn.ModuleDict({"backbone": model})
        assert {e.name for e in method_parameters(wrapper)} == {f"backbone.{n}" for n, _ in patched}


def test_each_parameter_is_labelled_with_the_method_that_adds_it():
    model = native_model(NATIVE["fusion_concat+neutreno"] | {"attention": "gfsa"})
    methods = {entry.name: entry.method for entry in method_parameters(model)}
    for name, method in methods.items():
        last = name.rsplit(".", 1)[-1]
        expected = ("fusion" if name.startswith("fusion.") else
                    "neutreno" if last == "neutreno_lambda" else "gfsa")
        assert method == expected, name
    assert set(methods.values()) == {"gfsa", "neutreno", "fusion"}


def _lr_of(groups: list[dict], default: float) -> dict[int, float]:
    return {id(p): g.get("lr", default) for g in groups for p in g["params"]}


def _decay_of(groups: list[dict]) -> dict[int, float]:
    return {id(p): g["weight_decay"] for g in groups for p in g["params"]}


def _check_groups(model: nn.Module, expected: set[int]) -> None:
    """With ``coefficient_lr`` the ``expected`` parameters, and they alone, get it; every
    parameter keeps its weight decay and appears once."""
    shared, coefficient = float(torch.rand(())) * 1e-3, float(torch.rand(())) * 1e-2 + 1e-3
    plain = parameter_groups(model, 0.07)
    groups = parameter_groups(model, 0.07, coefficient_lr=coefficient)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == sum(p.requires_grad for p in model.parameters())
    lrs = _lr_of(groups, shared)
    assert {i for i, lr in lrs.items() if lr == coefficient} == expected
    assert all(lr == shared for i, lr in lrs.items() if i not in expected)
    assert _decay_of(groups) == _decay_of(plain)
    assert _lr_of(parameter_groups(model, 0.07, coefficient_lr=None), shared) == _lr_of(plain,
                                                                                         shared)


@pytest.mark.parametrize("fields", NATIVE.values(), ids=NATIVE.keys())
def test_coefficient_lr_reaches_exactly_the_native_coefficients(fields):
    model = native_model(fields)
    named = dict(model.named_parameters())
    _check_groups(model, {id(named[name]) for name in coefficient_list(model)})


def test_coefficient_lr_reaches_exactly_the_patched_parameters():
    for model in patched_models().values():
        _check_groups(model, {id(p) for _, p in patched_parameters(model)})


def test_set_coefficient_lr_splits_a_built_optimizer_and_a_scheduler_scales_it():
    model = patch(hf_model("bert", head=True), "gfsa+fusion", fusion="gate")
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.01), lr=1e-3)
    set_coefficient_lr(optimizer, model, 5e-2)
    patched = {id(p) for _, p in patched_parameters(model)}
    lrs = _lr_of(optimizer.param_groups, float("nan"))
    assert {i for i, lr in lrs.items() if lr == 5e-2} == patched
    assert all(lrs[id(p)] == 1e-3 for p in model.parameters() if id(p) not in patched)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5)
    assert sorted(set(scheduler.get_last_lr())) == [5e-4, 2.5e-2]
    with pytest.raises(ValueError, match="no learning-rate scheduler holds yet"):
        set_coefficient_lr(optimizer, model, 1e-2)


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -1e-3])
def test_a_bad_coefficient_lr_is_refused_naming_it(lr):
    with pytest.raises(ValueError, match="coefficient_lr must be a finite learning rate"):
        parameter_groups(native_model(NATIVE["gfsa"]), 0.0, coefficient_lr=lr)
