"""Graphs as data: one container for a graph and one for a padded batch of graphs.

Shared by the molecule datasets and the Graph-Bridge tokenizer, so it depends on nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

__all__ = ["Graph", "GraphBatch", "collate_graphs"]


@dataclass
class Graph:
    """One directed graph; an undirected edge appears once per direction.

    Attributes:
        node_features: ``(n, F_node)`` float.
        edge_index: ``(2, E)`` long, row 0 the source node, row 1 the target.
        edge_features: ``(E, F_edge)`` float.
        label: the graph's target, if any.
    """

    node_features: Tensor
    edge_index: Tensor
    edge_features: Tensor
    label: int | float | None = None

    def __post_init__(self) -> None:
        n = self.node_features.shape[0]
        if self.node_features.dim() != 2:
            shape = tuple(self.node_features.shape)
            raise ValueError(f"node_features must be (n, F_node); got {shape}")
        if self.edge_index.dim() != 2 or self.edge_index.shape[0] != 2:
            raise ValueError(f"edge_index must be (2, E); got {tuple(self.edge_index.shape)}")
        if self.edge_features.dim() != 2 or self.edge_features.shape[0] != self.edge_index.shape[1]:
            raise ValueError(
                f"edge_features must be (E, F_edge) with E = {self.edge_index.shape[1]}; "
                f"got {tuple(self.edge_features.shape)}"
            )
        if self.edge_index.numel() and (self.edge_index.min() < 0 or self.edge_index.max() >= n):
            raise ValueError(f"edge_index refers to nodes outside 0..{n - 1}")

    @property
    def num_nodes(self) -> int:
        return self.node_features.shape[0]

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]


@dataclass
class GraphBatch:
    """Graphs of different sizes, padded to the largest.

    Attributes:
        node_features: ``(B, n_max, F_node)``.
        node_mask: ``(B, n_max)`` bool, True at real nodes.
        edge_index: ``(B, E_max, 2)`` long (source, target) within each graph; 0 at padding.
        edge_features: ``(B, E_max, F_edge)``.
        edge_mask: ``(B, E_max)`` bool, True at real edges.
        labels: ``(B,)`` or None.
    """

    node_features: Tensor
    node_mask: Tensor
    edge_index: Tensor
    edge_features: Tensor
    edge_mask: Tensor
    labels: Tensor | None = None

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> GraphBatch:
        """Move every tensor to ``device``; ``dtype`` applies to the float features only."""
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                float_dtype = dtype if value.is_floating_point() else None
                value = value.to(device=device, dtype=float_dtype)
            moved[f.name] = value
        return GraphBatch(**moved)


def collate_graphs(graphs: Sequence[Graph]) -> GraphBatch:
    """Pad a list of graphs into a :class:`GraphBatch`."""
    if not graphs:
        raise ValueError("graphs must be a non-empty sequence of Graph")
    batch = len(graphs)
    n_max = max(g.num_nodes for g in graphs)
    e_max = max(g.num_edges for g in graphs)
    f_node = graphs[0].node_features.shape[1]
    f_edge = graphs[0].edge_features.shape[1]
    dtype = graphs[0].node_features.dtype
    node_features = torch.zeros(batch, n_max, f_node, dtype=dtype)
    node_mask = torch.zeros(batch, n_max, dtype=torch.bool)
    edge_index = torch.zeros(batch, e_max, 2, dtype=torch.long)
    edge_features = torch.zeros(batch, e_max, f_edge, dtype=graphs[0].edge_features.dtype)
    edge_mask = torch.zeros(batch, e_max, dtype=torch.bool)
    for i, g in enumerate(graphs):
        if g.node_features.shape[1] != f_node or g.edge_features.shape[1] != f_edge:
            raise ValueError("all graphs in a batch must share node and edge feature sizes")
        node_features[i, : g.num_nodes] = g.node_features
        node_mask[i, : g.num_nodes] = True
        edge_index[i, : g.num_edges] = g.edge_index.t()
        edge_features[i, : g.num_edges] = g.edge_features
        edge_mask[i, : g.num_edges] = True
    labels = None
    if all(g.label is not None for g in graphs):
        labels = torch.tensor([g.label for g in graphs])
    return GraphBatch(node_features, node_mask, edge_index, edge_features, edge_mask, labels)
