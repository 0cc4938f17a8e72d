"""Fuzzing AGF's kernels: ``functional.agf``, its polynomial bases and its regulariser."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from filterformer.functional import (
    POLYNOMIAL_BASES,
    agf,
    agf_coefficients,
    agf_filter,
    agf_layer,
    agf_orthogonality,
    agf_response,
    efficient_feature_maps,
    jacobi_basis,
    polynomial_basis,
    polynomial_series,
)
from filterformer.functional.agf_triton import agf_triton_layer
from filterformer.functional.triton_support import interpreted, triton_available

from . import reference
from .strategies import (
    DTYPES,
    AttentionCase,
    assert_finite_gradients,
    assert_matches,
    assert_refused,
    attention_cases,
    budget,
    generator,
    max_abs,
    randn,
    replace_hidden,
    weighted_sum,
)

JACOBI_PARAMETERS = st.sampled_from((-0.5, 0.0, 0.5, 1.0, 2.5))


@dataclass(frozen=True)
class AGFCase:
    """An attention problem, AGF's singular values and a polynomial filter θ."""

    attention: AttentionCase
    basis: str
    K: int
    a: float
    b: float

    def inputs(self, *, requires_grad: bool = False):
        c = self.attention
        q, k, v = c.tensors(requires_grad=requires_grad)
        gen = generator(c.seed + 11)
        s = torch.sigmoid(randn(gen, *q.shape, dtype=torch.float64, scale=3)).to(c.dtype)
        theta = torch.cat([torch.ones(1, dtype=torch.float64),
                           torch.rand(self.K, generator=gen, dtype=torch.float64) * 2 - 1])
        theta = theta.to(c.dtype)
        return q, k, v, s.requires_grad_(requires_grad), theta.requires_grad_(requires_grad)

    def run(self, q, k, v, s, theta, padding):
        return agf(q, k, v, s, theta, basis=self.basis, a=self.a, b=self.b,
                   key_padding_mask=padding)


@st.composite
def agf_cases(draw: st.DrawFn, *, mask_required: bool = False) -> AGFCase:
    case = draw(attention_cases(key_only=True, causal=False, padding_only=True,
                                mask_required=mask_required))
    # agf's singular values have q's shape: as many queries as keys.
    case = AttentionCase(**{**case.__dict__, "queries": case.keys})
    return AGFCase(case, draw(st.sampled_from(POLYNOMIAL_BASES)), draw(st.integers(0, 6)),
                   draw(JACOBI_PARAMETERS), draw(JACOBI_PARAMETERS))


@given(case=agf_cases())
def test_finite_outputs_and_gradients(case):
    q, k, v, s, theta = case.inputs(requires_grad=True)
    out = case.run(q, k, v, s, theta, case.attention.masks().key_padding_mask)
    assert out.isfinite().all(), "non-finite output"
    assert_finite_gradients(weighted_sum(out, case.attention.seed), q, k, v, s, theta)


@given(case=agf_cases(mask_required=True))
def test_masks(case):
    q, k, v, s, theta = case.inputs()
    masks = case.attention.masks()
    padding = masks.key_padding_mask
    out = case.run(q, k, v, s, theta, padding)
    assert (out[masks.dead_rows] == 0).all()  # a sample without real keys gives 0
    hidden = masks.hidden_keys
    k2 = replace_hidden(k, hidden, case.attention.seed, case.attention.scale)
    v2 = replace_hidden(v, hidden, case.attention.seed + 1, case.attention.scale)
    out2 = case.run(q, k2, v2, s, theta, padding)
    assert torch.equal(out, out2)


@given(case=agf_cases())
def test_matches_the_float64_reference(case):
    q, k, v, s, theta = case.inputs()
    masks = case.attention.masks()
    out = case.run(q, k, v, s, theta, masks.key_padding_mask)
    rho_q, rho_k = reference.efficient_maps(q, k, ~masks.hidden_keys)
    g = reference.polynomial(s, theta, case.basis, case.a, case.b)
    expected = (rho_q * g) @ (rho_k.transpose(-1, -2) @ v.double())
    assert_matches(out, expected, case.attention.dtype, magnitude=max_abs(g) * max_abs(v),
                   conditioning=max_abs(q) + max_abs(k), depth=case.K + 1)


