"""A pretrained model is loaded in one place: ``filterformer diagnose --hf/--timm`` and a
pretrained training run call the same adapter function, and a timm name that no model has is
refused by one check, in one text, whichever of them asks."""

from pathlib import Path

import pytest

import filterformer
from filterformer.cli import main
from filterformer.families import TIMM, HuggingFaceFamily, TimmFamily
from filterformer.training.pretrained import PretrainedModelConfig, build_pretrained

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
