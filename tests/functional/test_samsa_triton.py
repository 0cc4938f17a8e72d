"""SAMSA's sampled-attention kernel equals attention to the gathered rows in float64, and the
module's evaluation with it equals its evaluation without, falling back on a kernel failure."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from filterformer.attention import build_attention
from filterformer.functional import samsa_triton as samsa_triton_module
from filterformer.functional.samsa_triton import samsa_sampled_attention

from ..operations import OperationCounts
from .triton_interpreter import (
    allow_kernels,
    fail_to_launch,
    falls_back,
    interpreter_only,
    record_launches,
)

pytestmark = interpreter_only


def gathered_attention(q, k, v, support_keys, support_values, index, scale):
    """softmax(q Kᵀ·scale) V in float64, K and V the candidates (tokens then supports) at index."""
    batch = q.shape[0]
    keys = torch.cat([k, support_keys.expand(batch, -1, -1, -1)], dim=2).double()
    values = torch.cat([v, support_values.expand(batch, -1, -1, -1)], dim=2).double()
    keys = keys.gather(2, index[..., None].expand(-1, -1, -1, keys.shape[-1]))
    values = values.gather(2, index[..., None].expand(-1, -1, -1, values.shape[-1]))
    weights = torch.softmax(q.double() @ keys.transpose(-1, -2) * scale, dim=-1)
    return weights @ values


@pytest.mark.parametrize(("batch", "heads", "length", "dim", "dim_v", "supports", "samples"), [
    (2, 3, 37, 16, 16, 10, 20),
    (1, 2, 130, 64, 64, 128, 64),
    (2, 2, 50, 24, 20, 8, 70),  # more samples than one block, a head width not a power of 2
    (1, 1, 5, 16, 16, 40, 20),  # fewer tokens than samples: mostly support tokens
])
def test_kernel_equals_attention_to_the_gathered_rows(
    batch, heads, length, dim, dim_v, supports, samples
):
    q, k = torch.randn(batch, heads, length, dim), torch.randn(batch, heads, length, dim)
    v = torch.randn(batch, heads, length, dim_v)
    support_keys, support_values = torch.randn(heads, supports, dim), torch.randn(
        heads, supports, dim_v)
    index = torch.stack([torch.stack([torch.randperm(length + supports)[:samples]
                                      for _ in range(heads)]) for _ in range(batch)])
    scale = float(torch.rand(()) + 0.1)
    out = samsa_sampled_attention(q, k, v, support_keys, support_values, index, scale)
    ref = gathered_attention(q, k, v, support_keys, support_values, index, scale)
    assert out.shape == ref.shape and out.dtype == q.dtype
    # float32 arithmetic against float64: rounding of logits up to |q||k|·scale ~ 10.
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=2e-5)


def test_half_precision_rounds_as_flash_attention():
    q, k, v = (torch.randn(2, 2, 80, 32).to(torch.bfloat16) for _ in range(3))
    support_keys, support_values = (torch.randn(2, 64, 32).to(torch.bfloat16) for _ in range(2))
    index = torch.stack([torch.randperm(144)[:32].view(1, 32).repeat(2, 1)] * 2)
    out = samsa_sampled_attention(q, k, v, support_keys, support_values, index, 32 ** -0.5)
    ref = gathered_attention(q, k, v, support_keys, support_values, index, 32 ** -0.5)
    assert out.dtype == torch.bfloat16
    assert ((out.double() - ref).norm() / ref.norm()).item() < 2e-2


def float32_supports_and_half_tokens():
    """bfloat16 q, k, v ``(2, 3, 40, 16)``, float32 support rows ``(3, 24, 32)`` (keys then
    values, as the module holds them) and indices ``(2, 3, 20)`` into the 64 candidates."""
    q, k, v = (torch.randn(2, 3, 40, 16).to(torch.bfloat16) for _ in range(3))
    rows = torch.randn(3, 24, 32)
    index = torch.stack([torch.stack([torch.randperm(64)[:20] for _ in range(3)])] * 2)
    return q, k, v, rows, index


def test_float32_supports_are_rounded_inside_to_the_products_precision():
    # The module passes its float32 supports, views of one (h, M, 2d) parameter, with half-
    # precision tokens. (The interpreter rounds float32 to bfloat16 toward zero, a GPU to
    # nearest as torch does: the CUDA tier checks that this equals a cast before the call.)
    q, k, v, rows, index = float32_supports_and_half_tokens()
    out = samsa_sampled_attention(q, k, v, rows[..., :16], rows[..., 16:], index, 0.25)
    cast = rows.to(torch.bfloat16)
    ref = gathered_attention(q, k, v, cast[..., :16], cast[..., 16:], index, 0.25)
    assert out.dtype == torch.bfloat16
    assert ((out.double() - ref).norm() / ref.norm()).item() < 2e-2


def test_bad_index_is_refused_by_name():
    q = torch.randn(1, 2, 8, 16)
    support = torch.randn(2, 4, 16)
    with pytest.raises(ValueError, match="index must have shape"):
        samsa_sampled_attention(q, q, q, support, support, torch.zeros(1, 3, 2, dtype=torch.long),
                                0.25)


def _layer_and_inputs():
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=8, mode="hard").eval()
    x = torch.randn(3, 21, 32)
    mask = torch.rand(3, 21) > 0.3
    mask[:, 0] = True
    return layer, x, mask


class _TopKOrders(TorchDispatchMode):
    """Whether each top-k run inside the mode sorts what it finds."""

    def __init__(self) -> None:
        super().__init__()
        self.sorted: list[bool] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket is torch.ops.aten.topk:
            self.sorted.append(bool(args[4] if len(args) > 4 else kwargs.get("sorted", True)))
        return func(*args, **kwargs)


def test_the_module_evaluation_with_the_kernel_equals_it_without(monkeypatch):
    layer, x, mask = _layer_and_inputs()
    with torch.no_grad():
        eager = layer(x, padding_mask=mask)
        allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
        calls = []
        original = samsa_triton_module.samsa_sampled_attention
        monkeypatch.setattr("filterformer.attention.samsa.samsa_sampled_attention",
                            lambda *a, **k: calls.append(1) or original(*a, **k))
        with _TopKOrders() as top_k:
            fast = layer(x, padding_mask=mask)
    assert calls, "the kernel was not used"
    # The kernel attends to a set: its top-k leaves the k unsorted (no sort on CUDA).
    assert top_k.sorted == [False]
    torch.testing.assert_close(fast, eager, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", ["_kernel", "_scores_kernels"])  # attention, scores
def test_a_kernel_failure_warns_once_and_falls_back(monkeypatch, kernel):
    layer, x, mask = _layer_and_inputs()
    with torch.no_grad():
        eager = layer(x, padding_mask=mask)
        switch = allow_kernels(monkeypatch, samsa_triton_module.SWITCH)

        monkeypatch.setattr(samsa_triton_module, kernel, fail_to_launch)
        fallen_back = falls_back(switch, lambda: layer(x, padding_mask=mask))
    torch.testing.assert_close(fallen_back, eager)


def test_hard_evaluation_projects_every_token_only_where_the_kernel_runs(monkeypatch):
    # The kernel reads every token's keys and values where they live; elsewhere (no Triton, a
    # kernel failure, the CPU) only the sampled rows are projected.
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=4, mode="hard").eval()
    x = torch.randn(1, 20, 32)
    assert layer.projects_own_rows(x)
    assert not layer.projects_own_rows(x, kernels_allowed=True)  # the choice made on CUDA
    allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    assert not layer.projects_own_rows(x)
    assert layer.projects_own_rows(x, kernels_allowed=False)
    assert layer.train().projects_own_rows(x)  # training: 2k rows a head, h·2k = 16 <= N
    assert layer.projects_own_rows(x, kernels_allowed=True)


def reference_scores(x, hidden, norm_weight, eps, head_weight, head_bias, support_scores,
                     padding_mask=None, noise=None):
    """The candidates' scores written out in float64: ``(x + RMSNorm(hidden))·Wᵀ + b`` plus the
    noise, padded tokens at float32's lowest, then the support scores."""
    x, hidden = x.double(), hidden.double()
    eps = torch.finfo(torch.float32).eps if eps is None else eps
    normed = hidden * torch.rsqrt(hidden.square().mean(-1, keepdim=True) + eps) * norm_weight
    scores = (x + normed) @ head_weight.double().T
    if head_bias is not None:
        scores = scores + head_bias.double()
    scores = scores.transpose(1, 2)
    if noise is not None:
        scores = scores + noise.double()
    if padding_mask is not None:
        scores = scores.masked_fill(~padding_mask[:, None, :], torch.finfo(torch.float32).min)
    support = support_scores.double().expand(x.shape[0], -1, -1)
    return torch.cat([scores, support], dim=-1)


