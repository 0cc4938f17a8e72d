"""Small classifiers' batches and steps, compiled against eager by the compilation tests (here
and in the CUDA tier), with no dependency beyond the package."""

from __future__ import annotations

import torch
from torch import nn

VOCAB, CLASSES, BATCH, MAX_LEN = 11, 3, 3, 16


def padded_batch(vocab: int, length: int) -> dict[str, torch.Tensor]:
    """Random ids, a padding mask with random real lengths (the first row full), labels."""
    lengths = torch.randint(1, length + 1, (BATCH,))
    lengths[0] = length
    return {
        "input_ids": torch.randint(0, vocab, (BATCH, length)),
        "padding_mask": torch.arange(length) < lengths[:, None],
        "labels": torch.randint(0, CLASSES, (BATCH,)),
    }


def two_lengths() -> tuple[int, int]:
    first = int(torch.randint(4, MAX_LEN - 4, ()))
    return first, first + int(torch.randint(1, 5, ()))


def perturb(model: nn.Module) -> None:
    """Move every parameter off its initial value (GFSA's filter, fusion weights, …) so that
    each method's own terms act."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)


def run(model: nn.Module, inputs: dict, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits and every parameter's gradient of one forward and backward (random draws such
    as SAMSA's Gumbel noise seeded by ``seed``)."""
    params = [p for p in model.parameters() if p.requires_grad]
    for param in params:
        param.grad = None
    torch.manual_seed(seed)
    out = model(**inputs)
    out.loss.backward()
    return out.logits.detach(), [p.grad.clone() if p.grad is not None else None for p in params]
