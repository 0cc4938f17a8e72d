import pytest
import torch

from filterformer.functional import gfsa, gfsa_combine, gfsa_filter, gfsa_response

from ..operations import OperationCounts
from .reference import efficient_maps, explicit_attention, explicit_filter, relative_error

B, H, N, D = 2, 3, 9, 5


def _inputs(dtype=torch.float64, requires_grad=False):
    q, k, v = (torch.randn(B, H, N, D, dtype=dtype, requires_grad=requires_grad) for _ in range(3))
    w0, w1, wK = (torch.randn(H, dtype=dtype, requires_grad=requires_grad) for _ in range(3))
    return q, k, v, w0, w1, wK


def _padding():
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[0, 6:] = False
    mask[1, 3:] = False
    return mask


@pytest.mark.parametrize("K", [2, 3, 7])
@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "padding+causal"])
def test_gfsa_equals_explicit_filter(K, mask_kind):
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding() if "padding" in mask_kind else None
    causal = "causal" in mask_kind
    out = gfsa(q, k, v, w0, w1, wK, K=K, key_padding_mask=padding, is_causal=causal)
    attn = explicit_attention(q, k, key_padding=padding, causal=causal)
    expected = explicit_filter(attn, w0, w1, wK, K) @ v
    assert relative_error(out, expected) <= 1e-10


@pytest.mark.parametrize("form", ["bool", "float"])
def test_gfsa_takes_sdpa_style_masks(form):
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding()
    mask = padding[:, None, None, :]
    if form == "float":
        mask = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    out = gfsa(q, k, v, w0, w1, wK, K=3, attn_mask=mask)
    expected = explicit_filter(explicit_attention(q, k, key_padding=padding), w0, w1, wK, 3) @ v
    assert relative_error(out, expected) <= 1e-10


def test_gfsa_full_attn_mask_with_causal():
    q, k, v, w0, w1, wK = _inputs()
    allowed = torch.rand(B, 1, N, N) > 0.3
    allowed |= torch.eye(N, dtype=torch.bool)
    out = gfsa(q, k, v, w0, w1, wK, K=4, attn_mask=allowed, is_causal=True)
    scores = (q @ k.transpose(-1, -2)) / D**0.5
    keep = allowed & torch.ones(N, N, dtype=torch.bool).tril()
    attn = scores.masked_fill(~keep, float("-inf")).softmax(-1)
    expected = explicit_filter(attn, w0, w1, wK, 4) @ v
    assert relative_error(out, expected) <= 1e-10


@pytest.mark.parametrize("K", [2, 5])
def test_exact_power_equals_matrix_power(K):
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding()
    out = gfsa(q, k, v, w0, w1, wK, K=K, exact_power=True, key_padding_mask=padding)
    attn = explicit_attention(q, k, key_padding=padding)
    eye = torch.eye(N, dtype=torch.float64)
    w = [t.view(1, H, 1, 1) for t in (w0, w1, wK)]
    expected = (w[0] * eye + w[1] * attn + w[2] * torch.linalg.matrix_power(attn, K)) @ v
    assert relative_error(out, expected) <= 1e-10


@pytest.mark.parametrize("padded", [False, True])
def test_efficient_base_equals_explicit_linear_attention(padded):
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding() if padded else None
    out = gfsa(q, k, v, w0, w1, wK, K=3, base="efficient", key_padding_mask=padding)
    rho_q, rho_k = efficient_maps(q, k, padding)
    attn = rho_q @ rho_k.transpose(-1, -2)
    expected = explicit_filter(attn, w0, w1, wK, 3) @ v
    assert relative_error(out, expected) <= 1e-10


def test_efficient_base_reads_padding_from_attn_mask():
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding()
    by_mask = gfsa(q, k, v, w0, w1, wK, K=3, base="efficient", attn_mask=padding[:, None, None])
    by_padding = gfsa(q, k, v, w0, w1, wK, K=3, base="efficient", key_padding_mask=padding)
    torch.testing.assert_close(by_mask, by_padding, rtol=0, atol=0)


