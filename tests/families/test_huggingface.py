"""Hugging Face models are told apart, their layers and attention modules found, and their
attention implementation switched and restored."""

import pytest
import torch

from filterformer.families import (
    attention_implementation,
    attention_modules,
    enclosing_layer,
    hidden_layers,
    is_huggingface_model,
    is_timm_vision_transformer,
    switch_attention_implementation,
    using_attention_implementation,
)

transformers = pytest.importorskip("transformers")

COMMON = dict(hidden_size=32, num_attention_heads=4, intermediate_size=37)


def bert() -> torch.nn.Module:
    return transformers.BertModel(
        transformers.BertConfig(vocab_size=50, num_hidden_layers=2, **COMMON)
    ).eval()


def llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=50, num_hidden_layers=3, num_key_value_heads=2, **COMMON
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_models_built_from_configs_are_huggingface_models():
    for model in (bert(), llama()):
        assert is_huggingface_model(model)
        assert not is_timm_vision_transformer(model)


def test_a_plain_module_is_no_family():
    module = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert not is_huggingface_model(module)
    assert not is_timm_vision_transformer(module)


def test_self_attention_modules_and_their_layers_in_depth_order():
    model = bert()
    modules = attention_modules(model)
    assert [name for name, _ in modules] == [
        "encoder.layer.0.attention.self", "encoder.layer.1.attention.self"
    ]
    assert [module for _, module in modules] == [
        layer.attention.self for layer in model.encoder.layer
    ]
    layers = [enclosing_layer(model, name) for name, _ in modules]
    assert layers == list(model.encoder.layer) == hidden_layers(model)


def test_decoder_layers_are_found_under_a_task_head():
    model = llama()
    modules = attention_modules(model)
    assert [module for _, module in modules] == [layer.self_attn for layer in model.model.layers]
    assert [enclosing_layer(model, name) for name, _ in modules] == hidden_layers(model)
    assert len(hidden_layers(model)) == 3


def test_shared_layers_have_no_stack_of_hidden_layers():
    config = transformers.AlbertConfig(
        vocab_size=50, embedding_size=16, num_hidden_layers=3, **COMMON
    )
    model = transformers.AlbertModel(config)
    assert len(attention_modules(model)) == 1  # one module serves the three layers
    assert hidden_layers(model) == []


def test_a_module_outside_any_list_of_layers_is_refused():
    model = bert()
    with pytest.raises(ValueError, match="list of layers"):
        enclosing_layer(model, "pooler.dense")


def test_attention_implementation_is_switched_and_restored():
    model = bert()
    before = attention_implementation(model.config)
    assert before != "eager"
    with using_attention_implementation(model, "eager"):
        assert attention_implementation(model.config) == "eager"
    assert attention_implementation(model.config) == before
    with pytest.raises(RuntimeError, match="inside"), using_attention_implementation(
        model, "eager"
    ):
        raise RuntimeError("inside")
    assert attention_implementation(model.config) == before


def test_a_refused_switch_leaves_the_implementation_as_it_was():
    model = bert()
    before = attention_implementation(model.config)
    with pytest.raises(ValueError, match="nonsense"):
        switch_attention_implementation(model, "nonsense")
    assert attention_implementation(model.config) == before
