"""Continue a text prompt with the language model of a `filterformer train` run (task text_lm).

The prompt is encoded with the run's own tokenizer (bytes or characters, as the run trained),
continued by the run's best checkpoint (or its last) and printed, prompt included. Greedy unless
--sample. A prompt and continuation longer than the model's max_len are refused.

Examples:
  filterformer generate --run runs/lm --prompt "def main(" --max-new-tokens 80
  filterformer generate --run runs/lm --prompt "It is a truth" --sample --temperature 0.8 \\
      --top-k 20 --seed 3
"""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--run", required=True, metavar="DIR",
                        help="the run directory (output_dir) of a language-model run")
    parser.add_argument("--prompt", required=True, metavar="TEXT", help="the text to continue")
    parser.add_argument("--max-new-tokens", type=int, default=64, metavar="N",
                        help="tokens (bytes or characters) to add (default 64)")
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best",
                        help="the best validation checkpoint (default) or the last one")
    parser.add_argument("--sample", action="store_true",
                        help="sample from the next-token distribution instead of taking the "
                             "most likely token")
    parser.add_argument("--temperature", type=float, default=1.0, metavar="T",
                        help="with --sample: divide the logits by T > 0 (default 1)")
    parser.add_argument("--top-k", type=int, metavar="K",
                        help="with --sample: draw from the K most likely tokens only")
    parser.add_argument("--seed", type=int, default=0,
                        help="with --sample: the seed of the draws (default 0)")


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast.
    import torch

    from ..checks import check_integer, check_positive
    from ..models import CausalLM
    from ..training.run_model import load_run

    check_integer("--max-new-tokens", args.max_new_tokens, minimum=0)
    if not args.sample and (args.top_k is not None or args.temperature != 1.0):
        raise ValueError("--temperature and --top-k shape sampling: add --sample")
    check_positive("--temperature", args.temperature)
    check_integer("--top-k", args.top_k, minimum=0, optional=True, hint=" (0 keeps every token)")
    loaded = load_run(args.run, args.checkpoint)
    model, tokenizer = loaded.model, loaded.text_tokenizer
    if not isinstance(model, CausalLM):
        raise ValueError(
            f"--run {args.run}: the run trained a {type(model).__name__} on task "
            f"{loaded.config.task!r}, not a language model; generate continues text with a "
            "language-model run (task text_lm)"
        )
    if tokenizer is None:
        raise ValueError(f"--run {args.run}: its checkpoint {loaded.checkpoint} records no text "
                         "tokenizer, so the prompt cannot be encoded (a text_lm run records one)")
    ids = tokenizer.encode(args.prompt)
    if not ids:
        raise ValueError("--prompt must hold at least one character")
    limit = model.config.max_len
    if model.config.position != "none" and len(ids) + args.max_new_tokens > limit:
        raise ValueError(
            f"--max-new-tokens {args.max_new_tokens}: the prompt's {len(ids)} tokens and the "
            f"new ones exceed the model's max_len={limit}; ask for at most "
            f"{max(limit - len(ids), 0)} new tokens (or a shorter --prompt)"
        )
    generator = torch.Generator().manual_seed(args.seed) if args.sample else None
    tokens = model.generate(torch.tensor([ids]), args.max_new_tokens, do_sample=args.sample,
                            temperature=args.temperature, top_k=args.top_k,
                            generator=generator)
    print(tokenizer.decode(tokens[0].tolist()))
    return 0
