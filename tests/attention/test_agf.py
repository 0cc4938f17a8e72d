import pytest
import torch
import torch.nn.functional as F
from scipy.special import eval_jacobi

from filterformer.attention import (
    AGF_AUX_LOSS,
    AttentionContext,
    AttentiveGraphFilterAttention,
    build_attention,
)
from filterformer.functional import efficient_attention
from filterformer.models import SequenceClassifier, TransformerConfig
from filterformer.optim import no_weight_decay

from ..functional.reference import efficient_maps
from .allocations import LargestAllocation, assert_no_quadratic_allocation
from .overfit import overfit_ratio

DIM, HEADS = 16, 2


def _merge(y):
    batch, _, length, _ = y.shape
    return y.transpose(1, 2).reshape(batch, length, DIM)


def _randomise_filter(module):
    with torch.no_grad():
        module.p.normal_()
        module.singular_values.weight.normal_(std=0.5)


def test_agf_at_init_is_efficient_attention():
    module = AttentiveGraphFilterAttention(DIM, HEADS, qkv_bias=True)
    x = torch.randn(2, 9, DIM)
    padding = torch.tensor([[True] * 9, [True] * 5 + [False] * 4])
    q, k, v = module.project_qkv(x)
    expected = module.proj(_merge(efficient_attention(q, k, v, padding)))
    torch.testing.assert_close(module(x, padding_mask=padding), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("basis", "a", "b"), [("jacobi", 1.0, 1.0), ("jacobi", -0.4, 2.0), ("legendre", 0.0, 0.0),
                          ("chebyshev", -0.5, -0.5)]
)
def test_agf_applies_the_token_specific_filter(basis, a, b):
    module = AttentiveGraphFilterAttention(DIM, HEADS, K=4, basis=basis, a=a, b=b).double()
    _randomise_filter(module)
    x = torch.randn(2, 7, DIM, dtype=torch.float64)
    q, k, v = module.project_qkv(x)
    s = torch.sigmoid(x @ module.singular_values.weight.T).view(2, 7, HEADS, -1).transpose(1, 2)
    theta = [1.0, *torch.tanh(module.p).tolist()]
    g = sum(theta[n] * torch.from_numpy(eval_jacobi(n, a, b, s.detach().numpy()))
            for n in range(5))
    rho_q, rho_k = efficient_maps(q, k)
    expected = torch.einsum("bhid,bhjd,bhje->bhie", rho_q * g, rho_k, v)
    torch.testing.assert_close(module(x), module.proj(_merge(expected)))


def test_agf_adds_the_orthogonality_regulariser_with_weight_gamma():
    module = AttentiveGraphFilterAttention(DIM, HEADS, orthogonality_weight=0.3).double()
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    context = AttentionContext()
    module(x, padding_mask=padding, context=context)
    weight, values = context.aux_losses[AGF_AUX_LOSS]
    assert weight == 0.3 and len(values) == 1
    q, k, _ = module.project_qkv(x)
    rho_q, rho_k = efficient_maps(q, k, padding)
    rho_q = rho_q * padding[:, None, :, None]
    eye = torch.eye(DIM // HEADS, dtype=torch.float64)
    expected = ((torch.einsum("bhnd,bhne->bhde", rho_q, rho_q) - eye).abs().mean()
                + (torch.einsum("bhnd,bhne->bhde", rho_k, rho_k) - eye).abs().mean())
    torch.testing.assert_close(values[0], expected)
    assert context.aux_loss().item() == pytest.approx(0.3 * expected.item())
    silent = AttentiveGraphFilterAttention(DIM, HEADS, orthogonality_weight=0.0)
    context = AttentionContext()
    silent(x.float(), context=context)
    assert context.aux_losses == {}


def test_real_tokens_do_not_depend_on_padded_tokens():
    module = AttentiveGraphFilterAttention(DIM, HEADS).double()
    _randomise_filter(module)
    x = torch.randn(2, 8, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 3 + [False] * 5, [True] * 6 + [False] * 2])
    changed = x.clone()
    changed[~padding] = 10 * torch.randn(int((~padding).sum()), DIM, dtype=torch.float64)
    first_context, second_context = AttentionContext(), AttentionContext()
    first = module(x, padding_mask=padding, context=first_context)
    second = module(changed, padding_mask=padding, context=second_context)
    torch.testing.assert_close(first[padding], second[padding])
    torch.testing.assert_close(
        first_context.aux_losses[AGF_AUX_LOSS][1][0], second_context.aux_losses[AGF_AUX_LOSS][1][0]
    )


