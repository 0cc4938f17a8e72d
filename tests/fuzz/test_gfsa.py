"""Fuzzing ``functional.gfsa`` (both bases, Taylor and exact powers) and
``functional.efficient_attention``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from filterformer.functional import efficient_attention, gfsa, gfsa_filter, gfsa_response

from . import reference
from .strategies import (
    AttentionCase,
    assert_finite_gradients,
    assert_matches,
    assert_refused,
    attention_cases,
    budget,
    max_abs,
    replace_hidden,
    weighted_sum,
)


@dataclass(frozen=True)
class GFSACase:
    """A square attention problem and GFSA's filter: base, order, exact or Taylor power."""

    attention: AttentionCase
    base: str
    K: int
    exact_power: bool

    def coefficients(self, *, requires_grad: bool = False):
        return [w.requires_grad_(requires_grad)
                for w in self.attention.weights(3, self.attention.heads)]

    def run(self, q, k, v, w, masks):
        return gfsa(q, k, v, *w, K=self.K, base=self.base, exact_power=self.exact_power,
                    scale=self.attention.score_scale if self.base == "softmax" else None,
                    **masks.arguments())


@st.composite
def gfsa_cases(draw: st.DrawFn, *, mask_required: bool = False) -> GFSACase:
    base = draw(st.sampled_from(("softmax", "efficient")))
    efficient = base == "efficient"
    case = draw(attention_cases(square=True, key_only=efficient, causal=not efficient,
                                mask_required=mask_required))
    return GFSACase(case, base, draw(st.integers(2, 5)), draw(st.booleans()))


@given(case=gfsa_cases())
def test_finite_outputs_and_gradients(case):
    q, k, v = case.attention.tensors(requires_grad=True)
    w = case.coefficients(requires_grad=True)
    out = case.run(q, k, v, w, case.attention.masks())
    assert out.dtype == case.attention.dtype
    assert out.isfinite().all(), "non-finite output"
    assert_finite_gradients(weighted_sum(out, case.attention.seed), q, k, v, *w)


@given(case=gfsa_cases(mask_required=True))
def test_rows_without_keys_are_the_identity_term(case):
    q, k, v = case.attention.tensors()
    w = case.coefficients()
    masks = case.attention.masks()
    out = case.run(q, k, v, w, masks)
    identity = w[0].view(1, -1, 1, 1) * v  # Ā = 0 in those rows: only w0·V is left
    dead = masks.dead_rows
    assert torch.equal(out[dead], identity[dead])


@given(case=gfsa_cases(mask_required=True))
def test_hidden_keys_never_affect_other_positions(case):
    q, k, v = case.attention.tensors()
    w = case.coefficients()
    masks = case.attention.masks()
    hidden = masks.hidden_keys
    k2 = replace_hidden(k, hidden, case.attention.seed, case.attention.scale)
    v2 = replace_hidden(v, hidden, case.attention.seed + 1, case.attention.scale)
    out, out2 = case.run(q, k, v, w, masks), case.run(q, k2, v2, w, masks)
    # A hidden position's own output keeps its identity term w0·V, which changed with V.
    shown = ~hidden[:, None, :].expand(out.shape[:-1])
    assert torch.equal(out[shown], out2[shown])


@given(case=gfsa_cases())
def test_matches_the_float64_reference(case):
    c = case.attention
    q, k, v = c.tensors()
    w = case.coefficients()
    masks = c.masks()
    out = case.run(q, k, v, w, masks)
    if case.base == "softmax":
        attn = reference.attention(q, k, masks.allowed, masks.bias, c.score_scale)
        conditioning = reference.logits(q, k, masks.allowed, masks.bias, c.score_scale)
    else:
        rho_q, rho_k = reference.efficient_maps(q, k, ~masks.hidden_keys)
        attn = rho_q @ rho_k.transpose(-1, -2)
        conditioning = max_abs(q) + max_abs(k)
    expected = reference.graph_filter(attn, *w, case.K, case.exact_power) @ v.double()
    w0, w1, wK = (max_abs(t) for t in w)
    magnitude = (w0 + w1 + 2 * case.K * wK) * max_abs(v)
    depth = case.K if case.exact_power else 2
    assert_matches(out, expected, c.dtype, magnitude=magnitude, conditioning=conditioning,
                   depth=depth)


