"""AGF's Triton kernels equal the eager layer in float64: values, the regulariser and every
gradient, with padding masks, in every basis, across the kernels' chunks, with strided inputs;
half-precision products as the eager layer's; and the module falls back on a kernel failure."""

from __future__ import annotations

import warnings

import pytest
import torch

from filterformer.functional import agf_coefficients, agf_layer
from filterformer.functional import agf_triton as agf_triton_module
from filterformer.functional.agf_triton import (
    agf_layer_for,
    agf_triton_applies,
    agf_triton_layer,
    polynomial_recursion,
)
from filterformer.functional.polynomials import polynomial_basis

from .triton_interpreter import FakeTritonError, allow_kernels, falls_back, interpreter_only

pytestmark = interpreter_only


def _inputs(batch, heads, length, dim, dim_v, order, masked, strided=False):
    if strided:  # q, k and logits as the module's views of one projection
        joint = torch.randn(batch, length, 3, heads, dim)
        q, k, logits = (joint[:, :, i].transpose(1, 2) for i in range(3))
    else:
        q, k, logits = (torch.randn(batch, heads, length, dim) for _ in range(3))
    v = torch.randn(batch, heads, length, dim_v)
    p = torch.randn(order)
    mask = None
    if masked:
        mask = torch.rand(batch, length) > 0.3
        mask[0, 0] = True
        if batch > 1:
            mask[-1] = False  # a sample with no real token
    return [q, k, v, logits, p], mask


def _run(layer, tensors, mask, grad_out, dtype, **options):
    leaves = [t.detach().to(dtype).requires_grad_() for t in tensors]
    out, reg = layer(*leaves[:4], agf_coefficients(leaves[4]), mask, **options)
    loss = (out.to(dtype) * grad_out.to(dtype)).sum()
    if reg is not None:
        loss = loss + 3.0 * reg
    # With K = 0 the filter is 1: the singular values' logits get no gradient (zeros here).
    grads = torch.autograd.grad(loss, leaves, allow_unused=True, materialize_grads=True)
    return out, reg, grads


def _relative(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm().clamp(min=1e-30)).item()


def _assert_equals_the_eager_layer(tensors, mask, grad_out):
    """The Triton layer in float32 against the eager one in float64, by relative norm: output,
    regulariser, every gradient."""
    out, reg, grads = _run(agf_triton_layer, tensors, mask, grad_out, torch.float32)
    ref_out, ref_reg, ref_grads = _run(agf_layer.eager, tensors, mask, grad_out, torch.float64)
    assert _relative(out, ref_out) < 1e-5
    assert abs(reg.item() - ref_reg.item()) < 1e-5
    for got, want in zip(grads, ref_grads, strict=True):
        assert _relative(got, want) < 1e-5


CASES = [  # (B, h, N, d, d_v, K, basis, masked, orthogonality)
    (2, 2, 37, 16, 16, 3, "jacobi", False, True),
    (2, 2, 41, 16, 16, 3, "jacobi", True, True),
    (2, 3, 150, 24, 20, 5, "chebyshev", True, True),
    (1, 2, 70, 64, 64, 2, "monomial", True, False),
    (2, 1, 90, 32, 16, 4, "legendre", False, False),
    (1, 1, 20, 16, 16, 0, "jacobi", True, True),
]


def assert_kernels_equal_the_eager_layer(case: tuple, device: torch.device) -> None:
    """AGF's Triton layer on ``device`` in float32 against the eager layer in float64 on the CPU,
    for one of :data:`CASES`: the output, the regulariser and every gradient."""
    batch, heads, length, dim, dim_v, order, basis, masked, orthogonality = case
    tensors, mask = _inputs(batch, heads, length, dim, dim_v, max(order, 1), masked,
                            strided=dim == 16)
    if order == 0:
        tensors[4] = tensors[4][:0]
    grad_out = torch.randn(batch, heads, length, dim_v)
    options = {"basis": basis, "a": 1.5, "b": 0.5, "orthogonality": orthogonality}
    out, reg, grads = _run(
        agf_triton_layer, [t.to(device) for t in tensors],
        None if mask is None else mask.to(device), grad_out.to(device), torch.float32, **options,
    )
    ref_out, ref_reg, ref_grads = _run(agf_layer.eager, tensors, mask, grad_out, torch.float64,
                                       **options)
    assert out.dtype == torch.float32 and out.shape == ref_out.shape
    assert _relative(out.cpu(), ref_out) < 1e-5
    if orthogonality:
        assert abs(reg.item() - ref_reg.item()) < 1e-5 * max(1.0, abs(ref_reg.item()))
    else:
        assert reg is None and ref_reg is None
    names = ("q", "k", "v", "singular_logits", "p")
    for name, got, want in zip(names, grads, ref_grads, strict=True):
        if want.numel() == 0:
            continue
        if not want.any():
            assert not got.any(), name
            continue
        assert _relative(got.cpu(), want) < 1e-5, name
    if mask is not None and batch > 1:  # the sample without real tokens: no key gradient
        assert grads[1][-1].abs().max() == 0 and grads[2][-1].abs().max() == 0


