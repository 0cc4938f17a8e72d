import copy
import math

import pytest
import torch
import torch.nn.functional as F

from filterformer.attention import (
    AttentionContext,
    AttentionInputs,
    ImportanceScore,
    SamplingAttention,
    build_attention,
)
from filterformer.attention.base import merge_heads, split_heads
from filterformer.functional import topk_split
from filterformer.strict_loading import load_weights, non_finite_parameters

from ..operations import OperationCounts
from .allocations import LargestAllocation, assert_no_quadratic_allocation
from .overfit import overfit_ratio

DIM, HEADS, SAMPLES = 16, 2, 3
HEAD_DIM = DIM // HEADS


def _module(**options):
    module = SamplingAttention(DIM, HEADS, num_samples=SAMPLES, **options).double()
    with torch.no_grad():  # spread the learnable support scores among the tokens' scores
        module.support_scores.normal_()
        module.support_values.normal_()
    return module


def _merge(y):
    return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], DIM)


def _explicit_scores(module, x, padding=None):
    """Token scores then support scores, padded tokens at the minimum: (B, h, N + 2k)."""
    z = module.importance(x)
    if padding is not None:
        z = z.masked_fill(~padding[:, None, :], torch.finfo(torch.float32).min)
    support = module.support_scores.expand(x.shape[0], -1, -1)
    return torch.cat([z.to(support.dtype), support], dim=-1)


def _explicit_attention(q, keys, values):
    weights = torch.softmax(q @ keys.T / math.sqrt(HEAD_DIM), dim=-1)
    return weights @ values


def _hard_reference(module, x, padding=None):
    """Attention of every query to exactly the top-k scored candidates of its head."""
    q, k, v = module.project_qkv(x)
    scores = _explicit_scores(module, x, padding)
    out = torch.empty_like(q)
    for b in range(x.shape[0]):
        for h in range(HEADS):
            keys = torch.cat([k[b, h], module.support_keys[h]])
            values = torch.cat([v[b, h], module.support_values[h]])
            order = sorted(range(len(keys)), key=lambda i, s=scores[b, h]: -s[i].item())
            chosen = order[:SAMPLES]
            out[b, h] = _explicit_attention(q[b, h], keys[chosen], values[chosen])
    return module.proj(_merge(out))


def test_importance_score_is_the_residual_mlp():
    score = ImportanceScore(DIM, HEADS, hidden_dim=24).double()
    x = torch.randn(2, 5, DIM, dtype=torch.float64)
    first, _, second = score.mlp
    norm = score.norm
    hidden = F.linear(F.gelu(F.linear(x, first.weight, first.bias)), second.weight, second.bias)
    eps = norm.eps if norm.eps is not None else torch.finfo(torch.float64).eps
    normed = hidden / torch.sqrt(hidden.square().mean(-1, keepdim=True) + eps) * norm.weight
    expected = F.linear(x + normed, score.head.weight, score.head.bias)
    torch.testing.assert_close(score(x), expected.transpose(1, 2))


def test_hard_eval_attends_to_exactly_the_top_k_tokens_of_each_head():
    module = _module(mode="hard").eval()
    x = torch.randn(2, 9, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 9, [True] * 5 + [False] * 4])
    torch.testing.assert_close(module(x, padding_mask=padding), _hard_reference(module, x, padding))
    top, _ = topk_split(_explicit_scores(module, x, padding), SAMPLES)
    assert not torch.equal(top[:, 0].sort().values, top[:, 1].sort().values)  # heads differ


def test_hard_training_forward_is_the_top_k_when_noise_cannot_reorder():
    module = _module(mode="hard").train()
    with torch.no_grad():  # score gaps far beyond the Gumbel noise's range
        module.importance.head.weight.mul_(1e4)
        module.support_scores.mul_(1e4)
    x = torch.randn(2, 7, DIM, dtype=torch.float64)
    torch.testing.assert_close(module(x), _hard_reference(module, x))


