import pytest

from filterformer.models import TransformerConfig


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"attention": "flash"}, r"unknown attention 'flash'; valid choices: .*gfsa.*softmax"),
        ({"norm": "sandwich"}, r"norm must be one of \('pre', 'post'\)"),
        ({"fusion": "sum"}, r"fusion must be one of \('concat', 'max', 'gate'\)"),
        ({"position": "rope"}, "position must be one of"),
        ({"dim": 30, "num_heads": 4}, "divisible"),
        ({"depth": 0}, "depth must be a positive integer"),
        ({"attention": "gfsa", "attention_layers": (0, 4)},
         r"attention_layers \[4\] do not exist: the model has 4 layers.* 0\.\.3"),
        ({"dropout": 1.5}, r"dropout must be in \[0, 1\)"),
        ({"neutreno_lambda": float("nan")}, r"neutreno_lambda must be a finite number >= 0"),
        ({"neutreno_lambda": float("inf")}, r"neutreno_lambda must be a finite number >= 0"),
        ({"neutreno_lambda": -1.0}, r"neutreno_lambda must be a finite number >= 0 \(the papers "
                                    r"use λ in \(0, 1\]"),
        ({"mlp_ratio": float("nan")}, "mlp_ratio must be a positive finite number"),
        ({"mlp_ratio": float("inf")}, "mlp_ratio must be a positive finite number"),
        ({"mlp_ratio": 1e308}, r"mlp_ratio × dim is the MLP's inner width, a whole number from 1 "
                               r"to 2\*\*63; got 1e\+308 × 128"),
        ({"mlp_ratio": 1e-3}, r"mlp_ratio × dim .*; got 0\.001 × 128"),
        ({"norm_eps": 0.0}, "norm_eps must be a positive finite number"),
        ({"norm_eps": -1e-5}, "norm_eps must be a positive finite number"),
        ({"norm_eps": float("nan")}, "norm_eps must be a positive finite number"),
        ({"attention_layers": ("a",)}, r"attention_layers must be a non-empty list of 0-based"),
        ({"attention_layers": (0.5,)}, r"attention_layers must be a non-empty list of 0-based"),
        ({"attention_layers": ()}, r"attention_layers must be a non-empty list"),
        ({"attention_layers": (1,)}, r"layers \[1\] select .*and this method has none"),
        ({"attention_layers": 2}, r"attention_layers must be a list"),
        ({"neutreno_lambda": 0.5, "neutreno_warmup": 3},
         r"neutreno_warmup=3 raises λ from 0 in a pretrained model's NeuTRENO patch .*trained "
         "from scratch"),
        ({"neutreno_warmup": -1}, r"neutreno_warmup must be an integer >= 0"),
    ],
)
def test_config_rejects_bad_values(overrides, needle):
    with pytest.raises(ValueError, match=needle):
        TransformerConfig(depth=overrides.pop("depth", 4), **overrides)


def test_config_round_trips_through_plain_data():
    config = TransformerConfig(
        attention="gfsa", attention_options={"K": 4}, attention_layers=[1, 3]
    )
    data = config.to_dict()
    assert data["attention_layers"] == [1, 3]
    assert "neutreno_warmup" not in data  # pretrained runs only: configs read as before it
    assert TransformerConfig.from_dict(data) == config
    with pytest.raises(ValueError, match="unknown TransformerConfig field"):
        TransformerConfig.from_dict({**data, "width": 3})


def test_layer_attention():
    config = TransformerConfig(depth=4, attention="gfsa", attention_options={"K": 2},
                               attention_layers=(1, 3))
    assert config.layer_attention(1) == ("gfsa", {"K": 2})
    assert config.layer_attention(0) == ("softmax", {})


def test_attention_layers_take_numpy_integers():
    import numpy as np

    config = TransformerConfig(depth=4, attention="agf", attention_layers=np.array([3, 1]))
    assert config.attention_layers == (1, 3) and type(config.attention_layers[0]) is int