@pytest.mark.parametrize("options", [{}, {"is_causal": True}, {"exact_power": True}])
def test_gfsa_gradcheck(options):
    q, k, v, w0, w1, wK = (
        t[..., :5, :3].detach().clone().requires_grad_() if t.dim() == 4 else t
        for t in _inputs(requires_grad=True)
    )
    padding = torch.tensor([[True] * 5, [True, True, True, False, False]])

    def fn(q, k, v, w0, w1, wK):
        return gfsa(q, k, v, w0, w1, wK, K=3, key_padding_mask=padding, **options)

    assert torch.autograd.gradcheck(fn, (q, k, v, w0, w1, wK))


def test_gfsa_efficient_gradcheck():
    q, k, v = (torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    ws = tuple(torch.randn(2, dtype=torch.float64, requires_grad=True) for _ in range(3))
    padding = torch.tensor([[True, True, True, False]])

    def fn(q, k, v, *ws):
        return gfsa(q, k, v, *ws, K=3, base="efficient", key_padding_mask=padding)

    assert torch.autograd.gradcheck(fn, (q, k, v, *ws))


@pytest.mark.parametrize("base", ["softmax", "efficient"])
def test_fully_masked_rows_are_zero_not_nan(base):
    q, k, v, w0, w1, wK = _inputs()
    padding = _padding()
    padding[1] = False  # a sample with no real token at all
    for t in (q, k, v):
        t.requires_grad_()
    out = gfsa(q, k, v, w0, w1, wK, K=3, key_padding_mask=padding, base=base)
    assert torch.isfinite(out).all()
    # w0·V is the only term left where Ā is all zero.
    torch.testing.assert_close(out[1], w0.view(H, 1, 1) * v[1])
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_bfloat16_close_to_float32():
    q, k, v, w0, w1, wK = _inputs(dtype=torch.float32)
    padding = _padding()
    ref = gfsa(q, k, v, w0, w1, wK, K=3, key_padding_mask=padding)
    low = gfsa(*(t.bfloat16() for t in (q, k, v, w0, w1, wK)), K=3, key_padding_mask=padding)
    assert low.dtype == torch.bfloat16
    assert relative_error(low.double(), ref.double()) < 3e-2


@pytest.mark.parametrize("base", ["softmax", "efficient"])
def test_under_autocast_the_filter_comes_out_in_its_passes_half_precision(base):
    # As a module's bfloat16 projections give them: q, k, v in bfloat16, the coefficients float32.
    q, k, v = (t.bfloat16() for t in _inputs(dtype=torch.float32)[:3])
    coefficients = [torch.randn(H, requires_grad=True) for _ in range(3)]
    padding, grad = _padding(), torch.randn(B, H, N, D)
    with torch.autocast("cpu", torch.bfloat16):
        out = gfsa(q, k, v, *coefficients, K=3, key_padding_mask=padding, base=base)
    assert out.dtype == torch.bfloat16  # as attend's under autocast: no float32 copy of H̃V
    out.backward(grad.bfloat16())
    wide = [w.detach().double().requires_grad_() for w in coefficients]
    ref = gfsa(q.double(), k.double(), v.double(), *wide, K=3, key_padding_mask=padding,
               base=base)
    ref.backward(grad.double())
    assert relative_error(out.double(), ref) < 3e-2
    for w, w_ref in zip(coefficients, wide, strict=True):
        assert w.grad.dtype == torch.float32  # the leaves' own dtype
        assert relative_error(w.grad.double(), w_ref.grad) < 3e-2


def test_combination_is_formed_in_the_terms_dtype_with_the_coefficients_cast_to_it():
    K = 3
    w0, w1, wK = (torch.randn(H, dtype=torch.float64) for _ in range(3))
    terms = [torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3)]
    view = lambda w: w.view(1, H, 1, 1)  # noqa: E731
    expected = (view(w0) * terms[0] + view(w1) * terms[1]
                + view(wK) * (terms[1] + (K - 1) * (terms[2] - terms[1])))
    for term_dtype, coefficient_dtype, tolerance in ((torch.bfloat16, torch.float32, 3e-2),
                                                     (torch.float64, torch.float32, 1e-6),
                                                     (torch.float32, torch.float64, 1e-6)):
        narrow = [t.to(term_dtype) for t in terms]
        out = gfsa_combine(*narrow, *(w.to(coefficient_dtype) for w in (w0, w1, wK)), K=K)
        assert out.dtype == term_dtype
        reference = (view(w0) * narrow[0].double() + view(w1) * narrow[1].double()
                     + view(wK) * (narrow[1].double()
                                   + (K - 1) * (narrow[2].double() - narrow[1].double())))
        assert relative_error(out.double(), reference) < tolerance
        assert relative_error(reference, expected) < tolerance


