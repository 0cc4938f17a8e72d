"""Launch settings of AGF's Triton kernels, timed side by side on a GPU.

    PYTHONPATH=src python scripts/gpu_tune_agf.py [--repeats 20]

For each shape of the GPU targets (D=768, h=12, d=64, 32,768 tokens a batch at N=512, 4096 and
16384; a padding mask at N=512 as the BERT-sized step has) the current settings
(:data:`filterformer.functional.agf_triton.LAUNCH`, one ``(rows per block, warps)`` per pass)
and each candidate given to all four passes, times the layer's forward (inference) and
forward + backward (training) in bf16 products, after warm-up, with CUDA events, the candidates
interleaved round by round so that drift falls on all alike. Prints one table per mode: ms per
call and each candidate's time over the current setting's. CUDA only.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from filterformer.functional import agf_coefficients
from filterformer.functional import agf_triton as agf_triton_module
from filterformer.functional.agf_triton import agf_triton_layer

CANDIDATES = [(16, 4), (32, 4), (32, 8), (64, 4), (64, 8), (128, 8)]
SHAPES = [(32, 512, True), (8, 4096, False), (2, 16384, False)]  # (B, N, padding mask)


def _inputs(batch: int, length: int, masked: bool, device: str = "cuda", heads: int = 12,
            dim: int = 64):
    joint = torch.randn(batch, length, 4, heads, dim, device=device, dtype=torch.bfloat16)
    q, k, v, logits = (joint[:, :, i].transpose(1, 2).requires_grad_() for i in range(4))
    p = torch.zeros(5, device=device, requires_grad=True)
    mask = None
    if masked:
        lengths = torch.randint(length // 2, length + 1, (batch,), device=device)
        mask = torch.arange(length, device=device)[None, :] < lengths[:, None]
    return q, k, v, logits, p, mask


def _step(tensors, training: bool):
    q, k, v, logits, p, mask = tensors

    def run():
        out, reg = agf_triton_layer(q, k, v, logits, agf_coefficients(p), mask,
                                    products_dtype=torch.bfloat16)
        if training:
            (out.float().square().mean() + reg).backward()

    return run


def _time(run, repeats: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    current = dict(agf_triton_module.LAUNCH)
    settings = {"current": current} | {
        f"{rows}×{warps}": dict.fromkeys(current, (rows, warps)) for rows, warps in CANDIDATES
    }
    try:
        for training in (False, True):
            _table(settings, training, args)
    finally:
        agf_triton_module.LAUNCH.update(current)


def _table(settings: dict[str, dict[str, tuple[int, int]]], training: bool, args) -> None:
    """One mode's table: each setting's median ms and its ratio to the current setting's."""
    print(f"\n== {'training (forward + backward)' if training else 'inference (forward)'}")
    print("| B | N | mask | " + " | ".join(settings) + " |")
    print("|---|---|---|" + "---:|" * len(settings))
    for batch, length, masked in SHAPES:
        run = _step(_inputs(batch, length, masked), training)
        times: dict[str, list[float]] = {label: [] for label in settings}
        for _ in range(args.rounds):
            for label, table in settings.items():
                agf_triton_module.LAUNCH.update(table)
                with torch.inference_mode(not training):
                    run()  # compiles on a setting's first round
                    times[label].append(_time(run, args.repeats))
        medians = {label: statistics.median(t) for label, t in times.items()}
        cells = [f"{medians[label]:.3f} ({medians[label] / medians['current']:.2f})"
                 for label in settings]
        print(f"| {batch} | {length} | {masked} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
