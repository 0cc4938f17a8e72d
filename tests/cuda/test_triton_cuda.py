"""The Triton kernels compiled for the GPU: AGF's layer (forward and backward), SAMSA's
candidate scores (forward and backward), gather, soft sample (forward and backward), sampled
attention and straight-through score gradient, and GFSA's combination against float64
references on the CPU, masks and gradients included, and the modules taking them on CUDA (and
not under ``torch.func`` transforms, nor, for those that sum by atomics, under deterministic
algorithms)."""

from __future__ import annotations

import pytest
import torch

from filterformer.attention import build_attention
from filterformer.attention import samsa as samsa_module
from filterformer.functional import agf_layer, gfsa
from filterformer.functional import agf_triton as agf_triton_module
from filterformer.functional import samsa_triton as samsa_triton_module
from filterformer.functional.agf_triton import agf_triton_layer
from filterformer.functional.gfsa_triton import gfsa_triton_combine
from filterformer.functional.sampling import _straight_through_scores
from filterformer.functional.samsa_triton import (
    samsa_candidate_scores,
    samsa_gathered_candidates,
    samsa_sampled_attention,
    soft_sample,
    straight_through_score_gradient,
)

from ..functional.test_agf_triton import (
    CASES,
    _inputs,
    _relative,
    _run,
    assert_kernels_equal_the_eager_layer,
)
from ..functional.test_gfsa_triton import _terms, closed_form, gfsa_module
from ..functional.test_samsa_triton import (
    _DIFFERENTIABLE,
    _float64_leaves,
    _gather_inputs,
    _gradients,
    _score_inputs,
    _soft_reference,
    _straight_through_inputs,
    _with_gradients,
    check_deterministic_backward,
    eager_candidates,
    float32_supports_and_half_tokens,
    gathered_attention,
    reference_scores,
)
from ..functional.test_triton_support import METHODS as TRANSFORM_METHODS
from ..functional.test_triton_support import check_per_sample_gradients

pytestmark = [
    pytest.mark.cuda,
    # A kernel that fails to compile would otherwise fall back with a warning, and pass.
    pytest.mark.filterwarnings("error:filterformer.*Triton kernels failed:RuntimeWarning"),
]


def _spy(monkeypatch, module, name):
    """Count the calls of ``module.name``."""
    calls = []
    original = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def _on(device, tensors, mask):
    return [t.to(device) for t in tensors], None if mask is None else mask.to(device)


@pytest.mark.parametrize("case", CASES)
def test_agf_kernels_equal_float64(cuda_device, case):
    assert_kernels_equal_the_eager_layer(case, cuda_device)


def test_agf_bf16_products_on_the_gpu_round_as_the_eager_layer(cuda_device):
    tensors, mask = _inputs(4, 12, 300, 64, 64, 5, masked=True)
    on_gpu, gpu_mask = _on(cuda_device, tensors, mask)
    grad_out = torch.randn(4, 12, 300, 64, device=cuda_device)
    out, reg, grads = _run(agf_triton_layer, on_gpu, gpu_mask, grad_out, torch.float32,
                           products_dtype=torch.bfloat16)
    ref_out, ref_reg, ref_grads = _run(agf_layer.eager, tensors, mask, grad_out.cpu(),
                                       torch.float64)
    assert out.dtype == torch.bfloat16
    assert _relative(out.cpu(), ref_out) < 3e-2
    assert abs(reg.item() - ref_reg.item()) < 3e-2
    for got, want in zip(grads, ref_grads, strict=True):
        assert _relative(got.cpu(), want) < 3e-2


