"""``compare`` with ``pretrained``: the defaults the user did not set give way, named in a
warning; what the user set is still refused."""

from __future__ import annotations

import pytest
import yaml

from filterformer.cli import main
from filterformer.methods import DEFAULT_METHODS
from filterformer.training.compare import load_compare_config
from filterformer.training.compare.comparison_config import DEFAULT_COMPARE_CONFIG
from filterformer.training.pretrained import MINILM

PRETRAINED = [f"pretrained={MINILM}", "task=sentiment"]
UNPATCHABLE = ("agf", "samsa_soft", "samsa_hard")


def test_the_built_in_comparison_gives_way_to_a_pretrained_model():
    with pytest.warns(UserWarning) as caught:
        config = load_compare_config(None, PRETRAINED)
    assert config.base.model == {} and config.base.pretrained == MINILM
    assert config.methods == tuple(m for m in DEFAULT_METHODS if m not in UNPATCHABLE)
    said = " ".join(str(w.message) for w in caught)
    assert all(f"model.{key}" in said for key in DEFAULT_COMPARE_CONFIG["model"])
    assert "the default methods agf, samsa_soft, samsa_hard cannot be patched" in said


def test_a_config_file_keeps_its_model_and_loses_only_unpatchable_default_methods(tmp_path):
    path = tmp_path / "minilm.yaml"
    path.write_text(yaml.safe_dump({"task": "sentiment", "pretrained": MINILM, "epochs": 1}))
    with pytest.warns(UserWarning, match="agf, samsa_soft, samsa_hard cannot be patched"):
        config = load_compare_config(path)
    assert config.methods == tuple(m for m in DEFAULT_METHODS if m not in UNPATCHABLE)
    assert config.base.epochs == 1
    path.write_text(yaml.safe_dump({"task": "sentiment", "pretrained": MINILM,
                                    "model": {"dim": 32}}))
    with pytest.raises(ValueError, match=r"model\.dim cannot be used with pretrained"):
        load_compare_config(path)


def test_the_pretrained_dry_run_exits_0_and_names_what_it_left_out(capsys):
    assert main(["compare", "--set", *PRETRAINED, "task_options.num_train=64", "batch_size=8",
                 "--seeds", "0", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "warning: pretrained=all-MiniLM-L6-v2: the built-in comparison's model.dim" in (
        captured.err)
    assert "the default methods agf, samsa_soft, samsa_hard cannot be patched" in captured.err
    assert "dry run: 4 methods × 1 seeds = 4 runs would train" in captured.out
    assert not any(f"{method}:" in captured.out for method in UNPATCHABLE)


@pytest.mark.parametrize(("extra", "named"), [
    (["--set", "model.depth=4"], "model.depth cannot be used with pretrained"),
    (["--methods", "softmax", "agf"], "method 'agf' uses attention 'agf', which cannot be patched"),
])
def test_what_the_user_set_is_still_refused(capsys, extra, named):
    assert main(["compare", "--set", *PRETRAINED, *extra, "--dry-run"]) == 2
    assert named in capsys.readouterr().err
