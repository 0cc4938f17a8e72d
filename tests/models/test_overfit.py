"""Every kind of tiny model can fit a small fixed batch: the whole path learns."""

import pytest
import torch

from filterformer.models import CausalLM, SequenceClassifier

from .helpers import KINDS, VOCAB, config

CLASSIFIERS = {
    **KINDS,
    "gfsa_efficient": {"attention": "gfsa", "attention_options": {"base": "efficient"}},
    "post_ln": {"norm": "post"},
    "fusion_concat": {"fusion": "concat"},
    "fusion_max": {"fusion": "max"},
    "fusion_gate": {"fusion": "gate"},
}


def _fit(model, batch, steps=120, lr=3e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses[0], min(losses[-5:])


@pytest.mark.parametrize("kind", CLASSIFIERS)
def test_tiny_classifier_overfits(kind):
    model = SequenceClassifier(config(depth=2, **CLASSIFIERS[kind]), num_classes=4,
                               pooling="attention" if kind == "post_ln" else "mean")
    ids = torch.randint(1, VOCAB, (16, 12))
    mask = torch.ones(16, 12, dtype=torch.bool)
    mask[::2, 9:] = False
    first, last = _fit(model, dict(input_ids=ids, padding_mask=mask,
                                   labels=torch.randint(0, 4, (16,))))
    assert last <= 0.1 * first


@pytest.mark.parametrize("kind", ["softmax", "gfsa+neutreno"])
def test_tiny_causal_lm_overfits(kind):
    model = CausalLM(config(depth=2, causal=True, **KINDS[kind]))
    ids = torch.randint(0, VOCAB, (8, 16))
    labels = torch.cat([ids[:, 1:], torch.full((8, 1), -100)], dim=1)
    first, last = _fit(model, dict(input_ids=ids, labels=labels), steps=150)
    assert last <= 0.1 * first
