"""Shared checks for the capture tests: hand-computed references of what a capture must hold."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from filterformer.diagnostics import CapturedForward, token_cosine_similarity


def reference_cosine(tokens: torch.Tensor) -> float:
    """Mean cosine over ordered pairs of distinct tokens ``(n, D)``, by an explicit loop."""
    n = tokens.shape[0]
    pairs = itertools.permutations(range(n), 2)
    cos = [torch.nn.functional.cosine_similarity(tokens[i], tokens[j], dim=0) for i, j in pairs]
    return float(sum(cos)) / (n * (n - 1))


def token_batch(vocab: int = 50) -> dict[str, torch.Tensor]:
    """Three samples of 9 token ids, two of them right-padded (``attention_mask`` 1 = real)."""
    ids = torch.randint(1, vocab, (3, 9))
    attention_mask = torch.ones(3, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    attention_mask[2, 4:] = 0
    return {"input_ids": ids, "attention_mask": attention_mask}


class HookedOutputs:
    """Layer outputs recorded by hooks of the test's own (the first element of a tuple)."""

    def __init__(self, layers: list[nn.Module]) -> None:
        self.outputs: list[torch.Tensor] = []
        self.handles = [layer.register_forward_hook(self._record) for layer in layers]

    def _record(self, module, args, out) -> None:
        self.outputs.append(out[0] if isinstance(out, tuple) else out)

    def __enter__(self) -> list[torch.Tensor]:
        return self.outputs

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()


def assert_softmax_attention(attn: torch.Tensor, mask: torch.Tensor, causal: bool) -> None:
    """Rows of real queries sum to 1 over real keys; padded (and future) keys get 0."""
    length = mask.shape[1]
    allowed = mask[:, None, :, None] & mask[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool).tril()
    rows = attn.masked_fill(~mask[:, None, :, None], 0).sum(-1)
    torch.testing.assert_close(rows, mask[:, None, :].expand_as(rows).to(attn.dtype))
    assert (attn.masked_select(~allowed & mask[:, None, :, None]) == 0).all()


def assert_hidden_metric_by_hand(captured: CapturedForward, mask: torch.Tensor) -> None:
    """The cosine metric of the captured hidden states equals a loop over real tokens."""
    got = token_cosine_similarity(torch.stack(captured.hidden_states).double(), mask)
    for layer, hidden in enumerate(captured.hidden_states):
        for b in range(hidden.shape[0]):
            real = hidden[b, mask[b]].double()
            assert got[layer, b].item() == pytest.approx(reference_cosine(real), rel=1e-9)
