"""What the fuzz suite draws: problem sizes, dtypes, input scales and masks, as small specs.

A drawn case holds only numbers (sizes, a dtype, a scale, a seed and a mask description) and
builds its tensors from its seed, so a failing example prints in one line and reproduces
exactly; Hypothesis shrinks the sizes and the seed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from hypothesis import settings
from hypothesis import strategies as st
from torch import Tensor

from filterformer.functional import MASKED_SCORE

#: The dtypes every kernel and module is fuzzed in (all on CPU).
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: Unit roundoff of each dtype, for tolerances against the float64 references.
EPS = {
    torch.float64: 2.0**-52,
    torch.float32: 2.0**-23,
    torch.bfloat16: 2.0**-7,
    torch.float16: 2.0**-10,
}
#: Input scales: q, k, v (or x) are standard normal times one of these.
SCALES = (1e-3, 1.0, 10.0, 100.0)
#: How a float mask writes "masked" (Hugging Face writes all of these); "bool" is False.
CONVENTIONS = ("bool", "-inf", "-1e9", "-1e4", "finfo.min")
#: Mask shapes that name each query ("full", "heads", "shared") or only keys ("keys", "vector").
QUERY_SHAPES = ("full", "heads", "shared")
KEY_SHAPES = ("keys", "vector")


def budget(fraction: float) -> settings:
    """This profile's examples times ``fraction`` (at least 3), for the slower properties."""
    return settings(max_examples=max(3, round(settings.default.max_examples * fraction)))


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(gen: torch.Generator, *shape: int, dtype: torch.dtype, scale: float = 1.0) -> Tensor:
    """Standard normal times ``scale``, drawn in float64 and rounded once to ``dtype``."""
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def masked_value(convention: str, dtype: torch.dtype) -> float:
    return {
        "-inf": float("-inf"),
        "-1e9": -1e9,
        "-1e4": MASKED_SCORE,
        "finfo.min": torch.finfo(dtype).min,
    }[convention]


@dataclass(frozen=True)
class MaskSpec:
    """A mask, described: which arguments carry it, how it is written, what it hides.

    Attributes:
        form: ``"none"``, ``"padding"`` (a ``(B, S)`` key-padding mask), ``"attn"`` (an
            SDPA-style ``attn_mask``) or ``"both"``.
        shape: the ``attn_mask``'s shape: ``full`` (B, h, L, S), ``heads`` (1, h, L, S),
            ``shared`` (L, S), ``keys`` (B, 1, 1, S) or ``vector`` (S,).
        convention: how masked entries are written (see :data:`CONVENTIONS`).
        bias: float masks only: random finite biases at the attended entries.
        causal: the ``is_causal`` flag.
        density: the chance that an entry is masked.
        dead_rows: force rows (or, for key masks, the first sample) to see no key.
        dead_sample: force the last sample to see no key at all.
        seed: the random pattern's seed.
    """

    form: str = "none"
    shape: str = "full"
    convention: str = "bool"
    bias: bool = False
    causal: bool = False
    density: float = 0.0
    dead_rows: bool = False
    dead_sample: bool = False
    seed: int = 0

    def build(self, batch: int, heads: int, queries: int, keys: int, dtype: torch.dtype) -> Masks:
        """The mask arguments and the intended ``(B, h, L, S)`` pattern (True = attend)."""
        gen = generator(self.seed)
        allowed = torch.ones(batch, heads, queries, keys, dtype=torch.bool)
        padding = attn_mask = None
        if self.form in ("padding", "both"):
            padding = torch.rand(batch, keys, generator=gen) >= self.density
            if self.dead_sample and batch:
                padding[-1] = False
            allowed = allowed & padding[:, None, None, :]
        if self.form in ("attn", "both"):
            shape = {
                "full": (batch, heads, queries, keys),
                "heads": (1, heads, queries, keys),
                "shared": (queries, keys),
                "keys": (batch, 1, 1, keys),
                "vector": (keys,),
            }[self.shape]
            pattern = torch.rand(shape, generator=gen) >= self.density
            if self.dead_rows and pattern.numel():
                if self.shape == "keys":
                    pattern[0] = False
                elif self.shape == "vector":
                    pattern[:] = False
                else:
                    pattern[..., int(torch.randint(queries, (), generator=gen)), :] = False
            if self.dead_sample and batch and self.shape in ("full", "keys"):
                pattern[-1] = False
            allowed = allowed & pattern.reshape((1,) * (4 - pattern.dim()) + shape)
            attn_mask = pattern
            if self.convention != "bool":
                # Written in float64 and rounded once: -1e9 is -inf in float16.
                written = torch.zeros(shape, dtype=torch.float64)
                if self.bias:
                    written = torch.rand(shape, generator=gen, dtype=torch.float64) * 6 - 3
                value = masked_value(self.convention, dtype)
                attn_mask = written.masked_fill(~pattern, value).to(dtype)
        if self.causal:
            offset = keys - queries
            rows = torch.arange(queries)[:, None] + offset
            allowed = allowed & (torch.arange(keys)[None, :] <= rows)
        bias = torch.zeros(allowed.shape, dtype=torch.float64)
        if attn_mask is not None and attn_mask.is_floating_point():
            written = attn_mask.double().reshape((1,) * (4 - attn_mask.dim()) + attn_mask.shape)
            bias = torch.where(allowed, written.expand(allowed.shape), bias)
        return Masks(attn_mask, padding, self.causal, allowed, bias)