@pytest.mark.parametrize("case", CASES)
def test_kernels_equal_the_eager_layer_in_float64(case):
    assert_kernels_equal_the_eager_layer(case, torch.device("cpu"))


@pytest.mark.parametrize("products", [torch.bfloat16, torch.float16])
def test_half_precision_products_round_as_the_eager_layer(products):
    tensors, mask = _inputs(2, 2, 50, 16, 16, 3, masked=True)
    grad_out = torch.randn(2, 2, 50, 16)
    out, reg, grads = _run(agf_triton_layer, tensors, mask, grad_out, torch.float32,
                           products_dtype=products)
    ref_out, ref_reg, ref_grads = _run(agf_layer.eager, tensors, mask, grad_out, torch.float64)
    assert out.dtype == products
    # Both round the products' operands to half precision: errors of that size, no larger.
    tolerance = 3e-2 if products == torch.bfloat16 else 5e-3
    assert _relative(out, ref_out) < tolerance
    assert abs(reg.item() - ref_reg.item()) < tolerance
    for got, want in zip(grads, ref_grads, strict=True):
        assert _relative(got, want) < tolerance


def test_half_precision_inputs_give_gradients_in_their_dtype():
    tensors, mask = _inputs(1, 2, 30, 16, 16, 2, masked=True)
    leaves = [t.to(torch.bfloat16).requires_grad_() for t in tensors[:4]]
    out, reg = agf_triton_layer(*leaves, agf_coefficients(tensors[4]), mask,
                                products_dtype=torch.bfloat16)
    (out.float().sum() + reg).backward()
    for leaf in leaves:
        assert leaf.grad.dtype == torch.bfloat16 and leaf.grad.shape == leaf.shape
        assert torch.isfinite(leaf.grad.float()).all()


def test_the_recursion_table_reproduces_every_basis():
    x = torch.rand(50, dtype=torch.float64)
    for basis, a, b in (("jacobi", 1.0, 1.0), ("jacobi", 2.0, -0.5), ("legendre", 0, 0),
                        ("chebyshev", 0, 0), ("monomial", 0, 0)):
        table = polynomial_recursion(4, basis, a, b)
        previous, current, terms = torch.zeros_like(x), torch.ones_like(x), [torch.ones_like(x)]
        for alpha, beta, gamma in table[1:].tolist():
            previous, current = current, (alpha * x + beta) * current - gamma * previous
            terms.append(current)
        torch.testing.assert_close(torch.stack(terms, -1), polynomial_basis(x, 4, basis, a, b))


def test_bad_shapes_are_refused_by_name():
    q = torch.randn(1, 2, 8, 16)
    theta = torch.ones(3)
    with pytest.raises(ValueError, match="singular_logits"):
        agf_triton_layer(q, q, q, q[..., :8], theta)
    with pytest.raises(ValueError, match="v must have shape"):
        agf_triton_layer(q, q, q[:, :, :4], q, theta)
    with pytest.raises(ValueError, match="head widths"):
        wide = torch.randn(1, 1, 4, 256)
        agf_triton_layer(wide, wide, wide, wide, theta)


def test_the_cpu_takes_the_eager_layer():
    q = torch.randn(1, 2, 8, 16)
    assert not agf_triton_applies(q, q, q)