def test_the_agf_module_takes_the_kernels_on_cuda(cuda_device, monkeypatch):
    calls = _spy(monkeypatch, agf_triton_module, "agf_triton_layer")
    layer = build_attention("agf", dim=64, num_heads=4).to(cuda_device)
    reference = build_attention("agf", dim=64, num_heads=4).double()
    reference.load_state_dict(layer.state_dict())
    x = torch.randn(2, 10, 64, dtype=torch.float64)
    mask = torch.rand(2, 10) > 0.3
    mask[:, 0] = True
    x_gpu = x.float().to(cuda_device).requires_grad_()
    out = layer(x_gpu, padding_mask=mask.to(cuda_device))
    x_ref = x.clone().requires_grad_()
    ref = reference(x_ref, padding_mask=mask)
    assert calls, "the module did not run the kernels"
    assert _relative(out.detach().cpu(), ref.detach()) < 1e-5
    grad_out = torch.randn(2, 10, 64, dtype=torch.float64)
    out.backward(grad_out.float().to(cuda_device))
    ref.backward(grad_out)
    assert _relative(x_gpu.grad.cpu(), x_ref.grad) < 1e-5
    for (name, param), ref_param in zip(layer.named_parameters(), reference.parameters(),
                                        strict=True):
        assert _relative(param.grad.cpu(), ref_param.grad) < 1e-4, name


def test_agf_trains_after_an_evaluation_under_inference_mode(cuda_device):
    """The kernels' recursion table, cached per device, made first under inference mode (as a
    validation loop in ``torch.inference_mode()`` does), still serves a training step."""
    agf_triton_module._device_recursion.cache_clear()
    layer = build_attention("agf", dim=64, num_heads=4, K=4).to(cuda_device)
    x = torch.randn(2, 10, 64, device=cuda_device)
    with torch.inference_mode():
        evaluated = layer.eval()(x)
    out = layer.train()(x.clone().requires_grad_())
    out.square().sum().backward()
    assert torch.isfinite(evaluated).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_samsa_kernel_equals_float64(cuda_device, dtype):
    batch, heads, length, dim, supports, samples = 3, 4, 777, 64, 512, 256
    q, k, v = (torch.randn(batch, heads, length, dim) for _ in range(3))
    sk, sv = torch.randn(heads, supports, dim), torch.randn(heads, supports, dim)
    index = torch.stack([torch.stack([torch.randperm(length + supports)[:samples]
                                      for _ in range(heads)]) for _ in range(batch)])
    out = samsa_sampled_attention(*(t.to(cuda_device, dtype) for t in (q, k, v, sk, sv)),
                                  index.to(cuda_device), 0.125)
    ref = gathered_attention(*(t.to(dtype) for t in (q, k, v, sk, sv)), index, 0.125)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert ((out.cpu().double() - ref).norm() / ref.norm()).item() < tolerance


def test_samsa_float32_supports_equal_supports_cast_before_the_call(cuda_device):
    # The module passes float32 supports with half-precision tokens; the kernel's rounding to
    # the products' precision is the one torch's cast makes.
    q, k, v, rows, index = (t.to(cuda_device) for t in float32_supports_and_half_tokens())
    out = samsa_sampled_attention(q, k, v, rows[..., :16], rows[..., 16:], index, 0.25)
    cast = rows.to(torch.bfloat16)
    expected = samsa_sampled_attention(q, k, v, cast[..., :16].contiguous(),
                                       cast[..., 16:].contiguous(), index, 0.25)
    assert torch.equal(out, expected)


