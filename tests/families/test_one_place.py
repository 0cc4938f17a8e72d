"""A pretrained model is loaded in one place: ``filterformer diagnose --hf/--timm``, a
pretrained training run and ``save_pretrained``/``from_pretrained`` call the same adapter
functions, and a timm name that no model has is refused by one check, in one text, whichever of
them asks."""

import copy
from pathlib import Path

import pytest
import torch

import filterformer
from filterformer import from_pretrained, patch, patch_change, patched_parameters, save_pretrained
from filterformer.cli import main
from filterformer.data import load_task
from filterformer.data.sentiment import minilm_tokenizer_path
from filterformer.families import MINILM, TIMM, HuggingFaceFamily, TimmFamily
from filterformer.patching.saved_patch import PATCH_FILE
from filterformer.training.pretrained import PretrainedModelConfig, build_pretrained

from ..patching.helpers import hf_inputs, hf_model, images, randomise_patch, timm_model
from .test_hf_directory import tiny_bert_with_tokenizer

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")

SOURCE = Path(filterformer.__file__).parent


def recorded(monkeypatch, cls: type, name: str) -> list[tuple]:
    """Record each call of ``cls.name`` (its arguments), then make it."""
    calls = []
    original = getattr(cls, name)

    def record(self, *args, **kwargs):
        calls.append((args, kwargs))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, record)
    return calls


