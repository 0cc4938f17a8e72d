"""The fused regions through inductor on CUDA (Triton kernels) equal their eager functions on the
same device, values and gradients, in one graph for two sequence lengths: AGF's layer (float32
products, and bfloat16 products as under autocast), GFSA's combination (where its Triton kernels
cannot serve) and SAMSA's score norm."""

import pytest
import torch

from filterformer.functional import (
    add_rms_normed,
    agf_coefficients,
    agf_layer,
    gfsa_combine,
    gfsa_triton,
)

from ..functional.test_fused import regions_compiled_by
from .parity import assert_relative_close

pytestmark = pytest.mark.cuda


@pytest.fixture
def inductor_regions(monkeypatch):
    """Every region compiled with inductor whatever its size, counting the graphs."""
    yield from regions_compiled_by("inductor", monkeypatch)


def _leaves(device, *shapes):
    return [torch.randn(*shape, device=device, requires_grad=True) for shape in shapes]


def _same(region, leaves, make_args, loss, tolerance=1e-5):
    out = loss(region(*make_args()))
    fused_grads = torch.autograd.grad(out, leaves)
    ref = loss(region.eager(*make_args()))
    ref_grads = torch.autograd.grad(ref, leaves)
    assert_relative_close(out, ref, "value", rtol=tolerance)
    for index, (got, want) in enumerate(zip(fused_grads, ref_grads, strict=True)):
        assert_relative_close(got, want, f"gradient {index}", rtol=tolerance)


@pytest.mark.parametrize("products", [None, torch.bfloat16])
def test_agf_layer(products, cuda_device, inductor_regions):
    for n in (int(torch.randint(5, 40, ())), int(torch.randint(40, 90, ()))):
        q, k, v, logits = leaves = _leaves(cuda_device, *[(2, 3, n, 8)] * 4)
        p = torch.randn(3, device=cuda_device, requires_grad=True)
        mask = torch.rand(2, n, device=cuda_device) > 0.3
        mask[:, 0] = True

        def make_args(q=q, k=k, v=v, logits=logits, p=p, mask=mask):
            return q, k, v, logits, agf_coefficients(p), mask

        def region(*a, products=products):
            return agf_layer(*a, products_dtype=products)

        region.eager = lambda *a, products=products: agf_layer.eager(*a, products_dtype=products)
        # bfloat16 products round both paths alike only up to their own rounding.
        _same(region, [*leaves, p], make_args, lambda r: r[0].float().pow(2).sum() + r[1],
              1e-5 if products is None else 2e-2)
    assert inductor_regions.frame_count == 1


def test_gfsa_combine(cuda_device, inductor_regions, monkeypatch):
    # On CUDA the combination is Triton's kernels (test_triton_cuda.py); the region serves where
    # they cannot (no Triton, after a kernel's failure), as here.
    monkeypatch.setattr(gfsa_triton.SWITCH, "failed", True)
    for n in (int(torch.randint(5, 40, ())), int(torch.randint(40, 90, ()))):
        values, first, last = _leaves(cuda_device, *[(2, 3, n, 8)] * 3)
        w = _leaves(cuda_device, (3,), (3,), (3,))
        out = gfsa_combine(values, first, last, *w, K=3)
        view = [c.view(1, 3, 1, 1) for c in w]
        ref = view[0] * values + view[1] * first + view[2] * (first + 2 * (last - first))
        assert_relative_close(out, ref, "value", rtol=1e-5)
        grads = torch.autograd.grad(out.pow(2).sum(), [values, first, last, *w])
        ref_grads = torch.autograd.grad(ref.pow(2).sum(), [values, first, last, *w])
        for index, (got, want) in enumerate(zip(grads, ref_grads, strict=True)):
            assert_relative_close(got, want, f"gradient {index}", rtol=1e-5)
    assert inductor_regions.frame_count == 1


@pytest.mark.parametrize("out_dtype", [None, torch.bfloat16])
def test_add_rms_normed(out_dtype, cuda_device, inductor_regions):
    for n in (int(torch.randint(5, 40, ())), int(torch.randint(40, 90, ()))):
        x, hidden, weight = leaves = _leaves(cuda_device, (2, n, 16), (2, n, 16), (16,))
        args = (x, hidden, weight, 1e-6, out_dtype)
        _same(add_rms_normed, leaves, lambda args=args: args, lambda r: r.float().pow(2).sum(),
              1e-5 if out_dtype is None else 1e-2)
    assert inductor_regions.frame_count == 1
