import math

import pytest
import torch

from filterformer.functional import (
    differentiable_topk,
    gumbel_noise,
    sampling,
    sampling_mixture,
    topk_gather,
    topk_split,
)

B, H, M, C, K = 2, 3, 11, 5, 4


def _scores_and_candidates(requires_grad=False):
    # A random permutation of distinct levels: no ties, so the top-k is unambiguous.
    scores = torch.stack([torch.randperm(M) for _ in range(B * H)]).view(B, H, M).double()
    scores = scores + 0.1 * torch.rand(B, H, M, dtype=torch.float64)
    candidates = torch.randn(B, H, M, C, dtype=torch.float64)
    return scores.requires_grad_(requires_grad), candidates.requires_grad_(requires_grad)


def _ranked(scores):
    """Indices by decreasing score, per (batch, head), from a plain sort."""
    return [[sorted(range(M), key=lambda i, r=row: -r[i]) for row in b] for b in scores.tolist()]


def _hand_soft(scores, candidates, k, tau):
    """METHODS.md §4's soft sample, written out with loops."""
    ranked = _ranked(scores.detach())
    rows = []
    for b in range(B):
        heads = []
        for h in range(H):
            top, bot = ranked[b][h][:k], ranked[b][h][k : 2 * k]
            sampled = []
            for m in range(k):
                p = [torch.sigmoid((scores[b, h, top[m]] - scores[b, h, bot[v]]) / tau)
                     for v in range(k)]
                vec = sum(p) / k * candidates[b, h, top[m]]
                vec = vec + sum((1 - p[v]) * candidates[b, h, bot[v]] for v in range(k)) / k
                sampled.append(vec)
            heads.append(torch.stack(sampled))
        rows.append(torch.stack(heads))
    return torch.stack(rows)


def test_topk_gather_takes_the_highest_scored_rows():
    scores, candidates = _scores_and_candidates()
    sampled = topk_gather(scores, candidates, K)
    ranked = _ranked(scores)
    for b in range(B):
        for h in range(H):
            torch.testing.assert_close(sampled[b, h], candidates[b, h, ranked[b][h][:K]])


def test_topk_split_is_first_and_second_block_of_the_ranking():
    scores, _ = _scores_and_candidates()
    top, bot = topk_split(scores, K)
    ranked = torch.tensor(_ranked(scores))
    assert torch.equal(top, ranked[..., :K]) and torch.equal(bot, ranked[..., K : 2 * K])


def test_sampling_mixture_weights_written_out():
    z_top, z_bot = torch.randn(2, K, dtype=torch.float64), torch.randn(2, K, dtype=torch.float64)
    keep, mix = sampling_mixture(z_top, z_bot, temperature=0.7)
    for n in range(2):
        for m in range(K):
            p = [1 / (1 + math.exp(-(z_top[n, m] - z_bot[n, v]).item() / 0.7)) for v in range(K)]
            assert keep[n, m].item() == pytest.approx(sum(p) / K, rel=1e-12)
            for v in range(K):
                assert mix[n, m, v].item() == pytest.approx((1 - p[v]) / K, rel=1e-12)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_soft_sample_equals_the_mixture_written_out(tau):
    scores, candidates = _scores_and_candidates(requires_grad=True)
    sampled = differentiable_topk(scores, candidates, K, mode="soft", temperature=tau)
    expected = _hand_soft(scores, candidates, K, tau)
    torch.testing.assert_close(sampled, expected)
    grad = torch.randn_like(sampled)
    got = torch.autograd.grad(sampled, (scores, candidates), grad)
    want = torch.autograd.grad(expected, (scores, candidates), grad)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_hard_sample_is_exactly_the_top_k_forward():
    scores, candidates = _scores_and_candidates(requires_grad=True)
    sampled = differentiable_topk(scores, candidates, K, mode="hard")
    assert torch.equal(sampled, topk_gather(scores, candidates, K))


def test_hard_gradients_are_straight_through():
    scores, candidates = _scores_and_candidates(requires_grad=True)
    hard = differentiable_topk(scores, candidates, K, mode="hard", temperature=0.5)
    soft = differentiable_topk(scores, candidates, K, mode="soft", temperature=0.5)
    grad = torch.randn_like(hard)
    d_scores_hard, d_candidates = torch.autograd.grad(hard, (scores, candidates), grad)
    (d_scores_soft,) = torch.autograd.grad(soft, (scores,), grad)
    torch.testing.assert_close(d_scores_hard, d_scores_soft)
    assert d_scores_hard.abs().sum() > 0
    ranked = _ranked(scores.detach())
    for b in range(B):
        for h in range(H):
            top, rest = ranked[b][h][:K], ranked[b][h][K:]
            assert torch.equal(d_candidates[b, h, top], grad[b, h])
            assert torch.equal(d_candidates[b, h, rest], torch.zeros(len(rest), C).double())


