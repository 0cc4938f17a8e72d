"""Where the GPU time of the efficient methods goes: the top CUDA kernels of one step.

    PYTHONPATH=src python scripts/gpu_profile.py [--top 12]

Attention modules at D=768, h=12, N=1024, B=32 (32,768 tokens), bf16 autocast, inference and
training, for softmax, AGF and SAMSA hard k=256, after warm-up steps (fused regions compiled);
GFSA's kernel against one SDPA call (B=4, h=16, N=1024, d=64, training); one cached decoding
step of the CausalLM (D=768, depth 12) after a 1,024-token prompt; and that model's first
generation (64 tokens) with SDPA's own choice of kernels and without cuDNN's. Prints each case's
GPU time and wall time per step (a wall time well above the GPU time: the host is the limit) and
its most expensive kernels (torch.profiler), and the host operations of the first generation.
CUDA only.
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from filterformer.attention import build_attention
from filterformer.functional import gfsa
from filterformer.models import CausalLM, TransformerConfig

CASES = {
    "softmax": ("softmax", {}),
    "agf": ("agf", {}),
    "samsa-hard-k256": ("samsa", {"num_samples": 256, "mode": "hard"}),
}


def _profile(step, top: int, label: str) -> None:
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - start) / 5 * 1000
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(e.self_device_time_total for e in events) / 5 / 1000
    print(f"\n== {label}: {total:.2f} ms of GPU time per step, {wall:.2f} ms wall")
    for event in sorted(events, key=lambda e: -e.self_device_time_total)[:top]:
        share = event.self_device_time_total / 5 / 1000
        print(f"  {share:7.3f} ms  {event.count // 5:4d}×  {event.key[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    device = torch.device("cuda")
    x = torch.randn(32, 1024, 768, device=device)
    for name, (method, options) in CASES.items():
        module = build_attention(method, 768, 12, **options).to(device)
        grad = torch.randn_like(x)

        def infer(module=module):
            with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16):
                module.eval()(x)

        def train(module=module, grad=grad):
            with torch.autocast("cuda", torch.bfloat16):
                out = module.train()(x.requires_grad_())
            out.backward(grad)

        _profile(infer, args.top, f"{name} inference")
        _profile(train, args.top, f"{name} training")
    q, k, v = (torch.randn(4, 16, 1024, 64, device=device, requires_grad=True)
               for _ in range(3))
    w0, w1, wK = (torch.randn(16, device=device, requires_grad=True) for _ in range(3))
    upstream = torch.randn(4, 16, 1024, 64, device=device)

    def sdpa_step():
        with torch.autocast("cuda", torch.bfloat16):
            out = F.scaled_dot_product_attention(q, k, v)
        out.backward(upstream)

    def gfsa_step():
        with torch.autocast("cuda", torch.bfloat16):
            out = gfsa(q, k, v, w0, w1, wK, K=3)
        out.backward(upstream)

    _profile(sdpa_step, args.top, "SDPA kernel training, B=4 h=16 N=1024")
    _profile(gfsa_step, args.top, "GFSA kernel training, B=4 h=16 N=1024")
    _first_generation(device, args.top)
    config = TransformerConfig(dim=768, depth=12, num_heads=12, causal=True, vocab_size=256,
                               max_len=2048)
    lm = CausalLM(config).to(device).eval()
    prompt = torch.randint(0, 256, (1, 1024), device=device)
    with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16):
        cache = lm.new_cache()
        lm(prompt, cache=cache)
        token = prompt[:, -1:]

        def decode():
            lm(token, cache=cache)

        _profile(decode, args.top, "CausalLM decoding step (1,024 cached positions, growing)")


def _first_generation(device: torch.device, top: int) -> None:
    """A fresh CausalLM's first and second 64-token generation after a new prompt length, with
    SDPA's choice of kernels and without cuDNN's (another prompt length, so both are first); then
    the host operations of a first generation at a third length."""
    config = TransformerConfig(dim=768, depth=12, num_heads=12, causal=True, vocab_size=256,
                               max_len=2048)
    lm = CausalLM(config).to(device).eval()
    lm.generate(torch.randint(0, 256, (1, 16), device=device), 2)  # libraries started
    no_cudnn = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]

    def generate(length: int, backends: list | None) -> float:
        prompt = torch.randint(0, 256, (1, length), device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", torch.bfloat16), (
            sdpa_kernel(backends) if backends else nullcontext()
        ):
            lm.generate(prompt, 64)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / 64 * 1000

    for label, length, backends in (("SDPA's choice", 1024, None), ("no cuDNN", 1000, no_cudnn)):
        first, second = generate(length, backends), generate(length, backends)
        print(f"\n== first generation, {label}, prompt {length}: {first:.2f} ms per token "
              f"first, {second:.2f} second")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        generate(990, None)
    print("\n== host operations of a first generation (SDPA's choice, prompt 990)")
    for event in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]:
        print(f"  {event.self_cpu_time_total / 1000:8.2f} ms  {event.count:6d}×  {event.key[:90]}")


if __name__ == "__main__":
    main()
