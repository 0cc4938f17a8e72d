import pytest
import torch

from filterformer.functional import check_neutreno_lambda, neutreno

from .reference import relative_error


def test_neutreno_adds_the_fidelity_term_per_head():
    attended, values, first = (torch.randn(2, 3, 5, 4, dtype=torch.float64) for _ in range(3))
    lam = torch.rand(3, dtype=torch.float64)
    out = neutreno(attended, values, first, lam)
    for h in range(3):
        expected = attended[:, h] + lam[h] * (first[:, h] - values[:, h])
        torch.testing.assert_close(out[:, h], expected)
    lam = torch.rand(()).item()  # a float λ takes its own path (scaled inside the addition)
    torch.testing.assert_close(neutreno(attended, values, first, lam),
                               attended + lam * (first - values))
    torch.testing.assert_close(neutreno(attended, values, first, 0.0), attended)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, -1e-9, True,
                                 "0.6", None])
def test_check_neutreno_lambda_refuses_non_finite_negative_and_non_numbers(bad):
    with pytest.raises(ValueError, match=r"neutreno_lambda must be a finite number >= 0 \(the "
                                         r"papers use λ in \(0, 1\].*0 disables the term\)"):
        check_neutreno_lambda(bad)


def test_check_neutreno_lambda_returns_valid_values_as_floats():
    for lam in (0, 0.0, 1, *torch.rand(3, dtype=torch.float64).tolist(), 1.5):
        checked = check_neutreno_lambda(lam)
        assert type(checked) is float and checked == lam


@pytest.mark.parametrize("kv_heads", [1, 2, 3])
def test_grouped_values_equal_values_repeated_to_every_query_head(kv_heads):
    heads = 6
    attended = torch.randn(2, heads, 5, 4, dtype=torch.float64)
    values, first = (torch.randn(2, kv_heads, 5, 4, dtype=torch.float64) for _ in range(2))
    repeat = lambda t: t.repeat_interleave(heads // kv_heads, dim=1)  # noqa: E731
    for lam in (0.4, torch.rand(heads, dtype=torch.float64)):
        expected = neutreno(attended, repeat(values), repeat(first), lam)
        torch.testing.assert_close(neutreno(attended, values, first, lam), expected)


def test_grouped_values_must_divide_the_heads():
    attended, values = torch.randn(1, 6, 3, 4), torch.randn(1, 4, 3, 4)
    with pytest.raises(ValueError, match="values have 4 heads, which does not divide the 6"):
        neutreno(attended, values, values, 0.5)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_a_learned_lambda_keeps_the_terms_half_precision_and_gets_its_own_gradient(kv_heads):
    batch, heads, length, dim = 2, 4, 5, 3
    attended = torch.randn(batch, heads, length, dim).bfloat16()
    values, first = (torch.randn(batch, kv_heads, length, dim).bfloat16() for _ in range(2))
    lam = torch.rand(heads, requires_grad=True)  # float32, as a learned λ is
    out = neutreno(attended, values, first, lam)
    assert out.dtype == torch.bfloat16  # as attention without the term gives
    grad = torch.randn(batch, heads, length, dim)
    out.backward(grad.bfloat16())
    wide = lam.detach().double().requires_grad_()
    ref = neutreno(attended.double(), values.double(), first.double(), wide)
    ref.backward(grad.double())
    assert relative_error(out.double(), ref) < 2e-2
    assert lam.grad.dtype == torch.float32 and relative_error(lam.grad.double(), wide.grad) < 2e-2
