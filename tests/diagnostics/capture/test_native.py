import pytest
import torch

from filterformer.diagnostics import capture, model_kind, smallest_token_std
from filterformer.models import CausalLM, SequenceClassifier, Transformer, TransformerConfig

from .helpers import assert_hidden_metric_by_hand, assert_softmax_attention, token_batch


def test_task_head_with_padding_gives_the_backbones_outputs():
    config = TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=50, attention="gfsa")
    model = SequenceClassifier(config, num_classes=3).eval()
    tokens = token_batch()
    mask = tokens["attention_mask"].bool()
    batch = {"input_ids": tokens["input_ids"], "padding_mask": mask,
             "labels": torch.zeros(3, dtype=torch.long)}
    with torch.no_grad():
        captured = capture(model, batch, attentions=True)
        out = model.transformer(tokens["input_ids"], padding_mask=mask,
                                output_hidden_states=True, output_attentions=True)
    assert model_kind(model) == "filterformer"
    for got, want in zip(captured.hidden_states, out.hidden_states, strict=True):
        torch.testing.assert_close(got, want)
    for got, maps in zip(captured.filters, out.attention_maps, strict=True):
        torch.testing.assert_close(got, maps.filter)
    assert_softmax_attention(captured.attentions[0], mask, causal=False)
    assert_hidden_metric_by_hand(captured, mask)


def test_causal_lm_and_a_tensor_batch():
    model = CausalLM(TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=50, causal=True))
    ids = torch.randint(1, 50, (2, 6))
    captured = capture(model, ids, attentions=True)
    assert captured.mask.all() and captured.num_layers == 2
    assert_softmax_attention(captured.attentions[1], captured.mask, causal=True)


def test_post_ln_sigmas_are_the_norm_inputs_computed_by_hand():
    config = TransformerConfig(dim=16, depth=3, num_heads=2, norm="post", vocab_size=30)
    model = Transformer(config).double().eval()
    ids = torch.randint(1, 30, (4, 7))
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 5:] = False
    captured = capture(model, {"input_ids": ids, "padding_mask": mask})
    assert len(captured.norm_stds) == 3
    with torch.no_grad():
        x = model.embed(ids)
        for block, (sigma1, sigma2) in zip(model.blocks, captured.norm_stds, strict=True):
            first = x + block.attn(x, padding_mask=mask)  # post-LN: norm1(x + attn(x))
            hidden = block.norm1(first)
            second = hidden + block.mlp(hidden)  # then norm2(h + mlp(h))
            torch.testing.assert_close(sigma1, smallest_token_std(first, mask))
            torch.testing.assert_close(sigma2, smallest_token_std(second, mask))
            x = block.norm2(second)


def test_batch_without_inputs_raises():
    model = Transformer(TransformerConfig(dim=8, depth=1, num_heads=2, vocab_size=10))
    with pytest.raises(ValueError, match="input_ids"):
        capture(model, {"labels": torch.zeros(2)})
