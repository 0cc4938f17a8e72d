"""Graph-Bridge: graphs as node and edge tokens for any Transformer (SAMSA paper; METHODS.md §4).

Node i gets a positional code ``p_i = noise_i ⊙ softplus(c) + MLP(x_i)``; its two halves
``p_i^l, p_i^r`` give edge (i → j) the code ``p_ij = p_i^l − p_j^r``, which changes when the edge
is reversed. Node token ``MLP([x_i, p_i])``, edge token ``MLP([e_ij, p_ij])``: both live in the
model's width, side by side in one sequence. A task head over a Transformer reads the tokens:
:class:`GraphBridgeClassifier` (classes) or :class:`GraphBridgeRegressor` (one real value).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import check_integer
from ..graphs import GraphBatch
from ..optim import exclude_from_weight_decay
from .classifier import ClassifierOutput, SequenceClassifier
from .config import TransformerConfig
from .regressor import RegressionOutput, SequenceRegressor
from .saved_model import SavesPretrained

__all__ = ["GraphBridgeClassifier", "GraphBridgeRegressor", "GraphBridgeTokenizer"]

#: Rows of the evaluation code table drawn per seed, so that the table for n nodes is a prefix
#: of the table for more nodes (a graph's codes do not depend on the batch it sits in).
_EVAL_BLOCK = 64


def _mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))


def _positive_int(name: str, value: int) -> int:
    check_integer(name, value)
    return value


class GraphBridgeTokenizer(nn.Module):
    """A :class:`~filterformer.graphs.GraphBatch` -> tokens ``(B, n + E, D)`` and their mask.

    The first ``n_max`` tokens are the nodes, the next ``E_max`` the edges; padded nodes and
    edges are zero tokens marked False in the mask.

    While training, the noise is fresh standard normal per node. In evaluation the codes are
    deterministic: node j of every graph gets row j of a fixed table drawn from ``eval_seed``
    (the same in every batch); ``eval_noise=True`` keeps fresh noise instead.

    Args:
        node_dim: node features F_node.
        edge_dim: edge features F_edge.
        dim: token width D.
        position_dim: width of the node codes (even; D when None).
        hidden_dim: hidden width of the MLPs (D when None).
        eval_noise: draw fresh noise in evaluation too.
        eval_seed: the seed of the evaluation code table.
    """

    def __init__(
        self,
        node_dim: int,
        edge_dim: int,
        dim: int,
        *,
        position_dim: int | None = None,
        hidden_dim: int | None = None,
        eval_noise: bool = False,
        eval_seed: int = 0,
    ) -> None:
        super().__init__()
        for name, value in (("node_dim", node_dim), ("edge_dim", edge_dim), ("dim", dim)):
            _positive_int(name, value)
        position_dim = _positive_int("position_dim", dim if position_dim is None else position_dim)
        hidden_dim = _positive_int("hidden_dim", dim if hidden_dim is None else hidden_dim)
        if position_dim % 2:
            raise ValueError(f"position_dim must be even (it splits in halves); got {position_dim}")
        self.node_dim, self.edge_dim, self.dim = node_dim, edge_dim, dim
        self.position_dim, self.hidden_dim = position_dim, hidden_dim
        self.eval_noise = eval_noise
        self.eval_seed = eval_seed
        # softplus(c) starts at 1: the codes start as standard normal noise plus MLP(x).
        self.noise_scale = exclude_from_weight_decay(
            nn.Parameter(torch.full((position_dim,), math.log(math.e - 1)))
        )
        self.node_position = _mlp(node_dim, hidden_dim, position_dim)
        self.node_token = _mlp(node_dim + position_dim, hidden_dim, dim)
        self.edge_token = _mlp(edge_dim + position_dim // 2, hidden_dim, dim)

    def node_noise(self, batch: GraphBatch, generator: torch.Generator | None = None) -> Tensor:
        """The noise of every node, ``(B, n_max, position_dim)`` (see the class docstring)."""
        batch_size, num_nodes, _ = batch.node_features.shape
        device, dtype = batch.node_features.device, batch.node_features.dtype
        if self.training or self.eval_noise:
            shape = (batch_size, num_nodes, self.position_dim)
            # torch.randn's overload with a generator (even None) takes no symbolic sizes: a
            # compiled model, whose number of nodes is dynamic, draws through the one without.
            drawn_by = {} if generator is None else {"generator": generator}
            return torch.randn(shape, device=device, dtype=dtype, **drawn_by)
        blocks = [
            torch.randn(
                _EVAL_BLOCK, self.position_dim,
                generator=torch.Generator().manual_seed(self.eval_seed + block),
            )
            for block in range(-(-num_nodes // _EVAL_BLOCK))
        ]
        table = torch.cat(blocks)[:num_nodes].to(device=device, dtype=dtype)
        return table.expand(batch_size, -1, -1)

    def node_positions(self, batch: GraphBatch, noise: Tensor) -> Tensor:
        """``p_i = noise_i ⊙ softplus(c) + MLP(x_i)``, ``(B, n_max, position_dim)``."""
        return noise * F.softplus(self.noise_scale) + self.node_position(batch.node_features)

    def forward(
        self,
        batch: GraphBatch,
        *,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Tokenize a batch of graphs.

        Args:
            batch: padded graphs.
            noise: ``(B, n_max, position_dim)`` node noise to use instead of drawing it.
            generator: the random generator of drawn noise.

        Returns:
            ``(tokens, padding_mask)``: ``(B, n_max + E_max, D)`` and ``(B, n_max + E_max)`` bool.
        """
        self._check(batch)
        if noise is None:
            noise = self.node_noise(batch, generator)
        expected = (*batch.node_features.shape[:2], self.position_dim)
        if tuple(noise.shape) != expected:
            raise ValueError(f"noise must have shape {expected}; got {tuple(noise.shape)}")
        positions = self.node_positions(batch, noise)
        left, right = positions.chunk(2, dim=-1)
        source, target = batch.edge_index.unbind(-1)
        edge_positions = _gather_nodes(left, source) - _gather_nodes(right, target)
        nodes = self.node_token(torch.cat([batch.node_features, positions], dim=-1))
        edges = self.edge_token(torch.cat([batch.edge_features, edge_positions], dim=-1))
        mask = torch.cat([batch.node_mask, batch.edge_mask], dim=1)
        tokens = torch.cat([nodes, edges], dim=1) * mask.unsqueeze(-1)
        return tokens, mask

    def _check(self, batch: GraphBatch) -> None:
        if batch.node_features.dim() != 3 or batch.node_features.shape[-1] != self.node_dim:
            shape = tuple(batch.node_features.shape)
            raise ValueError(f"node_features must be (B, n, {self.node_dim}); got {shape}")
        if batch.edge_features.dim() != 3 or batch.edge_features.shape[-1] != self.edge_dim:
            shape = tuple(batch.edge_features.shape)
            raise ValueError(f"edge_features must be (B, E, {self.edge_dim}); got {shape}")

    def extra_repr(self) -> str:
        return (
            f"node_dim={self.node_dim}, edge_dim={self.edge_dim}, dim={self.dim}, "
            f"position_dim={self.position_dim}, eval_noise={self.eval_noise}"
        )