def _score_inputs(batch, length, dim, heads, supports, bias=True, masked=True):
    x, hidden = torch.randn(batch, length, dim), torch.randn(batch, length, dim) * 3
    mask = torch.rand(batch, length) > 0.3 if masked else None
    return [x, hidden, torch.rand(dim) + 0.5, 1e-5, torch.randn(heads, dim) / dim**0.5,
            torch.randn(heads) if bias else None, torch.randn(heads, supports), mask]


@pytest.mark.parametrize(("batch", "length", "dim", "heads", "supports", "bias", "masked"), [
    (2, 37, 48, 3, 10, True, True),
    (1, 130, 200, 12, 300, False, False),  # more tokens and supports than a block; wide D
    (3, 0, 16, 2, 8, True, True),  # no tokens: the supports alone
    (2, 5, 24, 17, 4, True, False),  # heads not a power of 2, above 16
    (0, 5, 16, 2, 4, True, True),  # no samples
])
def test_candidate_scores_equal_the_written_out_scores(batch, length, dim, heads, supports,
                                                       bias, masked):
    inputs = _score_inputs(batch, length, dim, heads, supports, bias, masked)
    out = samsa_triton_module.samsa_candidate_scores(*inputs)
    reference = reference_scores(*inputs)
    assert out.shape == (batch, heads, length + supports) and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-5)


