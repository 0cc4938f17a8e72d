"""One spec, one set of layers: a model built from a config and a patched Hugging Face model run
GFSA and NeuTRENO on the same layers.

Both models are depth 4 and get ``gfsa+neutreno`` on layers [1, 3]. Their coefficients and λ are
moved to random values, and every layer's attention output is compared, in float64, with
METHODS.md §1–2 written out on that layer's own input and weights:

- a selected layer: ``H̃V + λ(V⁰ − V)``, with ``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))``;
- any other layer: ``ĀV`` (no filter, no λ);

where ``Ā = softmax(QKᵀ/√d)`` and ``V⁰`` are the values of layer 0.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from filterformer import patch, patched_parameters
from filterformer.method_spec import MethodSpec
from filterformer.models import Transformer, TransformerConfig

from .helpers import hf_model

DEPTH, DIM, HEADS, LENGTH, BATCH = 4, 32, 4, 6, 2
LAYERS = (1, 3)
K = 3


def _spec(learnable: bool) -> MethodSpec:
    lam = float(torch.rand(()) * 0.8 + 0.1)
    return MethodSpec.parse(
        "gfsa+neutreno", K=K, layers=list(LAYERS), neutreno_lambda=lam,
        neutreno_learnable=learnable,
    )


def _draw(spec: MethodSpec) -> dict[int, dict[str, Tensor]]:
    """Random coefficients (and, when learned, a random λ per head) for each selected layer."""
    drawn = {}
    for layer in LAYERS:
        values = {name: torch.randn(HEADS, dtype=torch.float64) for name in ("w0", "w1", "wK")}
        if spec.neutreno_learnable:
            values["neutreno_lambda"] = torch.rand(HEADS, dtype=torch.float64) + 0.1
        drawn[layer] = values
    return drawn


def _set(module: nn.Module, values: dict[str, Tensor]) -> None:
    with torch.no_grad():
        for name, value in values.items():
            getattr(module, name).copy_(value)


def _heads(x: Tensor) -> Tensor:
    """``(B, N, h·d)`` -> ``(B, h, N, d)``."""
    return x.view(x.shape[0], x.shape[1], HEADS, -1).transpose(1, 2)


def _written_out(
    q: Tensor, k: Tensor, v: Tensor, v0: Tensor, layer: int, drawn: dict, spec: MethodSpec
) -> Tensor:
    """METHODS.md §1–2 for layer ``layer``: ``(B, h, N, d)`` heads in, ``(B, N, h·d)`` out."""
    attention = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
    if layer not in drawn:
        out = attention @ v
    else:
        w0, w1, wK = (drawn[layer][n].view(1, HEADS, 1, 1) for n in ("w0", "w1", "wK"))
        eye = torch.eye(q.shape[-2], dtype=q.dtype)
        power = attention + (K - 1) * (attention @ attention - attention)
        out = (w0 * eye + w1 * attention + wK * power) @ v
        lam = drawn[layer].get("neutreno_lambda", torch.full((HEADS,), spec.neutreno_lambda,
                                                            dtype=q.dtype))
        out = out + lam.view(1, HEADS, 1, 1) * (v0 - v)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def _record(modules: list[nn.Module]) -> tuple[list, list]:
    """Hooks keeping each module's input (its first argument) and output, in layer order."""
    inputs: list = [None] * len(modules)
    outputs: list = [None] * len(modules)
    for i, module in enumerate(modules):
        def hook(module, args, kwargs, output, i=i):
            inputs[i] = args[0] if args else kwargs["hidden_states"]
            outputs[i] = output[0] if isinstance(output, tuple) else output
        module.register_forward_hook(hook, with_kwargs=True)
    return inputs, outputs


def _native_config(spec: MethodSpec, spelling: str) -> TransformerConfig:
    """The config of a depth-4 model with ``spec``: given as the spec, or as a config file's
    method fields (``attention``, ``attention_layers``, ``neutreno_lambda``, …)."""
    shape = {"dim": DIM, "depth": DEPTH, "num_heads": HEADS, "input_dim": 5}
    if spelling == "spec":
        return TransformerConfig(**shape, spec=spec)
    fields = {key: value for key, value in spec.to_config().items() if key != "neutreno_warmup"}
    assert fields["attention_layers"] == list(LAYERS)
    return TransformerConfig.from_dict({**shape, **fields})


@pytest.mark.parametrize("spelling", ["spec", "config_fields"])
@pytest.mark.parametrize("learnable", [False, True], ids=["fixed_lambda", "learned_lambda"])
def test_a_native_model_runs_the_spec_on_its_layers_as_written(learnable, spelling):
    spec = _spec(learnable)
    config = _native_config(spec, spelling)
    assert config.method == spec
    model = Transformer(config).to(torch.float64).eval()
    drawn = _draw(spec)
    for layer in LAYERS:
        _set(model.blocks[layer].attn, drawn[layer])
    attns = [block.attn for block in model.blocks]
    inputs, outputs = _record(attns)
    with torch.no_grad():
        model(inputs=torch.randn(BATCH, LENGTH, 5, dtype=torch.float64))
        v0 = None
        for layer, attn in enumerate(attns):
            q, k, v = (_heads(t) for t in attn.qkv(inputs[layer]).chunk(3, dim=-1))
            v0 = v if v0 is None else v0
            expected = attn.proj(_written_out(q, k, v, v0, layer, drawn, spec))
            torch.testing.assert_close(outputs[layer], expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("learnable", [False, True], ids=["fixed_lambda", "learned_lambda"])
def test_a_patched_model_runs_the_spec_on_its_layers_as_written(learnable):
    spec = _spec(learnable)
    model = hf_model("bert", dtype=torch.float64, layers=DEPTH)
    patch(model, spec)
    drawn = _draw(spec)
    names = {name for name, _ in patched_parameters(model)}
    assert names == {
        f"encoder.layer.{layer}.attention.self.filterformer.{name}"
        for layer in LAYERS for name in drawn[layer]
    }
    selfs = [layer.attention.self for layer in model.encoder.layer]
    for layer in LAYERS:
        _set(selfs[layer].filterformer, drawn[layer])
    inputs, outputs = _record(selfs)
    ids = torch.randint(3, 50, (BATCH, LENGTH))
    with torch.no_grad():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
        v0 = None
        for layer, attention in enumerate(selfs):
            x = inputs[layer]
            q, k, v = (_heads(f(x)) for f in (attention.query, attention.key, attention.value))
            v0 = v if v0 is None else v0
            expected = _written_out(q, k, v, v0, layer, drawn, spec)
            torch.testing.assert_close(outputs[layer], expected, rtol=1e-10, atol=1e-10)


def test_the_spec_a_config_holds_patches_the_same_layers():
    spec = _spec(learnable=True)
    native = Transformer(TransformerConfig(dim=DIM, depth=DEPTH, num_heads=HEADS, input_dim=5,
                                           spec=spec))
    patched = patch(hf_model("bert", layers=DEPTH), native.config.method)
    native_layers = {int(name.split(".")[1]) for name, _ in native.named_parameters()
                     if name.endswith(("w0", "w1", "wK", "neutreno_lambda"))}
    patched_layers = {int(name.split(".")[2]) for name, _ in patched_parameters(patched)}
    assert native_layers == patched_layers == set(LAYERS)