def _gather_nodes(x: Tensor, index: Tensor) -> Tensor:
    """Rows of ``(B, n, P)`` at ``(B, E)`` node indices -> ``(B, E, P)``."""
    return x.gather(1, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]))


class _GraphBridgeModel(nn.Module, SavesPretrained):
    """Graph-Bridge tokens, then a sequence model on them (a task head over a Transformer).

    The tokens carry their own positional codes, so the backbone needs ``position="none"``
    (sequence positions would make the output depend on node order).
    """

    def __init__(
        self,
        config: TransformerConfig,
        node_dim: int,
        edge_dim: int,
        *,
        pooling: str,
        position_dim: int | None,
        hidden_dim: int | None,
        eval_noise: bool,
        eval_seed: int,
    ) -> None:
        super().__init__()
        if config.position != "none":
            raise ValueError(
                f"Graph-Bridge tokens have no sequence order: config.position must be 'none'; "
                f"got {config.position!r}"
            )
        if pooling == "first":
            raise ValueError("pooling must be one of ('mean', 'attention') for graphs; got 'first'")
        self.config = config
        self.tokenizer = GraphBridgeTokenizer(
            node_dim, edge_dim, config.dim, position_dim=position_dim, hidden_dim=hidden_dim,
            eval_noise=eval_noise, eval_seed=eval_seed,
        )

    def pretrained_arguments(self) -> dict[str, Any]:
        tokens = self.tokenizer
        return {"node_dim": tokens.node_dim, "edge_dim": tokens.edge_dim,
                "pooling": self.sequence_model.pool.mode, "position_dim": tokens.position_dim,
                "hidden_dim": tokens.hidden_dim, "eval_noise": tokens.eval_noise,
                "eval_seed": tokens.eval_seed}

    @property
    def sequence_model(self) -> nn.Module:
        """The model on the tokens (it takes ``inputs_embeds`` and ``padding_mask``, and holds
        the Transformer as ``.transformer``): what diagnostics measure."""
        raise NotImplementedError

    def forward(
        self,
        batch: GraphBatch,
        *,
        labels: Tensor | None = None,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> ClassifierOutput | RegressionOutput:
        """Run the task head on a batch of graphs.

        Args:
            batch: padded graphs.
            labels: ``(B,)`` targets (e.g. ``batch.labels``): long classes for a classifier,
                floats for a regressor; adds the loss.
            noise, generator: as :meth:`GraphBridgeTokenizer.forward`.
            output_hidden_states, output_attentions: as :meth:`Transformer.forward`.

        Returns:
            The sequence model's output: :class:`~filterformer.models.ClassifierOutput` or
            :class:`~filterformer.models.RegressionOutput`.
        """
        tokens, mask = self.tokenizer(batch, noise=noise, generator=generator)
        return self.sequence_model(
            inputs_embeds=tokens, padding_mask=mask, labels=labels,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )


class GraphBridgeClassifier(_GraphBridgeModel):
    """Graph classification: Graph-Bridge tokens, a Transformer, pooling over real tokens, a head.

    The tokens carry their own positional codes, so the backbone needs ``position="none"``
    (sequence positions would make the output depend on node order).

    Args:
        config: the backbone's :class:`TransformerConfig` (``position="none"``); any attention
            method (SAMSA is the paper's).
        node_dim: node features F_node.
        edge_dim: edge features F_edge.
        num_classes: number of classes.
        pooling: ``"mean"`` or ``"attention"`` over node and edge tokens.
        position_dim, hidden_dim, eval_noise, eval_seed: as :class:`GraphBridgeTokenizer`.
    """

    def __init__(
        self,
        config: TransformerConfig,
        node_dim: int,
        edge_dim: int,
        num_classes: int,
        *,
        pooling: str = "mean",
        position_dim: int | None = None,
        hidden_dim: int | None = None,
        eval_noise: bool = False,
        eval_seed: int = 0,
    ) -> None:
        super().__init__(config, node_dim, edge_dim, pooling=pooling, position_dim=position_dim,
                         hidden_dim=hidden_dim, eval_noise=eval_noise, eval_seed=eval_seed)
        self.classifier = SequenceClassifier(config, num_classes, pooling=pooling)

    def pretrained_arguments(self) -> dict[str, Any]:
        return {**super().pretrained_arguments(), "num_classes": self.classifier.num_classes}

    @property
    def sequence_model(self) -> SequenceClassifier:
        return self.classifier


class GraphBridgeRegressor(_GraphBridgeModel):
    """Graph regression: Graph-Bridge tokens, a Transformer, pooling, one output.

    The same as :class:`GraphBridgeClassifier` with a :class:`SequenceRegressor` for the
    classifier: it predicts the standardised target ``(y − target_mean) / target_std``, is
    trained with its mean squared error and returns predictions in the target's units.

    Args:
        config: the backbone's :class:`TransformerConfig` (``position="none"``).
        node_dim: node features F_node.
        edge_dim: edge features F_edge.
        target_mean: the training targets' mean.
        target_std: the training targets' standard deviation (positive).
        pooling: ``"mean"`` or ``"attention"`` over node and edge tokens.
        position_dim, hidden_dim, eval_noise, eval_seed: as :class:`GraphBridgeTokenizer`.
    """

    def __init__(
        self,
        config: TransformerConfig,
        node_dim: int,
        edge_dim: int,
        *,
        target_mean: float = 0.0,
        target_std: float = 1.0,
        pooling: str = "mean",
        position_dim: int | None = None,
        hidden_dim: int | None = None,
        eval_noise: bool = False,
        eval_seed: int = 0,
    ) -> None:
        super().__init__(config, node_dim, edge_dim, pooling=pooling, position_dim=position_dim,
                         hidden_dim=hidden_dim, eval_noise=eval_noise, eval_seed=eval_seed)
        self.regressor = SequenceRegressor(config, pooling, target_mean=target_mean,
                                           target_std=target_std)

    def pretrained_arguments(self) -> dict[str, Any]:
        head = self.regressor.pretrained_arguments()
        return {**super().pretrained_arguments(), "target_mean": head["target_mean"],
                "target_std": head["target_std"]}

    @property
    def sequence_model(self) -> SequenceRegressor:
        return self.regressor
