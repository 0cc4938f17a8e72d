"""``load_run`` on a run whose model is a pretrained model with a method patched in."""

from __future__ import annotations

import torch

import filterformer
from filterformer.models.pretrained_classifier import TransformersClassifier
from filterformer.training import TrainConfig, Trainer
from filterformer.training.evaluation import model_inputs
from filterformer.training.model_building import load_task_data
from filterformer.training.pretrained import MINILM

from .test_pretrained import SMALL_SENTIMENT


def test_a_pretrained_run_loads_and_its_backbone_saves_with_its_patch(tmp_path):
    sentiment = load_task_data("sentiment", dict(SMALL_SENTIMENT))
    config = TrainConfig.from_dict({
        "task": "sentiment", "task_options": dict(SMALL_SENTIMENT), "pretrained": MINILM,
        "method": "gfsa", "batch_size": 8, "eval_batch_size": 32, "progress": False,
        "max_steps": 2, "output_dir": str(tmp_path / "run"),
    })
    trainer = Trainer(config, task=sentiment)
    trainer.fit()
    run = filterformer.load_run(tmp_path / "run", checkpoint="last")
    assert isinstance(run.model, TransformersClassifier) and not run.model.training
    assert run.text_tokenizer is None and run.step == 2
    batch = model_inputs(sentiment.collate([sentiment.test[i] for i in range(3)]),
                         torch.device("cpu"))
    expected = trainer.model.eval()(**batch).logits
    assert torch.allclose(run.model(**batch).logits, expected, atol=1e-6)
    filterformer.save_pretrained(run.model.backbone, tmp_path / "backbone")
    backbone = filterformer.from_pretrained(tmp_path / "backbone")
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["padding_mask"].long()}
    assert torch.allclose(backbone(**inputs).last_hidden_state,
                          run.model.backbone(**inputs).last_hidden_state, atol=1e-6)