def test_samsa_evaluation_on_cuda_takes_the_kernel_and_equals_float64(cuda_device, monkeypatch):
    calls = _spy(monkeypatch, samsa_module, "samsa_sampled_attention")
    layer = build_attention("samsa", dim=64, num_heads=4, num_samples=16, mode="hard").eval()
    reference = build_attention("samsa", dim=64, num_heads=4, num_samples=16, mode="hard")
    reference.load_state_dict(layer.state_dict())
    reference = reference.double().eval()
    layer = layer.to(cuda_device)
    x = torch.randn(2, 50, 64)
    mask = torch.rand(2, 50) > 0.3
    mask[:, 0] = True
    with torch.no_grad():
        out = layer(x.to(cuda_device), padding_mask=mask.to(cuda_device))
        ref = reference(x.double(), padding_mask=mask)
    assert calls, "the module did not run the kernel"
    assert _relative(out.cpu(), ref) < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gfsa_combination_kernels_equal_float64(cuda_device, dtype):
    terms, weights = _terms(4, 16, 1000, 64, dtype)
    leaves = [*terms, *weights]
    on_gpu = [x.detach().to(cuda_device).requires_grad_() for x in leaves]
    out = gfsa_triton_combine(*on_gpu[:3], *on_gpu[3:], -1, 2, dtype)
    reference_leaves = [x.detach().double().requires_grad_() for x in leaves]
    reference = closed_form(*reference_leaves, 3, False)
    grad = torch.randn_like(reference)
    found = torch.autograd.grad(out, on_gpu, grad.to(cuda_device, dtype))
    expected = torch.autograd.grad(reference, reference_leaves, grad)
    # bfloat16: the upstream gradient is rounded too; float32: the coefficients' gradients are
    # sums of 256k products.
    tolerance = 1e-6 if dtype == torch.float32 else 1e-2
    assert out.dtype == dtype and _relative(out.cpu(), reference) < tolerance
    for got, want, leaf in zip(found, expected, leaves, strict=True):
        assert got.dtype == leaf.dtype
        assert _relative(got.cpu(), want) < max(tolerance, 1e-5 if leaf.dim() == 1 else 0)


def test_gfsa_on_cuda_takes_the_kernels_and_equals_float64(cuda_device, monkeypatch):
    calls = _spy(monkeypatch, gfsa_module, "gfsa_triton_combine")
    q, k, v = (torch.randn(2, 4, 300, 64) for _ in range(3))
    weights = [torch.randn(4) for _ in range(3)]
    mask = torch.rand(2, 300) > 0.3
    mask[:, 0] = True
    leaves = [q, k, v, *weights]
    on_gpu = [x.to(cuda_device).requires_grad_() for x in leaves]
    reference_leaves = [x.double().requires_grad_() for x in leaves]
    out = gfsa(*on_gpu, K=3, key_padding_mask=mask.to(cuda_device))
    ref = gfsa(*reference_leaves, K=3, key_padding_mask=mask)
    assert calls, "gfsa did not run the kernels"
    assert _relative(out.cpu(), ref) < 1e-5
    grad = torch.randn_like(ref)
    found = torch.autograd.grad(out, on_gpu, grad.float().to(cuda_device))
    for got, want in zip(found, torch.autograd.grad(ref, reference_leaves, grad), strict=True):
        assert _relative(got.cpu(), want) < 1e-4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_samsa_candidate_scores_equal_float64(cuda_device, dtype):
    # BERT's width and heads; under autocast x and the MLP's output are bfloat16.
    inputs = _score_inputs(4, 1000, 768, 12, 512)
    inputs[0], inputs[1] = inputs[0].to(dtype), inputs[1].to(dtype)
    out = samsa_candidate_scores(*(t.to(cuda_device) if isinstance(t, torch.Tensor) else t
                                   for t in inputs))
    reference = reference_scores(*inputs)
    real = torch.cat([inputs[-1], torch.ones(4, 512, dtype=torch.bool)], dim=1)[:, None, :]
    assert out.dtype == torch.float32
    assert torch.equal(out.cpu() == torch.finfo(torch.float32).min, ~real.expand_as(out))
    got, want = out.cpu().double()[real.expand_as(out)], reference[real.expand_as(out)]
    assert _relative(got, want) < 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_samsa_candidate_score_gradients_equal_float64(cuda_device, dtype):
    # Training's scores at BERT's width and heads, with noise laid out as the module draws it.
    inputs = _score_inputs(4, 1000, 768, 12, 512)
    inputs[0], inputs[1] = inputs[0].to(dtype), inputs[1].to(dtype)
    noise = torch.randn(4, 1000, 12).transpose(1, 2)
    on_gpu = _with_gradients([t.to(cuda_device) if isinstance(t, torch.Tensor) else t
                              for t in inputs])
    doubles = _float64_leaves(inputs)
    out = samsa_candidate_scores(*on_gpu, noise=noise.to(cuda_device))
    reference = reference_scores(*doubles, noise=noise)
    grad = torch.randn(reference.shape, dtype=torch.float64)
    found = _gradients(out, on_gpu, grad.float().to(cuda_device))
    expected = _gradients(reference, doubles, grad)
    assert [g.dtype for g in found[:2]] == [dtype, dtype]
    # float32: sums over 4000 rows; bfloat16: x's and hidden's gradients rounded to 8 bits.
    bound = 1e-5 if dtype == torch.float32 else 1e-2
    for index, got, want in zip(_DIFFERENTIABLE, found, expected, strict=True):
        assert _relative(got.cpu().double(), want) < bound, index


