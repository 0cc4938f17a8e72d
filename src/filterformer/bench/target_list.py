"""The performance targets: :data:`TARGETS`, judged in any run, and :data:`GPU_TARGETS`, the
shapes people train and decode at, every step eager under bf16 autocast, judged on CUDA only."""

from __future__ import annotations

from functools import partial

from ..methods import DEFAULT_METHODS
from .step_cases import COMPILED, BenchShape
from .targets import Case, Target

__all__ = ["GPU_TARGETS", "TARGETS"]

#: Batch 1 at GPT-2 small's width, 4 layers: at width 256 a token is ~2 ms of mostly
#: per-operation overhead, which no method's arithmetic shows through.
DECODING_SHAPE = BenchShape(batch=1, heads=12, head_dim=64, depth=4)
_MODEL_ROWS = {"softmax": "model-softmax", "gfsa": "model-gfsa", "neutreno": "model-neutreno",
               "agf": "model-agf", "samsa_soft": "model-samsa-soft", "samsa_hard": "model-samsa",
               "fusion": "model-fusion"}
_train, _infer = partial(Case, mode="train"), partial(Case, mode="inference")

TARGETS: tuple[Target, ...] = (
    Target("GFSA two-pass / softmax SDPA time (N=4096)", _train("gfsa", 4096),
           _train("sdpa", 4096), 2.1, "<="),
    # The explicit formulation is compared in the forward pass: its O(N³) training step at
    # N=4096 takes over half a minute on a CPU. At equal kernel speed the time ratio is
    # N/(4d) + ½ (d=64): 32.5 at N=8192; at N=4096, 16.5, too near any bound to settle.
    Target("authors' explicit GFSA / GFSA two-pass time (N=8192; ceiling 32.5)",
           _infer("gfsa-explicit", 8192), _infer("gfsa", 8192), 25.0, ">="),
    Target("authors' explicit GFSA / GFSA two-pass time (N=4096), beside its ceiling 16.5",
           _infer("gfsa-explicit", 4096), _infer("gfsa", 4096), 16.5, "info"),
    Target("authors' explicit GFSA / GFSA two-pass extra memory (N=4096)",
           _infer("gfsa-explicit", 4096), _infer("gfsa", 4096), 10.0, ">=", "memory"),
    Target("NeuTRENO / softmax module time (N=4096)", _train("neutreno", 4096),
           _train("softmax-module", 4096), 1.05, "<="),
    Target("softmax module / AGF time (N=16384)", _train("softmax-module", 16384),
           _train("agf", 16384), 5.0, ">="),
    Target("AGF time at N=16384 / at N=2048 (linear is 8)", _train("agf", 16384),
           _train("agf", 2048), 10.0, "<="),
    Target("softmax module / SAMSA hard k=256 time (N=4096)", _infer("softmax-module", 4096),
           _infer("samsa-hard-k256", 4096), 2.0, ">="),
    Target("our softmax Transformer / x-transformers Encoder step time (N=1024)",
           _train("model-softmax", 1024), _train("model-xtransformers", 1024), 1.10, "<="),
    *(Target(f"{label} / softmax decoding time per token (prompt N={N})",
             _infer(f"decode-{method}", N), _infer("decode-softmax", N), bound, "<=",
             shape=DECODING_SHAPE)
      for method, label, bound in (("gfsa", "GFSA", 2.2), ("neutreno", "NeuTRENO", 1.05))
      for N in (256, 1024, 4096)),
    # Every method's model at 4096, and AGF at 16384: compiling does not lose. How much it
    # gains depends on the CPU: AGF at 16384 halved on an Intel Xeon with AVX-512; on an AVX2
    # AMD EPYC its matrix products are 70 % of the step, so no compilation can halve it there
    # (benchmarks/results/cpu-agf-profile). Three times the rounds: at one minute their middle
    # halves were 6–13 % wide, wider than the 5 % margin (decided before the run that used it).
    *(Target(f"{preset} eager / compiled training step (N={N})", _train(_MODEL_ROWS[preset], N),
             Case(_MODEL_ROWS[preset], N, COMPILED), 0.95, ">=", time_factor=3.0)
      for preset, N in (*((m, 4096) for m in DEFAULT_METHODS), ("agf", 16384))),
)

_D768 = "at D=768, h=12, 32k tokens a batch"
_gpu = partial(Target, precision="bf16")
KERNEL = BenchShape(batch=4, heads=16, head_dim=64)
BERT = BenchShape(batch=32, heads=12, head_dim=64, depth=12)
GENERATION = BenchShape(batch=1, heads=12, head_dim=64, depth=12)


def _d768(N: int) -> BenchShape:
    return BenchShape(batch=32768 // N, heads=12, head_dim=64)


GPU_TARGETS: tuple[Target, ...] = (
    *(_gpu(f"softmax / SAMSA hard k=256 module time (speed) {_D768} (N={N}, {mode})",
           Case("softmax-module", N, mode), Case("samsa-hard-k256", N, mode), bound, ">=",
           shape=_d768(N))
      for N, mode, bound in ((1024, "inference", 0.8), (4096, "inference", 1.6),
                             (4096, "train", 1.3))),
    _gpu("softmax / SAMSA hard k=128 module time (speed) at D=128, h=2, B=32 (N=1024)",
         _infer("softmax-module", 1024), _infer("samsa-hard-k128", 1024), 1.6, ">=",
         shape=BenchShape(batch=32, heads=2, head_dim=64)),
    *(_gpu(f"softmax / AGF module time (speed) {_D768} (N={N}, {mode})",
           Case("softmax-module", N, mode), Case("agf", N, mode), bound, ">=", shape=_d768(N))
      for N, bound in ((4096, 1.0), (16384, 3.0)) for mode in ("train", "inference")),
    *(_gpu(f"GFSA / one SDPA call, kernel time, B=4, h=16, d=64 (N={N})", _train("gfsa", N),
           _train("sdpa", N), 2.2, "<=", shape=KERNEL) for N in (1024, 4096, 16384)),
    *(_gpu(f"GFSA / softmax module time {_D768} (N={N})", _infer("gfsa-module", N),
           _infer("softmax-module", N), 2.2, "<=", shape=_d768(N)) for N in (1024, 4096, 16384)),
    *(_gpu(f"{label} / softmax BERT-base-sized training step (N=512, B=32)",
           _train(f"bert-{row}", 512), _train("bert-softmax", 512), bound, "<=", shape=BERT)
      for row, label, bound in (("gfsa", "GFSA", 1.35), ("samsa-hard-k256", "SAMSA hard k=256",
                                                         1.3), ("agf", "AGF", 1.3))),
    _gpu("first / warmed cached generation, ms per token (softmax CausalLM, prompt N=1024, "
         "64 tokens)", _infer("generate-softmax", 1024), _infer("generate-softmax", 1024), 1.3,
         "<=", "first", shape=GENERATION),
    _gpu("GFSA / softmax cached generation, ms per token (warmed, prompt N=1024)",
         _infer("generate-gfsa", 1024), _infer("generate-softmax", 1024), 2.2, "<=",
         shape=GENERATION),
)
