"""``transformers.Trainer`` fine-tunes a patched MiniLM classifier, with the filter out of weight
decay, and its saved model comes back through ``filterformer.from_pretrained``."""

import torch
import transformers

from filterformer import from_pretrained, patch, patched_parameters
from filterformer.optim import set_coefficient_lr
from filterformer.patching.saved_patch import PATCH_FILE

from .helpers import load_minilm, sentences


class PatchedTrainer(transformers.Trainer):
    """The recipe of docs/patching.md: the Trainer's own optimiser, minus decay on the patch."""

    def get_decay_parameter_names(self, model: torch.nn.Module) -> list[str]:
        patched = {name for name, _ in patched_parameters(model)}
        return [name for name in super().get_decay_parameter_names(model) if name not in patched]


class FasterPatchedTrainer(PatchedTrainer):
    """The recipe's option: the patch's own learning rate, a multiple of the shared one."""

    multiple = 10.0

    def create_optimizer(self, model=None):
        fresh = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if fresh:
            set_coefficient_lr(optimizer, model or self.model,
                               self.multiple * self.args.learning_rate)
        return optimizer


def test_the_trainer_recipe_gives_exactly_the_patch_its_own_learning_rate(tmp_path):
    model, tokenizer = load_minilm(transformers.AutoModelForSequenceClassification, num_labels=2)
    patch(model, "gfsa+fusion", fusion="gate")
    batch, labels = sentences(tokenizer, 8)
    dataset = [{**{k: v[i] for k, v in batch.items()}, "labels": labels[i]}
               for i in range(len(labels))]
    lr = float(torch.rand(())) * 1e-4 + 1e-5
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=2, per_device_train_batch_size=4,
        learning_rate=lr, weight_decay=0.1, save_strategy="no", logging_strategy="no",
        report_to="none", use_cpu=True, disable_tqdm=True,
    )
    trainer = FasterPatchedTrainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    patched = {id(param) for _, param in patched_parameters(model)}
    # initial_lr: each group's peak rate, which the Trainer's scheduler scales.
    peak = {id(p): g["initial_lr"] for g in trainer.optimizer.param_groups for p in g["params"]}
    assert {i for i, rate in peak.items() if rate == 10.0 * lr} == patched
    assert all(rate == lr for i, rate in peak.items() if i not in patched)
    assert peak.keys() == {id(p) for p in model.parameters() if p.requires_grad}
    undecayed = {id(p) for g in trainer.optimizer.param_groups if g["weight_decay"] == 0.0
                 for p in g["params"]}
    assert patched <= undecayed


def test_trainer_fine_tunes_a_patched_minilm_and_saves_it_for_from_pretrained(tmp_path):
    model, tokenizer = load_minilm(transformers.AutoModelForSequenceClassification, num_labels=2)
    patch(model, "gfsa")
    batch, labels = sentences(tokenizer, 16)
    dataset = [{**{k: v[i] for k, v in batch.items()}, "labels": labels[i]}
               for i in range(len(labels))]

    def loss() -> float:
        model.eval()
        with torch.no_grad():
            return model(**batch, labels=labels).loss.item()

    initial = loss()
    start = {name: param.detach().clone() for name, param in patched_parameters(model)}
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=4, per_device_train_batch_size=8,
        learning_rate=1e-4, weight_decay=0.1, save_strategy="no", logging_strategy="no",
        report_to="none", use_cpu=True, disable_tqdm=True,
        seed=int(torch.randint(0, 2**31 - 1, ())),
    )
    trainer = PatchedTrainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    assert loss() < initial

    patched = patched_parameters(model)
    moved = [(param.detach() - start[name]).abs().max().item() for name, param in patched]
    assert len(moved) == 3 * 6 and min(moved) > 1e-5  # every coefficient was fine-tuned
    groups = trainer.optimizer.param_groups
    decayed = {id(p) for g in groups if g["weight_decay"] == 0.1 for p in g["params"]}
    undecayed = {id(p) for g in groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert {id(param) for _, param in patched} <= undecayed - decayed
    assert decayed  # the pretrained weight matrices still decay
    # The plain Trainer would decay the coefficients (1-D, not named bias or norm).
    plain = set(transformers.Trainer.get_decay_parameter_names(trainer, model))
    assert {name for name, _ in patched} <= plain

    trainer.save_model(str(tmp_path / "saved"))  # the model's own save_pretrained
    assert (tmp_path / "saved" / PATCH_FILE).is_file()
    loaded = from_pretrained(tmp_path / "saved")
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits,
                                   rtol=0, atol=1e-6)
