"""GFSA's combination kernels equal the filter's closed form in float64 (output and every
gradient), and GFSA with them equals GFSA without, falling back on a kernel failure."""

from __future__ import annotations

import importlib

import pytest
import torch

from filterformer.functional import gfsa, gfsa_combine
from filterformer.functional import gfsa_triton as gfsa_triton_module
from filterformer.functional.gfsa_triton import gfsa_triton_applies, gfsa_triton_combine

from ..operations import OperationCounts
from .triton_interpreter import (
    allow_kernels,
    fail_to_launch,
    falls_back,
    interpreter_only,
    record_launches,
)

pytestmark = interpreter_only
#: The module (``filterformer.functional.gfsa`` names the function).
gfsa_module = importlib.import_module("filterformer.functional.gfsa")


def closed_form(values, first, last, w0, w1, wK, K, exact_power):
    """``w0·V + w1·ĀV + wK·(ĀV + (K−1)(Ā²V − ĀV))`` (or ``wK·Ā^K V``) in float64."""
    values, first, last = (t.double() for t in (values, first, last))
    w0, w1, wK = (w.double().view(1, -1, 1, 1) for w in (w0, w1, wK))
    high = last if exact_power else first + (K - 1) * (last - first)
    return w0 * values + w1 * first + wK * high


def _terms(batch, heads, length, dim, dtype=torch.float32):
    """V as a view of a projection's output (heads interleaved), ĀV and Ā²V as SDPA lays them
    out ((B, N, h, d) memory), and coefficients; all taking gradients."""
    qkv = torch.randn(batch, length, 3, heads, dim).to(dtype)
    values = qkv.select(2, 2).transpose(1, 2).detach().requires_grad_()
    first, last = (torch.randn(batch, length, heads, dim).to(dtype).transpose(1, 2)
                   .detach().requires_grad_() for _ in range(2))
    weights = [torch.randn(heads, requires_grad=True) for _ in range(3)]
    return [values, first, last], weights


def _factors(K, exact_power):
    return (0, 1) if exact_power else (2 - K, K - 1)


def _gradients(out, leaves, grad):
    return torch.autograd.grad(out, leaves, grad)


@pytest.mark.parametrize(("batch", "heads", "length", "dim", "K", "exact_power"), [
    (2, 3, 37, 16, 3, False),
    (1, 2, 130, 64, 2, False),  # more tokens than a block; K = 2: no ĀV share of wK
    (2, 2, 50, 24, 5, True),  # a head width not a power of 2, the exact power
    (3, 1, 1, 8, 4, False),  # one token
])
def test_kernels_equal_the_closed_form_in_float64(batch, heads, length, dim, K, exact_power):
    terms, weights = _terms(batch, heads, length, dim)
    out = gfsa_triton_combine(*terms, *weights, *_factors(K, exact_power), torch.float32)
    leaves = [*terms, *weights]
    reference_leaves = [x.detach().double().requires_grad_() for x in leaves]
    reference = closed_form(*reference_leaves, K, exact_power)
    assert out.shape == reference.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(out)
    found = _gradients(out, leaves, grad)
    expected = _gradients(reference, reference_leaves, grad.double())
    for got, want, leaf in zip(found, expected, leaves, strict=True):
        assert got.shape == leaf.shape and got.dtype == leaf.dtype
        # The coefficients' gradients are sums over B·N·d products, in float32.
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


def test_half_precision_terms_combine_in_float32_and_round_once():
    terms, weights = _terms(2, 2, 40, 32, torch.bfloat16)
    out = gfsa_triton_combine(*terms, *weights, -1, 2, torch.bfloat16)
    reference = closed_form(*terms, *weights, 3, False)
    assert out.dtype == torch.bfloat16
    # One rounding of the float32 sum to bfloat16 (8 significant bits): within one ulp (the
    # interpreter rounds toward zero, a GPU to nearest), plus float32's rounding of the terms.
    magnitude = closed_form(*(t.abs() for t in terms), *(w.abs() for w in weights), 3, False)
    error = (out.double() - reference).abs()
    assert (error <= reference.abs() * 2**-7 + magnitude * 2**-20).all()
    grads = _gradients(out, [*terms, *weights], torch.randn_like(out))
    assert [g.dtype for g in grads] == [torch.bfloat16] * 3 + [torch.float32] * 3