def test_samsa_training_on_cuda_takes_the_score_kernels_and_equals_float64(cuda_device,
                                                                          monkeypatch):
    calls = _spy(monkeypatch, samsa_module, "samsa_candidate_scores")
    layer = build_attention("samsa", dim=64, num_heads=4, num_samples=8, mode="soft",
                            eval_noise=True).eval()  # noise, and no dropout
    reference = build_attention("samsa", dim=64, num_heads=4, num_samples=8, mode="soft",
                                eval_noise=True).double().eval()
    reference.load_state_dict(layer.state_dict())
    layer = layer.to(cuda_device)
    noise = torch.randn(2, 50, 4).transpose(1, 2)
    monkeypatch.setattr(samsa_module, "gumbel_noise",
                        lambda like, dtype=None: noise.to(like.device, dtype or like.dtype))
    x = torch.randn(2, 50, 64)
    mask = torch.rand(2, 50) > 0.3
    mask[:, 0] = True
    out = layer(x.to(cuda_device), padding_mask=mask.to(cuda_device))
    ref = reference(x.double(), padding_mask=mask)
    assert calls, "the module did not run the score kernels"
    assert _relative(out.detach().cpu()[mask], ref.detach()[mask]) < 1e-5
    out[mask.to(cuda_device)].square().sum().backward()
    ref[mask].square().sum().backward()
    for (name, param), ref_param in zip(layer.named_parameters(), reference.parameters(),
                                        strict=True):
        assert (param.grad is None) == (ref_param.grad is None), name
        if ref_param.grad is not None:
            assert _relative(param.grad.cpu(), ref_param.grad) < 1e-4, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_samsa_gather_kernels_equal_float64(cuda_device, dtype):
    k, v, support_rows, index = _gather_inputs(batch=8, heads=12, length=1000, dim=64,
                                               supports=512, count=512)
    leaves = [k, v, support_rows]
    on_gpu = [x.detach().to(cuda_device, dtype if x.dim() == 4 else torch.float32)
              .requires_grad_() for x in leaves]
    out = samsa_gathered_candidates(*on_gpu, index.to(cuda_device), dtype, eager_candidates)
    doubles = [x.detach().to(dtype).double().requires_grad_() for x in leaves]
    reference = eager_candidates(*doubles, index)
    tolerance = 0 if dtype == torch.float32 else 4e-3  # bf16: supports rounded from float32
    assert out.dtype == dtype and _relative(out.cpu(), reference) <= tolerance
    grad = torch.randn_like(reference).to(dtype)
    found = torch.autograd.grad(out, on_gpu, grad.to(cuda_device))
    expected = torch.autograd.grad(reference, doubles, grad.double())
    for got, want in zip(found, expected, strict=True):
        assert _relative(got.cpu(), want) < 1e-6  # stores, and float32 sums over 8 samples