def test_filter_matrix_is_the_operator_on_values():
    module = AttentiveGraphFilterAttention(DIM, HEADS).double()
    _randomise_filter(module)
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    context = AttentionContext(output_attentions=True)
    out = module(x, padding_mask=padding, context=context)
    maps = context.attention_maps[0]
    _, _, v = module.project_qkv(x)
    torch.testing.assert_close(out, module.proj(_merge(maps.filter @ v)))
    torch.testing.assert_close(maps.attention.sum(-1), torch.ones(2, HEADS, 6, dtype=torch.float64))
    assert torch.equal(maps.attention[1, :, :, 4:], torch.zeros(HEADS, 6, 2, dtype=torch.float64))


def test_filter_runs_in_float32_and_products_in_half_precision_under_autocast():
    module = AttentiveGraphFilterAttention(DIM, HEADS)
    _randomise_filter(module)
    x = torch.randn(2, 6, DIM)

    class Dtypes(LargestAllocation):
        def __init__(self):
            super().__init__()
            self.dtypes = {"products": set(), "elementwise": set()}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket is torch.ops.aten.bmm:
                self.dtypes["products"].add(out.dtype)
            elif func.overloadpacket in (torch.ops.aten._softmax, torch.ops.aten.sigmoid,
                                         torch.ops.aten.mul):
                self.dtypes["elementwise"].add(out.dtype)
            return out

    with torch.autocast("cpu", dtype=torch.bfloat16):
        q, k, v = module.project_qkv(x)
        assert q.dtype == torch.bfloat16
        from filterformer.attention import AttentionInputs

        inputs = AttentionInputs(x=x.bfloat16(), residual=x, padding_mask=None, attn_mask=None,
                                 is_causal=False, context=AttentionContext(), cache=None)
        with Dtypes() as recorder:
            out = module.attend(q, k, v, inputs)
        full = module(x)
    # Feature maps and the filter in float32; the products over tokens in autocast's dtype.
    assert recorder.dtypes == {"products": {torch.bfloat16}, "elementwise": {torch.float32}}
    assert out.dtype == torch.bfloat16 and full.dtype == torch.bfloat16
    torch.testing.assert_close(full.float(), module(x), rtol=0.05, atol=0.05)


def test_nothing_quadratic_is_allocated_and_memory_grows_linearly():
    module = AttentiveGraphFilterAttention(DIM, HEADS, K=5)
    _randomise_filter(module)
    assert_no_quadratic_allocation(module, DIM)


def test_gradients_reach_the_filter_and_singular_value_projection():
    module = AttentiveGraphFilterAttention(DIM, HEADS, K=3)
    with torch.no_grad():
        module.p.fill_(0.3)
    module(torch.randn(2, 5, DIM)).square().sum().backward()
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    assert "p" in no_weight_decay(module)
    assert "singular_values.weight" not in no_weight_decay(module)


def test_agf_options_through_the_registry():
    module = build_attention("agf", DIM, HEADS, K=3, basis="legendre", orthogonality_weight=0.1)
    assert isinstance(module, AttentiveGraphFilterAttention)
    assert (module.K, module.a, module.b) == (3, 0.0, 0.0)
    assert module.theta.tolist() == [1.0, 0.0, 0.0, 0.0]


