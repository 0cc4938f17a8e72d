import pytest
import torch

from filterformer.nn import LayerFusion


def _layers(n=4, b=2, t=5, d=8):
    return [torch.randn(b, t, d, requires_grad=True) for _ in range(n)]


def test_concat_fusion_at_init_returns_the_last_layer_exactly():
    layers = _layers()
    fused = LayerFusion("concat", 8, 4)(layers)
    assert torch.equal(fused, layers[-1])


def test_max_fusion_is_the_elementwise_max():
    layers = _layers()
    fused = LayerFusion("max", 8, 4)(layers)
    assert fused.shape == (2, 5, 8)
    expected = layers[0]
    for layer in layers[1:]:
        expected = torch.maximum(expected, layer)
    assert torch.equal(fused, expected)
    fused.sum().backward()
    # Gradient flows only to the layer holding each maximum: exactly one per element.
    total = sum((layer.grad != 0).int() for layer in layers)
    assert torch.equal(total, torch.ones_like(total))


def test_gate_fusion_is_a_per_token_softmax_mixture():
    layers = _layers(n=3)
    fusion = LayerFusion("gate", 8, 3)
    fused = fusion(layers)
    assert fused.shape == (2, 5, 8)
    scores = torch.stack([fusion.gate(layer).squeeze(-1) for layer in layers], dim=-1)
    alpha = scores.softmax(-1)
    expected = sum(alpha[..., i : i + 1] * layers[i] for i in range(3))
    torch.testing.assert_close(fused, expected)
    fused.square().sum().backward()
    assert fusion.gate.weight.grad.abs().sum() > 0
    assert all(layer.grad.abs().sum() > 0 for layer in layers)


def test_fusion_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"one of \('concat', 'max', 'gate'\)"):
        LayerFusion("mean", 8, 3)
    with pytest.raises(ValueError, match="expected 3 layer outputs"):
        LayerFusion("max", 8, 3)(_layers(n=2))