def test_second_derivatives_go_through_the_eager_combination():
    terms, weights = _terms(2, 2, 20, 8)
    leaves = [*terms, *weights]

    def curvature(combine):
        out = combine(*terms, *weights)
        grads = torch.autograd.grad(out.square().sum(), leaves, create_graph=True)
        return torch.autograd.grad(sum(g.square().sum() for g in grads), leaves)

    fast = curvature(lambda *x: gfsa_triton_combine(*x, -2, 3, torch.float32))
    eager = curvature(lambda *x: closed_form(*x, 4, False))
    for got, want in zip(fast, eager, strict=True):
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-4)


def test_where_the_kernels_apply(monkeypatch):
    terms, weights = _terms(1, 2, 4, 8)
    assert not gfsa_triton_applies(*terms, *weights)  # the switch allows no CPU tensor
    allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    assert gfsa_triton_applies(*terms, *weights)
    values, first, last = terms
    assert not gfsa_triton_applies(values, first, last[..., :3, :], *weights)
    assert not gfsa_triton_applies(values[0], first[0], last[0], *weights)
    wide = torch.randn(1, 2, 4, 264)
    assert not gfsa_triton_applies(wide, wide, wide, *weights)
    assert not gfsa_triton_applies(*terms, weights[0], weights[1], torch.ones(2, dtype=torch.long))


def _gfsa_inputs(length=19, heads=2, dim=8):
    q, k, v = (torch.randn(2, heads, length, dim, requires_grad=True) for _ in range(3))
    weights = [torch.randn(heads, requires_grad=True) for _ in range(3)]
    mask = torch.rand(2, length) > 0.3
    mask[:, 0] = True
    return [q, k, v, *weights], mask