@given(
    basis=st.sampled_from(POLYNOMIAL_BASES),
    K=st.integers(0, 8),
    a=JACOBI_PARAMETERS,
    b=JACOBI_PARAMETERS,
    dtype=st.sampled_from((torch.float64, *DTYPES)),
    size=st.integers(0, 9),
    seed=st.integers(0, 2**16),
)
def test_polynomials_match_scipy(basis, K, a, b, dtype, size, seed):
    gen = generator(seed)
    x = (torch.rand(size, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    coefficients = randn(gen, K + 1, dtype=dtype)
    terms = [reference.polynomial(x, torch.eye(K + 1)[i], basis, a, b) for i in range(K + 1)]
    magnitude = sum(max_abs(c) * max_abs(t) for c, t in zip(coefficients, terms, strict=True))
    expected = reference.polynomial(x, coefficients, basis, a, b)
    series = polynomial_series(x, coefficients, basis, a, b)
    response = agf_response(x, coefficients, basis=basis, a=a, b=b)
    assert_matches(series, expected, dtype, magnitude=magnitude, depth=K + 1)
    assert_matches(response, expected, dtype, magnitude=magnitude, depth=K + 1)
    stacked = polynomial_basis(x, K, basis, a, b)
    for i, term in enumerate(terms):
        assert_matches(stacked[..., i], term, dtype, magnitude=max_abs(term) + 1, depth=K + 1)
    if basis == "jacobi":
        assert_matches(jacobi_basis(x, K, a, b), torch.stack(terms, -1), dtype,
                       magnitude=max(max_abs(t) for t in terms) + 1, depth=K + 1)


@given(case=attention_cases(key_only=True, causal=False, padding_only=True))
def test_orthogonality_regulariser(case):
    case = AttentionCase(**{**case.__dict__, "queries": case.keys})
    q, k, _ = case.tensors(requires_grad=True)
    masks = case.masks()
    padding = masks.key_padding_mask
    rho_q, rho_k = efficient_feature_maps(q, k, padding)
    value = agf_orthogonality(rho_q, rho_k, padding)
    assert value.isfinite().all()
    assert_finite_gradients(value.double(), q, k)
    # Padded tokens do not count: changing their q and k leaves the value as it is.
    hidden = masks.hidden_keys
    q2 = replace_hidden(q, hidden, case.seed, case.scale)
    k2 = replace_hidden(k, hidden, case.seed + 1, case.scale)
    assert torch.equal(value, agf_orthogonality(*efficient_feature_maps(q2, k2, padding), padding))
    ref_q, ref_k = reference.efficient_maps(q, k, ~hidden)
    ref_q = ref_q * (~hidden)[:, None, :, None]
    eye = torch.eye(q.shape[-1], dtype=torch.float64)
    expected = ((ref_q.transpose(-1, -2) @ ref_q - eye).abs().mean()
                + (ref_k.transpose(-1, -2) @ ref_k - eye).abs().mean())
    assert_matches(value, expected, case.dtype, magnitude=case.keys + 1,
                   conditioning=max_abs(q) + max_abs(k))


BAD_ARGUMENTS = {
    "s shape": (lambda q, s, theta: {"s": torch.cat([s, s], dim=-1)}, r"\bs\b"),
    "theta 2-D": (lambda q, s, theta: {"theta": theta[None]}, "theta"),
    "theta empty": (lambda q, s, theta: {"theta": theta[:0]}, "theta"),
    "basis": (lambda q, s, theta: {"basis": "hermite"}, "basis"),
    "a + b = -2": (lambda q, s, theta: {"a": -1.0, "b": -1.0, "theta": torch.ones(3)}, r"\ba\b"),
    "a not a number": (lambda q, s, theta: {"a": "one"}, r"\ba\b"),
    "b not a number": (lambda q, s, theta: {"b": None}, r"\bb\b"),
    "padding": (
        lambda q, s, theta: {"key_padding_mask": torch.ones(q.shape[0], q.shape[2] + 1).bool()},
        r"padding.mask",
    ),
}


@pytest.mark.parametrize("bad", sorted(BAD_ARGUMENTS))
@given(case=attention_cases(square=True, dtypes=(torch.float32,), max_len=4))
@budget(0.25)
def test_bad_arguments_are_named(bad, case):
    q, k, v = case.tensors()
    s = torch.rand(q.shape)
    theta = torch.ones(4)
    arguments = {"q": q, "k": k, "v": v, "s": s, "theta": theta,
                 **BAD_ARGUMENTS[bad][0](q, s, theta)}
    assert_refused(lambda: agf(**arguments), BAD_ARGUMENTS[bad][1])


@given(K=st.integers(-3, -1), basis=st.sampled_from(POLYNOMIAL_BASES))
def test_bad_orders_are_named(K, basis):
    assert_refused(lambda: polynomial_basis(torch.rand(3), K, basis), r"\bK\b")
    assert_refused(lambda: agf_coefficients(torch.zeros(2, 2)), r"\bp\b")
    assert_refused(lambda: polynomial_series(torch.rand(3), torch.zeros(0), basis),
                   "coefficients")


@given(case=agf_cases())
def test_explicit_operator_and_coefficients_match_the_reference(case):
    q, k, v, s, _ = case.inputs()
    masks = case.attention.masks()
    p = randn(generator(case.attention.seed + 4), case.K, dtype=case.attention.dtype, scale=2)
    theta = agf_coefficients(p)
    assert theta[0] == 1
    assert_matches(theta[1:], p.double().tanh(), case.attention.dtype, magnitude=1.0)
    rho_q, rho_k = efficient_feature_maps(q, k, masks.key_padding_mask)
    g = agf_response(s, theta, basis=case.basis, a=case.a, b=case.b)
    operator = agf_filter(rho_q, rho_k, g)
    ref_q, ref_k = reference.efficient_maps(q, k, ~masks.hidden_keys)
    ref_g = reference.polynomial(s, theta, case.basis, case.a, case.b)
    assert_matches(operator, (ref_q * ref_g) @ ref_k.transpose(-1, -2), case.attention.dtype,
                   magnitude=max_abs(ref_g), conditioning=max_abs(q) + max_abs(k),
                   depth=case.K + 1)
    out = case.run(q, k, v, s, theta, masks.key_padding_mask)
    assert_matches(out, operator.double() @ v.double(), case.attention.dtype,
                   magnitude=max_abs(ref_g) * max_abs(v) * max(case.attention.keys, 1),
                   conditioning=max_abs(q) + max_abs(k), depth=case.K + 1)


@pytest.mark.skipif(not (triton_available() and interpreted()),
                    reason="AGF's Triton kernels: Triton is not installed or not interpreted")
@budget(0.5)
@given(case=agf_cases(), orthogonality=st.booleans(), layout=st.integers(0, 2 ** 31 - 1))
def test_triton_layer_matches_the_eager_layer_in_float64(case, orthogonality, layout):
    """AGF's Triton kernels (in Triton's interpreter) against the eager layer in float64: the
    output, the regulariser and every gradient, for drawn shapes, masks, bases and scales."""
    c = case.attention
    q, k, v, logits, _ = case.inputs()
    gen = generator(layout)
    p = torch.rand(case.K, generator=gen, dtype=torch.float64) * 2 - 1
    padding = c.masks().key_padding_mask
    grad_out = randn(gen, *v.shape, dtype=torch.float64)

    def run(layer, dtype):
        leaves = [t.detach().to(dtype).requires_grad_() for t in (q, k, v, logits, p)]
        out, reg = layer(*leaves[:4], agf_coefficients(leaves[4]), padding, basis=case.basis,
                         a=case.a, b=case.b, orthogonality=orthogonality)
        loss = (out.double() * grad_out).sum() + (reg.double() if reg is not None else 0.0)
        grads = torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
        return [out, *([reg] if reg is not None else []), *grads]

    got = run(agf_triton_layer, torch.float32)
    want = run(agf_layer.eager, torch.float64)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        # float32 against float64, relative to the largest entry: the filter's polynomial can
        # reach |θ|·(K+1)·max|P_k| and the feature maps' softmaxes amplify the inputs' scale.
        assert g.shape == w.shape, index
        if w.numel() == 0:
            continue
        tolerance = 1e-4 * (case.K + 1) * max(1.0, c.scale) ** 2
        error = (g.double() - w).abs().max().item()
        assert error <= tolerance * max(1.0, w.abs().max().item()), (index, error)


@pytest.mark.skipif(not (triton_available() and interpreted()),
                    reason="AGF's Triton kernels: Triton is not installed or not interpreted")
@budget(0.25)
@given(batch=st.integers(1, 3), heads=st.integers(1, 2), length=st.integers(1, 300),
       dim=st.sampled_from((4, 16, 24, 64)), dim_v=st.sampled_from((8, 16, 40)),
       K=st.integers(0, 6), basis=st.sampled_from(POLYNOMIAL_BASES), a=JACOBI_PARAMETERS,
       b=JACOBI_PARAMETERS,
       padded_runs=st.lists(st.tuples(st.integers(0, 299), st.integers(1, 200)), max_size=3),
       key_scale=st.sampled_from((1.0, 8.0)), seed=st.integers(0, 2**31))
def test_triton_layer_across_chunks_matches_the_eager_layer(
    batch, heads, length, dim, dim_v, K, basis, a, b, padded_runs, key_scale, seed
):
    """AGF's Triton kernels at lengths that span several blocks and chunks, with runs of padding
    (whole chunks among them) and a sample without real tokens, against the eager layer in
    float64: the output, the regulariser and every gradient, by relative norm."""
    gen = generator(seed)
    q, logits = (randn(gen, batch, heads, length, dim, dtype=torch.float64) for _ in range(2))
    k = randn(gen, batch, heads, length, dim, dtype=torch.float64, scale=key_scale)
    v = randn(gen, batch, heads, length, dim_v, dtype=torch.float64)
    p = torch.rand(K, generator=gen, dtype=torch.float64) * 2 - 1
    mask = torch.ones(batch, length, dtype=torch.bool)
    for start, size in padded_runs:
        mask[0, start : start + size] = False
    if batch > 1:
        mask[-1] = False
    grad_out = randn(gen, batch, heads, length, dim_v, dtype=torch.float64)

    def run(layer, dtype):
        leaves = [t.to(dtype).requires_grad_() for t in (q, k, v, logits, p)]
        out, reg = layer(*leaves[:4], agf_coefficients(leaves[4]), mask, basis=basis, a=a, b=b)
        loss = (out.double() * grad_out).sum() + reg.double()
        grads = torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
        return [out, reg, *grads]

    got_all, want_all = run(agf_triton_layer, torch.float32), run(agf_layer.eager, torch.float64)
    # A gradient that cancels to about 0 (K's with N = 1: the keys' softmax over one token is
    # constant) keeps float32's rounding of its terms: it is held to a floor of 1e-2 of the
    # largest gradient's norm (an error of about 1e-7 of it, float32's rounding) instead.
    floor = 1e-2 * max(want.norm().item() for want in want_all[2:])
    for index, (got, want) in enumerate(zip(got_all, want_all, strict=True)):
        if want.numel() == 0:
            continue
        error = (got.double() - want).norm().item()
        scale = max(want.norm().item(), floor if index >= 2 else 0.0)
        assert error <= 1e-5 * (K + 1) * key_scale * scale, (index, error, scale)
