import pytest
import torch

from filterformer.graphs import Graph, collate_graphs
from filterformer.models import TransformerConfig
from filterformer.models.graph_bridge import (
    GraphBridgeClassifier,
    GraphBridgeRegressor,
    GraphBridgeTokenizer,
)

NODE_DIM, EDGE_DIM, DIM, POS = 5, 3, 16, 8


def _graph(num_nodes, num_edges, label=None):
    edges = torch.stack([torch.randint(0, num_nodes, (num_edges,)),
                         torch.randint(0, num_nodes, (num_edges,))])
    return Graph(torch.randn(num_nodes, NODE_DIM), edges, torch.randn(num_edges, EDGE_DIM), label)


def _config(attention="softmax", **options):
    return TransformerConfig(dim=DIM, depth=2, num_heads=2, mlp_ratio=2.0, position="none",
                             attention=attention, attention_options=options)


def _tokenizer():
    return GraphBridgeTokenizer(NODE_DIM, EDGE_DIM, DIM, position_dim=POS).eval()


def test_tokens_follow_the_formulas():
    tokenizer = _tokenizer()
    batch = collate_graphs([_graph(4, 6), _graph(2, 3)])
    noise = torch.randn(2, 4, POS)
    tokens, mask = tokenizer(batch, noise=noise)
    assert tokens.shape == (2, 4 + 6, DIM)
    assert mask.tolist() == [[True] * 10, [True, True, False, False] + [True] * 3 + [False] * 3]
    scale = torch.log1p(torch.exp(tokenizer.noise_scale))
    for b, graph_nodes in enumerate((4, 2)):
        codes = noise[b] * scale + tokenizer.node_position(batch.node_features[b])
        for i in range(graph_nodes):
            x = torch.cat([batch.node_features[b, i], codes[i]])
            torch.testing.assert_close(tokens[b, i], tokenizer.node_token(x))
        for e in range(int(batch.edge_mask[b].sum())):
            source, target = batch.edge_index[b, e].tolist()
            code = codes[source, : POS // 2] - codes[target, POS // 2 :]
            x = torch.cat([batch.edge_features[b, e], code])
            torch.testing.assert_close(tokens[b, 4 + e], tokenizer.edge_token(x))
    assert torch.equal(tokens[~mask], torch.zeros(int((~mask).sum()), DIM))


def test_relabelling_nodes_permutes_node_tokens_and_keeps_the_output():
    model = GraphBridgeClassifier(_config(), NODE_DIM, EDGE_DIM, 3, position_dim=POS).eval()
    graph = _graph(6, 9)
    perm = torch.randperm(6)  # new label of old node i is perm[i]
    relabelled = Graph(torch.empty(6, NODE_DIM), perm[graph.edge_index], graph.edge_features)
    relabelled.node_features[perm] = graph.node_features
    noise = torch.randn(1, 6, POS)
    moved_noise = torch.empty_like(noise)
    moved_noise[:, perm] = noise
    tokens, _ = model.tokenizer(collate_graphs([graph]), noise=noise)
    moved, _ = model.tokenizer(collate_graphs([relabelled]), noise=moved_noise)
    torch.testing.assert_close(moved[0, perm], tokens[0, :6])
    torch.testing.assert_close(moved[0, 6:], tokens[0, 6:])
    logits = model(collate_graphs([graph]), noise=noise).logits
    relabelled_logits = model(collate_graphs([relabelled]), noise=moved_noise).logits
    torch.testing.assert_close(relabelled_logits, logits)


def test_reversing_an_edge_changes_only_its_token():
    tokenizer = _tokenizer()
    graph = _graph(5, 4)
    graph.edge_index[:, 0] = torch.tensor([1, 3])
    reversed_index = graph.edge_index.clone()
    reversed_index[:, 0] = torch.tensor([3, 1])
    flipped = Graph(graph.node_features, reversed_index, graph.edge_features)
    noise = torch.randn(1, 5, POS)
    tokens, _ = tokenizer(collate_graphs([graph]), noise=noise)
    other, _ = tokenizer(collate_graphs([flipped]), noise=noise)
    assert (tokens[0, 5] - other[0, 5]).abs().max() > 1e-3
    torch.testing.assert_close(tokens[0, 6:], other[0, 6:])
    torch.testing.assert_close(tokens[0, :5], other[0, :5])


@pytest.mark.parametrize("attention", ["softmax", "samsa", "agf"])
def test_graphs_of_different_sizes_pad_cleanly(attention):
    options = {"num_samples": 3, "mode": "hard"} if attention == "samsa" else {}
    model = GraphBridgeClassifier(_config(attention, **options), NODE_DIM, EDGE_DIM, 3,
                                  position_dim=POS).eval()
    graphs = [_graph(3, 2), _graph(7, 12), _graph(5, 6)]
    batch = collate_graphs(graphs)
    noise = torch.randn(3, 7, POS)
    together = model(batch, noise=noise).logits
    for i, graph in enumerate(graphs):
        alone = model(collate_graphs([graph]), noise=noise[i : i + 1, : graph.num_nodes]).logits
        torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)
    # Without given noise, evaluation codes are deterministic and independent of the batch.
    drawn = model(batch).logits
    assert torch.equal(drawn, model(batch).logits)
    torch.testing.assert_close(drawn[1:2], model(collate_graphs(graphs[1:2])).logits)


