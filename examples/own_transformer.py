"""Drop a method into your own Transformer with one option, and train it.

A classifier of scikit-learn's 8×8 digits (16 patches of 4 pixels as tokens) with GFSA attention
and NeuTRENO, trained with AdamW; then the same model with softmax attention, for comparison.

    python examples/own_transformer.py [--steps 300]
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader

from filterformer import SequenceClassifier, TransformerConfig
from filterformer.data import load_task
from filterformer.optim import parameter_groups


def accuracy(model: torch.nn.Module, loader: DataLoader) -> float:
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch in loader:
            logits = model(inputs=batch["inputs"], padding_mask=batch["padding_mask"]).logits
            right += (logits.argmax(-1) == batch["labels"]).sum().item()
            total += len(batch["labels"])
    return right / total


def train(attention: str, steps: int, seed: int = 0) -> float:
    torch.manual_seed(seed)
    task = load_task("digits", seed=seed)
    config = TransformerConfig(
        dim=64, depth=4, num_heads=4, input_dim=task.input_dim, max_len=task.max_len,
        attention=attention,                                  # softmax | gfsa | agf | samsa
        attention_options={"K": 3} if attention == "gfsa" else {},
        neutreno_lambda=0.4 if attention == "gfsa" else 0.0,  # NeuTRENO on top (0 = off)
    )
    model = SequenceClassifier(config, num_classes=task.num_classes)
    # The methods' coefficients are kept out of weight decay.
    optimizer = torch.optim.AdamW(parameter_groups(model, weight_decay=0.01), lr=3e-3)
    loader = DataLoader(task.train, batch_size=64, shuffle=True, collate_fn=task.collate)
    step = 0
    while step < steps:
        for batch in loader:
            model.train()
            out = model(inputs=batch["inputs"], padding_mask=batch["padding_mask"],
                        labels=batch["labels"])
            optimizer.zero_grad()
            out.loss.backward()
            optimizer.step()
            step += 1
            if step == steps:
                break
    validation = DataLoader(task.validation, batch_size=256, collate_fn=task.collate)
    return accuracy(model, validation)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    for attention in ("gfsa", "softmax"):
        print(f"{attention:8s} validation accuracy {train(attention, args.steps):.3f}")


if __name__ == "__main__":
    main()