@pytest.mark.parametrize(("exact_power", "expected"), [
    (False, {"add": 1, "mul": 1, "addcmul": 2}),  # the Taylor form's weights: one add
    (True, {"mul": 1, "addcmul": 2}),
])
def test_combination_runs_the_fewest_operations(exact_power, expected):
    # On short inputs each operation is a host cost (a GPU's step waits on its launches): the
    # constant factors (2 − K) and (K − 1) ride on add's alpha and addcmul's value.
    terms = [torch.randn(B, H, N, D) for _ in range(3)]
    coefficients = [torch.randn(H) for _ in range(3)]
    with OperationCounts() as counts:
        gfsa_combine(*terms, *coefficients, K=4, exact_power=exact_power)
    assert counts.computed == expected


def test_combination_dispatches_nothing_more_under_inference_mode():
    # Decoding runs under inference mode with the coefficients as parameters, where
    # torch.as_tensor of a parameter dispatches a `to` (a view, but a host cost all the same).
    terms = [torch.randn(B, H, N, D) for _ in range(3)]
    coefficients = [torch.nn.Parameter(torch.randn(H)) for _ in range(3)]
    with torch.inference_mode(), OperationCounts(views=True) as counts:
        out = gfsa_combine(*terms, *coefficients, K=4)
    assert "to" not in counts.computed, counts.computed
    computed = {name: n for name, n in counts.computed.items() if name in ("add", "mul", "addcmul")}
    assert computed == {"add": 1, "mul": 1, "addcmul": 2}
    view = [w.detach().view(1, H, 1, 1) for w in coefficients]
    torch.testing.assert_close(out, view[0] * terms[0] + view[1] * terms[1]
                               + view[2] * (terms[1] + 3 * (terms[2] - terms[1])))


def test_gfsa_filter_matches_reference_and_response():
    attn = torch.rand(B, H, N, N, dtype=torch.float64)
    attn = attn / attn.sum(-1, keepdim=True)
    w0, w1, wK = (torch.randn(H, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(
        gfsa_filter(attn, w0, w1, wK, K=4), explicit_filter(attn, w0, w1, wK, 4)
    )
    # On a symmetric Ā, H̃'s eigenvalues are g(σ) at Ā's eigenvalues σ.
    sym = torch.rand(N, N, dtype=torch.float64)
    sym = sym + sym.T
    sym = sym / sym.sum(-1).max()
    sigma, _ = torch.linalg.eigh(sym)
    filt = gfsa_filter(sym.expand(1, H, N, N), w0, w1, wK, K=4)[0]
    for h in range(H):
        eig = torch.linalg.eigvalsh(filt[h])
        torch.testing.assert_close(
            eig.sort().values, gfsa_response(sigma, w0, w1, wK, K=4)[h].sort().values
        )


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"K": 1}, "K must be an integer >= 2"),
        ({"K": 2.5}, "K must be an integer >= 2"),
        ({"K": 3, "base": "linear"}, "base must be one of"),
        ({"K": 3, "base": "efficient", "is_causal": True}, "non-causal only"),
        ({"K": 3, "attn_mask": torch.ones(B, N, N + 1, dtype=torch.bool)}, "attn_mask"),
        ({"K": 3, "key_padding_mask": torch.ones(B, N + 1, dtype=torch.bool)}, "padding mask"),
        ({"K": 3, "key_padding_mask": torch.ones(B, N)}, "bool"),
    ],
)
def test_gfsa_rejects_bad_arguments(kwargs, needle):
    q, k, v, w0, w1, wK = _inputs()
    with pytest.raises(ValueError, match=needle):
        gfsa(q, k, v, w0, w1, wK, **kwargs)


