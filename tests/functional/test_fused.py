"""Fused regions equal their eager functions, compile once for every length, and fall back."""

from __future__ import annotations

import functools

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.attention import build_attention
from filterformer.functional import (
    add_rms_normed,
    agf_coefficients,
    agf_layer,
    gfsa_combine,
)
from filterformer.functional import fused as fused_module

LENGTHS = (5, 9, 14)


def regions_compiled_by(backend, monkeypatch):
    """Every fused region compiled with ``backend`` on every device and at every size, from a
    clean cache: yields the counter of the graphs compiled."""
    counter = CompileCounterWithBackend(backend)
    torch._dynamo.reset()
    monkeypatch.setattr(fused_module, "BACKEND", counter)
    monkeypatch.setenv("FILTERFORMER_FUSED", "always")
    fused_module.reset_fused_regions()
    yield counter
    fused_module.reset_fused_regions()
    torch._dynamo.reset()


@pytest.fixture
def compiled_regions(monkeypatch):
    """Fused regions compiled with ``aot_eager`` (TorchDynamo's graph and AOTAutograd's
    backward, run by eager kernels), counting the graphs compiled."""
    yield from regions_compiled_by("aot_eager", monkeypatch)


def _grads(tensors):
    grads = [None if t.grad is None else t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    return grads


def _leaves(*shapes):
    return [torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in shapes]


def _assert_same_call(region, inputs, make_args, loss):
    """``region`` (compiled) and ``region.eager`` give the same values and gradients."""
    out = loss(region(*make_args()))
    out.backward()
    fused_grads = _grads(inputs)
    ref = loss(region.eager(*make_args()))
    ref.backward()
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(fused_grads, _grads(inputs), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
def test_agf_layer_fused_equals_eager_at_every_length_with_one_graph(compiled_regions, masked):
    graphs = []
    for n in LENGTHS:
        q, k, v, logits = inputs = _leaves(*[(2, 3, n, 4)] * 4)
        p = torch.randn(3, dtype=torch.float64, requires_grad=True)
        mask = torch.rand(2, n) > 0.3 if masked else None

        def call(q=q, k=k, v=v, logits=logits, p=p, mask=mask):
            return q, k, v, logits, agf_coefficients(p), mask

        _assert_same_call(
            agf_layer, [*inputs, p], call, lambda result: result[0].pow(2).sum() + result[1]
        )
        graphs.append(compiled_regions.frame_count)
    # One graph (no break inside the region) serves every length.
    assert graphs == [1] * len(graphs), f"graphs compiled after each length: {graphs}"


@pytest.mark.parametrize("exact_power", [False, True])
def test_gfsa_combine_fused_equals_eager(compiled_regions, exact_power):
    graphs = []
    for n in LENGTHS:
        values, first, last = tensors = _leaves(*[(2, 3, n, 4)] * 3)
        w0, w1, wK = coefficients = _leaves((3,), (3,), (3,))
        out = gfsa_combine(values, first, last, w0, w1, wK, K=3, exact_power=exact_power)
        out.pow(2).sum().backward()
        grads = _grads([*tensors, *coefficients])
        # The written-out filter: w0·V + w1·ĀV + wK·(ĀV + (K−1)(Ā²V − ĀV)), or wK·Ā^K V.
        view = [w.view(1, 3, 1, 1) for w in coefficients]
        high = last if exact_power else first + 2 * (last - first)
        ref = view[0] * values + view[1] * first + view[2] * high
        ref.pow(2).sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        for got, want in zip(grads, _grads([*tensors, *coefficients]), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        graphs.append(compiled_regions.frame_count)
    # One graph (no break inside the region) serves every length.
    assert graphs == [1] * len(graphs), f"graphs compiled after each length: {graphs}"


def test_add_rms_normed_fused_equals_the_written_out_norm(compiled_regions):
    graphs = []
    for n in LENGTHS:
        x, hidden, weight = tensors = _leaves((2, n, 6), (2, n, 6), (6,))
        out = add_rms_normed(x, hidden, weight, 1e-6)
        out.pow(2).sum().backward()
        grads = _grads(tensors)
        ref = x + hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
        ref.pow(2).sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        for got, want in zip(grads, _grads(tensors), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        graphs.append(compiled_regions.frame_count)
    # One graph (no break inside the region) serves every length.
    assert graphs == [1] * len(graphs), f"graphs compiled after each length: {graphs}"


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("agf", {"K": 3}),
        ("samsa", {"num_samples": 2, "mode": "soft"}),
        ("samsa", {"num_samples": 2, "mode": "hard"}),
        ("gfsa", {"K": 3}),
    ],
)
@pytest.mark.parametrize("training", [True, False])
def test_modules_with_fused_regions_equal_their_eager_selves(
    compiled_regions, monkeypatch, method, options, training
):
    module = build_attention(method, 8, 2, **options).double().train(training)
    with torch.no_grad():  # away from the identity start, so every term of every filter acts
        for param in module.parameters():
            param.add_(0.3 * torch.randn_like(param))
    for n in LENGTHS[:2]:
        x = torch.randn(3, n, 8, dtype=torch.float64, requires_grad=True)
        padding = torch.rand(3, n) > 0.3
        padding[:, 0] = True
        results = []
        for mode in ("always", "never"):
            monkeypatch.setenv("FILTERFORMER_FUSED", mode)
            torch.manual_seed(n)  # the same Gumbel noise on both sides
            out = module(x, padding_mask=padding)
            out.pow(2).sum().backward()
            results.append((out, _grads([x, *module.parameters()])))
        (out, grads), (ref, ref_grads) = results
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
        for got, want in zip(grads, ref_grads, strict=True):
            assert (got is None) == (want is None)
            if got is not None:
                torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert compiled_regions.frame_count >= 1


def test_inductor_compiles_the_gfsa_mix_to_the_same_numbers(monkeypatch):
    """One region through the real compiler (inductor's generated code on the CPU)."""
    torch._dynamo.reset()
    monkeypatch.setenv("FILTERFORMER_FUSED", "always")
    fused_module.reset_fused_regions()
    try:
        for n in LENGTHS[:2]:
            values, first, last = _leaves(*[(2, 3, n, 4)] * 3)
            w = _leaves((3,), (3,), (3,))
            out = gfsa_combine(values, first, last, *w, K=4)
            view = [c.view(1, 3, 1, 1) for c in w]
            ref = view[0] * values + view[1] * first + view[2] * (first + 3 * (last - first))
            torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    finally:
        fused_module.reset_fused_regions()
        torch._dynamo.reset()


def test_regions_stay_eager_on_the_cpu_by_default(monkeypatch):
    calls = []
    monkeypatch.delenv("FILTERFORMER_FUSED", raising=False)
    monkeypatch.setattr(torch, "compile", lambda *a, **k: calls.append(a) or (lambda *x: None))
    fused_module.reset_fused_regions()
    x, hidden, weight = _leaves((1, 3, 4), (1, 3, 4), (4,))
    out = add_rms_normed(x, hidden, weight, None)
    assert calls == [] and out.shape == x.shape
    monkeypatch.setenv("FILTERFORMER_FUSED", "never")
    assert add_rms_normed(x, hidden, weight, None).shape == x.shape and calls == []


def test_a_compiler_failure_warns_once_and_stays_eager(monkeypatch):
    from torch._dynamo.exc import BackendCompilerFailed

    def broken_backend(gm, example_inputs):
        raise BackendCompilerFailed(broken_backend, RuntimeError("no compiler here"))

    torch._dynamo.reset()
    monkeypatch.setattr(fused_module, "BACKEND", broken_backend)
    monkeypatch.setenv("FILTERFORMER_FUSED", "always")
    fused_module.reset_fused_regions()
    x, hidden, weight = _leaves((1, 3, 4), (1, 3, 4), (4,))
    try:
        with pytest.warns(RuntimeWarning, match="runs eagerly from now on"):
            out = add_rms_normed(x, hidden, weight, 1e-5)
        torch.testing.assert_close(out, add_rms_normed.eager(x, hidden, weight, 1e-5))
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            add_rms_normed(x, hidden, weight, 1e-5)  # no second warning
    finally:
        fused_module.reset_fused_regions()
        torch._dynamo.reset()


def test_an_unknown_setting_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("FILTERFORMER_FUSED", "sometimes")
    x, hidden, weight = _leaves((1, 3, 4), (1, 3, 4), (4,))
    with pytest.raises(ValueError, match="FILTERFORMER_FUSED must be one of cuda, always, never"):
        add_rms_normed(x, hidden, weight, None)


# Legendre and Chebyshev are Jacobi's recursion with fixed (a, b): one other (a, b) covers them.
@pytest.mark.parametrize(("basis", "a", "b"), [("monomial", 0.0, 0.0), ("jacobi", 2.0, -0.5)])
def test_agf_layer_fused_equals_eager_in_every_basis(compiled_regions, basis, a, b):
    q, k, v, logits = inputs = _leaves(*[(2, 3, 6, 4)] * 4)
    p = torch.randn(4, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 6) > 0.3

    def call():
        return q, k, v, logits, agf_coefficients(p), mask

    region = functools.partial(agf_layer, basis=basis, a=a, b=b)
    region.eager = functools.partial(agf_layer.eager, basis=basis, a=a, b=b)
    _assert_same_call(
        region, [*inputs, p], call, lambda result: result[0].pow(2).sum() + result[1]
    )
    # a and b are constants of the graph: a check of their value does not break it in two.
    assert compiled_regions.frame_count == 1


class _StandIn:
    """What :func:`runs_compiled` reads of a tensor: its device and size."""

    def __init__(self, device: str, numel: int):
        self.device, self._numel = torch.device(device), numel

    def numel(self) -> int:
        return self._numel


def test_by_default_only_large_enough_cuda_calls_compile(monkeypatch):
    monkeypatch.delenv("FILTERFORMER_FUSED", raising=False)
    least = int(torch.randint(2, 2**20, ()))
    assert fused_module.runs_compiled(_StandIn("cuda", least), least)
    assert not fused_module.runs_compiled(_StandIn("cuda", least - 1), least)
    assert not fused_module.runs_compiled(_StandIn("cpu", 2**30), least)
    monkeypatch.setenv("FILTERFORMER_FUSED", "always")
    assert fused_module.runs_compiled(_StandIn("cpu", 1), least)
    monkeypatch.setenv("FILTERFORMER_FUSED", "never")
    assert not fused_module.runs_compiled(_StandIn("cuda", 2**30), least)
