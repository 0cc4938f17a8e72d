"""Count the aten operations a piece of code runs: its host cost, one dispatch (and on a GPU one
launch) each."""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class OperationCounts(TorchDispatchMode):
    """Inside the mode, ``computed`` counts the operations run by name, views aside (they
    compute nothing, though each is a dispatch: ``views`` counts them too); with ``reading``,
    only those with an input in that storage's memory."""

    def __init__(self, reading: torch.UntypedStorage | None = None, *,
                 views: bool = False) -> None:
        super().__init__()
        self.computed: Counter[str] = Counter()
        self.pointer = None if reading is None else reading.data_ptr()
        self.views = views

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if (self.views or not func.is_view) and (self.pointer is None or any(
                isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == self.pointer
                for t in tree_leaves((args, kwargs or {})))):
            self.computed[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))