def test_a_kernel_failure_warns_once_and_falls_back(monkeypatch):
    switch = allow_kernels(monkeypatch, agf_triton_module.SWITCH)

    def broken():
        raise FakeTritonError("out of resources")

    monkeypatch.setattr(agf_triton_module, "_kernels", broken)
    tensors, mask = _inputs(1, 2, 12, 16, 16, 2, masked=True)
    args = (*tensors[:4], agf_coefficients(tensors[4]), mask)
    out, reg = falls_back(switch, lambda: agf_layer_for(*args))
    ref_out, ref_reg = agf_layer(*args)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(reg, ref_reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the next call takes the other path quietly
        again, _ = agf_layer_for(*args)
    torch.testing.assert_close(again, ref_out)


def test_a_failure_in_the_backward_pass_warns_and_gives_the_eager_gradients(monkeypatch):
    switch = allow_kernels(monkeypatch, agf_triton_module.SWITCH)
    keys_forward, queries_forward, _, _ = agf_triton_module._kernels()

    class Broken:
        def __getitem__(self, grid):
            def run(*args, **kwargs):
                raise RuntimeError("PassManager::run failed")
            return run

    monkeypatch.setattr(agf_triton_module, "_kernels",
                        lambda: (keys_forward, queries_forward, Broken(), Broken()))
    tensors, mask = _inputs(2, 2, 30, 16, 16, 3, masked=True)
    grad_out = torch.randn(2, 2, 30, 16)
    *_, grads = falls_back(switch, lambda: _run(agf_triton_layer, tensors, mask, grad_out,
                                                torch.float32))
    *_, ref_grads = _run(agf_layer.eager, tensors, mask, grad_out, torch.float64)
    for got, want in zip(grads, ref_grads, strict=True):
        assert _relative(got, want) < 1e-5


def test_a_padded_chunk_inside_a_partly_real_sample():
    """Chunks whose keys are all padding merge with weight 0; a sample real only in its last
    chunk still normalises over its real keys."""
    tensors, _ = _inputs(2, 2, 200, 16, 16, 3, masked=False)
    tensors[1] = tensors[1] * 8
    mask = torch.ones(2, 200, dtype=torch.bool)
    mask[0, 64:192] = False
    mask[1, :192] = False
    grad_out = torch.randn(2, 2, 200, 16)
    _assert_equals_the_eager_layer(tensors, mask, grad_out)


def test_the_output_can_be_changed_in_place():
    tensors, mask = _inputs(1, 2, 20, 16, 16, 2, masked=True)
    out, _ = agf_triton_layer(*tensors[:4], agf_coefficients(tensors[4]), mask)
    doubled = out.clone() * 2
    out.mul_(2)  # as the eager layer's output can be
    torch.testing.assert_close(out, doubled)


def test_second_derivatives_equal_the_eager_layer():
    """A gradient penalty through the layer (``create_graph``): the kernels' backward hands over
    to the eager layer, whose gradients have a graph."""
    tensors, mask = _inputs(1, 2, 20, 16, 16, 2, masked=True)
    weight = torch.randn(20, 16, dtype=torch.float64)

    def penalty(layer, dtype):
        leaves = [t.detach().to(dtype).requires_grad_() for t in tensors]
        out, reg = layer(*leaves[:4], agf_coefficients(leaves[4]), mask)
        loss = (out.to(dtype) * weight.to(dtype)).square().sum() + reg
        first = torch.autograd.grad(loss, leaves, create_graph=True)
        second = torch.autograd.grad(sum(g.square().sum() for g in first), leaves)
        return first, second

    first, second = penalty(agf_triton_layer, torch.float32)
    ref_first, ref_second = penalty(agf_layer.eager, torch.float64)
    for got, want in zip([*first, *second], [*ref_first, *ref_second], strict=True):
        assert _relative(got.detach(), want) < 1e-4


def test_training_after_an_evaluation_under_inference_mode():
    """The recursion table is cached per device: one made under ``torch.inference_mode()``
    (evaluation, as Lightning's validation runs) must still be savable for a training step's
    backward."""
    agf_triton_module._device_recursion.cache_clear()
    tensors, mask = _inputs(1, 2, 20, 16, 16, 4, masked=True)
    with torch.inference_mode():
        agf_triton_layer(*tensors[:4], agf_coefficients(tensors[4]), mask)
    leaves = [t.clone().requires_grad_() for t in tensors]
    out, reg = agf_triton_layer(*leaves[:4], agf_coefficients(leaves[4]), mask)
    found = torch.autograd.grad(out.square().sum() + reg, leaves)
    doubles = [t.double().requires_grad_() for t in tensors]
    out, reg = agf_layer.eager(*doubles[:4], agf_coefficients(doubles[4]), mask)
    for got, want in zip(found, torch.autograd.grad(out.square().sum() + reg, doubles),
                         strict=True):
        assert _relative(got, want) < 1e-4


def test_float64_inputs_are_refused_by_name():
    q = torch.randn(1, 2, 8, 16, dtype=torch.float64)
    with pytest.raises(ValueError, match="float64"):
        agf_triton_layer(q, q, q, q, torch.ones(3, dtype=torch.float64))


def test_passes_with_different_blocks_share_one_split_of_the_tokens(monkeypatch):
    """Each pass may take its own rows per block (:data:`LAUNCH`): all four split the tokens
    into the same chunks, so the key statistics, the context and their gradients line up."""
    blocks = {"keys_forward": 16, "queries_forward": 64, "queries_backward": 32,
              "keys_backward": 16}
    for table in ("LAUNCH", "FLOAT32_LAUNCH"):  # half-precision and float32 products
        monkeypatch.setattr(agf_triton_module, table,
                            {name: (rows, 4) for name, rows in blocks.items()})
    tensors, mask = _inputs(2, 2, 150, 16, 16, 3, masked=True)
    grad_out = torch.randn(2, 2, 150, 16)
    _assert_equals_the_eager_layer(tensors, mask, grad_out)


def merged_keys(maxima, sums, context, gram):
    """The key pass's chunks merged in float64 torch operations (the reference of the merge
    kernel): the column softmax's maxima, inverse sums, context and Gram matrix over every
    chunk."""
    maxima, sums, context = maxima.double(), sums.double(), context.double()
    top = maxima.max(dim=1).values
    scale = torch.exp(maxima - top[:, None])
    total = (sums * scale).sum(dim=1)
    inverse = torch.where(total > 0, 1.0 / total.clamp(min=torch.finfo(torch.float32).tiny), 0.0)
    merged = (context * scale[..., None]).sum(dim=1) * inverse[..., None]
    if gram is not None:
        weights = scale[..., :, None] * scale[..., None, :]
        gram = (gram.double() * weights).sum(dim=1) * inverse[:, :, None] * inverse[:, None, :]
    return top, inverse, merged, gram


@pytest.mark.parametrize(("programs", "splits", "dim", "dim_v", "with_gram"), [
    (3, 4, 16, 16, True), (2, 1, 24, 40, True), (5, 3, 64, 64, False),
])
def test_the_merge_kernel_equals_the_merged_chunks_in_float64(programs, splits, dim, dim_v,
                                                              with_gram):
    maxima = torch.randn(programs, splits, dim) * 3
    sums = torch.rand(programs, splits, dim) * 5
    # A chunk of padding only (its maxima far below, its sums 0), and a feature with no key.
    maxima[0, -1], sums[0, -1] = -1.0e30, 0.0
    sums[-1, :, 0] = 0.0
    context = torch.randn(programs, splits, dim, dim_v)
    gram = torch.randn(programs, splits, dim, dim) if with_gram else None
    found = agf_triton_module._merge_keys(maxima, sums, context, gram)
    expected = merged_keys(maxima, sums, context, gram)
    assert found[1][-1, 0] == 0 and (found[3] is None) == (not with_gram)
    for got, want in zip(found, expected, strict=True):
        if want is not None:
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("programs", "splits", "dim"), [(3, 2, 16), (2, 1, 24)])
def test_the_regulariser_kernels_equal_its_float64_formula_and_gradient(programs, splits, dim):
    gram_u_chunks = torch.randn(programs, splits, dim, dim)
    gram_k = torch.randn(programs, dim, dim)
    gram_k[0].fill_diagonal_(1.0)  # entries where |G − I| has no slope: sign 0
    gram_u, reg = agf_triton_module._orthogonality(gram_u_chunks, gram_k)
    leaves = [gram_u_chunks.double().sum(dim=1).requires_grad_(), gram_k.double().requires_grad_()]
    eye = torch.eye(dim, dtype=torch.float64)
    expected = sum((g - eye).abs().mean() for g in leaves)
    torch.testing.assert_close(gram_u.double(), leaves[0].detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(reg.double(), expected.detach(), rtol=1e-5, atol=1e-6)
    grad = torch.randn(())
    weights = agf_triton_module._orthogonality_weights(gram_u, gram_k, grad)
    # The weights W = w + wᵀ, w the regulariser's gradient at each Gram matrix.
    for got, slope in zip(weights, torch.autograd.grad(expected, leaves), strict=True):
        want = slope * grad.double()
        torch.testing.assert_close(got.double(), want + want.transpose(-1, -2))