BAD_ARGUMENTS = {
    "K=1": ({"K": 1}, r"\bK\b"),
    "K=2.5": ({"K": 2.5}, r"\bK\b"),
    "K=True": ({"K": True}, r"\bK\b"),
    "K='3'": ({"K": "3"}, r"\bK\b"),
    "base": ({"base": "linear"}, "base"),
    "w0 shape": ({"w0": torch.zeros(7)}, "w0"),
    "wK shape": ({"wK": torch.zeros(1, 1)}, "wK"),
    "efficient causal": ({"base": "efficient", "is_causal": True}, "causal"),
    "efficient per-query mask": (
        {"base": "efficient", "attn_mask": "per-query"}, "attn_mask"
    ),
    "fewer queries": ({"q": "first query"}, "queries"),
    "dropout_p": ({"dropout_p": -0.5}, "dropout_p"),
}


@pytest.mark.parametrize("bad", sorted(BAD_ARGUMENTS))
@given(case=attention_cases(square=True, dtypes=(torch.float32,), max_len=4))
@budget(0.25)
def test_bad_arguments_are_named(bad, case):
    q, k, v = case.tensors()
    change, argument = BAD_ARGUMENTS[bad]
    w0, w1, wK = case.weights(3, case.heads)
    arguments = {"q": q, "k": k, "v": v, "w0": w0, "w1": w1, "wK": wK, "K": 3, **change}
    if arguments.get("attn_mask") == "per-query":
        if case.keys == 0:
            return  # a (1, 0) mask masks no query
        arguments["attn_mask"] = torch.ones(case.keys + 1, case.keys, dtype=torch.bool)
    if arguments["q"] == "first query":
        if case.queries < 2:
            return
        arguments["q"] = q[..., :1, :]
    assert_refused(lambda: gfsa(**arguments), argument)


@given(case=attention_cases(key_only=True, causal=False, padding_only=True))
def test_efficient_attention_finite_outputs_and_gradients(case):
    q, k, v = case.tensors(requires_grad=True)
    out = efficient_attention(q, k, v, case.masks().key_padding_mask)
    assert out.isfinite().all(), "non-finite output"
    assert_finite_gradients(weighted_sum(out, case.seed), q, k, v)


@given(case=attention_cases(key_only=True, causal=False, padding_only=True, mask_required=True))
def test_efficient_attention_masks(case):
    q, k, v = case.tensors()
    masks = case.masks()
    hidden = masks.hidden_keys
    out = efficient_attention(q, k, v, masks.key_padding_mask)
    assert (out[masks.dead_rows] == 0).all()  # a sample without real keys gives 0
    k2 = replace_hidden(k, hidden, case.seed, case.scale)
    v2 = replace_hidden(v, hidden, case.seed + 1, case.scale)
    assert torch.equal(out, efficient_attention(q, k2, v2, masks.key_padding_mask))


@given(case=attention_cases(key_only=True, causal=False, padding_only=True))
def test_efficient_attention_matches_the_float64_reference(case):
    q, k, v = case.tensors()
    masks = case.masks()
    out = efficient_attention(q, k, v, masks.key_padding_mask)
    rho_q, rho_k = reference.efficient_maps(q, k, ~masks.hidden_keys)
    expected = rho_q @ (rho_k.transpose(-1, -2) @ v.double())
    assert_matches(out, expected, case.dtype, magnitude=max_abs(v),
                   conditioning=max_abs(q) + max_abs(k))


@given(case=gfsa_cases())
def test_explicit_filter_and_response_match_the_reference(case):
    c = case.attention
    q, k, _ = c.tensors()
    w = case.coefficients()
    attn = reference.attention(q, k, c.masks().allowed[..., : c.keys], c.masks().bias, None)
    attn = attn.to(c.dtype)
    expected = reference.graph_filter(attn.double(), *w, case.K, case.exact_power)
    w0, w1, wK = (max_abs(t) for t in w)
    magnitude = w0 + w1 + 2 * case.K * wK
    depth = case.K if case.exact_power else 2
    out = gfsa_filter(attn, *w, K=case.K, exact_power=case.exact_power)
    assert_matches(out, expected, c.dtype, magnitude=magnitude * max(c.keys, 1), depth=depth)
    sigma = torch.linspace(0, 1, 9, dtype=c.dtype)
    response = gfsa_response(sigma, *w, K=case.K, exact_power=case.exact_power)
    s = sigma.double()
    high = s**case.K if case.exact_power else s + (case.K - 1) * (s**2 - s)
    w0, w1, wK = (t.double().view(-1, 1) for t in w)
    assert_matches(response, w0 + w1 * s + wK * high, c.dtype, magnitude=magnitude, depth=depth)
