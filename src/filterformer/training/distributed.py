"""Running under ``torchrun``: one process per device, DistributedDataParallel, rank 0 speaks.

:func:`setup_distributed` reads torchrun's environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), joins the process group (gloo on CPU, nccl on CUDA) and says which device this
process drives. A plain ``python`` run gets a one-process :class:`DistributedContext` whose
collectives do nothing, so the training loop has a single code path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..machine import resolve_device

__all__ = ["DistributedContext", "setup_distributed", "torchrun_rank", "torchrun_world_size"]


def torchrun_world_size() -> int:
    """The number of processes torchrun started (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def torchrun_rank() -> int:
    """This process's global rank under torchrun (0 outside torchrun)."""
    return int(os.environ.get("RANK", "0"))


@dataclass
class DistributedContext:
    """This process's place in the job.

    Attributes:
        rank: global rank (0 logs and writes files).
        world_size: number of processes.
        local_rank: rank on this machine (picks the GPU).
        device: the device this process trains on.
        initialized: whether this context joined the process group (and must leave it).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    initialized: bool = False

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that logs, shows progress and writes checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        """Wait for every process (no-op alone)."""
        if self.distributed:
            dist.barrier()

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        """Element-wise sums of ``values`` over processes (float64, on the training device)."""
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def all_gather_object(self, value: Any) -> list[Any]:
        """Every process's ``value``, in rank order."""
        if not self.distributed:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` on every process (others pass anything, e.g. None)."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        """Wait for every process, then leave the process group this context joined."""
        if self.initialized and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
            self.initialized = False


def setup_distributed(device: str = "auto") -> DistributedContext:
    """Join torchrun's process group when there is one, and choose this process's device.

    Args:
        device: ``auto`` (a GPU when there is one), ``cpu`` or ``cuda``.

    Raises:
        ValueError: for a device not in :data:`~filterformer.machine.DEVICES`, ``cuda``
            without a GPU, or fewer GPUs than processes on a machine.
    """
    use_cuda = resolve_device(device) == "cuda"
    world_size = torchrun_world_size()
    rank = torchrun_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        if local_rank >= torch.cuda.device_count():
            raise ValueError(
                f"LOCAL_RANK {local_rank} has no GPU (this machine has "
                f"{torch.cuda.device_count()}); start at most that many processes per machine"
            )
        torch.cuda.set_device(local_rank)
        chosen = torch.device("cuda", local_rank)
    else:
        chosen = torch.device("cpu")
    initialized = False
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if use_cuda else "gloo"
        dist.init_process_group(
            backend, rank=rank, world_size=world_size,
            device_id=chosen if use_cuda else None,
        )
        initialized = True
    return DistributedContext(rank, world_size, local_rank, chosen, initialized)