@dataclass
class Masks:
    """A built :class:`MaskSpec`: the arguments, and the pattern and biases they intend."""

    attn_mask: Tensor | None
    key_padding_mask: Tensor | None
    is_causal: bool
    allowed: Tensor  # (B, h, L, S) bool, True where a query may attend to a key
    bias: Tensor  # (B, h, L, S) float64, the additive float mask at allowed entries

    @property
    def dead_rows(self) -> Tensor:
        """``(B, h, L)``: rows that see no key."""
        return ~self.allowed.any(dim=-1)

    @property
    def hidden_keys(self) -> Tensor:
        """``(B, S)``: keys that no query of any head may attend to."""
        return ~self.allowed.any(dim=-2).any(dim=-2)

    def arguments(self) -> dict:
        return {
            "attn_mask": self.attn_mask,
            "key_padding_mask": self.key_padding_mask,
            "is_causal": self.is_causal,
        }


@st.composite
def masks(
    draw: st.DrawFn,
    *,
    key_only: bool = False,
    causal: bool = True,
    required: bool = False,
    padding_only: bool = False,
) -> MaskSpec:
    """A :class:`MaskSpec`; ``key_only`` for methods that mask only keys (efficient, AGF,
    SAMSA), ``causal`` whether ``is_causal`` may be drawn, ``required`` to always mask,
    ``padding_only`` for kernels that take only a key-padding mask."""
    forms = ("padding",) if padding_only else ("padding", "attn", "both")
    form = draw(st.sampled_from(forms if required else ("none", *forms)))
    convention = draw(st.sampled_from(CONVENTIONS))
    return MaskSpec(
        form=form,
        shape=draw(st.sampled_from(KEY_SHAPES if key_only else QUERY_SHAPES + KEY_SHAPES)),
        convention=convention,
        bias=convention != "bool" and draw(st.booleans()),
        causal=causal and not key_only and draw(st.booleans()),
        density=draw(st.sampled_from((0.0, 0.3, 0.6, 1.0))),
        dead_rows=draw(st.booleans()),
        dead_sample=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


@dataclass(frozen=True)
class AttentionCase:
    """q ``(B, h, L, d)``, k ``(B, h, S, d)``, v ``(B, h, S, d_v)`` and a mask."""

    batch: int
    heads: int
    queries: int
    keys: int
    head_dim: int
    value_dim: int
    dtype: torch.dtype
    scale: float
    seed: int
    mask: MaskSpec
    score_scale: float | None = None

    def tensors(self, *, requires_grad: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        gen = generator(self.seed)
        b, h, L, S = self.batch, self.heads, self.queries, self.keys
        q = randn(gen, b, h, L, self.head_dim, dtype=self.dtype, scale=self.scale)
        k = randn(gen, b, h, S, self.head_dim, dtype=self.dtype, scale=self.scale)
        v = randn(gen, b, h, S, self.value_dim, dtype=self.dtype, scale=self.scale)
        return tuple(t.requires_grad_(requires_grad) for t in (q, k, v))

    def masks(self) -> Masks:
        return self.mask.build(self.batch, self.heads, self.queries, self.keys, self.dtype)

    def weights(self, count: int, size: int, *, scale: float = 1.0) -> list[Tensor]:
        """``count`` random ``(size,)`` tensors in this case's dtype (filter coefficients)."""
        gen = generator(self.seed + 1)
        return [randn(gen, size, dtype=self.dtype, scale=scale) for _ in range(count)]


@st.composite
def attention_cases(
    draw: st.DrawFn,
    *,
    square: bool = False,
    key_only: bool = False,
    causal: bool = True,
    mask_required: bool = False,
    padding_only: bool = False,
    dtypes: tuple[torch.dtype, ...] = DTYPES,
    scales: tuple[float, ...] = SCALES,
    max_len: int = 7,
) -> AttentionCase:
    """An :class:`AttentionCase` with 0..``max_len`` queries and keys (N = 0 and 1 included);
    ``square`` for as many queries as keys (no decoding)."""
    keys = draw(st.integers(0, max_len))
    queries = keys if square else draw(st.integers(0, keys))
    return AttentionCase(
        batch=draw(st.integers(1, 3)),
        heads=draw(st.integers(1, 3)),
        queries=queries,
        keys=keys,
        head_dim=draw(st.integers(1, 8)),
        value_dim=draw(st.integers(1, 5)),
        dtype=draw(st.sampled_from(dtypes)),
        scale=draw(st.sampled_from(scales)),
        seed=draw(st.integers(0, 2**16)),
        mask=draw(masks(key_only=key_only, causal=causal, required=mask_required,
                        padding_only=padding_only)),
        score_scale=draw(st.sampled_from((None, None, 0.25, 1.0))),
    )


def replace_hidden(t: Tensor, hidden: Tensor, seed: int, scale: float) -> Tensor:
    """``t`` ``(B, h, S, d)`` with new random values at the ``(B, S)`` positions ``hidden``."""
    other = randn(generator(seed + 7), *t.shape, dtype=t.dtype, scale=10 * scale)
    return torch.where(hidden[:, None, :, None], other, t.detach())


def assert_finite_gradients(loss: Tensor, *tensors: Tensor) -> None:
    """Backpropagate ``loss``; every gradient that reaches a tensor must be finite."""
    loss.backward()
    for i, t in enumerate(tensors):
        if t.grad is not None:
            assert t.grad.isfinite().all(), f"non-finite gradient for input {i}"


def weighted_sum(out: Tensor, seed: int) -> Tensor:
    """A scalar that depends on every output entry, for backward passes."""
    weights = torch.randn(out.shape, generator=generator(seed + 3), dtype=torch.float64)
    return (out.double() * weights).sum()


def assert_matches(
    actual: Tensor,
    expected: Tensor,
    dtype: torch.dtype,
    *,
    magnitude: float,
    conditioning: float = 0.0,
    depth: int = 1,
) -> None:
    """``actual`` equals the float64 ``expected`` within ``dtype``'s rounding.

    The bound is ``4·eps·depth·(1 + conditioning)·magnitude``: ``magnitude`` is the size of what
    is being mixed (|V|, the filter's coefficients), ``conditioning`` how far rounding a score
    moves the result (the largest |logit|), ``depth`` the number of chained rounded passes.
    """
    assert actual.shape == expected.shape, (tuple(actual.shape), tuple(expected.shape))
    if not expected.numel():
        return
    assert actual.isfinite().all(), "non-finite output"
    tolerance = 4 * EPS[dtype] * depth * (1 + conditioning) * magnitude + 1e-30
    error = (actual.double() - expected).abs().max().item()
    assert error <= tolerance, f"max error {error:.3g} > tolerance {tolerance:.3g}"


def max_abs(t: Tensor) -> float:
    return t.double().abs().max().item() if t.numel() else 0.0


def option_text(options: dict) -> str:
    """``{"K": 1, "base": "x"}`` -> ``K=1,base=x``: a readable test id."""
    return ",".join(f"{key}={value}" for key, value in options.items()) or "no-options"


def assert_refused(call, argument: str) -> None:
    """``call()`` raises ValueError or TypeError whose message names ``argument`` (a regex)."""
    try:
        call()
    except (ValueError, TypeError) as error:
        assert re.search(argument, str(error)), f"{error!r} does not name {argument!r}"
    else:
        raise AssertionError(f"a bad {argument!r} was accepted")