def test_soft_eval_is_the_mixture_written_out():
    tau = 0.8
    module = _module(mode="soft", temperature=tau).eval()
    x = torch.randn(2, 8, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 8, [True] * 3 + [False] * 5])
    q, k, v = module.project_qkv(x)
    scores = _explicit_scores(module, x, padding)
    out = torch.empty_like(q)
    for b in range(2):
        for h in range(HEADS):
            kv = torch.cat([torch.cat([k[b, h], module.support_keys[h]]),
                            torch.cat([v[b, h], module.support_values[h]])], dim=-1)
            z = scores[b, h]
            order = sorted(range(len(kv)), key=lambda i, z=z: -z[i].item())
            top, bot = order[:SAMPLES], order[SAMPLES : 2 * SAMPLES]
            sampled = []
            for m in top:
                p = [torch.sigmoid((z[m] - z[u]) / tau) for u in bot]
                sampled.append(sum(p) / SAMPLES * kv[m]
                               + sum((1 - pu) * kv[u] for pu, u in zip(p, bot, strict=True))
                               / SAMPLES)
            sampled = torch.stack(sampled)
            out[b, h] = _explicit_attention(q[b, h], sampled[:, :HEAD_DIM], sampled[:, HEAD_DIM:])
    torch.testing.assert_close(module(x, padding_mask=padding), module.proj(_merge(out)))


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_padded_tokens_are_never_sampled(mode):
    module = _module(mode=mode).train()
    x = torch.randn(2, 12, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * 2 + [False] * 10, [True] * 7 + [False] * 5])
    inputs = AttentionInputs(x=x, residual=x, padding_mask=padding, attn_mask=None,
                             is_causal=False, context=AttentionContext(), cache=None)
    for _ in range(20):
        top, bot = topk_split(module.candidate_scores(inputs, noise=True), SAMPLES)
        chosen = torch.cat([top, bot], dim=-1)
        is_pad = torch.cat([~padding, torch.zeros(2, 2 * SAMPLES, dtype=torch.bool)], dim=-1)
        assert not is_pad[:, None, :].expand(-1, HEADS, -1).gather(-1, chosen).any()
    changed = x.clone()
    changed[~padding] = 100 * torch.randn(int((~padding).sum()), DIM, dtype=torch.float64)
    torch.manual_seed(7)
    first = module(x, padding_mask=padding)
    torch.manual_seed(7)
    second = module(changed, padding_mask=padding)
    torch.testing.assert_close(first[padding], second[padding])


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_fewer_tokens_than_samples_work_through_the_supports(mode):
    module = SamplingAttention(DIM, HEADS, num_samples=8, mode=mode)
    x = torch.randn(2, 3, DIM, requires_grad=True)
    out = module(x)
    assert out.shape == (2, 3, DIM) and torch.isfinite(out).all()
    out.square().sum().backward()
    for name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_evaluation_is_repeatable_unless_noise_is_kept(mode):
    module = _module(mode=mode)
    x = torch.randn(2, 10, DIM, dtype=torch.float64)
    module.eval()
    assert torch.equal(module(x), module(x))
    module.eval_noise = True
    assert not torch.equal(module(x), module(x))
    module.eval_noise = False
    module.train()
    assert not torch.equal(module(x), module(x))


def test_filter_matrix_is_the_operator_on_the_tokens_values():
    for mode in ("soft", "hard"):
        module = _module(mode=mode).eval()
        with torch.no_grad():
            module.support_values.zero_()  # then the supports add nothing to the output
        x = torch.randn(2, 7, DIM, dtype=torch.float64)
        padding = torch.tensor([[True] * 7, [True] * 5 + [False] * 2])
        context = AttentionContext(output_attentions=True)
        out = module(x, padding_mask=padding, context=context)
        operator = context.attention_maps[0].filter
        _, _, v = module.project_qkv(x)
        torch.testing.assert_close(out, module.proj(_merge(operator @ v)))
        assert (operator.sum(-1) <= 1 + 1e-12).all()
        assert torch.equal(operator[1, :, :, 5:], torch.zeros(HEADS, 7, 2, dtype=torch.float64))


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_nothing_quadratic_is_allocated_and_memory_grows_linearly(mode):
    module = SamplingAttention(DIM, HEADS, num_samples=16, mode=mode)
    assert_no_quadratic_allocation(module, DIM)


def test_samsa_options_through_the_registry():
    module = build_attention("samsa", DIM, HEADS, num_samples=5, mode="hard", temperature=0.5)
    assert isinstance(module, SamplingAttention)
    assert module.support_keys.shape == (HEADS, 10, HEAD_DIM)
    assert module.support_scores.shape == (HEADS, 10)


