import torch

from filterformer.functional import neutreno


def test_neutreno_adds_the_fidelity_term_per_head():
    attended, values, first = (torch.randn(2, 3, 5, 4, dtype=torch.float64) for _ in range(3))
    lam = torch.rand(3, dtype=torch.float64)
    out = neutreno(attended, values, first, lam)
    for h in range(3):
        expected = attended[:, h] + lam[h] * (first[:, h] - values[:, h])
        torch.testing.assert_close(out[:, h], expected)
    torch.testing.assert_close(neutreno(attended, values, first, 0.0), attended)
