"""One meaning for every padding mask: boolean, ``-inf`` and large finite negatives (the Hugging
Face conventions) mask the same keys in every GFSA base and every attention module, and rows
that see no key come out as documented (0 before the output projection)."""

from __future__ import annotations

import copy

import pytest
import torch

from filterformer.attention import GraphFilterAttention, LayerCache, build_attention
from filterformer.attention.base import merge_heads
from filterformer.functional import (
    MASKED_SCORE,
    attend,
    attention_matrix,
    attention_powers,
    gfsa,
)

from .reference import explicit_attention

B, H, N, D = 3, 2, 6, 8


def _real_keys() -> torch.Tensor:
    """``(B, N)``: sample 0 full, sample 1 with random padding, sample 2 with no real key."""
    real = torch.ones(B, N, dtype=torch.bool)
    real[1] = torch.rand(N) < 0.6
    real[1, 0] = True
    real[2] = False
    return real


def _mask_forms(real: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The same ``(B, 1, 1, N)`` padding mask written in each convention."""
    boolean = real[:, None, None, :]

    def additive(value: float) -> torch.Tensor:
        return torch.zeros(boolean.shape, dtype=dtype).masked_fill(~boolean, value)

    forms = {"bool": boolean, "-inf": additive(float("-inf"))}
    if torch.finfo(dtype).min <= -1e9:  # float16 cannot hold −1e9
        forms["-1e9"] = additive(-1e9)
    forms["-1e4"] = additive(MASKED_SCORE)  # bfloat16 rounds it to −9984, which still masks
    forms["finfo.min"] = additive(torch.finfo(dtype).min)
    return forms


@pytest.mark.parametrize("base", ["softmax", "efficient"])
@pytest.mark.parametrize("exact_power", [False, True])
def test_every_mask_convention_gives_the_same_gfsa(base, exact_power):
    dtype = torch.float64
    q, k, v = (torch.randn(B, H, N, D, dtype=dtype) for _ in range(3))
    w0, w1, wK = (torch.randn(H, dtype=dtype) for _ in range(3))
    real = _real_keys()
    outputs = {
        name: gfsa(q, k, v, w0, w1, wK, K=3, attn_mask=mask, base=base, exact_power=exact_power)
        for name, mask in _mask_forms(real, dtype).items()
    }
    outputs["key_padding_mask"] = gfsa(
        q, k, v, w0, w1, wK, K=3, key_padding_mask=real, base=base, exact_power=exact_power
    )
    reference = outputs["bool"]
    assert reference.isfinite().all()
    for name, out in outputs.items():
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-6, msg=name)
    # A sample with no real key has Ā = 0 there: only the identity term w0·V is left.
    torch.testing.assert_close(reference[2], w0.view(H, 1, 1) * v[2], rtol=0, atol=1e-12)


def test_masked_keys_values_never_reach_the_output():
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    w0, w1, wK = (torch.randn(H, dtype=torch.float64) for _ in range(3))
    real = _real_keys()
    mask = _mask_forms(real, torch.float64)["finfo.min"]
    changed = v.masked_fill(~real[:, None, :, None], 1e3)
    for base in ("softmax", "efficient"):
        out = gfsa(q, k, v, w0, w1, wK, K=3, attn_mask=mask, base=base)
        # V at padded queries still enters through w0·V; compare the real positions only.
        again = gfsa(q, k, changed, w0, w1, wK, K=3, attn_mask=mask, base=base)
        rows = real[:, None, :, None].expand_as(out)
        torch.testing.assert_close(out[rows], again[rows], rtol=0, atol=1e-9)


MODULES = [
    ("softmax", {}),
    ("gfsa", {}),
    ("gfsa", {"base": "efficient"}),
    ("gfsa", {"exact_power": True}),
    ("agf", {}),
    ("samsa", {"mode": "soft", "num_samples": 3}),
    ("samsa", {"mode": "hard", "num_samples": 3}),
]


@pytest.mark.parametrize(("method", "options"), MODULES)
def test_every_mask_convention_gives_the_same_module_output(method, options):
    module = build_attention(method, H * D, H, **options).double().eval()
    with torch.no_grad():
        for name in ("w0", "wK"):
            if hasattr(module, name):
                getattr(module, name).normal_()
    x = torch.randn(B, N, H * D, dtype=torch.float64)
    real = _real_keys()
    with torch.no_grad():
        outputs = {name: module(x, attn_mask=mask) for name, mask in
                   _mask_forms(real, torch.float64).items()}
        outputs["padding_mask"] = module(x, padding_mask=real)
    reference = outputs["padding_mask"]
    assert reference.isfinite().all()
    for name, out in outputs.items():
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-6, msg=name)
    if method == "softmax":  # a row that sees no key is 0 before the output projection
        torch.testing.assert_close(
            reference[2], module.proj.bias.expand(N, -1), rtol=0, atol=1e-12
        )


# Low precision: every softmax path, with the mask in q's dtype or in another one.
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
MASK_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
#: Tolerance, relative to the reference's largest entry, for outputs computed in each dtype.
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 4e-2, torch.float16: 5e-3}


def _left_padded_keys() -> torch.Tensor:
    """``(B, N)``: sample 0 full, sample 1 left-padded (so a causal mask leaves its first rows no
    key), sample 2 with no real key."""
    real = torch.ones(B, N, dtype=torch.bool)
    real[1, : int(torch.randint(1, N - 1, ()))] = False
    real[2] = False
    return real


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual.double(), expected, rtol=tol,
                               atol=tol * expected.abs().max().item(), msg=lambda m: f"{name}: {m}")


def _float_masks(real: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The additive forms of a padding mask, in ``dtype``."""
    return {f"{name} ({dtype})": mask
            for name, mask in _mask_forms(real, dtype).items() if name != "bool"}


@pytest.mark.parametrize("mask_dtype", MASK_DTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_float_masks_leave_rows_without_keys_zero_in_every_softmax_kernel(dtype, mask_dtype):
    q, k, v = (torch.randn(B, H, N, D, dtype=dtype) for _ in range(3))
    q64, k64, v64 = (t.double() for t in (q, k, v))
    real = _left_padded_keys()
    decoded = 2  # the last queries, decoded against every key (L < S)
    for causal in (False, True):
        attn = explicit_attention(q64, k64, key_padding=real, causal=causal)
        dead = attn.sum(-1) == 0
        assert dead[2].all() and dead[1, :, 0].all() == causal  # rows that see no key
        for name, mask in _float_masks(real, mask_dtype).items():
            name = f"{name}, causal={causal}"
            out = attend(q, k, v, attn_mask=mask, is_causal=causal)
            matrix = attention_matrix(q, k, attn_mask=mask, is_causal=causal)
            powers = attention_powers(q, k, v, 2, attn_mask=mask, is_causal=causal)
            for what, actual, expected in [
                ("attend", out, attn @ v64),
                ("attention_matrix", matrix, attn),
                ("ĀV", powers[0], attn @ v64),
                ("Ā²V", powers[1], attn @ attn @ v64),
            ]:
                assert actual.dtype == dtype
                _close(actual, expected, dtype, f"{what}, {name}")
                assert torch.equal(actual[dead], torch.zeros_like(actual[dead])), f"{what}, {name}"
            if causal:
                last = attend(q[..., -decoded:, :], k, v, attn_mask=mask, is_causal=True)
                _close(last, (attn @ v64)[..., -decoded:, :], dtype, f"decoding, {name}")
                assert torch.equal(last[2], torch.zeros_like(last[2])), f"decoding, {name}"


def _explicit_module(module, x: torch.Tensor, real: torch.Tensor, causal: bool) -> torch.Tensor:
    """The module's output written out in float64 from its weights: softmax ``ĀV`` or GFSA's
    ``H̃V`` (METHODS.md §1), then the output projection."""
    wide = copy.deepcopy(module).double()
    q, k, v = wide.project_qkv(x.double())
    attn = explicit_attention(q, k, key_padding=real, causal=causal)
    if isinstance(module, GraphFilterAttention):
        w0, w1, wK = (w.view(1, H, 1, 1) for w in (wide.w0, wide.w1, wide.wK))
        high = torch.linalg.matrix_power(attn, wide.K) if wide.exact_power else (
            attn + (wide.K - 1) * (attn @ attn - attn))
        eye = torch.eye(N, dtype=torch.float64)
        out = (w0 * eye + w1 * attn + wK * high) @ v
    else:
        out = attn @ v
    return wide.proj(merge_heads(out))


@pytest.mark.parametrize("mask_dtype", MASK_DTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("method", "options"), [("softmax", {}), ("gfsa", {}),
                                                 ("gfsa", {"exact_power": True})])
def test_float_masks_in_modules_and_decoding(method, options, dtype, mask_dtype):
    real = _left_padded_keys()
    prefix = 4  # decoding: the first tokens, then the rest against the cache
    for causal in (False, True):
        module = build_attention(method, H * D, H, causal=causal, **options).to(dtype).eval()
        with torch.no_grad():
            for name in ("w0", "wK"):
                if hasattr(module, name):
                    getattr(module, name).normal_()
        x = torch.randn(B, N, H * D, dtype=dtype)
        expected = _explicit_module(module, x, real, causal)
        for name, mask in _float_masks(real, mask_dtype).items():
            name = f"{name}, causal={causal}"
            with torch.no_grad():
                out = module(x, attn_mask=mask)
            _close(out, expected, dtype, name)
            if method == "softmax":  # sample 2 sees no key: 0 before the output projection
                assert torch.equal(out[2], module.proj.bias.expand(N, -1)), name
            if not causal:
                continue
            cache = LayerCache()
            with torch.no_grad():
                module(x[:, :prefix], attn_mask=mask[..., :prefix], cache=cache)
                rest = module(x[:, prefix:], attn_mask=mask, cache=cache)
            _close(rest, expected[:, prefix:], dtype, f"decoding, {name}")
