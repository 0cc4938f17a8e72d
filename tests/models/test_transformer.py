import pytest
import torch

from filterformer.functional import gfsa_filter
from filterformer.models import SequenceClassifier, Transformer

from .helpers import KINDS, VOCAB, config, randomise_filters


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("causal", [False, True])
def test_gfsa_model_at_init_equals_softmax_model(norm, causal):
    softmax = Transformer(config(norm=norm, causal=causal)).eval()
    gfsa = Transformer(config(norm=norm, causal=causal, attention="gfsa")).eval()
    missing, unexpected = gfsa.load_state_dict(softmax.state_dict(), strict=False)
    assert not unexpected and all(name.split(".")[-1] in ("w0", "w1", "wK") for name in missing)
    ids = torch.randint(0, VOCAB, (3, 11))
    padding = torch.ones(3, 11, dtype=torch.bool)
    padding[2, 7:] = False
    a = softmax(ids, padding_mask=padding).last_hidden_state
    b = gfsa(ids, padding_mask=padding).last_hidden_state
    assert (a - b).abs().max() <= 1e-6


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_neutreno_lambda_zero_is_the_baseline_and_layer_zero_is_unchanged(norm):
    base = Transformer(config(norm=norm)).eval()
    zero = Transformer(config(norm=norm, neutreno_lambda=0.0)).eval()
    neu = Transformer(config(norm=norm, neutreno_lambda=0.6)).eval()
    zero.load_state_dict(base.state_dict())
    neu.load_state_dict(base.state_dict())
    ids = torch.randint(0, VOCAB, (2, 9))
    ref = base(ids, output_hidden_states=True).hidden_states
    assert torch.equal(zero(ids).last_hidden_state, base(ids).last_hidden_state)
    out = neu(ids, output_hidden_states=True).hidden_states
    torch.testing.assert_close(out[1], ref[1], rtol=0, atol=0)
    assert (out[2] - ref[2]).abs().max() > 1e-3


@pytest.mark.parametrize("kind", [*KINDS, "fusion_gate"])
def test_every_causal_model_is_causal(kind):
    options = {"fusion": "gate"} if kind == "fusion_gate" else KINDS[kind]
    model = Transformer(config(causal=True, **options)).double().eval()
    randomise_filters(model)
    ids = torch.randint(0, VOCAB, (2, 12))
    out = model(ids).last_hidden_state
    for t in (0, 5, 10):
        changed = ids.clone()
        changed[:, t + 1 :] = torch.randint(0, VOCAB, changed[:, t + 1 :].shape)
        other = model(changed).last_hidden_state
        torch.testing.assert_close(other[:, : t + 1], out[:, : t + 1], rtol=0, atol=1e-12)
        if t + 1 < 12:
            assert (other[:, t + 1 :] - out[:, t + 1 :]).abs().max() > 1e-6


ALL_KINDS = {
    **{f"{k}-{c}": dict(v, causal=c == "causal") for k, v in KINDS.items()
       for c in ("causal", "bidirectional")},
    "gfsa_efficient": {"attention": "gfsa", "attention_options": {"base": "efficient"}},
    "fusion_concat": {"fusion": "concat"},
    "fusion_max": {"fusion": "max", "fusion_include_embeddings": True},
    "post_ln_gfsa": {"attention": "gfsa", "norm": "post"},
    "selective_gfsa": {"attention": "gfsa", "attention_layers": (1,)},
}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_appending_padding_does_not_change_real_tokens(kind):
    model = Transformer(config(**ALL_KINDS[kind])).double().eval()
    randomise_filters(model)
    ids = torch.randint(1, VOCAB, (2, 8))
    lengths = torch.tensor([8, 5])
    mask = torch.arange(8)[None] < lengths[:, None]
    out = model(ids, padding_mask=mask).last_hidden_state
    longer = torch.cat([ids, torch.randint(0, VOCAB, (2, 6))], dim=1)
    longer_mask = torch.cat([mask, torch.zeros(2, 6, dtype=torch.bool)], dim=1)
    out_long = model(longer, padding_mask=longer_mask).last_hidden_state
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(out_long[b, :n], out[b, :n], rtol=0, atol=1e-10)


def test_selective_layers_use_the_chosen_attention():
    model = Transformer(config(depth=6, attention="gfsa", attention_layers=(1, 3, 5)))
    kinds = [type(block.attn).__name__ for block in model.blocks]
    assert kinds == ["SoftmaxAttention", "GraphFilterAttention"] * 3


def test_hidden_states_and_attention_maps_on_request():
    model = Transformer(config(attention="gfsa", attention_options={"K": 5})).double().eval()
    randomise_filters(model)
    ids = torch.randint(0, VOCAB, (2, 7))
    out = model(ids, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 4 and all(h.shape == (2, 7, 32) for h in out.hidden_states)
    assert len(out.attention_maps) == 3
    for block, maps in zip(model.blocks, out.attention_maps, strict=True):
        rows = maps.attention.sum(-1)
        torch.testing.assert_close(rows, torch.ones_like(rows))
        a = block.attn
        torch.testing.assert_close(maps.filter, gfsa_filter(maps.attention, a.w0, a.w1, a.wK, K=5))
    plain = model(ids)
    assert plain.hidden_states is None and plain.attention_maps is None and plain.aux_loss is None


def test_bfloat16_model_runs_close_to_float32():
    model = Transformer(config(attention="gfsa", neutreno_lambda=0.5)).eval()
    randomise_filters(model)
    ids = torch.randint(0, VOCAB, (2, 10))
    ref = model(ids).last_hidden_state
    low = model.bfloat16()(ids).last_hidden_state
    assert low.dtype == torch.bfloat16 and torch.isfinite(low).all()
    assert ((low.float() - ref).norm() / ref.norm()) < 5e-2


def test_model_gradients_are_finite_with_padding():
    model = Transformer(config(attention="gfsa", causal=True, neutreno_lambda=0.4))
    ids = torch.randint(0, VOCAB, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, :4] = False  # left padding: the first rows see no key under the causal mask
    model(ids, padding_mask=mask).last_hidden_state.sum().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name


@pytest.mark.parametrize("num_classes", [1, 2.5, True])
def test_classifier_names_a_bad_class_count(num_classes):
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        SequenceClassifier(config(), num_classes)