def test_candidate_scores_take_float32_machine_epsilon_by_default():
    inputs = _score_inputs(2, 9, 16, 2, 4)
    inputs[1] = inputs[1] * 1e-4  # a norm where eps shows
    inputs[3] = None
    out = samsa_triton_module.samsa_candidate_scores(*inputs)
    torch.testing.assert_close(out.double(), reference_scores(*inputs), rtol=1e-5, atol=1e-5)


def test_candidate_scores_refuse_mismatched_shapes_by_name():
    inputs = _score_inputs(2, 9, 16, 2, 4)
    for index, bad, name in [(1, torch.randn(2, 9, 8), "hidden"),
                             (4, torch.randn(3, 16), "head_weight"),
                             (5, torch.randn(3), "head_bias"),
                             (7, torch.ones(2, 8, dtype=torch.bool), "padding_mask")]:
        broken = list(inputs)
        broken[index] = bad
        with pytest.raises(ValueError, match=name):
            samsa_triton_module.samsa_candidate_scores(*broken)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_the_module_evaluation_with_the_score_kernel_equals_it_without(monkeypatch, mode):
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=8, mode=mode).eval()
    x = torch.randn(3, 21, 32)
    mask = torch.rand(3, 21) > 0.3
    mask[:, 0] = True
    with torch.no_grad():
        eager = layer(x, padding_mask=mask)
        allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
        calls = []
        original = samsa_triton_module.samsa_candidate_scores
        monkeypatch.setattr("filterformer.attention.samsa.samsa_candidate_scores",
                            lambda *a, **k: calls.append(1) or original(*a, **k))
        fast = layer(x, padding_mask=mask)
    assert calls, "the score kernel was not used"
    torch.testing.assert_close(fast, eager, rtol=1e-5, atol=1e-6)


#: The positions of _score_inputs' tensors that take gradients: x, hidden, the norm's weight,
#: the head's weight and bias, the support scores.
_DIFFERENTIABLE = (0, 1, 2, 4, 5, 6)


def _with_gradients(inputs, dtype=None):
    """``inputs`` with every differentiable tensor a leaf that requires grad (x and hidden in
    ``dtype`` where given)."""
    out = list(inputs)
    for i in _DIFFERENTIABLE:
        if out[i] is not None:
            tensor = out[i].to(dtype) if dtype is not None and i < 2 else out[i]
            out[i] = tensor.detach().clone().requires_grad_()
    return out


def _float64_leaves(inputs):
    """``inputs``' floating tensors in float64, each differentiable one a leaf (as
    :func:`_with_gradients`)."""
    return _with_gradients([t.double() if isinstance(t, torch.Tensor) and t.is_floating_point()
                            else t for t in inputs])


def _gradients(out, inputs, grad, **kwargs):
    leaves = [inputs[i] for i in _DIFFERENTIABLE if inputs[i] is not None]
    return torch.autograd.grad(out, leaves, grad, **kwargs)