def test_diagnose_and_training_load_a_hugging_face_model_through_the_adapter(
    tmp_path, monkeypatch, capsys
):
    directory = str(tiny_bert_with_tokenizer(tmp_path / "bert"))
    loads = recorded(monkeypatch, HuggingFaceFamily, "load")
    assert main(["diagnose", "--hf", directory, "--num-samples", "2", "--no-attentions",
                 "--formats", "svg", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert loads == [((directory,), {})]
    model = build_pretrained(PretrainedModelConfig(directory, "transformers", None))
    assert loads == [((directory,), {})] * 2
    assert model.backbone.config.hidden_size == 8


def test_diagnose_and_training_create_a_timm_vit_through_the_adapter(
    tmp_path, monkeypatch, capsys
):
    creates = recorded(monkeypatch, TimmFamily, "create")
    assert main(["diagnose", "--timm", "vit_tiny_patch16_224", "--image-size", "32",
                 "--num-samples", "2", "--no-attentions", "--formats", "svg", "--quiet",
                 "--out", str(tmp_path)]) == 0
    assert [args for args, _ in creates] == [("vit_tiny_patch16_224",)]
    config = PretrainedModelConfig("timm:vit_tiny_patch16_224", "timm", None, num_classes=3,
                                   image_size=(8, 8), patch_size=2)
    model = build_pretrained(config)
    assert [args for args, _ in creates] == [("vit_tiny_patch16_224",)] * 2
    assert model.backbone.patch_embed.proj.kernel_size == (2, 2)


def test_a_timm_name_no_model_has_is_refused_in_one_text(tmp_path, capsys):
    name = "vit_tiny_patch16"  # the size left out
    with pytest.raises(ValueError) as direct:
        TIMM.create(name, vit_only=True)
    assert str(direct.value).startswith(f"timm has no model {name!r}; ViTs include ")
    config = PretrainedModelConfig(f"timm:{name}", "timm", None, image_size=(8, 8), patch_size=2)
    with pytest.raises(ValueError) as training:
        build_pretrained(config)
    assert str(training.value) == f"pretrained='timm:{name}': {direct.value}"
    assert main(["diagnose", "--timm", name, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.endswith(f"--timm: {direct.value}\n")


@pytest.mark.parametrize("text", ["timm has no model", "timm.is_model(", "ViTs include",
                                  '"config.json").is_file()'])
def test_the_family_checks_are_written_once_in_the_package(text):
    files = [path.relative_to(SOURCE).as_posix() for path in SOURCE.rglob("*.py")
             if text in path.read_text(encoding="utf-8")]
    home = "families/hf_directory.py" if "config.json" in text else "families/timm.py"
    assert files == [home]


def test_saving_and_loading_a_patched_hugging_face_model_rebuilds_it_through_the_adapter(
    tmp_path, monkeypatch
):
    rebuilds = recorded(monkeypatch, HuggingFaceFamily, "rebuild")
    model = patch(hf_model("bert", head=True), "gfsa+neutreno", layers=[1])
    randomise_patch(patched_parameters(model), scale=0.3)
    save_pretrained(model, tmp_path / "saved")
    model.save_pretrained(tmp_path / "own")  # the route transformers.Trainer takes
    assert rebuilds == []
    inputs = hf_inputs("bert")
    for name in ("saved", "own"):
        loaded = from_pretrained(tmp_path / name)
        assert rebuilds[-1] == ((tmp_path / name, type(model).__name__),
                                {"named_in": tmp_path / name / PATCH_FILE})
        with torch.no_grad():
            torch.testing.assert_close(loaded(**inputs).logits, model.eval()(**inputs).logits,
                                       rtol=0, atol=1e-6)
    assert len(rebuilds) == 2


def test_saving_and_loading_a_patched_timm_vit_goes_through_the_adapter(tmp_path, monkeypatch):
    configs = recorded(monkeypatch, TimmFamily, "saved_config")
    creates = recorded(monkeypatch, TimmFamily, "from_saved_config")
    rebuilds = recorded(monkeypatch, TimmFamily, "rebuild")
    model = patch(timm_model(), "gfsa+neutreno", neutreno_learnable=True, layers=[0, 2])
    randomise_patch(patched_parameters(model), scale=0.3)
    save_pretrained(model, tmp_path)
    assert [args for args, _ in configs] == [(model, None)]
    assert [args[0]["architecture"] for args, _ in creates] == ["deit_tiny_patch16_224"]
    assert rebuilds == []
    loaded = from_pretrained(tmp_path)
    assert rebuilds == [((tmp_path, "deit_tiny_patch16_224"),
                         {"named_in": tmp_path / PATCH_FILE})]
    assert len(creates) == 2  # the check when saving, the model when loading
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=1e-6)


def test_patch_change_reads_a_timm_vit_through_the_adapter(monkeypatch):
    reads = recorded(monkeypatch, TimmFamily, "final_hidden_states")
    original = timm_model().eval()
    patched = patch(copy.deepcopy(original), "neutreno", neutreno_lambda=0.5)
    x = images()
    change = patch_change(original, patched, x)
    assert [args[0] for args, _ in reads] == [original, patched]
    with torch.no_grad():
        before, after = original.forward_features(x).double(), patched.forward_features(x).double()
    expected = ((after - before).norm() / before.norm()).item()
    assert change.relative_change == pytest.approx(expected, rel=1e-6)
    assert change.relative_change > 1e-3 and change.tokens == before.shape[0] * before.shape[1]
    with pytest.raises(ValueError, match=r"inputs of a timm ViT must be its \(B, C, H, W\) images"):
        patch_change(original, patched, {"x": x})


@pytest.mark.parametrize("text", ["import timm", "GenerationConfig.from_pretrained(",
                                  "issubclass(cls, transformers.PreTrainedModel)"])
def test_models_are_built_only_in_the_family_adapters(text):
    files = {path.relative_to(SOURCE).parts[0] for path in SOURCE.rglob("*.py")
             if text in path.read_text(encoding="utf-8")}
    assert files == {"families"}


def test_the_sentiment_task_reads_its_tokenizer_through_the_adapter(tmp_path, monkeypatch):
    words = ["good", "bad", "film", "dull", "witty", "plot", "slow", "fine"]
    generator = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ())))
    lines = []
    for number in range(1, 21):
        picks = torch.randint(0, len(words), (3,), generator=generator).tolist()
        rating = round(float(torch.rand((), generator=generator)) * 4 - 2, 2) or 0.5
        lines.append(f"{number}\t{rating}\t{' '.join(words[i] for i in picks)}")
    snippets = tmp_path / "snippets.txt"
    snippets.write_text("\n".join(lines))
    directory = tiny_bert_with_tokenizer(tmp_path / "bert")
    tokenizers = recorded(monkeypatch, HuggingFaceFamily, "tokenizer")
    own = load_task("sentiment", path=snippets, tokenizer=str(directory))
    default = load_task("sentiment", path=snippets)
    assert [args for args, _ in tokenizers] == [(str(directory),), (MINILM,)]
    assert own.metadata["tokenizer"] == str(directory)
    assert default.metadata["tokenizer"] == str(minilm_tokenizer_path())
    reference = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
    expected = sorted(reference([line.split("\t")[2] for line in lines])["input_ids"])
    read = sorted(split[i]["input_ids"].tolist() for split in (own.train, own.validation, own.test)
                  for i in range(len(split)))
    assert read == expected