def test_invalid_use_is_rejected():
    with pytest.raises(ValueError, match="non-causal only"):
        AttentiveGraphFilterAttention(DIM, HEADS, causal=True)
    with pytest.raises(ValueError, match="divides by zero"):
        AttentiveGraphFilterAttention(DIM, HEADS, K=3, a=-1.0, b=-1.0)
    with pytest.raises(ValueError, match=r"basis must be one of \('jacobi'"):
        AttentiveGraphFilterAttention(DIM, HEADS, basis="hermite")
    with pytest.raises(ValueError, match="K must be"):
        AttentiveGraphFilterAttention(DIM, HEADS, K=0)
    with pytest.raises(ValueError, match="orthogonality_weight"):
        AttentiveGraphFilterAttention(DIM, HEADS, orthogonality_weight=-1.0)
    module = AttentiveGraphFilterAttention(DIM, HEADS)
    with pytest.raises(ValueError, match="padding_mask"):
        module(torch.randn(1, 4, DIM), attn_mask=torch.ones(4, 4, dtype=torch.bool))


def _agf_classifier_and_batch():
    """A 2-layer AGF classifier (γ = 0.05) and a batch of 4 sequences of 8 tokens with labels."""
    config = TransformerConfig(dim=DIM, depth=2, num_heads=HEADS, vocab_size=10, max_len=8,
                               attention="agf", attention_options={"orthogonality_weight": 0.05})
    model = SequenceClassifier(config, num_classes=3)
    return model, torch.randint(0, 10, (4, 8)), torch.randint(0, 3, (4,))


def test_agf_regulariser_reaches_the_model_loss():
    model, ids, labels = _agf_classifier_and_batch()
    out = model(ids, labels=labels)
    assert out.aux_loss is not None and out.aux_loss.item() > 0
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels) + out.aux_loss)


def test_evaluation_forms_no_regulariser_and_its_loss_is_the_tasks():
    model, ids, labels = _agf_classifier_and_batch()
    trained = model(ids, labels=labels)
    model.eval()
    evaluated = model(ids, labels=labels)
    assert evaluated.aux_loss is None
    torch.testing.assert_close(evaluated.loss, F.cross_entropy(evaluated.logits, labels))
    # Only the loss differs: the logits are the training forward's (no dropout here).
    torch.testing.assert_close(evaluated.logits, trained.logits)
    assert trained.aux_loss is not None and trained.aux_loss.item() > 0
    context = AttentionContext()
    model.transformer.blocks[0].attn(torch.randn(2, 5, DIM), context=context)
    assert context.aux_losses == {}


@pytest.mark.slow
def test_tiny_agf_model_overfits_a_fixed_batch():
    assert overfit_ratio("agf", {"K": 3}) <= 0.1


@pytest.mark.parametrize(("basis", "a", "b"), [("jacobi", 0.5, -0.3), ("legendre", 0.0, 0.0),
                                                ("chebyshev", -0.5, -0.5)])
def test_filter_response_is_the_closed_form_of_its_own_coefficients(basis, a, b):
    module = AttentiveGraphFilterAttention(DIM, HEADS, K=3, basis=basis, a=a, b=b)
    with torch.no_grad():
        module.p.normal_()
    sigma = torch.linspace(0, 1, 9, dtype=torch.float64)
    theta = [1.0, *torch.tanh(module.p.detach().double()).tolist()]
    expected = sum(t * eval_jacobi(k, a, b, sigma.numpy()) for k, t in enumerate(theta))
    response = module.filter_response(sigma)
    assert response.shape == (1, 9) and response.dtype == torch.float64
    torch.testing.assert_close(response[0], torch.as_tensor(expected))


@pytest.mark.parametrize("option", ["a", "b", "orthogonality_weight"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_options_are_rejected_naming_them(option, value):
    with pytest.raises(ValueError, match=rf"^{option} must be a finite"):
        AttentiveGraphFilterAttention(DIM, HEADS, **{option: value})
    with pytest.raises(ValueError, match=rf"^attention_options.{option} must be a finite number"):
        TransformerConfig(attention="agf", attention_options={option: value})
