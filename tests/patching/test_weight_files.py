"""A saved directory holds one set of weights, the last save's; two sets are refused on loading."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from filterformer import from_pretrained, patch, patched_parameters, save_pretrained

from .helpers import hf_inputs, hf_model, images, randomise_patch, timm_model

SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"
#: Small enough for the tiny BERT (about 130 kB of weights) to take several shards.
SHARDED = {"max_shard_size": "40kB"}


def patched_bert():
    model = patch(hf_model("bert"), "gfsa")
    randomise_patch(patched_parameters(model))
    return model


def weight_files(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("model"))


def shards(directory):
    return sorted(set(json.loads((directory / INDEX).read_text())["weight_map"].values()))


def assert_loads_as(directory, model, inputs):
    with torch.no_grad():
        loaded = from_pretrained(directory)(**inputs).last_hidden_state
        torch.testing.assert_close(loaded, model(**inputs).last_hidden_state, rtol=0, atol=0)


@pytest.mark.parametrize(("first", "second"), [({}, SHARDED), (SHARDED, {})],
                         ids=["single-then-sharded", "sharded-then-single"])
def test_a_second_save_leaves_only_its_own_weights_and_loads_as_itself(tmp_path, first, second):
    inputs = hf_inputs("bert")
    earlier, later = patched_bert(), patched_bert()
    save_pretrained(earlier, tmp_path, **first)
    save_pretrained(later, tmp_path, **second)
    files = weight_files(tmp_path)
    if second:
        assert SINGLE not in files and len(shards(tmp_path)) > 1
        assert files == sorted({INDEX, *shards(tmp_path)})
    else:
        assert files == [SINGLE]
    assert_loads_as(tmp_path, later, inputs)


def test_a_timm_save_replaces_earlier_shards(tmp_path):
    save_pretrained(patched_bert(), tmp_path, **SHARDED)
    model = patch(timm_model(), "gfsa")
    randomise_patch(patched_parameters(model))
    save_pretrained(model, tmp_path)
    assert weight_files(tmp_path) == [SINGLE]
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(from_pretrained(tmp_path)(x), model(x), rtol=0, atol=0)


def test_a_directory_holding_both_layouts_is_refused_naming_them(tmp_path):
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    save_pretrained(patched_bert(), single)
    save_pretrained(patched_bert(), sharded, **SHARDED)
    shutil.copy(single / SINGLE, sharded / SINGLE)  # a save that left the other layout behind
    with pytest.raises(ValueError, match=rf"{sharded} holds two sets of weights, {SINGLE} and "
                                         rf"the shards of {INDEX}"):
        from_pretrained(sharded)


def test_shards_that_do_not_match_their_index_are_refused_naming_the_file(tmp_path):
    save_pretrained(patched_bert(), tmp_path, **SHARDED)
    first, *_, last = shards(tmp_path)
    weights = load_file(tmp_path / last)
    weights.pop(sorted(weights)[0])
    save_file(weights, tmp_path / last, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=rf"{last} does not hold the weights .*{INDEX}"):
        from_pretrained(tmp_path)
    (tmp_path / first).unlink()
    with pytest.raises(FileNotFoundError, match=rf"{INDEX} names the shard {first}"):
        from_pretrained(tmp_path)


def test_a_variant_save_is_refused_because_it_would_not_be_read(tmp_path):
    with pytest.raises(ValueError, match=r"variant='fp16'.*model\.fp16\.safetensors"):
        save_pretrained(patched_bert(), tmp_path, variant="fp16")
    assert not tmp_path.exists() or not weight_files(tmp_path)