def test_torch_func_gives_the_hard_sample_autograd_s_gradients():
    # torch.func.grad, vmap and jacrev need the straight-through Function written for them.
    scores, candidates = _scores_and_candidates()
    upstream = torch.randn(B, H, K, C, dtype=torch.float64)

    def loss(scores, candidates):
        sample = differentiable_topk(scores, candidates, K, mode="hard", temperature=0.7)
        return (sample * upstream).sum()

    found = torch.func.grad(loss, argnums=(0, 1))(scores, candidates)
    leaves = [scores.clone().requires_grad_(), candidates.clone().requires_grad_()]
    sample = differentiable_topk(*leaves, K, mode="hard", temperature=0.7)
    # Outside a transform a Function with a ctx in its forward serves: the host's cost of
    # binding a setup_context Function's arguments is spared.
    function = sampling._StraightThroughSample
    assert type(sample.grad_fn) is function._backward_cls
    assert function.setup_context is torch.autograd.Function.setup_context
    expected = torch.autograd.grad(loss(*leaves), leaves)
    for a, b in zip(found, expected, strict=True):
        torch.testing.assert_close(a, b)
    assert found[0].abs().sum() > 0
    def row_loss(scores, candidates, upstream):
        sample = differentiable_topk(scores, candidates, K, mode="hard", temperature=0.7)
        return (sample * upstream).sum()

    per_row = torch.func.vmap(torch.func.grad(row_loss))(scores, candidates, upstream)
    torch.testing.assert_close(per_row, expected[0])  # rows are independent


def test_excluded_candidates_are_never_sampled():
    scores, candidates = _scores_and_candidates(requires_grad=True)
    excluded = torch.zeros(B, H, M, dtype=torch.bool)
    excluded[..., :3] = True  # the padding of a sample: M − 3 ≥ 2k candidates remain
    masked = scores.masked_fill(excluded, torch.finfo(scores.dtype).min)
    top, bot = topk_split(masked, K)
    assert not excluded.gather(-1, top).any() and not excluded.gather(-1, bot).any()
    sampled = differentiable_topk(masked, candidates, K, mode="soft")
    (d_candidates,) = torch.autograd.grad(sampled.sum(), (candidates,))
    assert torch.equal(d_candidates[excluded], torch.zeros_like(d_candidates[excluded]))


def test_gumbel_noise_has_the_gumbel_moments_and_follows_its_generator():
    like = torch.empty(200_000, dtype=torch.float64)
    noise = gumbel_noise(like, generator=torch.Generator().manual_seed(3))
    euler_gamma = 0.5772156649
    assert noise.mean().item() == pytest.approx(euler_gamma, abs=0.01)
    assert noise.var().item() == pytest.approx(math.pi**2 / 6, rel=0.02)
    again = gumbel_noise(like, generator=torch.Generator().manual_seed(3))
    assert torch.equal(noise, again)
    # In another dtype, for half-precision scores whose noise must be wider.
    half = torch.empty(10, dtype=torch.bfloat16)
    assert gumbel_noise(half, dtype=torch.float32).dtype == torch.float32
    assert gumbel_noise(half).dtype == torch.bfloat16


def test_invalid_arguments_are_rejected():
    scores, candidates = _scores_and_candidates()
    with pytest.raises(ValueError, match="mode must be one of"):
        differentiable_topk(scores, candidates, K, mode="gumbel")
    with pytest.raises(ValueError, match="at least 12 candidates"):
        differentiable_topk(scores, candidates, 6)
    with pytest.raises(ValueError, match="temperature"):
        differentiable_topk(scores, candidates, K, temperature=0.0)
    with pytest.raises(ValueError, match="k \\(the number"):
        topk_gather(scores, candidates, 0)
    with pytest.raises(ValueError, match="candidates must have shape"):
        topk_gather(scores, candidates[..., :5, :], 2)


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_half_precision_candidates_give_the_float64_gradients(mode):
    # SAMSA's case: float32 scores, float16 keys and values of magnitude ~10², gradients ~10².
    # The weights' gradient sums grad·X, whose products overflow float16 while the sum fits.
    scores, candidates = _scores_and_candidates()
    scores = scores.float().requires_grad_()
    candidates = (300 * candidates).half().requires_grad_()
    grad = (300 * torch.randn(B, H, K, C)).half()
    sampled = differentiable_topk(scores, candidates, K, mode=mode, temperature=0.5)
    d_scores, d_candidates = torch.autograd.grad(sampled, (scores, candidates), grad)
    wide_scores, wide_candidates = (
        t.detach().double().requires_grad_() for t in (scores, candidates)
    )
    expected = differentiable_topk(wide_scores, wide_candidates, K, mode=mode, temperature=0.5)
    expected_grads = torch.autograd.grad(expected, (wide_scores, wide_candidates), grad.double())
    assert sampled.dtype == torch.float16 and d_candidates.dtype == torch.float16
    for actual, reference in zip((sampled, d_scores, d_candidates), (expected, *expected_grads),
                                 strict=True):
        assert actual.isfinite().all()
        scale = reference.abs().max().item()
        torch.testing.assert_close(actual.double(), reference, rtol=2e-3, atol=2e-3 * scale)
