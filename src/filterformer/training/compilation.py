"""Compiling a run's training step with :func:`torch.compile` (``compile: true``, ``--compile``).

What is compiled is the model the training step calls, once it is built and on its device:
under ``torchrun`` the :class:`~torch.nn.parallel.DistributedDataParallel` wrapper, as PyTorch's
guide to DDP and ``torch.compile`` asks (wrap first, then compile, so that TorchDynamo splits the
graph at DDP's gradient buckets and communication still overlaps the backward pass). The module
inside stays the one evaluation, checkpoints and diagnostics use: its state dict has no
``_orig_mod.`` prefix, and a checkpoint written by a compiled run loads into an eager model.

Batches are padded to their own longest sequence, so the sequence length N changes from batch
to batch. :func:`mark_sequence_dynamic` marks dimension 1 of every input tensor dynamic before
the step, so the first batch compiles one graph for every length and no later batch recompiles.
Marking only N keeps the batch size and the widths static, which the compiler specialises on
(``torch.compile(dynamic=True)`` would make them symbolic too); bucketing lengths would change
how much padding every model sees. The mark is a hint (``maybe_mark_dynamic``): a model that
fixes the length itself (a timm ViT folds its patches back into an image of one size) gets a
static graph rather than an error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["BACKEND", "RECOMPILE_LIMIT", "compile_model", "mark_sequence_dynamic"]

#: The :func:`torch.compile` backend: inductor, PyTorch's own compiler (its default).
BACKEND: Any = "inductor"
#: Graphs TorchDynamo keeps per compiled function. Every model instance of one configuration
#: shares a graph, but each method adds its own to the same ``forward`` functions, and past
#: TorchDynamo's default limit (8) a process that trains or times more methods (a comparison)
#: would silently run the later ones eagerly.
RECOMPILE_LIMIT = 64


def compile_model(model: nn.Module) -> nn.Module:
    """``torch.compile(model)`` with :data:`BACKEND`; ``model`` itself is left as it is.

    Raises TorchDynamo's recompile limit to :data:`RECOMPILE_LIMIT` for this process (never
    lowers it).

    Args:
        model: the module the training step calls (the DDP wrapper under ``torchrun``).

    Returns:
        The compiled module; calling it runs the compiled graph, and its parameters are
        ``model``'s.
    """
    config = torch._dynamo.config
    # ``cache_size_limit`` in the torch versions before the rename.
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, max(getattr(config, name), RECOMPILE_LIMIT))
    return torch.compile(model, backend=BACKEND)


def mark_sequence_dynamic(inputs: dict[str, Any]) -> dict[str, Any]:
    """Mark dimension 1 (the sequence) of every input tensor of two or more dimensions dynamic,
    so that batches of other lengths reuse the compiled graph.

    Token ids, features, padding masks and per-token labels ``(B, N, …)`` are marked, labels
    ``(B,)`` are not; a :class:`~filterformer.graphs.GraphBatch`'s node and edge tensors
    ``(B, n_max, …)``, ``(B, E_max, …)`` are marked too.

    Args:
        inputs: the model's keyword inputs (:func:`~filterformer.training.evaluation.model_inputs`).

    Returns:
        ``inputs`` (marked in place).
    """
    for value in inputs.values():
        tensors = [value]
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            tensors = [getattr(value, f.name) for f in dataclasses.fields(value)]
        for tensor in tensors:
            if isinstance(tensor, Tensor) and tensor.dim() >= 2:
                torch._dynamo.maybe_mark_dynamic(tensor, 1)
    return inputs
