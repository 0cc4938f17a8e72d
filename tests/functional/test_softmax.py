import pytest
import torch

from filterformer.functional import attend, attention_matrix, causal_mask, sdpa_mask

from .reference import explicit_attention, relative_error


def _qkv(b=2, h=2, n=7, d=4, dtype=torch.float64):
    return (torch.randn(b, h, n, d, dtype=dtype) for _ in range(3))


@pytest.mark.parametrize("causal", [False, True])
def test_attend_and_matrix_match_reference(causal):
    q, k, v = _qkv()
    padding = torch.ones(2, 7, dtype=torch.bool)
    padding[1, 4:] = False
    expected = explicit_attention(q, k, key_padding=padding, causal=causal)
    attn = attention_matrix(q, k, key_padding_mask=padding, is_causal=causal)
    assert relative_error(attn, expected) < 1e-12
    out = attend(q, k, v, key_padding_mask=padding, is_causal=causal)
    assert relative_error(out, expected @ v) < 1e-12


def test_causal_mask_is_bottom_right_aligned():
    mask = causal_mask(2, 5)
    assert mask.tolist() == [[True, True, True, True, False], [True] * 5]


def test_decoding_queries_see_the_cached_past():
    q, k, v = _qkv(n=6)
    full = attend(q, k, v, is_causal=True)
    last_two = attend(q[..., 4:, :], k, v, is_causal=True)
    torch.testing.assert_close(last_two, full[..., 4:, :], rtol=1e-12, atol=1e-12)


def test_a_single_decoded_query_needs_no_causal_mask():
    q, k, v = _qkv(n=6)
    # Bottom-right aligned, the last query sees every key: SDPA's unmasked path serves it.
    folded = sdpa_mask(batch=2, heads=2, query_len=1, key_len=6, dtype=q.dtype,
                       device=q.device, is_causal=True)
    assert folded == (None, False)
    full = attend(q, k, v, is_causal=True)
    torch.testing.assert_close(attend(q[..., 5:, :], k, v, is_causal=True), full[..., 5:, :],
                               rtol=1e-12, atol=1e-12)
    padding = torch.ones(2, 6, dtype=torch.bool)
    padding[1, :2] = False
    expected = explicit_attention(q, k, key_padding=padding, causal=True)[..., 5:, :] @ v
    out = attend(q[..., 5:, :], k, v, key_padding_mask=padding, is_causal=True)
    assert relative_error(out, expected) < 1e-12


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("masking", ["none", "causal", "padding+causal", "decoding"])
def test_grouped_keys_and_values_equal_their_repeated_heads(dtype, masking):
    q = torch.randn(2, 6, 7, 4, dtype=dtype)
    k, v = (torch.randn(2, 2, 7, 4, dtype=dtype) for _ in range(2))
    padding = torch.ones(2, 7, dtype=torch.bool)
    padding[1, 5:] = False
    options = {
        "none": {}, "causal": {"is_causal": True}, "decoding": {"is_causal": True},
        "padding+causal": {"is_causal": True, "key_padding_mask": padding},
    }[masking]
    if masking == "decoding":
        q = q[..., 6:, :]
    # query heads 0-2 read key/value head 0, heads 3-5 head 1, as repeat_interleave lays out.
    k6, v6 = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    expected = attend(q, k6, v6, **options)
    tolerance = {"rtol": 1e-6, "atol": 1e-6} if dtype == torch.float32 else {}
    torch.testing.assert_close(attend(q, k, v, **options), expected, **tolerance)
    # values with a value per query head (GFSA's later powers) beside grouped keys
    torch.testing.assert_close(attend(q, k, v6, **options), expected, **tolerance)


def test_grouped_keys_and_values_are_repeated_where_sdpa_cannot_group_them(monkeypatch):
    q = torch.randn(2, 4, 5, 3, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 5, 3, dtype=torch.float64) for _ in range(2))
    grouped = attend(q, k, v, is_causal=True)
    monkeypatch.setattr("filterformer.functional.softmax.SDPA_GROUPS", False)  # torch < 2.5
    torch.testing.assert_close(attend(q, k, v, is_causal=True), grouped)


def test_attend_names_key_heads_that_do_not_divide_the_query_heads():
    q, k, v = _qkv(h=4)
    with pytest.raises(ValueError, match="heads must divide"):
        attend(q, k[:, :3], v[:, :3])
    with pytest.raises(ValueError, match="batch size"):
        attend(q, k[:1, :2], v[:1, :2])


