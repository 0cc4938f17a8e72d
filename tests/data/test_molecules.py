"""Molecules: SMILES to graphs against known structures, a B3DB fixture, and the real set."""

from __future__ import annotations

import pytest
import torch

from filterformer.data import load_task, read_b3db, smiles_to_graph
from filterformer.data.molecules import ATOM_SYMBOLS, EDGE_FEATURES, NODE_FEATURES
from filterformer.graphs import GraphBatch

ELEMENTS = len(ATOM_SYMBOLS) + 1
AROMATIC_BOND, IN_RING_BOND = 3, 5


@pytest.mark.parametrize(
    ("smiles", "atoms", "bonds", "elements"),
    [
        ("CCO", 3, 2, ["C", "C", "O"]),
        ("c1ccccc1", 6, 6, ["C"] * 6),
        ("CC(=O)O", 4, 3, ["C", "C", "O", "O"]),
        ("[Na+].[Cl-]", 2, 0, ["other", "Cl"]),
        ("ClC(Br)I", 4, 3, ["Cl", "C", "Br", "I"]),
    ],
)
def test_graph_matches_the_molecule(smiles, atoms, bonds, elements):
    graph = smiles_to_graph(smiles, label=1)
    assert graph.num_nodes == atoms and graph.num_edges == 2 * bonds
    assert graph.node_features.shape == (atoms, NODE_FEATURES)
    assert graph.edge_features.shape == (2 * bonds, EDGE_FEATURES)
    symbols = [*ATOM_SYMBOLS, "other"]
    found = [symbols[int(i)] for i in graph.node_features[:, :ELEMENTS].argmax(1)]
    assert found == elements and graph.label == 1


def test_benzene_is_aromatic_and_acetic_acid_has_one_double_bond():
    benzene = smiles_to_graph("c1ccccc1")
    assert (benzene.edge_features[:, AROMATIC_BOND] == 1).all()
    assert (benzene.edge_features[:, IN_RING_BOND] == 1).all()
    acid = smiles_to_graph("CC(=O)O")
    assert int(acid.edge_features[:, 1].sum()) == 2  # one double bond, both directions


def test_edges_come_in_both_directions_with_equal_features():
    graph = smiles_to_graph("CN1C=NC2=C1C(=O)N(C(=O)N2C)C")  # caffeine
    pairs = {(int(s), int(t)): graph.edge_features[k] for k, (s, t) in
             enumerate(graph.edge_index.t())}
    for (s, t), features in pairs.items():
        assert torch.equal(pairs[(t, s)], features)


def test_one_hot_groups_sum_to_one():
    graph = smiles_to_graph("CC(C)Cc1ccc(cc1)[C@@H](C)C(=O)O")  # ibuprofen
    start = 0
    for size in (ELEMENTS, 6, 5, 5, 6):
        assert (graph.node_features[:, start : start + size].sum(1) == 1).all()
        start += size
    assert (graph.edge_features[:, :4].sum(1) == 1).all()


def test_unreadable_smiles_gives_none():
    assert smiles_to_graph("C1CC(") is None


def test_b3db_fixture_loads_as_graph_batches(tmp_path):
    rows = [("CCO", "BBB+"), ("c1ccccc1O", "BBB-"), ("CC(=O)O", "BBB-"), ("CCN", "BBB+"),
            ("C1CC(", "BBB+"), ("CCCl", "BBB+"), ("OCCO", "BBB-"), ("CCCC", "BBB+"),
            ("c1ccncc1", "BBB-"), ("CC=O", "BBB+"), ("NCC(=O)O", "BBB-")]
    lines = ["NO.\tSMILES\tBBB+/BBB-"] + [f"{i}\t{s}\t{y}" for i, (s, y) in enumerate(rows)]
    path = tmp_path / "b3db.tsv"
    path.write_text("\n".join(lines) + "\n")
    assert read_b3db(path) == [(s, int(y == "BBB+")) for s, y in rows]
    options = dict(path=path, cache_dir=tmp_path, validation_fraction=0.2, test_fraction=0.2,
                   max_unreadable_fraction=0.1)  # 1 of 11 rows is unreadable
    with pytest.warns(UserWarning, match=r"1 of 11 rows \(9\.1%\)"):
        task = load_task("b3db", **options)
    assert task.metadata["unreadable_smiles"] == ["C1CC("]
    graphs = [split[i] for split in (task.train, task.validation, task.test)
              for i in range(len(split))]
    assert len(graphs) == 10 and task.kind == "graph_classification"
    batch = task.collate(graphs)
    assert isinstance(batch, GraphBatch) and batch.labels.dtype == torch.long
    assert batch.node_mask.sum().item() == sum(g.num_nodes for g in graphs)
    assert task.max_len == max(g.num_nodes + g.num_edges for g in graphs)
    with pytest.warns(UserWarning, match="1 of 11 rows"):
        cached = load_task("b3db", **options)
    assert torch.equal(cached.train[0].node_features, task.train[0].node_features)


def test_real_b3db_gives_all_7807_graphs(tmp_path):
    rows = read_b3db()
    assert len(rows) == 7807 and {label for _, label in rows} == {0, 1}
    task = load_task("b3db", cache_dir=tmp_path)
    assert len(task.train) + len(task.validation) + len(task.test) == 7807
    assert task.metadata["unreadable_smiles"] == []
