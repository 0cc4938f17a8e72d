"""Fuzzing SAMSA's sampling kernels: ``differentiable_topk``, ``topk_gather``, ``topk_split``,
``sampling_mixture`` and ``gumbel_noise``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from filterformer.functional import (
    SAMPLING_MODES,
    differentiable_topk,
    gumbel_noise,
    sampling_mixture,
    topk_gather,
    topk_split,
)
from filterformer.functional.samsa_triton import samsa_sampled_attention
from filterformer.functional.triton_support import interpreted, triton_available

from ..functional.test_samsa_triton import gathered_attention
from . import reference
from .strategies import (
    DTYPES,
    EPS,
    SCALES,
    assert_finite_gradients,
    assert_matches,
    assert_refused,
    budget,
    generator,
    max_abs,
    randn,
    weighted_sum,
)


@dataclass(frozen=True)
class SamplingCase:
    """``(B, h, M)`` distinct scores (``excluded`` of them at the dtype's minimum, as padding
    is) and ``(B, h, M, C)`` candidates, from which k are sampled."""

    batch: int
    heads: int
    k: int
    candidates: int
    excluded: int
    width: int
    dtype: torch.dtype
    score_dtype: torch.dtype
    spacing: float
    scale: float
    mode: str
    temperature: float
    seed: int

    def inputs(self, *, requires_grad: bool = False):
        gen = generator(self.seed)
        b, h, m = self.batch, self.heads, self.candidates
        # Distinct multiples of a power of two: exact, hence untied, in every dtype.
        order = torch.stack([torch.randperm(m, generator=gen) for _ in range(b * h)])
        scores = ((order - m / 2) * self.spacing).view(b, h, m).to(self.score_dtype)
        excluded = torch.zeros(b, h, m, dtype=torch.bool)
        excluded[..., : self.excluded] = True
        scores = scores.masked_fill(excluded, torch.finfo(self.score_dtype).min)
        values = randn(gen, b, h, m, self.width, dtype=self.dtype, scale=self.scale)
        return scores.requires_grad_(requires_grad), values.requires_grad_(requires_grad), excluded

    def run(self, scores, values):
        return differentiable_topk(scores, values, self.k, mode=self.mode,
                                   temperature=self.temperature)


@st.composite
def sampling_cases(draw: st.DrawFn) -> SamplingCase:
    k = draw(st.integers(1, 4))
    candidates = draw(st.integers(2 * k, 2 * k + 6))
    dtype = draw(st.sampled_from(DTYPES))
    return SamplingCase(
        batch=draw(st.integers(1, 3)),
        heads=draw(st.integers(1, 3)),
        k=k,
        candidates=candidates,
        excluded=draw(st.integers(0, candidates - 2 * k)),
        width=draw(st.integers(1, 6)),
        dtype=dtype,
        score_dtype=draw(st.sampled_from((torch.float32, dtype))),
        spacing=draw(st.sampled_from((2.0**-6, 1.0, 8.0))),
        scale=draw(st.sampled_from(SCALES)),
        mode=draw(st.sampled_from(SAMPLING_MODES)),
        temperature=draw(st.sampled_from((0.1, 1.0, 10.0))),
        seed=draw(st.integers(0, 2**16)),
    )


@given(case=sampling_cases())
def test_finite_outputs_and_gradients(case):
    scores, values, _ = case.inputs(requires_grad=True)
    out = case.run(scores, values)
    assert out.shape == (case.batch, case.heads, case.k, case.width)
    assert out.dtype == case.dtype
    assert out.isfinite().all(), "non-finite output"
    assert_finite_gradients(weighted_sum(out, case.seed), scores, values)


@given(case=sampling_cases())
def test_excluded_candidates_never_affect_the_sample(case):
    scores, values, excluded = case.inputs()
    other = randn(generator(case.seed + 5), *values.shape, dtype=case.dtype, scale=case.scale)
    changed = torch.where(excluded[..., None], other, values)
    assert torch.equal(case.run(scores, values), case.run(scores, changed))


@given(case=sampling_cases())
def test_matches_the_float64_reference(case):
    scores, values, _ = case.inputs()
    out = case.run(scores, values)
    expected = reference.sampled(scores, values, case.k, case.mode, case.temperature)
    if case.mode == "hard":
        assert torch.equal(out, expected.to(case.dtype))
        assert torch.equal(out, topk_gather(scores, values, case.k))
    else:
        assert_matches(out, expected, case.dtype, magnitude=max_abs(values), depth=case.k)
    top, bot = topk_split(scores, case.k)
    keep, mix = sampling_mixture(scores.gather(-1, top), scores.gather(-1, bot),
                                 case.temperature)
    assert keep.isfinite().all() and mix.isfinite().all()
    # Each chosen token's weight and its runners-up's weights sum to 1.
    total = keep.double() + mix.double().sum(-1)
    assert (total - 1).abs().max() <= 8 * case.k * EPS[case.score_dtype]


@given(dtype=st.sampled_from((torch.float64, *DTYPES)), size=st.integers(0, 4096),
       seed=st.integers(0, 2**16))
def test_gumbel_noise_is_finite(dtype, size, seed):
    noise = gumbel_noise(torch.empty(size, dtype=dtype), generator(seed))
    assert noise.dtype == dtype and noise.shape == (size,)
    assert noise.isfinite().all()


BAD_ARGUMENTS = {
    "k=0": ({"k": 0}, r"\bk\b"),
    "k=1.5": ({"k": 1.5}, r"\bk\b"),
    "k too large": ({"k": 100}, r"\bk\b"),
    "mode": ({"mode": "argmax"}, "mode"),
    "temperature=0": ({"temperature": 0.0}, "temperature"),
    "temperature=nan": ({"temperature": float("nan")}, "temperature"),
    "temperature<0": ({"temperature": -1.0}, "temperature"),
    "candidates": ({"candidates": "short"}, "candidates"),
}


@pytest.mark.parametrize("bad", sorted(BAD_ARGUMENTS))
@given(case=sampling_cases())
@budget(0.25)
def test_bad_arguments_are_named(bad, case):
    scores, values, _ = case.inputs()
    change, argument = BAD_ARGUMENTS[bad]
    arguments = {"scores": scores, "candidates": values, "k": case.k, "mode": case.mode,
                 "temperature": case.temperature, **change}
    if arguments["candidates"] == "short":
        arguments["candidates"] = values[..., :-1, :]
    assert_refused(lambda: differentiable_topk(**arguments), argument)
    if bad.startswith("k") or bad == "candidates":
        arguments = {"scores": scores, "candidates": arguments["candidates"],
                     "k": arguments["k"]}
        assert_refused(lambda: topk_gather(**arguments), argument)


@pytest.mark.skipif(not (triton_available() and interpreted()),
                    reason="SAMSA's Triton kernel: Triton is not installed or not interpreted")
@budget(0.5)
@given(batch=st.integers(1, 3), heads=st.integers(1, 3), length=st.integers(1, 90),
       dim=st.integers(1, 40), dim_v=st.integers(1, 40), supports=st.integers(1, 70),
       fraction=st.floats(0.01, 1.0), scale=st.sampled_from(SCALES), seed=st.integers(0, 2**31))
def test_sampled_attention_kernel_matches_the_gathered_rows(
    batch, heads, length, dim, dim_v, supports, fraction, scale, seed
):
    """SAMSA's gather-and-attend kernel (in Triton's interpreter) against attention to the
    gathered rows in float64, for drawn shapes, sample counts (over one block of candidates or
    several) and scales."""
    gen = generator(seed)
    samples = max(1, round(fraction * (length + supports)))
    q, k = (randn(gen, batch, heads, length, dim, dtype=torch.float32, scale=scale)
            for _ in range(2))
    v = randn(gen, batch, heads, length, dim_v, dtype=torch.float32, scale=scale)
    support_keys = randn(gen, heads, supports, dim, dtype=torch.float32, scale=scale)
    support_values = randn(gen, heads, supports, dim_v, dtype=torch.float32, scale=scale)
    index = torch.rand(batch, heads, length + supports, generator=gen).argsort(-1)[..., :samples]
    out = samsa_sampled_attention(q, k, v, support_keys, support_values, index, dim ** -0.5)
    expected = gathered_attention(q, k, v, support_keys, support_values, index, dim ** -0.5)
    assert_matches(out, expected, torch.float32, magnitude=max_abs(v) + max_abs(support_values),
                   conditioning=dim ** 0.5 * max_abs(q) * max(max_abs(k), max_abs(support_keys)),
                   depth=2)
