"""save_pretrained / from_pretrained: a patched model comes back whole, or not at all."""

import copy
import json
import logging

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from filterformer import from_pretrained, patch, patched_parameters, save_pretrained, unpatch
from filterformer.patching.saved_patch import MARKER_KEY, PATCH_FILE
from filterformer.patching.state import get_patch_state

from .helpers import (
    hf_inputs,
    hf_model,
    images,
    load_minilm,
    randomise_patch,
    sentences,
    timm_model,
)


def perturbed(model, method, **options):
    """``model`` patched, its new parameters moved away from their init."""
    patch(model, method, **options)
    randomise_patch(patched_parameters(model), scale=0.3)
    return model


def assert_same_patch(loaded, model):
    assert type(loaded) is type(model) and not loaded.training
    assert get_patch_state(loaded).spec == get_patch_state(model).spec
    for (name, ours), (saved_name, saved) in zip(
        patched_parameters(loaded), patched_parameters(model), strict=True
    ):
        assert name == saved_name and torch.equal(ours, saved), name


class Records(logging.Handler):
    """The messages logged under one logger while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# ----- round trips ------------------------------------------------------------------------


def test_a_gfsa_minilm_comes_back_with_its_perturbed_filter(tmp_path):
    model, tokenizer = load_minilm()
    batch, _ = sentences(tokenizer, 6)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        plain = model(**batch).last_hidden_state
        perturbed(model, "gfsa", K=4, learn=("w1", "wK"))
        patched = model(**batch).last_hidden_state
    assert (patched - plain)[real].abs().max() > 1e-3  # the saved filter really acts

    assert save_pretrained(model, tmp_path) == tmp_path
    saved = json.loads((tmp_path / PATCH_FILE).read_text())
    assert (saved["backend"], saved["model"]) == ("transformers", "BertModel")
    assert saved["method"] == "gfsa"
    assert saved["options"] == {"K": 4, "learn": ["w1", "wK"], "exact_power": False,
                                "base": "softmax", "layers": None}
    loaded = from_pretrained(tmp_path)
    assert_same_patch(loaded, model)
    with torch.no_grad():
        again = loaded(**batch).last_hidden_state
    torch.testing.assert_close(again[real], patched[real], rtol=0, atol=1e-6)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_a_gfsa_neutreno_causal_lm_saved_by_its_own_save_pretrained_comes_back(tmp_path, kind):
    model = perturbed(
        hf_model(kind, head=True), "gfsa+neutreno", K=2, neutreno_lambda=0.3,
        neutreno_learnable=True, layers=[1],
    )
    model.save_pretrained(tmp_path)  # the model's own save, as transformers.Trainer calls it
    assert (tmp_path / PATCH_FILE).is_file()
    loaded = from_pretrained(tmp_path)
    assert_same_patch(loaded, model)
    if kind == "gpt2":  # tied input and output embeddings stay one tensor
        assert loaded.lm_head.weight is loaded.transformer.wte.weight
    inputs = hf_inputs(kind)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits,
                                   rtol=0, atol=1e-6)
    generate = dict(inputs, max_new_tokens=4, do_sample=False)
    assert torch.equal(loaded.generate(**generate), model.generate(**generate))


@pytest.mark.parametrize(
    ("kind", "method", "options"),
    [("bert", "fusion", {"fusion": "gate"}), ("vit", "gfsa+fusion", {"K": 3})],
)
def test_a_fused_encoder_comes_back(tmp_path, kind, method, options):
    model = perturbed(hf_model(kind, head=True), method, **options)
    save_pretrained(model, tmp_path)
    loaded = from_pretrained(tmp_path)
    assert_same_patch(loaded, model)
    assert any(name.startswith("filterformer_fusion.") for name, _ in patched_parameters(loaded))
    inputs = hf_inputs(kind)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, model(**inputs).logits,
                                   rtol=0, atol=1e-6)


def test_a_patched_timm_vit_comes_back_with_its_create_arguments(tmp_path):
    model = perturbed(timm_model(), "gfsa+neutreno", neutreno_learnable=True, layers=[0, 2])
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architecture"] == "deit_tiny_patch16_224" and config["num_classes"] == 5
    loaded = from_pretrained(tmp_path)
    assert_same_patch(loaded, model)
    assert [len(loaded.blocks), loaded.embed_dim, loaded.patch_embed.img_size] == [3, 48, (32, 32)]
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=1e-6)


def test_timm_create_arguments_are_asked_for_when_the_model_does_not_record_them(tmp_path):
    model = perturbed(timm_model(), "gfsa")
    vars(model).pop("_model_args", None)  # as from a timm that keeps no record
    with pytest.raises(ValueError, match=r"\*\*\{'num_classes': 5\}\) does not rebuild this "
                       r"model.*proj\.bias: \(48,\) here, \(192,\) rebuilt.*create_kwargs="):
        save_pretrained(model, tmp_path)
    wrong = dict(img_size=32, patch_size=8, embed_dim=48, depth=2, num_heads=3)
    with pytest.raises(ValueError, match=r"blocks\.2\.attn\.w0: \(3,\) here, absent rebuilt"):
        save_pretrained(model, tmp_path, create_kwargs=wrong)
    with pytest.raises(ValueError, match=r"create_kwargs\['act_layer'\].*JSON"):
        save_pretrained(model, tmp_path, create_kwargs={**wrong, "act_layer": torch.nn.GELU})
    save_pretrained(model, tmp_path, create_kwargs={**wrong, "depth": 3})
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path)(x), model(x), rtol=0, atol=1e-6)


# ----- refusals ---------------------------------------------------------------------------


@pytest.fixture
def saved_bert(tmp_path):
    """A tiny patched BERT classifier saved in ``tmp_path``."""
    save_pretrained(perturbed(hf_model("bert", head=True), "gfsa+neutreno"), tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(method="gfsa+magic"), r"method must be one of \('gfsa', 'neutreno'"),
        (lambda d: d.update(method="agf"), r"'agf' replaces the attention itself"),
        (lambda d: d["options"].update(K=1), r"K must be an integer >= 2.*got 1"),
        (lambda d: d["options"].update(K="three"), r"K must be an integer >= 2.*got 'three'"),
        (lambda d: d["options"].pop("K"), r"options lack \['K'\].*'gfsa\+neutreno'"),
        (lambda d: d["options"].update(lam=0.5), r"unknown option\(s\) 'lam'.*valid options"),
        (lambda d: d.pop("method"), r"missing field\(s\) \['method'\]"),
        (lambda d: d.update(extra=1), r"unknown field\(s\) \['extra'\]"),
        (lambda d: d.update(format=2), r"format 2 is not one this filterformer reads"),
        (lambda d: d.update(backend="keras"), r"backend must be one of \('transformers', 'timm'\)"),
        (lambda d: d.update(model="NoSuchModel"), r"'NoSuchModel' is not a transformers model"),
        (lambda d: d.update(model="GPT2Model"), r"names model 'GPT2Model', which is built from a "
         r"GPT2Config \(model_type 'gpt2'\), and .*config\.json holds a BertConfig"),
    ],
)
def test_a_tampered_patch_file_is_refused_with_a_clear_error(saved_bert, change, message):
    path = saved_bert / PATCH_FILE
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as raised:
        from_pretrained(saved_bert)
    assert PATCH_FILE in str(raised.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: w.pop("bert.encoder.layer.1.attention.self.filterformer.wK"),
         r"missing \['bert\.encoder\.layer\.1\.attention\.self\.filterformer\.wK'\]"),
        (lambda w: w.update({"bert.encoder.layer.0.attention.self.filterformer.w2": torch.ones(4)}),
         r"unexpected \['bert\.encoder\.layer\.0\.attention\.self\.filterformer\.w2'\]"),
        (lambda w: w.pop(MARKER_KEY), r"missing \['filterformer\.from_pretrained'\]"),
        (lambda w: w.update({"bert.encoder.layer.0.attention.self.filterformer.w1": torch.ones(3)}),
         r"mis-shaped \['bert\.encoder\.layer\.0\.attention\.self\.filterformer\.w1: \(3,\) "
         r"saved, \(4,\) in the model'\]"),
    ],
)
def test_weights_that_lack_or_add_a_patch_key_are_refused_naming_it(saved_bert, change, message):
    path = saved_bert / "model.safetensors"
    weights = load_file(path)
    change(weights)
    save_file(weights, path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=message):
        from_pretrained(saved_bert)


def test_what_cannot_be_saved_or_loaded_is_refused(tmp_path):
    model = hf_model("bert")
    with pytest.raises(ValueError, match="is not patched; patch"):
        save_pretrained(model, tmp_path)
    patch(model, "gfsa")
    with pytest.raises(ValueError, match="create_kwargs is for timm models"):
        save_pretrained(model, tmp_path, create_kwargs={"depth": 2})
    with pytest.raises(ValueError, match=r"unknown argument\(s\) \['max_shard_size'\]"):
        save_pretrained(patch(timm_model(), "gfsa"), tmp_path, max_shard_size="1GB")
    unpatch(model)  # the model's own save is transformers' again: no patch file
    model.save_pretrained(tmp_path / "plain")
    assert not (tmp_path / "plain" / PATCH_FILE).exists()
    with pytest.raises(FileNotFoundError, match=r"no filterformer\.json"):
        from_pretrained(tmp_path / "plain")


# ----- what other loaders see -------------------------------------------------------------


def test_plain_transformers_loads_the_base_weights_and_names_filterformer_from_pretrained(
    tmp_path,
):
    model = hf_model("bert")
    original = copy.deepcopy(model)
    inputs = hf_inputs("bert")
    save_pretrained(perturbed(model, "gfsa"), tmp_path)

    records = Records()
    logger = logging.getLogger("transformers")
    logger.addHandler(records)
    try:
        plain = transformers.AutoModel.from_pretrained(tmp_path).eval()
    finally:
        logger.removeHandler(records)
    report = "\n".join(records.messages)
    assert "UNEXPECTED" in report and "filterformer.from_pretrained" in report
    for coefficient in ("w0", "w1", "wK"):
        assert f"attention.self.filterformer.{coefficient}" in report
    with torch.no_grad():  # the base weights, without the patch
        assert torch.equal(plain(**inputs).last_hidden_state,
                           original(**inputs).last_hidden_state)

    # A state dict holding the marker loads strictly into a patched model (a Trainer resuming
    # from the checkpoint), and into an unpatched one it is named.
    weights = load_file(tmp_path / "model.safetensors")
    patch(original, "gfsa").load_state_dict(weights, strict=True)
    assert_same_patch(original.eval(), model)
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\).*filterformer\.from_pretrained"):
        unpatch(original).load_state_dict(weights, strict=True)


def test_a_timm_model_name_timm_does_not_know_is_refused_naming_the_config_file(tmp_path):
    save_pretrained(perturbed(timm_model(), "gfsa"), tmp_path)
    for name, key in (("config.json", "architecture"), (PATCH_FILE, "model")):
        data = json.loads((tmp_path / name).read_text())
        data[key] = "vit_tiny_patch16"  # the size left out
        (tmp_path / name).write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"timm has no model 'vit_tiny_patch16'; ViTs include ") \
            as raised:
        from_pretrained(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path / 'config.json'}: ")
