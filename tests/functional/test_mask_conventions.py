"""One meaning for every padding mask: boolean, ``-inf`` and large finite negatives (the Hugging
Face conventions) mask the same keys in every GFSA base and every attention module, and rows
that see no key come out as documented (0 before the output projection)."""

from __future__ import annotations

import pytest
import torch

from filterformer.attention import build_attention
from filterformer.functional import MASKED_SCORE, gfsa

B, H, N, D = 3, 2, 6, 8


def _real_keys() -> torch.Tensor:
    """``(B, N)``: sample 0 full, sample 1 with random padding, sample 2 with no real key."""
    real = torch.ones(B, N, dtype=torch.bool)
    real[1] = torch.rand(N) < 0.6
    real[1, 0] = True
    real[2] = False
    return real


def _mask_forms(real: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The same ``(B, 1, 1, N)`` padding mask written in each convention."""
    boolean = real[:, None, None, :]

    def additive(value: float) -> torch.Tensor:
        return torch.zeros(boolean.shape, dtype=dtype).masked_fill(~boolean, value)

    return {
        "bool": boolean,
        "-inf": additive(float("-inf")),
        "-1e9": additive(-1e9),
        "-1e4": additive(MASKED_SCORE),
        "finfo.min": additive(torch.finfo(dtype).min),
    }


@pytest.mark.parametrize("base", ["softmax", "efficient"])
@pytest.mark.parametrize("exact_power", [False, True])
def test_every_mask_convention_gives_the_same_gfsa(base, exact_power):
    dtype = torch.float64
    q, k, v = (torch.randn(B, H, N, D, dtype=dtype) for _ in range(3))
    w0, w1, wK = (torch.randn(H, dtype=dtype) for _ in range(3))
    real = _real_keys()
    outputs = {
        name: gfsa(q, k, v, w0, w1, wK, K=3, attn_mask=mask, base=base, exact_power=exact_power)
        for name, mask in _mask_forms(real, dtype).items()
    }
    outputs["key_padding_mask"] = gfsa(
        q, k, v, w0, w1, wK, K=3, key_padding_mask=real, base=base, exact_power=exact_power
    )
    reference = outputs["bool"]
    assert reference.isfinite().all()
    for name, out in outputs.items():
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-6, msg=name)
    # A sample with no real key has Ā = 0 there: only the identity term w0·V is left.
    torch.testing.assert_close(reference[2], w0.view(H, 1, 1) * v[2], rtol=0, atol=1e-12)


def test_masked_keys_values_never_reach_the_output():
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    w0, w1, wK = (torch.randn(H, dtype=torch.float64) for _ in range(3))
    real = _real_keys()
    mask = _mask_forms(real, torch.float64)["finfo.min"]
    changed = v.masked_fill(~real[:, None, :, None], 1e3)
    for base in ("softmax", "efficient"):
        out = gfsa(q, k, v, w0, w1, wK, K=3, attn_mask=mask, base=base)
        # V at padded queries still enters through w0·V; compare the real positions only.
        again = gfsa(q, k, changed, w0, w1, wK, K=3, attn_mask=mask, base=base)
        rows = real[:, None, :, None].expand_as(out)
        torch.testing.assert_close(out[rows], again[rows], rtol=0, atol=1e-9)


MODULES = [
    ("softmax", {}),
    ("gfsa", {}),
    ("gfsa", {"base": "efficient"}),
    ("gfsa", {"exact_power": True}),
    ("agf", {}),
    ("samsa", {"mode": "soft", "num_samples": 3}),
    ("samsa", {"mode": "hard", "num_samples": 3}),
]


@pytest.mark.parametrize(("method", "options"), MODULES)
def test_every_mask_convention_gives_the_same_module_output(method, options):
    module = build_attention(method, H * D, H, **options).double().eval()
    with torch.no_grad():
        for name in ("w0", "wK"):
            if hasattr(module, name):
                getattr(module, name).normal_()
    x = torch.randn(B, N, H * D, dtype=torch.float64)
    real = _real_keys()
    with torch.no_grad():
        outputs = {name: module(x, attn_mask=mask) for name, mask in
                   _mask_forms(real, torch.float64).items()}
        outputs["padding_mask"] = module(x, padding_mask=real)
    reference = outputs["padding_mask"]
    assert reference.isfinite().all()
    for name, out in outputs.items():
        torch.testing.assert_close(out, reference, rtol=0, atol=1e-6, msg=name)
    if method == "softmax":  # a row that sees no key is 0 before the output projection
        torch.testing.assert_close(
            reference[2], module.proj.bias.expand(N, -1), rtol=0, atol=1e-12
        )