def test_samsa_training_on_cuda_takes_the_gather_kernels_and_equals_float64(cuda_device,
                                                                           monkeypatch):
    calls = _spy(monkeypatch, samsa_module, "samsa_gathered_candidates")
    layer = build_attention("samsa", dim=64, num_heads=4, num_samples=16, mode="hard",
                            eval_noise=False)
    reference = build_attention("samsa", dim=64, num_heads=4, num_samples=16, mode="hard")
    reference.load_state_dict(layer.state_dict())
    layer, reference = layer.to(cuda_device).eval(), reference.double().eval()
    x = torch.randn(2, 50, 64)
    out = layer(x.to(cuda_device))  # evaluation with gradients: the gather, not the attention
    ref = reference(x.double())
    assert calls, "the module did not run the gather kernels"
    assert _relative(out.detach().cpu(), ref.detach()) < 1e-5
    out.square().sum().backward()
    ref.square().sum().backward()
    for (name, param), ref_param in zip(layer.named_parameters(), reference.parameters(),
                                        strict=True):
        # Evaluation's top-k gives the scores no gradient.
        assert (param.grad is None) == (ref_param.grad is None), name
        if ref_param.grad is not None:
            assert _relative(param.grad.cpu(), ref_param.grad) < 1e-4, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_samsa_straight_through_kernel_equals_float64(cuda_device, dtype):
    """Half-precision gradients and rows take tensor cores for ``G·X_bot``: exact products of
    the same numbers, accumulated in float32."""
    grad, x_top, x_bot, z = _straight_through_inputs(batch=8, heads=12, count=256, width=128)
    inputs = [*(t.to(dtype) for t in (grad, x_top, x_bot)), z]
    out = straight_through_score_gradient(*(t.to(cuda_device) for t in inputs), 0.5)
    expected = _straight_through_scores(*(t.double() for t in inputs), 0.5)
    assert out.dtype == torch.float32 and _relative(out.cpu(), expected) < 1e-5


def test_samsa_soft_sample_kernels_equal_float64(cuda_device):
    _, x_top, x_bot, z = _straight_through_inputs(batch=8, heads=12, count=256, width=128)
    on_gpu = [x.to(cuda_device).requires_grad_() for x in (x_top, x_bot, z)]
    out = soft_sample(*on_gpu, 0.5, torch.float32, lambda *x: _soft_reference(*x, 0.5))
    doubles = [x.double().requires_grad_() for x in (x_top, x_bot, z)]
    reference = _soft_reference(*doubles, 0.5)
    assert _relative(out.detach().cpu(), reference.detach()) < 1e-5
    grad = torch.randn_like(reference)
    found = torch.autograd.grad(out, on_gpu, grad.float().to(cuda_device))
    for got, want in zip(found, torch.autograd.grad(reference, doubles, grad), strict=True):
        assert _relative(got.cpu(), want) < 1e-5


@pytest.mark.parametrize("method", sorted(TRANSFORM_METHODS))
def test_per_sample_gradients_by_vmap_on_cuda_equal_one_backward_per_sample(cuda_device, method,
                                                                             monkeypatch):
    """``torch.func`` transforms take the eager operations (the kernels' Functions have no
    batching rules); one backward per sample takes the kernels."""
    check_per_sample_gradients(monkeypatch, method, cuda_device)


@pytest.mark.parametrize("mode", ["hard", "soft"])
@pytest.mark.filterwarnings("ignore::UserWarning")  # warn_only: torch's own nondeterminism
def test_samsa_backward_under_deterministic_algorithms_takes_no_atomic_kernel(cuda_device, mode,
                                                                              monkeypatch):
    """With torch's deterministic algorithms on (warn only: cuBLAS needs its workspace setting
    before CUDA starts), SAMSA's backward runs no kernel that sums by float32 atomics."""
    check_deterministic_backward(
        monkeypatch, mode, cuda_device,
        lambda: monkeypatch.setattr(samsa_triton_module.SWITCH, "failed", False), warn_only=True,
    )