def test_invalid_use_is_rejected():
    with pytest.raises(ValueError, match="non-causal only"):
        SamplingAttention(DIM, HEADS, causal=True)
    with pytest.raises(ValueError, match=r"mode must be one of \('soft', 'hard'\)"):
        SamplingAttention(DIM, HEADS, mode="gumbel")
    with pytest.raises(ValueError, match="num_samples"):
        SamplingAttention(DIM, HEADS, num_samples=0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingAttention(DIM, HEADS, temperature=0)
    with pytest.raises(ValueError, match="score_hidden_dim must be a positive integer or None"):
        SamplingAttention(DIM, HEADS, score_hidden_dim=-1)
    module = SamplingAttention(DIM, HEADS, num_samples=2)
    with pytest.raises(ValueError, match="padding_mask"):
        module(torch.randn(1, 4, DIM), attn_mask=torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_tiny_samsa_model_overfits_a_fixed_batch(mode):
    assert overfit_ratio("samsa", {"num_samples": 4, "mode": mode}) <= 0.1


def test_hard_evaluation_is_one_top_k_and_a_gather():
    module = SamplingAttention(DIM, HEADS, num_samples=5, mode="hard").eval()
    x = torch.randn(2, 11, DIM)

    class Ops(LargestAllocation):
        def __init__(self):
            super().__init__()
            self.names, self.shapes = [], []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            self.names.append(func.overloadpacket.__name__)
            self.shapes += [tuple(t.shape) for t in (out if isinstance(out, tuple) else (out,))
                            if isinstance(t, torch.Tensor)]
            return out

    with Ops() as recorder:
        module(x)
    assert recorder.names.count("topk") == 1 and "gather" in recorder.names
    assert not any(shape[-2:] == (5, 5) for shape in recorder.shapes if len(shape) >= 2)
    module.train()
    with Ops() as recorder:
        out = module(x)
    # Training's value is the top k too: the (k, k) mixture exists in the backward alone.
    assert not any(shape[-2:] == (5, 5) for shape in recorder.shapes if len(shape) >= 2)
    with Ops() as recorder:
        out.sum().backward()
    assert any(shape[-2:] == (5, 5) for shape in recorder.shapes if len(shape) >= 2)


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_samsa_trains_under_autocast(mode):
    module = SamplingAttention(DIM, HEADS, num_samples=4, mode=mode)
    x = torch.randn(2, 9, DIM)
    padding = torch.tensor([[True] * 9, [True] * 2 + [False] * 7])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module(x, padding_mask=padding)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    out.float().square().sum().backward()
    assert torch.isfinite(module.support_scores.grad).all()
    assert module.importance.head.weight.grad.abs().sum() > 0


def _float16_gradients(module, x, grad):
    """A float16 training step's output and gradients, with the q, k, v and candidate scores it
    drew (Gumbel noise included): ``(out, grads, qkv_out, scores)``."""
    drawn = {}
    module.qkv.register_forward_hook(lambda _, __, out: drawn.setdefault("qkv", out).retain_grad())
    draw_scores = module.candidate_scores

    def recorded_scores(inputs, *, noise):
        scores = draw_scores(inputs, noise=noise)
        scores.retain_grad()
        drawn["scores"] = scores
        return scores

    module.candidate_scores = recorded_scores
    out = module(x)
    out.backward(grad)
    grads = {name: p.grad for name, p in module.named_parameters()}
    grads["qkv output"], grads["scores"] = drawn["qkv"].grad, drawn["scores"].grad
    return out, grads, drawn["qkv"], drawn["scores"]


def _float64_gradients(module, x, grad, qkv_out, scores):
    """The same step in float64 from the float16 step's own q, k, v and scores (so the same
    tokens are sampled): the gradients the float16 ones round."""
    wide = copy.deepcopy(module).double()
    qkv_out = qkv_out.detach().double().requires_grad_()
    scores = scores.detach().double().requires_grad_()
    wide.candidate_scores = lambda inputs, *, noise: scores
    q, k, v = (split_heads(t, module.num_heads) for t in qkv_out.chunk(3, dim=-1))
    inputs = AttentionInputs(x=x.double(), residual=x.double(), padding_mask=None, attn_mask=None,
                             is_causal=False, context=AttentionContext(), cache=None)
    out = wide.proj(merge_heads(wide.attend(q, k, v, inputs)))
    out.backward(grad.double())
    grads = {name: p.grad for name, p in wide.named_parameters() if p.grad is not None}
    grads["qkv output"], grads["scores"] = qkv_out.grad, scores.grad
    grads["support_scores"] = scores.grad[..., x.shape[1] :].sum(0)
    grads["qkv.weight"] = qkv_out.grad.flatten(0, 1).T @ x.double().flatten(0, 1)
    wide.importance(x.double()).backward(scores.grad[..., : x.shape[1]])
    grads.update({f"importance.{n}": p.grad for n, p in wide.importance.named_parameters()})
    return out, grads


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_float16_gradients_are_finite_wherever_float16_holds_them(mode):
    # Inputs ×100, logits ~10⁴. The sampling's weights see gradients Σ grad·X whose products
    # overflow float16 although the sum fits. Some true gradients exceed float16 themselves
    # (qkv.weight's, as SoftmaxAttention's does on the same input, and at times the importance
    # head's): each gradient is checked where the float64 one fits its dtype (float32 for the
    # scores), the float64 one computed from the float16 step's own q, k, v and scores.
    dim, heads, samples, length = 64, HEADS, 32, 64
    checked = []
    for _ in range(20):
        module = SamplingAttention(dim, heads, num_samples=samples, mode=mode).half().train()
        x = (100 * torch.randn(2, length, dim)).half()
        grad = torch.randn(2, length, dim).half()
        out, grads, qkv_out, scores = _float16_gradients(module, x, grad)
        expected_out, expected = _float64_gradients(module, x, grad, qkv_out, scores)
        assert out.isfinite().all()
        if mode == "hard":  # the same tokens sampled; soft keys are rounded to float16 first
            assert (out.double() - expected_out).norm() <= 1e-2 * expected_out.norm()
        for name, reference in expected.items():
            if reference.abs().max() <= torch.finfo(grads[name].dtype).max / 2:
                checked.append(name)
                assert grads[name].isfinite().all(), name
    # What SAMSA adds (its scores, supports and the sampled keys' gradients) always fits.
    for name in ("scores", "support_rows", "support_scores", "qkv output"):
        assert checked.count(name) == 20, name


def _spy_on_keys(module):
    """Record whether each call's ``attend`` got every token's keys (True) or None (False)."""
    seen, attend = [], module.attend

    def recorded(q, k, v, inputs):
        seen.append(k is not None)
        return attend(q, k, v, inputs)

    module.attend = recorded
    return seen


@pytest.mark.parametrize("qkv_bias", [True, False])
@pytest.mark.parametrize("mode", ["soft", "hard"])
@pytest.mark.parametrize("training", [True, False])
def test_projecting_only_the_sampled_rows_equals_projecting_every_token(mode, training, qkv_bias):
    # A layer after the first (V⁰ recorded) without NeuTRENO projects only the rows it samples
    # from x; output and every gradient equal those of projecting every token and gathering.
    module = _module(mode=mode, qkv_bias=qkv_bias).train(training)
    if qkv_bias:  # a bias that is not zero, so its slices are checked
        with torch.no_grad():
            module.qkv.bias.normal_()
    length = 4 * HEADS * SAMPLES
    x = torch.randn(3, length, DIM, dtype=torch.float64, requires_grad=True)
    padding = torch.ones(3, length, dtype=torch.bool)
    padding[1, length // 3 :] = False
    first_values = torch.randn(3, HEADS, length, HEAD_DIM, dtype=torch.float64)
    seen, results = _spy_on_keys(module), []
    for every_token in (False, True):
        module.projects_own_rows = lambda x, every_token=every_token: not every_token
        torch.manual_seed(7)  # the same Gumbel noise on both paths
        out = module(x, padding_mask=padding, context=AttentionContext(first_values=first_values))
        params = [p for p in module.parameters() if p.requires_grad]
        grads = torch.autograd.grad(out.square().sum(), [x, *params], allow_unused=True)
        results.append((out, grads))
    assert seen == [False, True]
    (own, own_grads), (every, every_grads) = results
    torch.testing.assert_close(own, every)
    for a, b in zip(own_grads, every_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)
    assert own_grads[0].abs().sum() > 0


def test_hard_eval_from_the_sampled_rows_is_the_top_k_written_out():
    module = _module(mode="hard").eval()
    length = HEADS * SAMPLES + 5
    x = torch.randn(2, length, DIM, dtype=torch.float64)
    padding = torch.tensor([[True] * length, [True] * 4 + [False] * (length - 4)])
    seen = _spy_on_keys(module)
    context = AttentionContext(first_values=torch.randn(2, HEADS, length, HEAD_DIM).double())
    out = module(x, padding_mask=padding, context=context)
    assert seen == [False]
    torch.testing.assert_close(out, _hard_reference(module, x, padding))


def test_every_token_is_projected_where_its_keys_or_values_are_needed():
    length = 2 * HEADS * SAMPLES
    x = torch.randn(2, length, DIM, dtype=torch.float64)
    recorded = torch.randn(2, HEADS, length, HEAD_DIM, dtype=torch.float64)
    cases = {
        "a later layer": (_module(), AttentionContext(first_values=recorded), length, False),
        "the first layer (it records V⁰)": (_module(), AttentionContext(), length, True),
        "NeuTRENO's term": (_module(neutreno_lambda=0.5), AttentionContext(first_values=recorded),
                            length, True),
        "maps recorded": (_module(), AttentionContext(first_values=recorded,
                                                      output_attentions=True), length, True),
        # h·2k rows gathered from x would outnumber its N tokens
        "too few tokens": (_module(), AttentionContext(first_values=recorded[:, :, :5]), 5, True),
    }
    for name, (module, context, n, every_token) in cases.items():
        seen = _spy_on_keys(module.train())
        module(x[:, :n], context=context)
        assert seen == [every_token], name


def test_a_samsa_model_equals_one_that_projects_every_token():
    from filterformer.models import Transformer, TransformerConfig

    config = TransformerConfig(dim=DIM, depth=3, num_heads=HEADS, vocab_size=50, max_len=64,
                               attention="samsa", attention_options={"num_samples": SAMPLES,
                                                                     "mode": "hard"})
    model = Transformer(config).double().eval()
    ids = torch.randint(0, 50, (2, 4 * HEADS * SAMPLES))
    layers = [m for m in model.modules() if isinstance(m, SamplingAttention)]
    seen = [_spy_on_keys(layer) for layer in layers]
    own = model(ids).last_hidden_state
    assert [s[0] for s in seen] == [True, False, False]  # the first layer records V⁰
    for layer in layers:
        layer.projects_own_rows = lambda x: False
    torch.testing.assert_close(own, model(ids).last_hidden_state)


@pytest.mark.parametrize("mode", ["soft", "hard"])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("autocast", [False, True])
def test_the_supports_are_read_once_a_call_from_their_one_layout(mode, training, autocast):
    # Keys and values side by side in one parameter: no call concatenates them; each reads
    # them once, by the gather of the sampled rows (float32) or by the cast autocast needs.
    module = SamplingAttention(DIM, HEADS, num_samples=3, mode=mode).train(training)
    with torch.no_grad():
        module.support_scores.add_(10)  # supports among the sampled, so gradients reach them
    assert module.support_keys.data_ptr() == module.support_rows.data_ptr()
    assert module.support_values.untyped_storage().data_ptr() == module.support_rows.data_ptr()
    x = torch.randn(2, 5, DIM, requires_grad=training)
    reads = OperationCounts(reading=module.support_rows.untyped_storage())
    with reads, torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = module(x)
    assert reads.computed == ({"_to_copy": 1} if autocast else {"gather": 1})
    if training:
        out.float().sum().backward()
        grad = module.support_rows.grad
        assert grad.shape == module.support_rows.shape and grad.abs().sum() > 0


def test_the_state_dict_holds_the_support_keys_and_values_as_two_tensors():
    module = _module()
    state = module.state_dict()
    assert "support_rows" not in state
    keys, values = state["support_keys"], state["support_values"]
    assert keys.is_contiguous() and values.is_contiguous()
    assert keys.untyped_storage().data_ptr() != module.support_rows.data_ptr()
    assert torch.equal(torch.cat([keys, values], dim=-1), module.support_rows)
    # Loaded into a fresh module, the two tensors are laid side by side again.
    fresh = SamplingAttention(DIM, HEADS, num_samples=SAMPLES).double()
    fresh.load_state_dict({name: tensor.clone() for name, tensor in state.items()})
    assert torch.equal(fresh.support_rows, module.support_rows)
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    torch.testing.assert_close(fresh.eval()(x), module.eval()(x), rtol=0, atol=0)
    # Halves that do not fit are refused by name, as any mis-shaped weight is.
    state["support_values"] = state["support_values"][:, :-1]
    with pytest.raises(RuntimeError, match="support_rows"):
        fresh.load_state_dict(state)


def test_non_finite_supports_are_found_under_their_saved_names():
    module = _module()
    weights = module.state_dict()
    weights["support_values"][1, 0, 2] = float("nan")
    assert non_finite_parameters(module, weights) == ["support_values"]
    with pytest.raises(ValueError, match="support_values"):
        load_weights(module, weights, "checkpoint x.pt")