@pytest.mark.parametrize("options", [
    {"K": 3}, {"K": 4, "exact_power": True}, {"K": 2, "is_causal": True},
    {"K": 3, "base": "efficient"},
])
def test_gfsa_with_the_kernels_equals_gfsa_without(monkeypatch, options):
    leaves, mask = _gfsa_inputs()
    mask_options = {} if options.get("is_causal") else {"key_padding_mask": mask}
    eager = gfsa(*leaves, **options, **mask_options)
    grad = torch.randn_like(eager)
    expected = _gradients(eager, leaves, grad)
    allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    calls = []
    original = gfsa_triton_module.gfsa_triton_combine
    monkeypatch.setattr(gfsa_module, "gfsa_triton_combine",
                        lambda *a: calls.append(1) or original(*a))
    fast = gfsa(*leaves, **options, **mask_options)
    assert calls, "the kernels were not used"
    torch.testing.assert_close(fast, eager, rtol=1e-5, atol=1e-6)
    for got, want in zip(_gradients(fast, leaves, grad), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_training_step_of_the_gfsa_module_equals_it_without_the_kernels(monkeypatch):
    from filterformer.attention import build_attention

    torch.manual_seed(0)
    layer = build_attention("gfsa", dim=16, num_heads=2)
    x = torch.randn(2, 11, 16)

    def step():
        layer.zero_grad(set_to_none=False)
        layer(x).square().sum().backward()
        torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
        return [p.grad.clone() for p in layer.parameters()]

    layer(x).sum().backward()  # every parameter has a gradient tensor to zero
    eager = step()
    allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    fast, again = step(), step()
    for got, want, repeated in zip(fast, eager, again, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(repeated, got)


def test_a_kernel_failure_warns_once_and_falls_back(monkeypatch):
    leaves, mask = _gfsa_inputs()
    eager = gfsa(*leaves, K=3, key_padding_mask=mask)
    grad = torch.randn_like(eager)
    expected = _gradients(eager, leaves, grad)
    switch = allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)

    monkeypatch.setattr(gfsa_triton_module, "_kernels", fail_to_launch)
    fallen_back = falls_back(switch, lambda: gfsa(*leaves, K=3, key_padding_mask=mask))
    torch.testing.assert_close(fallen_back, eager)
    for got, want in zip(_gradients(fallen_back, leaves, grad), expected, strict=True):
        torch.testing.assert_close(got, want)


def test_a_failure_in_the_backward_kernel_takes_the_eager_gradients(monkeypatch):
    leaves, mask = _gfsa_inputs()
    eager = gfsa(*leaves, K=3, key_padding_mask=mask)
    grad = torch.randn_like(eager)
    expected = _gradients(eager, leaves, grad)
    switch = allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    fast = gfsa(*leaves, K=3, key_padding_mask=mask)
    forward_kernel, _ = gfsa_triton_module._kernels()

    def backward_broken():
        return forward_kernel, fail_to_launch

    monkeypatch.setattr(gfsa_triton_module, "_kernels", backward_broken)
    found = falls_back(switch, lambda: _gradients(fast, leaves, grad))
    for got, want in zip(found, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_gfsa_combine_takes_the_kernels_only_where_they_apply(monkeypatch):
    allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    terms, weights = _terms(1, 2, 5, 8)
    calls = []
    monkeypatch.setattr(gfsa_module, "gfsa_triton_combine",
                        lambda *a: calls.append(1) or gfsa_triton_combine(*a))
    gfsa_combine(*terms, *weights, K=3)
    assert calls == [1]
    gfsa_combine(*terms, *(w.double() for w in weights), K=3)  # float64 coefficients apply too
    assert calls == [1, 1]
    wide = torch.randn(1, 2, 5, 264)
    gfsa_combine(wide, wide, wide, *weights, K=3)
    assert calls == [1, 1]


def test_the_kernels_launch_once_forward_and_once_backward(monkeypatch):
    # Where a step waits on its host each launch counts: the eager combination runs 4
    # operations forward and about 15 backward (test_gfsa.py counts the forward's).
    allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
    launches = record_launches(monkeypatch, gfsa_triton_module)
    terms, weights = _terms(2, 2, 9, 8)
    grad = torch.randn(2, 2, 9, 8)
    with OperationCounts() as forward:
        out = gfsa_combine(*terms, *weights, K=3)
    assert forward.computed == {"empty": 1} and launches == ["gfsa_combine_forward"]
    with OperationCounts() as backward:
        torch.autograd.grad(out, [*terms, *weights], grad)
    # Allocations (no launch on a GPU), the kernel, and one sum of the coefficients' shares.
    assert backward.computed == {"empty_like": 3, "empty": 1, "sum": 1}
    assert launches == ["gfsa_combine_forward", "gfsa_combine_backward"]


def test_cached_decoding_with_the_kernels_equals_recomputation_without(monkeypatch):
    # While decoding, V is narrowed to the new positions: the kernels read it where it lives.
    from ..models.helpers import VOCAB, causal_lm

    model = causal_lm("gfsa").float()  # the kernels take float32 and half precision
    ids = torch.randint(0, VOCAB, (2, 11))
    with torch.no_grad():
        full = model(ids).logits
        allow_kernels(monkeypatch, gfsa_triton_module.SWITCH)
        calls = []
        monkeypatch.setattr(gfsa_module, "gfsa_triton_combine",
                            lambda *a: calls.append(1) or gfsa_triton_combine(*a))
        cache = model.new_cache()
        steps = [model(ids[:, :5], cache=cache).logits]
        steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(5, 11)]
    assert calls, "the kernels were not used"
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("batch", "length"), [(0, 5), (2, 0)])
def test_no_samples_or_no_tokens_give_empty_terms_and_zero_coefficient_gradients(batch, length):
    terms, weights = _terms(batch, 2, length, 8)
    out = gfsa_triton_combine(*terms, *weights, -1, 2, torch.float32)
    assert out.shape == (batch, 2, length, 8)
    grads = torch.autograd.grad(out, [*terms, *weights], torch.ones_like(out))
    assert [g.shape for g in grads] == [t.shape for t in [*terms, *weights]]
    assert all(torch.equal(g, torch.zeros(2)) for g in grads[3:])