def test_rows_without_keys_are_zero_with_finite_gradients():
    q, k, v = (t.requires_grad_() for t in _qkv())
    allowed = torch.rand(2, 1, 7, 7) > 0.5
    allowed[0, 0, 3] = False
    out = attend(q, k, v, attn_mask=allowed)
    assert torch.isfinite(out).all()
    assert out[0, :, 3].abs().max() == 0
    out.square().sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all()
    additive = torch.zeros(allowed.shape, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    torch.testing.assert_close(attend(q, k, v, attn_mask=additive), out)


def test_attend_bfloat16_close_to_float32():
    q, k, v = _qkv(dtype=torch.float32)
    ref = attend(q, k, v, is_causal=True)
    low = attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), is_causal=True)
    assert low.dtype == torch.bfloat16
    assert relative_error(low.double(), ref.double()) < 2e-2


def test_attend_rejects_bad_masks():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="attn_mask"):
        attend(q, k, v, attn_mask=torch.ones(3, 1, 7, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="attn_mask must be bool or floating"):
        attend(q, k, v, attn_mask=torch.ones(7, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="padding mask"):
        attend(q, k, v, key_padding_mask=torch.ones(2, 6, dtype=torch.bool))


@pytest.mark.parametrize("logit_scale", [1.0, 1e4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_attention_matrix_in_half_precision_matches_float64(dtype, logit_scale):
    # ×1e4 makes QKᵀ ~1e8: beyond float16, whose softmax then gave NaN values and gradients.
    q, k, v = (logit_scale * t for t in _qkv(dtype=torch.float32))
    q, k, v = (t.to(dtype).requires_grad_() for t in (q, k, v))
    padding = torch.ones(2, 7, dtype=torch.bool)
    padding[1, 4:] = False
    weights = torch.randn(2, 2, 7, 7, dtype=torch.float64)  # a loss that needs every entry
    attn = attention_matrix(q, k, key_padding_mask=padding, is_causal=True)
    (attn.double() * weights).sum().backward()
    q64, k64 = (t.detach().double().requires_grad_() for t in (q, k))
    expected = explicit_attention(q64, k64, key_padding=padding, causal=True)
    (expected * weights).sum().backward()
    assert attn.dtype == dtype and q.grad.dtype == dtype
    tol = 5e-3 if dtype == torch.float16 else 4e-2
    for actual, reference in ((attn, expected), (q.grad, q64.grad), (k.grad, k64.grad)):
        assert actual.isfinite().all()
        scale = reference.abs().max().item()
        torch.testing.assert_close(actual.double(), reference, rtol=tol, atol=tol * scale)
    out = attend(q, k, v, key_padding_mask=padding, is_causal=True)  # the fused path agrees
    out.double().sum().backward()
    assert out.isfinite().all() and q.grad.isfinite().all() and v.grad.isfinite().all()


@pytest.mark.parametrize("rate", [-0.5, 1.0, 1.5, float("nan")])
def test_attend_names_a_bad_dropout_rate(rate):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        attend(q, k, v, dropout_p=rate)
    with pytest.raises(ValueError, match="dropout_p"):  # even with nothing to drop
        attend(q[..., :0, :], k[..., :0, :], v[..., :0, :], dropout_p=rate)


def _decoding_reference(q, k, v, padding=None, additive=None):
    """Queries as the last positions of k: scores, masks written out, rows without keys 0."""
    queries, held = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if additive is not None:
        scores = scores + additive
    allowed = torch.arange(held)[None, :] <= torch.arange(held - queries, held)[:, None]
    if padding is not None:
        allowed = allowed & padding[:, None, None, :]
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(scores.softmax(-1), nan=0.0)
    return weights @ v


@pytest.mark.parametrize("queries", [1, 3])
def test_a_decoding_step_ignores_the_keys_after_its_last_query(queries):
    """A bucketed cache passes keys past the last query (unused positions, any finite values):
    the result equals attention over the positions held, with their masks."""
    b, h, d = 2, 3, 4
    offset = int(torch.randint(2, 9, ()))
    held, capacity = offset + queries, offset + queries + int(torch.randint(1, 6, ()))
    q = torch.randn(b, h, queries, d, dtype=torch.float64)
    k, v = (torch.randn(b, h, capacity, d, dtype=torch.float64) for _ in range(2))
    k[..., held:, :], v[..., held:, :] = 1e6, -1e6  # unused positions: must not leak in
    padding = torch.rand(b, capacity) > 0.3
    padding[:, 0] = True
    additive = torch.randn(b, 1, queries, capacity, dtype=torch.float64)
    got = attend(q, k, v, key_padding_mask=padding, attn_mask=additive, is_causal=True,
                 query_offset=offset)
    want = _decoding_reference(q, k[..., :held, :], v[..., :held, :], padding[:, :held],
                               additive[..., :held])
    assert relative_error(got, want) < 1e-12
    plain = attend(q, k, v, is_causal=True, query_offset=offset)
    want = _decoding_reference(q, k[..., :held, :], v[..., :held, :])
    assert relative_error(plain, want) < 1e-12
