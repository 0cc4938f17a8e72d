"""Where the GPU time of the efficient methods goes: the top CUDA kernels of one step.

    PYTHONPATH=src python scripts/gpu_profile.py [--top 12]

Attention modules at D=768, h=12, N=1024, B=32 (32,768 tokens), bf16 autocast, inference and
training, for softmax, AGF and SAMSA hard k=256, after warm-up steps (fused regions compiled);
then one cached decoding step of the CausalLM (D=768, depth 12) after a 1,024-token prompt. Prints
each case's GPU time per step and its most expensive kernels (torch.profiler). CUDA only.
"""

from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from filterformer.attention import build_attention
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
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_time_total > 0]
    total = sum(e.self_device_time_total for e in events) / 5 / 1000
    print(f"\n== {label}: {total:.2f} ms of GPU time per step")
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


if __name__ == "__main__":
    main()