@pytest.mark.parametrize(("batch", "length", "dim", "heads", "supports", "bias", "masked"), [
    (2, 37, 48, 3, 10, True, True),
    (1, 130, 200, 12, 300, False, False),  # more tokens than a block; D over several blocks
    (3, 0, 16, 2, 8, True, True),  # no tokens: the supports alone
    (2, 5, 24, 17, 4, True, False),  # heads not a power of 2, above 16
    (2, 70, 16, 2, 4, True, True),  # a second block of tokens, partly padding
    (1, 45, 16, 40, 4, True, True),  # over 32 heads: the backward's blocks of 32 tokens
])
@pytest.mark.parametrize("transposed", [False, True])  # the module's noise: (B, N, h) memory
def test_candidate_scores_with_noise_and_their_gradients_equal_float64(
    batch, length, dim, heads, supports, bias, masked, transposed
):
    inputs = _with_gradients(_score_inputs(batch, length, dim, heads, supports, bias, masked))
    noise = (torch.randn(batch, length, heads).transpose(1, 2) if transposed
             else torch.randn(batch, heads, length))
    out = samsa_triton_module.samsa_candidate_scores(*inputs, noise=noise)
    reference_inputs = _float64_leaves(inputs)
    reference = reference_scores(*reference_inputs, noise=noise)
    torch.testing.assert_close(out.double(), reference.detach(), rtol=1e-5, atol=1e-5)
    grad = torch.randn(out.shape, dtype=torch.float64)
    for got, want in zip(_gradients(out, inputs, grad.float()),
                         _gradients(reference, reference_inputs, grad), strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
def test_gradients_stay_finite_with_a_zero_epsilon_past_the_last_token(masked):
    # 37 tokens: the second half of the block has no token, whose 1/sqrt(0 + 0) is infinite.
    inputs = _with_gradients(_score_inputs(2, 37, 24, 3, 4, masked=masked))
    inputs[3] = 0.0
    out = samsa_triton_module.samsa_candidate_scores(*inputs)
    reference_inputs = _float64_leaves(inputs)
    reference = reference_scores(*reference_inputs)
    grad = torch.randn(out.shape, dtype=torch.float64)
    for got, want in zip(_gradients(out, inputs, grad.float()),
                         _gradients(reference, reference_inputs, grad), strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


def test_the_default_epsilon_is_that_of_the_norms_dtype_as_eagerly():
    # A model held in bfloat16 (no autocast): RMSNorm's epsilon is bfloat16's, 2⁻⁷.
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=4).bfloat16().eval()
    x = torch.randn(2, 9, 32, dtype=torch.bfloat16)
    hidden = layer.importance.mlp(x) * 0.05  # a norm where the epsilon shows
    norm, head = layer.importance.norm, layer.importance.head
    assert norm.eps is None
    eager = layer.importance.scores(x, hidden)
    out = samsa_triton_module.samsa_candidate_scores(
        x, hidden, norm.weight, norm.eps, head.weight, head.bias, layer.support_scores)
    wrong = samsa_triton_module.samsa_candidate_scores(
        x, hidden, norm.weight, torch.finfo(torch.float32).eps, head.weight, head.bias,
        layer.support_scores)
    tokens = out[..., :9].double()
    # Eagerly the sum and the scores are rounded to bfloat16 (8 bits): within 2⁻⁸ of the kernel.
    torch.testing.assert_close(tokens, eager.double(), rtol=2**-7, atol=2**-7)
    assert (wrong[..., :9].double() - eager.double()).abs().max() > 4 * 2**-7


def test_half_precision_rows_take_gradients_in_their_dtype():
    inputs = _with_gradients(_score_inputs(2, 40, 64, 4, 8), dtype=torch.bfloat16)
    out = samsa_triton_module.samsa_candidate_scores(*inputs)
    reference_inputs = _float64_leaves(inputs)
    reference = reference_scores(*reference_inputs)
    grad = torch.randn(out.shape, dtype=torch.float64)
    found = _gradients(out, inputs, grad.float())
    assert [g.dtype for g in found[:2]] == [torch.bfloat16] * 2
    for got, want in zip(found, _gradients(reference, reference_inputs, grad), strict=True):
        # bfloat16 keeps 8 bits: each element of x's and hidden's gradient is rounded once.
        torch.testing.assert_close(got.double(), want, rtol=1e-2, atol=1e-2 * want.abs().max())


def _eager_scores(padding_mask, noise, eps=1e-5):
    def eager(x, hidden, norm_weight, head_weight, head_bias, support_scores):
        normed = hidden * torch.rsqrt(hidden.square().mean(-1, keepdim=True) + eps) * norm_weight
        scores = torch.nn.functional.linear(x + normed, head_weight, head_bias).transpose(1, 2)
        scores = scores + noise
        scores = scores.masked_fill(~padding_mask[:, None, :], torch.finfo(torch.float32).min)
        return torch.cat([scores, support_scores.expand(x.shape[0], -1, -1)], dim=-1)

    return eager


def test_a_second_derivative_goes_through_the_eager_scores():
    inputs = _with_gradients(_score_inputs(2, 30, 32, 3, 6))
    noise = torch.randn(2, 3, 30)
    eager = _eager_scores(inputs[7], noise)
    out = samsa_triton_module.samsa_candidate_scores(*inputs, noise=noise, eager=eager)
    grad = torch.randn_like(out)
    first = _gradients(out, inputs, grad, retain_graph=True)
    with_graph = _gradients(out, inputs, grad, create_graph=True)
    assert all(g.grad_fn is not None for g in with_graph[:2])
    for got, want in zip(with_graph, first, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # The second derivative itself: d/dhidden of (dL/dhidden · v) against float64 autograd.
    v = torch.randn_like(inputs[1])
    (second,) = torch.autograd.grad((with_graph[1] * v).sum(), inputs[1])
    reference_inputs = _float64_leaves(inputs)
    reference = reference_scores(*reference_inputs, noise=noise)
    (dh,) = torch.autograd.grad(reference, reference_inputs[1], grad.double(), create_graph=True)
    (want,) = torch.autograd.grad((dh * v.double()).sum(), reference_inputs[1])
    torch.testing.assert_close(second.double(), want, rtol=1e-4, atol=1e-6)
    without = samsa_triton_module.samsa_candidate_scores(*inputs)
    with pytest.raises(RuntimeError, match="needs its eager argument"):
        _gradients(without, inputs, grad, create_graph=True)


def test_a_failing_backward_kernel_warns_and_takes_the_eager_gradients(monkeypatch):
    switch = allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    inputs = _with_gradients(_score_inputs(2, 30, 32, 3, 6))
    noise = torch.randn(2, 3, 30)
    out = samsa_triton_module.samsa_candidate_scores(*inputs, noise=noise,
                                                     eager=_eager_scores(inputs[7], noise))
    grad = torch.randn_like(out)
    kernels = _gradients(out, inputs, grad, retain_graph=True)
    monkeypatch.setattr(samsa_triton_module, "_scores_backward", fail_to_launch)
    fallen_back = falls_back(switch, lambda: _gradients(out, inputs, grad))
    for got, want in zip(fallen_back, kernels, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_noise_of_another_shape_or_dtype_is_refused():
    inputs = _score_inputs(2, 9, 16, 2, 4)
    for bad in (torch.randn(2, 2, 8), torch.randn(2, 2, 9, dtype=torch.float64)):
        with pytest.raises(ValueError, match="noise must be float32 of shape"):
            samsa_triton_module.samsa_candidate_scores(*inputs, noise=bad)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_the_module_training_with_the_score_kernels_equals_it_without(monkeypatch, mode):
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=4, mode=mode)
    x = torch.randn(3, 21, 32, requires_grad=True)
    mask = torch.rand(3, 21) > 0.3
    mask[:, 0] = True
    leaves = [x, *layer.parameters()]

    def step():
        torch.manual_seed(11)  # the same Gumbel noise on both paths
        out = layer(x, padding_mask=mask)
        return out, torch.autograd.grad(out.square().sum(), leaves, allow_unused=True)

    eager, eager_grads = step()
    allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    calls = []
    original = samsa_triton_module.samsa_candidate_scores
    monkeypatch.setattr("filterformer.attention.samsa.samsa_candidate_scores",
                        lambda *a, **k: calls.append(k["noise"]) or original(*a, **k))
    fast, fast_grads = step()
    assert len(calls) == 1 and calls[0] is not None, "the score kernels did not take the noise"
    torch.testing.assert_close(fast, eager, rtol=1e-5, atol=1e-6)
    for got, want in zip(fast_grads, eager_grads, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


#: The kernels that add into shared sums with float32 atomics (run-to-run order).
ATOMIC_KERNELS = {"samsa_scatter_candidates", "samsa_sample_backward"}


def check_deterministic_backward(monkeypatch, mode: str, device: torch.device,
                                 allow: Callable[[], None], *, warn_only: bool = False):
    """A SAMSA training step launches the atomic kernels, and with torch's deterministic
    algorithms on (``warn_only`` as torch takes it; the setting is restored after) its backward
    does not, with the gradients of the eager step; its forward kernels still run. ``allow()``
    lets the kernels run on ``device``. Shared with the CUDA tier."""
    # h·2k = 16 rows a head exceed N = 12: the candidates are gathered, by the kernel.
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=4, mode=mode).to(device)
    x = torch.randn(3, 12, 32, device=device, requires_grad=True)
    leaves = [x, *layer.parameters()]
    launched = record_launches(monkeypatch, samsa_triton_module)

    def step():
        launched.clear()
        torch.manual_seed(5)  # the same Gumbel noise on every path
        out = layer(x)
        return torch.autograd.grad(out.square().sum(), leaves, allow_unused=True)

    monkeypatch.setattr(samsa_triton_module.SWITCH, "failed", True)  # eager
    eager = step()
    allow()
    step()
    assert set(launched) >= ATOMIC_KERNELS, launched
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    try:
        found = step()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    assert "samsa_gather_candidates" in launched and not ATOMIC_KERNELS & set(launched), launched
    for got, want in zip(found, eager, strict=True):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_deterministic_algorithms_keep_the_atomic_kernels_out_of_the_backward(monkeypatch,
                                                                             mode):
    check_deterministic_backward(
        monkeypatch, mode, torch.device("cpu"),
        lambda: allow_kernels(monkeypatch, samsa_triton_module.SWITCH),
    )


def eager_candidates(k, v, support_rows, index):
    """The candidates at ``index`` by torch operations: tokens' keys and values, then the
    supports' rows."""
    batch = k.shape[0]
    rows = torch.cat([torch.cat([k, v], dim=-1),
                      support_rows.to(k.dtype).expand(batch, -1, -1, -1)], dim=-2)
    return rows.gather(-2, index[..., None].expand(-1, -1, -1, rows.shape[-1]))


def _gather_inputs(batch=3, heads=2, length=29, dim=24, supports=12, count=16):
    k, v = (torch.randn(batch, heads, length, dim, requires_grad=True) for _ in range(2))
    support_rows = torch.randn(heads, supports, 2 * dim, requires_grad=True)
    index = torch.stack([torch.stack([torch.randperm(length + supports)[:count]
                                      for _ in range(heads)]) for _ in range(batch)])
    return k, v, support_rows, index


def test_the_gather_kernels_equal_the_gathered_rows_and_their_gradients_in_float64():
    k, v, support_rows, index = _gather_inputs()
    leaves = [k, v, support_rows]
    out = samsa_triton_module.samsa_gathered_candidates(k, v, support_rows, index,
                                                        torch.float32, eager_candidates)
    doubles = [x.detach().double().requires_grad_() for x in leaves]
    reference = eager_candidates(*doubles, index)
    assert out.shape == reference.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference)
    grad = torch.randn_like(reference)
    found = torch.autograd.grad(out, leaves, grad.float())
    # The supports' gradient sums over the samples that picked them.
    for got, want in zip(found, torch.autograd.grad(reference, doubles, grad), strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


def test_second_derivatives_through_the_gather_go_through_the_eager_rows():
    k, v, support_rows, index = _gather_inputs()
    leaves = [k, v, support_rows]

    def curvature(gather):
        out = gather(*leaves, index)
        grads = torch.autograd.grad(out.square().sum(), leaves, create_graph=True)
        return torch.autograd.grad(sum((g.square() * torch.arange(g.shape[-1])).sum()
                                       for g in grads), leaves)

    fast = curvature(lambda *a: samsa_triton_module.samsa_gathered_candidates(
        *a, torch.float32, eager_candidates))
    for got, want in zip(fast, curvature(eager_candidates), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_a_training_step_with_the_gather_kernels_equals_it_without(monkeypatch, mode):
    torch.manual_seed(0)
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=6, mode=mode)
    x = torch.randn(3, 21, 32)
    mask = torch.rand(3, 21) > 0.3
    mask[:, 0] = True

    def step():
        torch.manual_seed(1)  # the same Gumbel noise
        layer.zero_grad()
        out = layer(x, padding_mask=mask)
        out.square().sum().backward()
        return [out.detach(), *(p.grad.clone() for p in layer.parameters())]

    eager = step()
    allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    calls = []
    original = samsa_triton_module.samsa_gathered_candidates
    monkeypatch.setattr("filterformer.attention.samsa.samsa_gathered_candidates",
                        lambda *a: calls.append(1) or original(*a))
    fast = step()
    assert calls, "the gather kernels were not used"
    for got, want in zip(fast, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def _projected_keys_and_values(batch=2, heads=3, length=23, dim=16):
    """Keys and values as the attention base splits them from a ``(B, N, 3·h·d)`` projection:
    ``(B, h, N, d)`` views, heads inside tokens in memory."""
    projection = torch.randn(batch, length, 3 * heads * dim, requires_grad=True)
    _, k, v = (t.view(batch, length, heads, dim).transpose(1, 2)
               for t in projection.chunk(3, dim=-1))
    return k, v


@pytest.mark.parametrize("layout", ["projected", "last axis strided"])
def test_the_scattered_gradients_of_keys_and_values_keep_their_layout_and_values(layout):
    k, v = _projected_keys_and_values()
    if layout == "last axis strided":  # the kernels need a unit last stride: contiguous then
        k, v = (t.transpose(-1, -2).contiguous().transpose(-1, -2) for t in (k, v))
        assert k.stride(-1) != 1
    support_rows = torch.randn(k.shape[1], 5, 2 * k.shape[-1], requires_grad=True)
    index = torch.stack([torch.stack([torch.randperm(k.shape[2] + 5)[:9]
                                      for _ in range(k.shape[1])]) for _ in range(k.shape[0])])
    out = samsa_triton_module.samsa_gathered_candidates(k, v, support_rows, index,
                                                        torch.float32, eager_candidates)
    grad = torch.randn_like(out)
    found = torch.autograd.grad(out, [k, v], grad)
    doubles = [x.detach().double().requires_grad_() for x in (k, v, support_rows)]
    expected = torch.autograd.grad(eager_candidates(*doubles, index), doubles[:2], grad.double())
    for got, want in zip(found, expected, strict=True):
        torch.testing.assert_close(got.double(), want)
        assert got.stride(-1) == 1
        if layout == "projected":  # (B, N, h, d) in memory, as the projection's gradient is
            assert got.transpose(1, 2).is_contiguous(), got.stride()


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_a_training_step_on_the_kernels_copies_no_gradient_of_the_sampled_rows(monkeypatch,
                                                                              mode):
    """The keys' and values' gradients reach the projection without a copy to its layout, and
    the soft sample's two blocks of rows take one concatenation, not two zero-filled slices."""
    torch.manual_seed(0)
    layer = build_attention("samsa", dim=32, num_heads=2, num_samples=6, mode=mode)
    allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    launched = record_launches(monkeypatch, samsa_triton_module)
    out = layer(torch.randn(3, 21, 32))
    with OperationCounts() as counts:
        out.square().sum().backward()
    assert "samsa_scatter_candidates" in launched, launched
    assert counts.computed["clone"] == 0 and counts.computed["contiguous"] == 0, counts.computed
    assert counts.computed["slice_backward"] == (1 if mode == "hard" else 0), counts.computed


def test_a_failure_of_the_scatter_kernel_takes_the_eager_gradients(monkeypatch):
    k, v, support_rows, index = _gather_inputs()
    leaves = [k, v, support_rows]
    expected = torch.autograd.grad(eager_candidates(*leaves, index).sum(), leaves)
    switch = allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    out = samsa_triton_module.samsa_gathered_candidates(k, v, support_rows, index,
                                                        torch.float32, eager_candidates)
    gather, _ = samsa_triton_module._gather_kernels()

    def scatter_broken():
        return gather, fail_to_launch

    monkeypatch.setattr(samsa_triton_module, "_gather_kernels", scatter_broken)
    found = falls_back(switch, lambda: torch.autograd.grad(out.sum(), leaves))
    for got, want in zip(found, expected, strict=True):
        torch.testing.assert_close(got, want)


def _straight_through_inputs(batch=2, heads=3, count=37, width=40):
    grad, x_top, x_bot = (torch.randn(batch, heads, count, width) for _ in range(3))
    z = torch.randn(batch, heads, 2 * count) * 2
    z[0, 0, -1] = torch.finfo(torch.float32).min  # a padded runner-up
    return grad, x_top, x_bot, z


@pytest.mark.parametrize(("count", "width", "temperature"), [(37, 40, 0.7), (8, 16, 1.0),
                                                             (70, 128, 2.0)])
def test_the_straight_through_kernel_equals_the_written_out_gradient_in_float64(count, width,
                                                                               temperature):
    from filterformer.functional.sampling import _straight_through_scores

    inputs = _straight_through_inputs(count=count, width=width)
    out = samsa_triton_module.straight_through_score_gradient(*inputs, temperature)
    expected = _straight_through_scores(*(t.double() for t in inputs), temperature)
    assert out.shape == expected.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize(("grad_dtype", "rows_dtype"), [
    (torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
    (torch.float32, torch.bfloat16),  # a float32 gradient is not rounded to the rows' precision
])
def test_the_scores_gradient_of_half_precision_rows_is_exact_products_in_float32(
    grad_dtype, rows_dtype, soft
):
    """Where the sample's gradient and the rows share a half precision, ``G·X_bot`` runs in it
    (on a GPU, on tensor cores): products of half-precision numbers are exact in float32, so the
    scores' gradient still equals the float64 one of the same numbers."""
    from filterformer.functional.sampling import _straight_through_scores

    grad, x_top, x_bot, z = _straight_through_inputs(count=45, width=64)
    grad = (grad * 3).to(grad_dtype)
    x_top, x_bot = x_top.to(rows_dtype), x_bot.to(rows_dtype)
    found = samsa_triton_module._sample_backward(grad, x_top, x_bot, z, 0.7, soft=soft)[0]
    expected = _straight_through_scores(*(t.double() for t in (grad, x_top, x_bot, z)), 0.7)
    torch.testing.assert_close(found.double(), expected, rtol=1e-4, atol=1e-5)


def test_hard_sampling_with_the_straight_through_kernel_equals_it_without(monkeypatch):
    from filterformer.functional import differentiable_topk

    scores = (torch.randn(2, 3, 40) * 2).requires_grad_()
    candidates = torch.randn(2, 3, 40, 24, requires_grad=True)

    def gradients():
        sampled = differentiable_topk(scores, candidates, 12, mode="hard", temperature=0.5)
        return torch.autograd.grad((sampled * torch.arange(24)).sum(), [scores, candidates])

    eager = gradients()
    allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    calls = []
    original = samsa_triton_module.straight_through_score_gradient
    monkeypatch.setattr("filterformer.functional.sampling.straight_through_score_gradient",
                        lambda *a: calls.append(1) or original(*a))
    fast = gradients()
    assert calls, "the kernel was not used"
    for got, want in zip(fast, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Second derivatives: the written-out gradient, with its graph, not the kernel.
    calls.clear()
    sampled = differentiable_topk(scores, candidates, 12, mode="hard")
    (grad,) = torch.autograd.grad((sampled * candidates[..., :12, :]).sum(), [scores],
                                  create_graph=True)
    grad.square().sum().backward()
    assert calls == [] and candidates.grad is not None


def test_a_straight_through_kernel_failure_takes_the_written_out_gradient(monkeypatch):
    from filterformer.functional import differentiable_topk

    scores = torch.randn(2, 3, 40, requires_grad=True)
    candidates = torch.randn(2, 3, 40, 24)
    sampled = differentiable_topk(scores, candidates, 12, mode="hard")
    grad = torch.randn_like(sampled)
    (expected,) = torch.autograd.grad(sampled, [scores], grad, retain_graph=True)
    switch = allow_kernels(monkeypatch, samsa_triton_module.SWITCH)

    monkeypatch.setattr(samsa_triton_module, "_sample_kernels", fail_to_launch)
    (found,) = falls_back(switch, lambda: torch.autograd.grad(sampled, [scores], grad))
    torch.testing.assert_close(found, expected)


def _soft_reference(x_top, x_bot, z, temperature):
    """The soft sample ``keep ⊙ X_top + mix @ X_bot`` written out (float64 inputs stay so)."""
    from filterformer.functional import sampling_mixture

    k = x_top.shape[-2]
    keep, mix = sampling_mixture(z[..., :k], z[..., k:], temperature)
    return keep.unsqueeze(-1) * x_top + mix @ x_bot


@pytest.mark.parametrize(("count", "width", "temperature"), [(37, 40, 0.7), (8, 16, 1.0),
                                                             (70, 128, 2.0)])
def test_the_soft_sample_kernels_equal_the_written_out_sample_in_float64(count, width,
                                                                        temperature):
    _, x_top, x_bot, z = _straight_through_inputs(count=count, width=width)
    leaves = [x.requires_grad_() for x in (x_top, x_bot, z)]
    out = samsa_triton_module.soft_sample(*leaves, temperature, torch.float32,
                                          lambda *x: _soft_reference(*x, temperature))
    doubles = [x.detach().double().requires_grad_() for x in leaves]
    reference = _soft_reference(*doubles, temperature)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(reference)
    found = torch.autograd.grad(out, leaves, grad.float())
    for got, want in zip(found, torch.autograd.grad(reference, doubles, grad), strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


def test_soft_sampling_with_the_kernels_equals_it_without_and_falls_back(monkeypatch):
    from filterformer.functional import differentiable_topk

    scores = (torch.randn(2, 3, 40) * 2).requires_grad_()
    candidates = torch.randn(2, 3, 40, 24, requires_grad=True)

    def sample_and_gradients(**options):
        sampled = differentiable_topk(scores, candidates, 12, mode="soft", temperature=0.5)
        weights = torch.arange(24.0)
        return [sampled, *torch.autograd.grad((sampled * weights).sum(), [scores, candidates],
                                              **options)]

    eager = sample_and_gradients()
    switch = allow_kernels(monkeypatch, samsa_triton_module.SWITCH)
    calls = []
    original = samsa_triton_module.soft_sample
    monkeypatch.setattr("filterformer.functional.sampling.soft_sample",
                        lambda *a: calls.append(1) or original(*a))
    fast = sample_and_gradients()
    assert calls, "the kernels were not used"
    for got, want in zip(fast, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Second derivatives go through the written-out sample, with its graph.
    (_, grad_scores, _) = sample_and_gradients(create_graph=True)
    (again,) = torch.autograd.grad(grad_scores.square().sum(), [candidates])
    monkeypatch.setattr(switch, "failed", True)  # the eager path throughout
    (_, eager_scores, _) = sample_and_gradients(create_graph=True)
    (expected,) = torch.autograd.grad(eager_scores.square().sum(), [candidates])
    torch.testing.assert_close(again, expected, rtol=1e-5, atol=1e-6)
    # A kernel that fails warns once and the eager sample is taken.
    monkeypatch.setattr(switch, "failed", False)
    monkeypatch.setattr(samsa_triton_module, "_sample_kernels", fail_to_launch)
    fallen_back = falls_back(switch, sample_and_gradients)
    for got, want in zip(fallen_back, eager, strict=True):
        torch.testing.assert_close(got, want)
