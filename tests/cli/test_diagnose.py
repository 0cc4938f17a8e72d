import argparse
import json
import xml.etree.ElementTree as ET

import pytest
import torch
import yaml

from filterformer.cli import diagnose as command
from filterformer.cli import main
from filterformer.data import load_task
from filterformer.diagnostics import DiagnosticsReport, diagnose, random_batches, task_batches
from filterformer.models import SequenceClassifier, Transformer, TransformerConfig
from filterformer.training.checkpoint import save_checkpoint


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args([str(a) for a in argv]))


def reports(out) -> list[DiagnosticsReport]:
    data = json.loads((out / "diagnostics.json").read_text())
    return [DiagnosticsReport.from_dict(r) for r in data["reports"]]


CONFIG = {"dim": 16, "depth": 4, "num_heads": 2, "norm": "post", "vocab_size": 50, "max_len": 12}


def test_configs_give_the_reports_of_the_python_api_and_figures(tmp_path):
    (tmp_path / "softmax.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "neutreno.json").write_text(json.dumps({**CONFIG, "neutreno_lambda": 0.6}))
    out = tmp_path / "out"
    assert run("--config", tmp_path / "softmax.yaml", "--config", tmp_path / "neutreno.json",
               "--num-samples", 10, "--batch-size", 4, "--seq-len", 8, "--seed", 3,
               "--out", out) == 0
    got = reports(out)
    assert [r.label for r in got] == ["softmax", "neutreno"]
    for report, extra in zip(got, ({}, {"neutreno_lambda": 0.6}), strict=True):
        torch.manual_seed(3)
        model = Transformer(TransformerConfig(**CONFIG, **extra))
        batches = random_batches(model.config, 10, 4, 8, seed=3)
        expected = diagnose(model, batches, label=report.label)
        assert report.num_samples == 10
        assert report.token_cosine_similarity == pytest.approx(expected.token_cosine_similarity)
        assert report.frequency_response[1] == pytest.approx(expected.frequency_response[1])
    assert (out / "cosine_similarity.png").read_bytes()[:4] == b"\x89PNG"
    assert ET.parse(out / "cosine_similarity.svg").getroot().tag.endswith("svg")


def test_checkpoint_backbone_and_comparison_with_an_earlier_run(tmp_path):
    config = TransformerConfig(**{**CONFIG, "attention": "gfsa"})
    model = SequenceClassifier(config, num_classes=3)
    with torch.no_grad():
        for block in model.transformer.blocks:
            block.attn.wK.normal_()
    path = save_checkpoint(tmp_path / "best.pt", {
        "config": {}, "model_config": config.to_dict(), "model": model.state_dict(),
    })
    (tmp_path / "softmax.yaml").write_text(yaml.safe_dump(CONFIG))
    run("--config", tmp_path / "softmax.yaml", "--num-samples", 4, "--out", tmp_path / "first")
    out = tmp_path / "second"
    run("--checkpoint", path, "--label", "trained", "--num-samples", 6, "--seq-len", 10,
        "--compare", tmp_path / "first" / "diagnostics.json", "--formats", "png",
        "--out", out)
    trained, earlier = reports(out)
    assert (trained.label, earlier.label) == ("trained", "softmax")
    expected = diagnose(model.transformer, random_batches(config, 6, 32, 10, seed=0))
    assert trained.effective_rank == pytest.approx(expected.effective_rank)
    for got, want in zip(trained.gfsa_filters, expected.gfsa_filters, strict=True):
        torch.testing.assert_close(torch.tensor(got.response), torch.tensor(want.response))
    assert (out / "gfsa_filters_trained.png").is_file()
    assert not (out / "cosine_similarity.svg").exists()


def test_task_batches_and_the_task_input_size(tmp_path):
    fields = {"dim": 16, "depth": 2, "num_heads": 2}
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(fields))
    run("--config", tmp_path / "model.yaml", "--task", "digits", "--task-option", "patch_size=4",
        "--num-samples", 5, "--split", "test", "--seed", 2, "--no-attentions", "--out", tmp_path)
    (report,) = reports(tmp_path)
    assert report.num_samples == 5 and report.frequency_response is None
    task = load_task("digits", patch_size=4)
    torch.manual_seed(2)
    model = Transformer(TransformerConfig(**fields, input_dim=task.input_dim, max_len=task.max_len))
    expected = diagnose(model, task_batches(task, "test", 5, 32), attentions=False)
    assert report.token_cosine_similarity == pytest.approx(expected.token_cosine_similarity)


def test_bad_arguments_raise_value_errors(tmp_path):
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(CONFIG))
    with pytest.raises(ValueError, match="at least one model"):
        run("--out", tmp_path)
    with pytest.raises(ValueError, match="--label"):
        run("--config", tmp_path / "m.yaml", "--label", "a", "--label", "b")
    with pytest.raises(ValueError, match="seq-len"):
        run("--config", tmp_path / "m.yaml", "--seq-len", 99, "--out", tmp_path)
    with pytest.raises(ValueError, match="unknown TransformerConfig field"):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**CONFIG, "depht": 3}))
        run("--config", tmp_path / "bad.yaml")
    with pytest.raises(ValueError, match="does not exist"):
        run("--checkpoint", tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="--task-option must be KEY=VALUE; got 'patch_size'"):
        run("--config", tmp_path / "m.yaml", "--task", "digits", "--task-option", "patch_size")


@pytest.mark.parametrize("case", ["a path under a regular file", "an existing regular file"])
def test_an_unusable_out_directory_is_refused_before_any_model(tmp_path, capsys, case):
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(CONFIG))
    blocker = tmp_path / f"file-{torch.randint(10**9, ()).item()}"
    blocker.write_text("not a directory")
    out = blocker / "out" if case.startswith("a path") else blocker
    code = main(["diagnose", "--config", str(tmp_path / "m.yaml"), "--num-samples", "4",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(f"filterformer diagnose: error: --out {out} ")
    assert "not a directory" in captured.err and "Traceback" not in captured.err
    assert captured.out == ""  # no model was diagnosed
    assert blocker.read_text() == "not a directory"
