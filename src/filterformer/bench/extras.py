"""The extra benchmarks: each alternates the steps of its rows in rounds in one process
(:func:`~filterformer.timing.paired_step_times`), so that a ratio of two rows is already paired.
Their rows join ``bench.json`` in the methods' record shape, one ``round_group`` per alternation.
The GPU targets' benchmarks (:mod:`.gpu_rows`, :data:`GPU_EXTRAS`) run only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from . import compiled_steps, decoding_latency, gpu_rows, loop_overhead
from .records import BenchRecord

__all__ = ["DEFAULT_EXTRAS", "EXTRAS", "GPU_EXTRAS", "QUICK_EXTRAS", "ExtraBenchmark"]


@dataclass(frozen=True)
class ExtraBenchmark:
    """``run(quick, device)``: its records, rows named ``prefix…`` (a module-level function or a
    ``partial`` of one, as it runs in a fresh process), within ``limit_s`` seconds; ``title``:
    its section of ``bench.md``."""

    run: Callable[[bool, str], list[BenchRecord]]
    prefix: str
    title: str
    limit_s: float = 4 * 3600.0  # a full CPU run compiles for minutes


def _side_by_side(prefix: str, title: str) -> ExtraBenchmark:
    return ExtraBenchmark(partial(gpu_rows.run_side_by_side, gpu_rows.GPU_GROUPS[prefix]), prefix,
                          title, limit_s=300.0)


EXTRAS: dict[str, ExtraBenchmark] = {
    "decoding": ExtraBenchmark(decoding_latency.run, "decode-",
                               "Cached greedy decoding: ms per token after a prompt of N tokens"),
    "loop": ExtraBenchmark(loop_overhead.run, "loop-",
                           "filterformer train's loop against a bare loop: ms per step"),
    "compiled": ExtraBenchmark(compiled_steps.run, "step-",
                               "Eager against compiled training steps: ms per step"),
    "gpu-d768": _side_by_side("gpu-d768-", "Attention modules at D=768, h=12, 32,768 tokens a "
                              "batch (B = 32768/N), bf16 autocast: ms per step"),
    "gpu-d128": _side_by_side("gpu-d128-", "Attention modules at D=128, h=2, B=32, bf16 "
                              "autocast: ms per step"),
    "gpu-kernel": _side_by_side("gpu-kernel-", "GFSA against one SDPA call, B=4, h=16, d=64, "
                                "bf16 autocast: ms per step"),
    "gpu-bert": ExtraBenchmark(gpu_rows.run_bert, gpu_rows.BERT.prefix,
                               "BERT-base-sized classifier (depth 12, D=768, N=512, B=32), bf16 "
                               "autocast: ms per AdamW training step", limit_s=300.0),
    "gpu-decoding": ExtraBenchmark(gpu_rows.run_decoding, gpu_rows.DECODE.prefix,
                                   "CausalLM (D=768, depth 12) generating 64 tokens after a "
                                   "1,024-token prompt, bf16 autocast: ms per token, first "
                                   "generation and warmed ones", limit_s=300.0),
}
#: What a full run runs unless asked for others.
DEFAULT_EXTRAS = ("decoding", "loop", "compiled")
#: What ``--quick`` runs unless asked for others (compiling takes a while at any size).
QUICK_EXTRAS = ("decoding", "loop")
#: The GPU targets' rows (``--gpu-targets``).
GPU_EXTRAS = ("gpu-d768", "gpu-d128", "gpu-kernel", "gpu-bert", "gpu-decoding")
