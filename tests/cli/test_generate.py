"""A trained run back to a model: ``filterformer.load_run``, ``filterformer generate`` and the
model saved and loaded again."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch

import filterformer
from filterformer.cli import main
from filterformer.data.text_tokenizer import TextTokenizer
from filterformer.models import CausalLM, SequenceClassifier
from filterformer.training import load_checkpoint, save_checkpoint

from .test_train import tiny_listops, write_yaml

WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far")


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory) -> Path:
    """A character-level language-model run of a few seconds on a fresh random text."""
    root = tmp_path_factory.mktemp("lm")
    corpus = root / "corpus.txt"
    corpus.write_text(" ".join(random.choice(WORDS) for _ in range(500)))
    run = root / "run"
    assert main(["train", "--quiet", "--output-dir", str(run), "--set", "task=text_lm",
                 f"task_options.path={corpus}", "task_options.level=char",
                 "task_options.max_len=24", "model.dim=16", "model.depth=2", "model.num_heads=2",
                 "model.mlp_ratio=2.0", "batch_size=16", "max_steps=12", "eval_every=4"]) == 0
    return run


def test_a_run_loads_as_its_model_in_eval_mode(lm_run):
    summary = json.loads((lm_run / "summary.json").read_text())
    best = filterformer.load_run(lm_run)
    assert isinstance(best.model, CausalLM) and not best.model.training
    assert best.checkpoint == lm_run / "checkpoints" / "best.pt"
    assert best.step == summary["best_step"]
    assert best.validation == summary["best_validation"]
    assert best.config.task == "text_lm" and best.model_config.vocab_size == summary[
        "model_config"]["vocab_size"]
    saved = load_checkpoint(best.checkpoint)["model"]
    assert all(torch.equal(saved[name], tensor) for name, tensor in
               best.model.state_dict().items())
    last = filterformer.load_run(lm_run, checkpoint="last")
    assert last.step == summary["steps"] == 12
    assert isinstance(best.text_tokenizer, TextTokenizer)
    assert set(best.text_tokenizer.vocabulary) == set(" ".join(WORDS))


def test_generate_continues_the_prompt_with_the_runs_tokenizer(lm_run, capsys):
    prompt = random.choice(WORDS) + " " + random.choice(WORDS)
    assert main(["generate", "--run", str(lm_run), "--prompt", prompt,
                 "--max-new-tokens", "10"]) == 0
    printed = capsys.readouterr().out
    loaded = filterformer.load_run(lm_run)
    tokenizer = loaded.text_tokenizer
    expected = loaded.model.generate(torch.tensor([tokenizer.encode(prompt)]), 10)
    assert printed == tokenizer.decode(expected[0].tolist()) + "\n"
    assert printed.startswith(prompt) and len(printed) == len(prompt) + 11

    seed = random.randrange(1000)
    sampling = ["generate", "--run", str(lm_run), "--prompt", prompt, "--max-new-tokens", "10",
                "--checkpoint", "last", "--sample", "--temperature", "1.5", "--top-k", "4",
                "--seed", str(seed)]
    assert main(sampling) == 0
    first = capsys.readouterr().out
    assert main(sampling) == 0 and capsys.readouterr().out == first
    model = filterformer.load_run(lm_run, "last").model
    drawn = model.generate(torch.tensor([tokenizer.encode(prompt)]), 10, do_sample=True,
                           temperature=1.5, top_k=4,
                           generator=torch.Generator().manual_seed(seed))
    assert first == tokenizer.decode(drawn[0].tolist()) + "\n"


def test_a_loaded_run_saves_and_loads_with_equal_logits(lm_run, tmp_path):
    model = filterformer.load_run(lm_run).model
    filterformer.save_pretrained(model, tmp_path / "package")
    model.save_pretrained(tmp_path / "method")
    ids = torch.randint(1, model.config.vocab_size, (3, 11))
    logits = model(ids).logits
    for loaded in (filterformer.from_pretrained(tmp_path / "package"),
                   CausalLM.from_pretrained(tmp_path / "method")):
        assert torch.equal(loaded(ids).logits, logits)


@pytest.mark.parametrize(("argument", "message"), [
    (["--max-new-tokens", "30"], r"--max-new-tokens 30: the prompt's 3 tokens and the new ones "
                                 r"exceed the model's max_len=24; ask for at most 21"),
    (["--max-new-tokens", "-1"], r"--max-new-tokens must be an integer >= 0"),
    (["--top-k", "3"], r"--temperature and --top-k shape sampling: add --sample"),
    (["--sample", "--temperature", "0"], r"--temperature must be a positive finite number"),
    (["--checkpoint", "last", "--prompt", ""], r"--prompt must hold at least one character"),
])
def test_generate_refuses_what_it_cannot_do(lm_run, capsys, argument, message):
    assert main(["generate", "--run", str(lm_run), "--prompt", "cat", *argument]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_generate_refuses_a_run_that_is_not_a_language_model(tmp_path, capsys):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["generate", "--run", str(tmp_path / "run"), "--prompt", "[MAX 1 2]"]) == 2
    err = capsys.readouterr().err
    assert (f"--run {tmp_path / 'run'}: the run trained a SequenceClassifier on task 'listops', "
            "not a language model") in err
    assert isinstance(filterformer.load_run(tmp_path / "run").model, SequenceClassifier)


def test_load_run_refuses_missing_and_damaged_runs_by_name(lm_run, tmp_path):
    with pytest.raises(ValueError, match=rf"run directory {tmp_path / 'nowhere'} does not exist"):
        filterformer.load_run(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"holds no checkpoints/ folder"):
        filterformer.load_run(tmp_path)
    with pytest.raises(ValueError, match=r"checkpoint must be one of \('best', 'last'\)"):
        filterformer.load_run(lm_run, checkpoint="final")
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(ValueError, match=r"best.pt does not exist; the run has not validated yet"):
        filterformer.load_run(tmp_path)
    damaged = tmp_path / "checkpoints" / "best.pt"
    damaged.write_bytes((lm_run / "checkpoints" / "best.pt").read_bytes()[:5000])
    with pytest.raises(ValueError, match=rf"checkpoint {damaged} is corrupt"):
        filterformer.load_run(tmp_path)
    state = load_checkpoint(lm_run / "checkpoints" / "best.pt")
    state["model"]["transformer.norm.weight"][1] = float("nan")
    save_checkpoint(damaged, state)
    with pytest.raises(ValueError, match=rf"checkpoint {damaged} holds non-finite weights"):
        filterformer.load_run(tmp_path)


def test_a_checkpoint_without_the_models_description_is_rebuilt_from_its_task(lm_run, tmp_path):
    state = load_checkpoint(lm_run / "checkpoints" / "best.pt")
    recorded = TextTokenizer.from_dict(state.pop("text_tokenizer"))
    del state["model_description"]
    save_checkpoint(tmp_path / "checkpoints" / "best.pt", state)
    old = filterformer.load_run(tmp_path)
    new = filterformer.load_run(lm_run)
    assert old.text_tokenizer == recorded
    ids = torch.randint(1, new.model.config.vocab_size, (2, 7))
    assert torch.equal(old.model(ids).logits, new.model(ids).logits)
