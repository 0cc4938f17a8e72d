import pytest
import torch

from filterformer.diagnostics import (
    attention_map_similarity,
    diagnose,
    effective_rank,
    filter_frequency_response,
    identical_token_distance,
    token_cosine_similarity,
)
from filterformer.models import Transformer, TransformerConfig


def nan_mean(values: torch.Tensor) -> float:
    return float(values[~values.isnan()].mean())


def token_batches(num: int, size: int, length: int, vocab: int, seed: int) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(1, vocab, (size, length), generator=generator)}
            for _ in range(num)]


def test_streaming_equals_one_pass_over_all_samples():
    config = TransformerConfig(dim=16, depth=3, num_heads=2, vocab_size=40, attention="gfsa")
    model = Transformer(config).double().eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.wK.fill_(0.3)
    ids = torch.randint(1, 40, (6, 8))
    mask = torch.ones(6, 8, dtype=torch.bool)
    mask[1, 5:], mask[4, 3:] = False, False
    batches = [{"input_ids": ids[:2], "padding_mask": mask[:2]},
               {"input_ids": ids[2:], "padding_mask": mask[2:]}]
    report = diagnose(model, batches)
    with torch.no_grad():
        out = model(ids, padding_mask=mask, output_hidden_states=True, output_attentions=True)
    hidden = torch.stack(out.hidden_states)
    assert report.num_samples == 6 and report.num_layers == 3
    for layer in range(4):
        assert report.token_cosine_similarity[layer] == pytest.approx(
            nan_mean(token_cosine_similarity(hidden[layer], mask)))
        assert report.relative_identical_token_distance[layer] == pytest.approx(
            nan_mean(identical_token_distance(hidden[layer], mask, relative=True)))
        assert report.effective_rank[layer] == pytest.approx(
            nan_mean(effective_rank(hidden[layer], mask)))
    for layer, maps in enumerate(out.attention_maps):
        response = filter_frequency_response(maps.filter, mask, num_frequencies=8)
        got = torch.tensor(report.frequency_response[layer], dtype=torch.float64)
        torch.testing.assert_close(got, response.magnitude)
    similarity = attention_map_similarity(
        out.attention_maps[0].attention, out.attention_maps[1].attention, mask
    )
    assert report.attention_similarity[0] == pytest.approx(nan_mean(similarity))
    tokens = hidden[-1][mask]
    pooled = torch.linalg.svdvals(tokens)
    torch.testing.assert_close(
        torch.tensor(report.pooled_singular_spectrum[: len(pooled)], dtype=torch.float64),
        pooled / pooled[0],
    )
    assert len(report.gfsa_filters) == 3


def test_padding_changes_no_metric():
    config = TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=40, norm="post")
    model = Transformer(config).double()
    ids = torch.randint(1, 40, (4, 6))
    padded_ids = torch.cat([ids, torch.randint(1, 40, (4, 3))], dim=1)
    mask = torch.ones(4, 9, dtype=torch.bool)
    mask[:, 6:] = False
    plain = diagnose(model, [{"input_ids": ids}]).to_dict()
    padded = diagnose(model, [{"input_ids": padded_ids, "padding_mask": mask}]).to_dict()
    assert plain.keys() == padded.keys()
    for key, value in plain.items():
        other = padded[key]
        if key == "singular_spectrum":  # min(N, D) grows with padding: zeros past the rank
            for a, b in zip(value, other, strict=True):
                assert b[: len(a)] == pytest.approx(a) and not any(b[len(a):])
        elif isinstance(value, list) and value and isinstance(value[0], list):
            for a, b in zip(value, other, strict=True):
                assert b == pytest.approx(a)
        elif key == "pooled_singular_spectrum":
            # From a Gram matrix: zero singular values come back as √(rounding) ≈ 1e-9.
            assert other == pytest.approx(value, abs=1e-7)
        else:
            assert other == pytest.approx(value), key


def test_post_ln_softmax_over_smooths_and_neutreno_resists():
    # NeuTRENO's appendix G.3: at random init, similarity rises with depth and the fidelity term
    # (λ = 0.6) keeps the last layer's tokens apart. Same weights for both: λ adds no parameter.
    reports = {}
    for lam in (0.0, 0.6):
        torch.manual_seed(0)
        config = TransformerConfig(dim=64, depth=12, num_heads=4, norm="post", vocab_size=1000,
                                   max_len=16, neutreno_lambda=lam)
        batches = token_batches(4, 64, 16, 1000, seed=1)
        reports[lam] = diagnose(Transformer(config), batches, attentions=False, norms=False)
    softmax = reports[0.0].token_cosine_similarity
    neutreno = reports[0.6].token_cosine_similarity
    assert reports[0.0].num_samples == 256
    # Rises with depth: every layer above the one two below it, and far above the embeddings.
    assert all(softmax[i + 2] > softmax[i] for i in range(len(softmax) - 2)), softmax
    assert softmax[-1] > softmax[0] + 0.15
    assert neutreno[-1] < 0.5 * softmax[-1], (neutreno[-1], softmax[-1])


def test_learned_filters_and_norms_are_reported():
    config = TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=40, attention="agf",
                               attention_options={"K": 3})
    report = diagnose(Transformer(config), token_batches(1, 3, 5, 40, seed=0), filter_points=7)
    assert [len(c.sigma) for c in report.agf_filters] == [7, 7]
    # θ = (1, 0, …) at init: G(σ) = P_0 = 1.
    assert report.agf_filters[0].response == [[pytest.approx(1.0)] * 7]
    assert all(v > 0 for v in report.layer_norm_product)
    assert report.layer_norm_product_min[0] <= report.layer_norm_product[0]


def test_bad_arguments():
    model = Transformer(TransformerConfig(dim=8, depth=1, num_heads=2, vocab_size=10))
    with pytest.raises(ValueError, match="max_batches"):
        diagnose(model, [], max_batches=0)
    with pytest.raises(ValueError, match="at least one batch"):
        diagnose(model, [])
    report = diagnose(model, token_batches(5, 2, 4, 10, seed=0), max_batches=2)
    assert report.num_samples == 4
    assert report.attention_similarity == []  # one layer: no pair of successive maps
