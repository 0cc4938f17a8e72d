import pytest
import torch

from filterformer.attention import GraphFilterAttention, SoftmaxAttention, build_attention
from filterformer.functional import attention_matrix, gfsa_filter

DIM, HEADS = 24, 3


def _pair(causal=False, **gfsa_options):
    softmax = SoftmaxAttention(DIM, HEADS, qkv_bias=True, causal=causal).double()
    graph = GraphFilterAttention(DIM, HEADS, qkv_bias=True, causal=causal, **gfsa_options).double()
    graph.load_state_dict(softmax.state_dict(), strict=False)
    return softmax, graph


@pytest.mark.parametrize("causal", [False, True])
def test_gfsa_module_at_init_is_softmax_attention(causal):
    softmax, graph = _pair(causal=causal)
    x = torch.randn(2, 7, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    torch.testing.assert_close(graph(x, padding_mask=padding), softmax(x, padding_mask=padding))


def test_gfsa_module_applies_the_filter_to_its_values():
    _, graph = _pair(K=4)
    with torch.no_grad():
        for name in ("w0", "w1", "wK"):
            getattr(graph, name).normal_()
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    q, k, v = graph.project_qkv(x)
    filt = gfsa_filter(attention_matrix(q, k), graph.w0, graph.w1, graph.wK, K=4)
    merged = (filt @ v).transpose(1, 2).reshape(2, 6, DIM)
    torch.testing.assert_close(graph(x), graph.proj(merged))


def test_learn_selects_parameters_and_buffers():
    module = GraphFilterAttention(DIM, HEADS, learn=("wK",))
    params = dict(module.named_parameters())
    assert "wK" in params and "w0" not in params and "w1" not in params
    assert set(module.state_dict()) >= {"w0", "w1", "wK"}
    assert module.w1.tolist() == [1.0] * HEADS


def test_gradients_reach_coefficients_and_projections():
    module = GraphFilterAttention(DIM, HEADS, K=3, causal=True)
    module(torch.randn(2, 5, DIM)).square().sum().backward()
    for name, param in module.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    assert module.wK.grad.abs().sum() > 0


def test_efficient_base_module_rejects_causal_and_attn_mask():
    with pytest.raises(ValueError, match="non-causal only"):
        GraphFilterAttention(DIM, HEADS, base="efficient", causal=True)
    module = GraphFilterAttention(DIM, HEADS, base="efficient")
    with pytest.raises(ValueError, match="padding_mask"):
        module(torch.randn(1, 4, DIM), attn_mask=torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"K": 1}, "K must be"),
        ({"learn": ("w2",)}, r"learn must name coefficients among \('w0', 'w1', 'wK'\)"),
        ({"base": "flash"}, r"base must be one of \('softmax', 'efficient'\)"),
        ({"order": 3}, "unknown option"),
    ],
)
def test_gfsa_module_rejects_bad_options(options, needle):
    with pytest.raises(ValueError, match=needle):
        build_attention("gfsa", DIM, HEADS, **options)


def test_bfloat16_module_is_finite_and_close():
    module = GraphFilterAttention(DIM, HEADS, causal=True)
    with torch.no_grad():
        module.wK.fill_(0.5)
    x = torch.randn(2, 8, DIM)
    ref = module(x)
    low = module.bfloat16()(x.bfloat16())
    assert torch.isfinite(low).all()
    assert ((low.float() - ref).norm() / ref.norm()) < 5e-2


@pytest.mark.parametrize("exact_power", [False, True])
def test_filter_response_is_the_closed_form_of_its_own_coefficients(exact_power):
    module = GraphFilterAttention(DIM, HEADS, K=4, exact_power=exact_power)
    with torch.no_grad():
        for name in ("w0", "w1", "wK"):
            getattr(module, name).normal_()
    sigma = torch.linspace(0, 1, 9, dtype=torch.float64)
    w0, w1, wK = (getattr(module, name).detach().double()[:, None] for name in ("w0", "w1", "wK"))
    high = sigma**4 if exact_power else sigma + 3 * (sigma**2 - sigma)
    response = module.filter_response(sigma)
    assert response.shape == (HEADS, 9) and response.dtype == torch.float64
    torch.testing.assert_close(response, w0 + w1 * sigma + wK * high)
