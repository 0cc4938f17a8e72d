"""Fuzzing ``functional.neutreno``: ``attended + λ·(V⁰ − V)``, scalar or per-head λ."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from filterformer.functional import neutreno

from .strategies import DTYPES, SCALES, assert_matches, generator, max_abs, randn


@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 7), st.integers(1, 6)),
    dtype=st.sampled_from(DTYPES),
    scale=st.sampled_from(SCALES),
    per_head=st.booleans(),
    lam=st.floats(0.0, 2.0),
    seed=st.integers(0, 2**16),
)
def test_matches_the_float64_reference_with_finite_gradients(
    shape, dtype, scale, per_head, lam, seed
):
    gen = generator(seed)
    attended, values, first = (randn(gen, *shape, dtype=dtype, scale=scale).requires_grad_()
                               for _ in range(3))
    lam = randn(gen, shape[1], dtype=dtype).abs() if per_head else lam
    out = neutreno(attended, values, first, lam)
    weight = lam.double().view(1, -1, 1, 1) if per_head else lam
    expected = attended.double() + weight * (first.double() - values.double())
    assert_matches(out, expected, dtype, magnitude=3 * scale * (1 + max_abs(torch.as_tensor(lam))))
    out.double().sum().backward()
    assert all(t.grad.isfinite().all() for t in (attended, values, first))
