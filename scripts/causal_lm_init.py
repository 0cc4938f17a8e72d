"""How a freshly initialised CausalLM starts: first loss, logit scale, greedy repetition.

Measures, for the default ``TransformerConfig`` (D = 128, 4 heads, pre-LN) with a 256-token
vocabulary, at several depths and over several seeds:

- the next-token cross-entropy on random tokens against ln(vocab), the loss of uniform logits;
- the standard deviation of the logits;
- the share of greedy continuations (16 random prompts of 8 tokens, 16 new tokens each) that are
  one token repeated throughout;

for the model as built, and, for comparison, with nanoGPT's scaled residual projections
(``attn.proj`` and ``mlp.fc2`` drawn N(0, (0.02/sqrt(2·depth))²)).

Run: ``PYTHONPATH=src python scripts/causal_lm_init.py``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from filterformer.models import CausalLM, TransformerConfig

VOCAB, SEEDS, PROMPTS, PROMPT_LEN, NEW = 256, 5, 16, 8, 16


def scale_residual_projections(model: CausalLM, depth: int) -> None:
    """nanoGPT's init of the projections that write into the residual stream."""
    for name, parameter in model.named_parameters():
        if name.endswith(("attn.proj.weight", "mlp.fc2.weight")):
            nn.init.normal_(parameter, std=0.02 / math.sqrt(2 * depth))


@torch.no_grad()
def measure(depth: int, scaled: bool) -> tuple[float, float, float]:
    losses, stds, repeated = [], [], 0
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        model = CausalLM(TransformerConfig(causal=True, vocab_size=VOCAB, depth=depth)).eval()
        if scaled:
            scale_residual_projections(model, depth)
        ids, labels = (torch.randint(0, VOCAB, (8, 64)) for _ in range(2))
        out = model(ids, labels=labels)
        losses.append(out.loss.item())
        stds.append(out.logits.std().item())
        prompts = torch.randint(0, VOCAB, (PROMPTS, PROMPT_LEN))
        new = model.generate(prompts, NEW)[:, PROMPT_LEN:]
        repeated += int((new == new[:, :1]).all(dim=1).sum())
    return sum(losses) / SEEDS, sum(stds) / SEEDS, repeated / (SEEDS * PROMPTS)


def main() -> None:
    uniform = math.log(VOCAB)
    print(f"ln({VOCAB}) = {uniform:.4f}; {SEEDS} seeds, {PROMPTS} greedy prompts each")
    print("| init | depth | first loss | vs ln V | logit std | one-token continuations |")
    print("|---|---|---|---|---|---|")
    for scaled in (False, True):
        for depth in (2, 4, 8, 12):
            loss, std, repeated = measure(depth, scaled)
            init = "nanoGPT scaled projections" if scaled else "as built"
            print(f"| {init} | {depth} | {loss:.3f} | {100 * (loss / uniform - 1):+.1f}% | "
                  f"{std:.3f} | {100 * repeated:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
