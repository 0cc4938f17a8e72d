"""Train a tiny sequence classifier on one fixed batch and compare its loss before and after."""

from __future__ import annotations

import torch

from filterformer.models import SequenceClassifier, TransformerConfig


def overfit_ratio(attention: str, options: dict, *, steps: int = 30, lr: float = 1e-2) -> float:
    """Final over initial evaluation loss (cross-entropy plus auxiliary loss) on a fixed batch."""
    config = TransformerConfig(
        dim=32, depth=2, num_heads=2, mlp_ratio=2.0, vocab_size=12, max_len=16,
        attention=attention, attention_options=options,
    )
    model = SequenceClassifier(config, num_classes=4)
    ids, labels = torch.randint(0, 12, (8, 12)), torch.randint(0, 4, (8,))
    padding = torch.ones(8, 12, dtype=torch.bool)
    padding[::2, 9:] = False
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def eval_loss() -> float:
        model.eval()
        with torch.no_grad():
            loss = model(ids, padding_mask=padding, labels=labels).loss.item()
        model.train()
        return loss

    initial = eval_loss()
    for _ in range(steps):
        loss = model(ids, padding_mask=padding, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return eval_loss() / initial
