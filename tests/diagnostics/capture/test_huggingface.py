import pytest
import torch

from filterformer.diagnostics import capture, model_kind

from .helpers import (
    HookedOutputs,
    assert_hidden_metric_by_hand,
    assert_softmax_attention,
    token_batch,
)

transformers = pytest.importorskip("transformers")


def test_bert_hidden_states_attention_and_norms():
    config = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=16,
    )
    model = transformers.BertModel(config).eval()
    batch = token_batch()
    mask = batch["attention_mask"].bool()
    with torch.no_grad(), HookedOutputs(list(model.encoder.layer)) as outputs:
        embeddings = model.embeddings(input_ids=batch["input_ids"])
        captured = capture(model, batch, attentions=True)
    assert model.config._attn_implementation == "sdpa"  # restored after the pass
    assert model_kind(model) == "huggingface" and captured.num_layers == 2
    for got, expected in zip(captured.hidden_states, [embeddings, *outputs], strict=True):
        torch.testing.assert_close(got, expected)
    torch.testing.assert_close(captured.mask, mask)
    assert_hidden_metric_by_hand(captured, mask)
    # Attention by hand from the layer's own query and key projections.
    layer = model.encoder.layer[1].attention.self
    with torch.no_grad():
        x = captured.hidden_states[1]
        q, k = (p(x).view(3, 9, 4, 8).transpose(1, 2) for p in (layer.query, layer.key))
        scores = (q @ k.transpose(-1, -2)) / 8**0.5
        expected = scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
    torch.testing.assert_close(captured.attentions[1], expected)
    assert_softmax_attention(captured.attentions[0], mask, causal=False)
    assert len(captured.norm_stds) == 2 and all(len(s) == 2 for s in captured.norm_stds)


def test_gpt2_hidden_states_and_causal_attention():
    config = transformers.GPT2Config(
        vocab_size=50, n_layer=2, n_embd=32, n_head=4, n_positions=16,
        bos_token_id=0, eos_token_id=0,
    )
    model = transformers.GPT2Model(config).eval()
    batch = token_batch()
    mask = batch["attention_mask"].bool()
    with torch.no_grad(), HookedOutputs(list(model.h)) as outputs:
        captured = capture(model, {**batch, "labels": batch["input_ids"]}, attentions=True)
        embeddings = model.wte(batch["input_ids"]) + model.wpe(torch.arange(9)[None])
        # Hugging Face's last hidden state is after GPT-2's final LayerNorm.
        expected = [embeddings, outputs[0], model.ln_f(outputs[1])]
    for got, want in zip(captured.hidden_states, expected, strict=True):
        torch.testing.assert_close(got, want)
    assert_hidden_metric_by_hand(captured, mask)
    for attn in captured.attentions:
        assert_softmax_attention(attn, mask, causal=True)


def test_batch_must_be_a_dict():
    model = transformers.BertModel(transformers.BertConfig(
        vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=8,
    ))
    with pytest.raises(ValueError, match="dict"):
        capture(model, torch.randint(0, 20, (2, 4)))


def test_patched_bert_returns_the_gfsa_filter_and_its_learned_curves():
    from filterformer.diagnostics import diagnose
    from filterformer.functional import gfsa_filter
    from filterformer.patching import patch

    config = transformers.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=16,
    )
    model = transformers.BertModel(config).eval()
    patch(model, "gfsa", K=3)
    layer = model.encoder.layer[1].attention.self
    coefficients = layer.filterformer
    with torch.no_grad():
        coefficients.wK.normal_()
    batch = token_batch()
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        captured = capture(model, batch, attentions=True)
        x = captured.hidden_states[1]
        q, k = (p(x).view(3, 9, 4, 8).transpose(1, 2) for p in (layer.query, layer.key))
        scores = (q @ k.transpose(-1, -2)) / 8**0.5
        attn = scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)
        expected = gfsa_filter(attn, coefficients.w0, coefficients.w1, coefficients.wK, K=3)
    real = mask[:, None, :, None]  # padded query rows are not part of any metric
    torch.testing.assert_close(captured.filters[1] * real, expected * real)
    report = diagnose(model, [batch])
    assert len(report.gfsa_filters) == 2
    # g(σ) = σ + wK·(σ + 2(σ² − σ)) at K = 3, w0 = 0, w1 = 1.
    sigma, w = torch.tensor(report.gfsa_filters[1].sigma), coefficients.wK[2].item()
    torch.testing.assert_close(
        torch.tensor(report.gfsa_filters[1].response[2]), sigma + w * (2 * sigma**2 - sigma)
    )