def test_gfsa_rejects_bad_shapes():
    q, k, v, w0, w1, wK = _inputs()
    with pytest.raises(ValueError, match="q must have shape"):
        gfsa(q[0], k, v, w0, w1, wK, K=3)
    with pytest.raises(ValueError, match="w1 must have shape"):
        gfsa(q, k, v, w0, w1[:2], wK, K=3)
    with pytest.raises(ValueError, match="head_dim"):
        gfsa(q, k[..., :2], v, w0, w1, wK, K=3)


def test_gfsa_response_exact_power_matches_matrix_power_spectrum():
    sym = torch.rand(N, N, dtype=torch.float64)
    sym = sym + sym.T
    sym = sym / sym.sum(-1).max()
    sigma = torch.linalg.eigvalsh(sym)
    w0, w1, wK = (torch.randn(H, dtype=torch.float64) for _ in range(3))
    filt = gfsa_filter(sym.expand(1, H, N, N), w0, w1, wK, K=5, exact_power=True)[0]
    response = gfsa_response(sigma, w0, w1, wK, K=5, exact_power=True)
    for h in range(H):
        torch.testing.assert_close(
            torch.linalg.eigvalsh(filt[h]).sort().values, response[h].sort().values
        )


@pytest.mark.parametrize("rate", [-0.5, 1.0, 2.0])
def test_gfsa_names_a_bad_dropout_rate(rate):
    q, k, v, w0, w1, wK = _inputs()
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        gfsa(q, k, v, w0, w1, wK, K=3, dropout_p=rate)


class _Powers:
    """A decoding cache of ``Ā^n V`` (what ``LayerCache.append_power`` does)."""

    def __init__(self) -> None:
        self.powers: dict[int, torch.Tensor] = {}

    def append_power(self, n, power):
        past = self.powers.get(n)
        self.powers[n] = power if past is None else torch.cat([past, power], dim=-2)
        return self.powers[n]


@pytest.mark.parametrize("options", [{}, {"exact_power": True}, {"base": "efficient"}])
def test_grouped_keys_and_values_equal_their_repeated_heads(options):
    heads, groups = 4, 2
    q = torch.randn(B, heads, N, D, dtype=torch.float64)
    k, v = (torch.randn(B, groups, N, D, dtype=torch.float64) for _ in range(2))
    w0, w1, wK = (torch.randn(heads, dtype=torch.float64) for _ in range(3))
    causal = options.get("base") != "efficient"
    k4, v4 = (t.repeat_interleave(heads // groups, dim=1) for t in (k, v))
    run = dict(K=3, key_padding_mask=_padding(), is_causal=causal, **options)
    expected = gfsa(q, k4, v4, w0, w1, wK, **run)
    torch.testing.assert_close(gfsa(q, k, v, w0, w1, wK, **run), expected)
    if not causal:
        return
    # Decoding the last two positions one by one after a prompt, with the past's powers cached.
    grouped, repeated = _Powers(), _Powers()
    gfsa(q[..., :7, :], k[..., :7, :], v[..., :7, :], w0, w1, wK, K=3, is_causal=True,
         past=grouped, **options)
    gfsa(q[..., :7, :], k4[..., :7, :], v4[..., :7, :], w0, w1, wK, K=3, is_causal=True,
         past=repeated, **options)
    for end in (8, 9):
        step = dict(K=3, is_causal=True, **options)
        got = gfsa(q[..., end - 1 : end, :], k[..., :end, :], v[..., :end, :], w0, w1, wK,
                   past=grouped, **step)
        want = gfsa(q[..., end - 1 : end, :], k4[..., :end, :], v4[..., :end, :], w0, w1, wK,
                    past=repeated, **step)
        torch.testing.assert_close(got, want)
        full = gfsa(q[..., :end, :], k4[..., :end, :], v4[..., :end, :], w0, w1, wK, **step)
        torch.testing.assert_close(got, full[..., -1:, :])