def test_training_draws_fresh_noise_and_follows_a_generator():
    tokenizer = GraphBridgeTokenizer(NODE_DIM, EDGE_DIM, DIM, position_dim=POS).train()
    batch = collate_graphs([_graph(4, 5), _graph(6, 2)])
    first, second = tokenizer(batch)[0], tokenizer(batch)[0]
    assert not torch.equal(first, second)
    seeded = [tokenizer(batch, generator=torch.Generator().manual_seed(1))[0] for _ in range(2)]
    assert torch.equal(*seeded)
    tokenizer.eval()
    tokenizer.eval_noise = True
    assert not torch.equal(tokenizer(batch)[0], tokenizer(batch)[0])


@pytest.mark.slow
def test_graph_bridge_model_overfits_a_small_batch():
    graphs = [_graph(n, e, label=i % 3) for i, (n, e) in
              enumerate([(4, 6), (6, 8), (3, 2), (5, 9), (7, 10), (4, 4)])]
    batch = collate_graphs(graphs)
    noise = torch.randn(len(graphs), 7, POS)  # a fixed batch: its node noise is fixed too
    model = GraphBridgeClassifier(_config(), NODE_DIM, EDGE_DIM, 3, position_dim=POS)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def eval_loss():
        model.eval()
        with torch.no_grad():
            loss = model(batch, labels=batch.labels, noise=noise).loss.item()
        model.train()
        return loss

    initial = eval_loss()
    for _ in range(30):
        loss = model(batch, labels=batch.labels, noise=noise).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert eval_loss() <= 0.1 * initial


def test_invalid_configuration_is_rejected():
    with pytest.raises(ValueError, match="position must be 'none'"):
        GraphBridgeClassifier(TransformerConfig(dim=DIM, num_heads=2), NODE_DIM, EDGE_DIM, 2)
    with pytest.raises(ValueError, match="position_dim must be even"):
        GraphBridgeTokenizer(NODE_DIM, EDGE_DIM, DIM, position_dim=7)
    tokenizer = _tokenizer()
    batch = collate_graphs([_graph(3, 2)])
    with pytest.raises(ValueError, match="noise must have shape"):
        tokenizer(batch, noise=torch.randn(1, 3, POS + 2))
    wrong = GraphBridgeTokenizer(NODE_DIM + 1, EDGE_DIM, DIM)
    with pytest.raises(ValueError, match="node_features must be"):
        wrong(batch)


def test_the_regressor_is_the_classifier_with_one_standardised_output():
    mean, std = float(torch.randn(())), float(torch.rand(()) + 0.5)
    torch.manual_seed(7)
    classifier = GraphBridgeClassifier(_config(), NODE_DIM, EDGE_DIM, 3, position_dim=POS)
    torch.manual_seed(7)
    regressor = GraphBridgeRegressor(_config(), NODE_DIM, EDGE_DIM, target_mean=mean,
                                     target_std=std, position_dim=POS)
    assert classifier.sequence_model is classifier.classifier
    assert regressor.sequence_model is regressor.regressor
    # The same Graph-Bridge tokenizer and Transformer, initialised alike; only the head differs.
    ours, theirs = regressor.state_dict(), classifier.state_dict()
    shared = [k for k in theirs if k.startswith("tokenizer.")] + [
        k for k in theirs if k.startswith("classifier.transformer.")]
    for key in shared:
        assert torch.equal(ours[key.replace("classifier.", "regressor.", 1)], theirs[key]), key
    assert regressor.regressor.head.out_features == 1
    graphs = [_graph(3, 2, label=float(torch.randn(()))), _graph(6, 9, label=1.5)]
    batch = collate_graphs(graphs)
    assert batch.labels.dtype == torch.float32
    noise = torch.randn(2, 6, POS)
    out = regressor.eval()(batch, labels=batch.labels, noise=noise)
    assert out.predictions.shape == (2,)
    torch.testing.assert_close(out.loss, (((out.predictions - batch.labels) / std) ** 2).mean(),
                               rtol=1e-5, atol=1e-6)
    tokens, mask = regressor.tokenizer(batch, noise=noise)
    alone = regressor.regressor(inputs_embeds=tokens, padding_mask=mask).predictions
    torch.testing.assert_close(alone, out.predictions)
