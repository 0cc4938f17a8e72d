"""Whether every Triton kernel compiles for NVIDIA GPUs, at the launches the methods make.

    python scripts/compile_kernels.py --output DIR [--arch 90 --arch 80]

Triton's interpreter (what the test suite runs the kernels in on a CPU) executes a kernel's
Python with NumPy; it does not type-check the kernel as Triton's compiler does, nor lower it to a
GPU. This script does, without a GPU: it runs each method's step on CUDA's path (every kernel
allowed, run in the interpreter) at the GPU targets' widths (D=768, h=12 and D=128, h=2: heads of
64), in float32 and under bfloat16 and float16 autocast, in training and evaluation, with and
without padding; records each launch's specialisation (the arguments' dtypes and alignment, the
integers' values, the constants); and compiles every distinct one, in a process without the
interpreter, for each architecture asked (``--arch 90``: H100, ``80``: A100) down to its
``cubin`` with the ``ptxas`` that Triton ships. For each it reports the registers a thread uses,
bytes spilled to local memory, the shared memory a block needs against the architecture's
limit, and whether its products run on tensor cores. ``--quick`` records at D=128, h=2 in
float32 and bfloat16 only (every kernel is still launched). Writes DIR/kernel_compilation.json
and DIR/kernel_compilation.md; exits 1 when any launch fails to compile or needs more shared
memory than its architecture has, 2 on bad arguments (or without Triton).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

#: Shared memory a block may use, in bytes, per architecture (compute capability × 10).
SHARED_MEMORY_LIMIT = {80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}
#: The GPUs named for each architecture in the report.
GPU_NAMES = {80: "A100", 86: "RTX 30xx / A10", 89: "L4 / RTX 40xx", 90: "H100 / H200"}

#: The interpreter's ``DOT_KIND`` for half-precision products, and what a GPU launch passes.
_INTERPRETED_DOT_KINDS = {3: 1, 4: 2}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="folder for the report (required)")
    parser.add_argument("--arch", type=int, action="append", choices=sorted(SHARED_MEMORY_LIMIT),
                        help="compute capability × 10 to compile for (repeatable; default 90)")
    parser.add_argument("--quick", action="store_true",
                        help="D=128, h=2 only, float32 and bfloat16 autocast (every kernel still "
                             "launched)")
    parser.add_argument("--triton", type=Path,
                        help="a folder holding another Triton to compile with (`pip install "
                             "--target DIR triton==3.6.0`, the one torch 2.11 requires); the "
                             "launches are still recorded in the installed one's interpreter")
    parser.add_argument("--compile", type=Path, help=argparse.SUPPRESS)
    return parser


# --- Recording (in Triton's interpreter) -----------------------------------------------------


def _describe(value) -> dict:
    """A launch argument as the compiler specialises on it."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": str(value.dtype).removeprefix("torch."),
                "aligned": value.data_ptr() % 16 == 0}
    if isinstance(value, bool) or value is None:
        return {"constant": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    raise TypeError(f"a launch argument of type {type(value).__name__}")


@contextmanager
def _recording(launches: list[dict], failures: list[dict]) -> Iterator[None]:
    """Every method's kernels allowed on the CPU's tensors, each launch described in
    ``launches`` before it runs in the interpreter; a launch the interpreter fails (the method
    then takes its other path) is described in ``failures`` too, with its error."""
    from filterformer.functional import agf_triton, gfsa_triton, samsa_triton

    def recorded(launch, kernel, grid, *args, **kwargs):
        constants = {name: _INTERPRETED_DOT_KINDS.get(value, value) if name == "DOT_KIND"
                     else value for name, value in kwargs.items()}
        described = {"module": kernel.fn.__module__, "kernel": kernel.fn.__name__,
                     "args": [_describe(arg) for arg in args], "constants": constants}
        launches.append(described)
        try:
            return launch(kernel, grid, *args, **kwargs)
        except Exception as err:
            failures.append({**described, "error": str(err).splitlines()[0] if str(err) else
                             type(err).__name__})
            raise

    with ExitStack() as stack:
        for module in (agf_triton, samsa_triton, gfsa_triton):
            stack.enter_context(mock.patch.object(module.SWITCH, "allows", lambda x: True))
            real = module.launch
            stack.enter_context(mock.patch.object(
                module, "launch", lambda *a, real=real, **k: recorded(real, *a, **k)))
        yield


#: The modules' widths ``(D, h)``: BERT's and GPT-2's, and the GPU targets' small model's.
WIDTHS = ((768, 12), (128, 2))


#: The modules recorded: each name's first word is the method, the value its options.
METHODS = {
    "gfsa": {}, "agf": {}, "agf without regulariser": {"orthogonality_weight": 0.0},
    "samsa hard": {"mode": "hard", "num_samples": 8},
    "samsa soft": {"mode": "soft", "num_samples": 8},
}
#: Sequence lengths at which each kernel's compilations are counted: multiples of 16 and not.
LENGTHS = (17, 33, 48, 64, 100, 127, 160, 256)


def _scope(quick: bool) -> str:
    widths = " and ".join(f"D={dim}, h={heads}" for dim, heads in WIDTHS[quick:])
    dtypes = "float32 and bfloat16 autocast" if quick else \
        "float32, bfloat16 autocast and float16 autocast"
    return (f"each method's module at {widths}; {dtypes}; training and evaluation; with and "
            "without padding; GFSA's kernel at d=64; a GFSA causal LM's training step and "
            "cached decoding")


def _steps(quick: bool) -> Iterator[tuple[str, object]]:
    """``(name, step)`` for every case: a method's module at a target's width (the small one
    alone where ``quick``), or GFSA's kernel; ``step(train, autocast)`` runs its forward, and
    its backward in training."""
    import torch

    from filterformer.attention import build_attention
    from filterformer.functional import gfsa

    for dim, heads in WIDTHS[quick:]:
        for name, options in METHODS.items():
            method = name.split()[0]
            for padded in (False, True):
                module = build_attention(method, dim, heads, **options)

                def step(train, autocast, module=module, dim=dim, padded=padded):
                    module.train(train)
                    x = torch.randn(2, 24, dim, requires_grad=train)
                    mask = torch.ones(2, 24, dtype=torch.bool)
                    if padded:
                        mask[1, 17:] = False
                    with _autocast(autocast), torch.set_grad_enabled(train):
                        out = module(x, padding_mask=mask if padded else None)
                    if train:
                        out.float().sum().backward()

                yield f"{name} module D={dim} h={heads}{' padded' if padded else ''}", step

    def kernel_step(train, autocast):
        q, k, v = (torch.randn(2, 4, 24, 64, requires_grad=train) for _ in range(3))
        weights = [torch.randn(4, requires_grad=train) for _ in range(3)]
        with _autocast(autocast), torch.set_grad_enabled(train):
            out = gfsa(q, k, v, *weights, K=3)
        if train:
            out.float().sum().backward()

    yield "gfsa kernel d=64", kernel_step

    from filterformer.models import CausalLM, TransformerConfig

    model = CausalLM(TransformerConfig(causal=True, vocab_size=50, dim=128, num_heads=2, depth=2,
                                       attention="gfsa"))

    def language_model_step(train, autocast):
        """Training: the loss's backward; evaluation: cached decoding of 3 tokens (one query a
        step: Triton specialises lengths of 1 apart)."""
        ids = torch.randint(0, 50, (2, 24))
        with _autocast(autocast), torch.set_grad_enabled(train):
            if train:
                model.train()(ids, labels=ids).loss.backward()
            else:
                model.eval().generate(ids, 3)

    yield "gfsa causal LM D=128 h=2 (evaluation: cached decoding)", language_model_step


def _autocast(dtype):
    import torch

    return torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def _record(quick: bool) -> tuple[list[dict], list[str], list[dict]]:
    """The distinct launches of every case, each with the cases that made it; the steps; and
    the launches the interpreter failed, each with its case and error."""
    import torch

    seen: dict[str, dict] = {}
    cases: list[str] = []
    failures: list[dict] = []
    for name, step in _steps(quick):
        for autocast in (None, torch.bfloat16) if quick else (None, torch.bfloat16, torch.float16):
            for train in (False, True):
                case = f"{name}, {'train' if train else 'inference'}, " \
                       f"{'float32' if autocast is None else str(autocast)[6:] + ' autocast'}"
                launches: list[dict] = []
                failed: list[dict] = []
                with warnings.catch_warnings(), _recording(launches, failed):
                    warnings.simplefilter("ignore", RuntimeWarning)  # the failures are kept
                    step(train, autocast)
                cases.append(case)
                failures += [{**failure, "case": case} for failure in failed]
                for launch in launches:
                    key = json.dumps(launch, sort_keys=True)
                    seen.setdefault(key, {**launch, "cases": []})["cases"].append(case)
    return list(seen.values()), cases, failures


def _length_sweep() -> tuple[list[dict], list[dict]]:
    """The launches of each method's module at D=128, h=2 under bfloat16 autocast, in training
    and evaluation, at each of :data:`LENGTHS`, each tagged with its ``step`` and ``length``;
    and the launches the interpreter failed."""
    import torch

    from filterformer.attention import build_attention

    launches: list[dict] = []
    failures: list[dict] = []
    for name, options in METHODS.items():
        module = build_attention(name.split()[0], 128, 2, **options)
        for train in (False, True):
            module.train(train)
            step = f"{name}, {'train' if train else 'inference'}"
            for length in LENGTHS:
                found: list[dict] = []
                with warnings.catch_warnings(), _recording(found, failures), \
                        _autocast(torch.bfloat16), torch.set_grad_enabled(train):
                    warnings.simplefilter("ignore", RuntimeWarning)  # the failures are kept
                    out = module(torch.randn(1, length, 128, requires_grad=train))
                    if train:
                        out.float().sum().backward()
                launches += [{**launch, "step": step, "length": length} for launch in found]
    return launches, failures


def _recompilations(sweep: list[dict], keys: list[str]) -> list[dict]:
    """Per kernel and step of the sweep: the lengths it ran at and its distinct compilations."""
    groups: dict[tuple[str, str], dict] = {}
    for launch, key in zip(sweep, keys, strict=True):
        group = groups.setdefault((launch["kernel"], launch["step"]),
                                  {"kernel": launch["kernel"], "step": launch["step"],
                                   "lengths": [], "keys": set()})
        if launch["length"] not in group["lengths"]:
            group["lengths"].append(launch["length"])
        group["keys"].add(key)
    return [{"kernel": group["kernel"], "step": group["step"], "lengths": group["lengths"],
             "compilations": len(group.pop("keys"))} for group in groups.values()]


# --- Compiling (without the interpreter) -----------------------------------------------------


def _argument(description: dict):
    import torch

    if "tensor" in description:
        dtype = getattr(torch, description["tensor"])
        base = torch.zeros(64, dtype=dtype)
        return base if description["aligned"] else base[1:]
    return next(iter(description.values()))


def _resources(cubin: bytes) -> dict:
    """Registers, stack and local memory of the cubin's kernel, by Triton's ``cuobjdump``."""
    from triton.backends.nvidia import __file__ as nvidia

    tool = Path(nvidia).parent / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        text = subprocess.run([str(tool), "--dump-resource-usage", handle.name],
                              capture_output=True, text=True, check=True).stdout
    found = dict(re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", text))
    return {"registers": int(found.get("REG", 0)), "stack_bytes": int(found.get("STACK", 0)),
            "local_bytes": int(found.get("LOCAL", 0))}


def _bind(launch: dict, arch: int):
    """``launch``'s kernel bound to its arguments as Triton binds a launch on sm_``arch``:
    ``(kernel, target, backend, bound arguments, specialization, options)``."""
    import importlib

    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    kernel = getattr(importlib.import_module(launch["module"]), launch["kernel"])
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*[_argument(arg) for arg in launch["args"]],
                                            **launch["constants"])
    return kernel, target, backend, bound, specialization, options


def _compile_one(launch: dict, arch: int) -> dict:
    import triton
    from triton.compiler import ASTSource

    try:
        kernel, target, backend, bound, specialization, options = _bind(launch, arch)
        options, signature, constants, attrs = kernel._pack_args(
            backend, launch["constants"], bound, specialization, options)
        compiled = triton.compile(ASTSource(kernel, signature, constants, attrs), target=target,
                                  options=options.__dict__)
    except Exception as err:  # the compiler's own errors are what is reported
        first = str(err).strip().splitlines()
        return {"compiled": False, "error": f"{type(err).__name__}: "
                f"{' / '.join(line.strip() for line in first[-3:]) if first else ''}"}
    shared = int(compiled.metadata.shared)
    ptx = compiled.asm["ptx"]
    return {"compiled": True, "shared_bytes": shared, "num_warps": compiled.metadata.num_warps,
            "fits": shared <= SHARED_MEMORY_LIMIT[arch],
            "tensor_core_instructions": ptx.count("wgmma.mma_async") + ptx.count("mma.sync"),
            **_resources(compiled.asm["cubin"])}


def _compile_for_archs(launch: dict, archs: list[int]) -> dict:
    return {arch: _compile_one(launch, arch) for arch in archs}


def _compile_all(path: Path) -> int:
    """Compiles each distinct specialisation among the launches in ``path`` once per
    architecture (launches that differ only in what the compiler does not specialise on, such
    as a stride's value beyond its divisibility by 16, share one), on every CPU core; writes
    back, per launch, the index of its compilation."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import triton

    job = json.loads(path.read_text())
    compilations: dict[str, int] = {}
    distinct, launch_to_compilation = [], []
    for launch in job["launches"]:
        key = _specialisation(launch)
        if key not in compilations:
            compilations[key] = len(distinct)
            distinct.append(launch)
        launch_to_compilation.append(compilations[key])
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_compile_for_archs, distinct,
                                [job["archs"]] * len(distinct)))
    path.write_text(json.dumps({
        **job, "results": results, "compilation": launch_to_compilation,
        "sweep_keys": [_specialisation(launch) for launch in job.get("sweep", [])],
        "triton": triton.__version__,
    }))
    return 0


def _specialisation(launch: dict) -> str:
    """What Triton's compiler specialises ``launch`` on (bound for sm_90; the specialisation of
    arguments is the same on every architecture): its kernel, the arguments' types and
    attributes, and the constants."""
    _, _, _, _, specialization, options = _bind(launch, 90)
    return repr((launch["module"], launch["kernel"], specialization, options))


# --- Report ----------------------------------------------------------------------------------


def _commit(revision: dict) -> str:
    commit = (revision["commit"] or "unknown")[:7]
    return commit + (" (with changes not committed)" if revision["modified"] else "")


def _signature(launch: dict) -> str:
    dtypes = sorted({arg["tensor"] for arg in launch["args"] if "tensor" in arg})
    constants = ", ".join(f"{name}={value}" for name, value in launch["constants"].items())
    return f"{'/'.join(dtypes)}; {constants}"


def _cell(one: dict) -> str:
    if not one["compiled"]:
        return f"**fails**: {one['error']}"
    spilled = one["local_bytes"] + one["stack_bytes"]
    return (f"{one['registers']} regs, " + (f"**{spilled} B spilled**" if spilled else "no spill")
            + f", {one['shared_bytes'] / 1024:.1f} KiB shared"
            + ("" if one["fits"] else " **over the limit**")
            + (", tensor cores" if one["tensor_core_instructions"] else ""))


def _markdown(report: dict) -> str:
    archs = report["archs"]
    lines = [
        "# Triton kernels compiled for NVIDIA GPUs",
        "",
        f"`{report['command']}` at commit {report['commit']}, compiled by Triton "
        f"{report['triton']} (its own `ptxas`; launches recorded in Triton "
        f"{report['recorded_with_triton']}'s interpreter), on {report['machine']} (no GPU: "
        "compiled, not run). Each row is one "
        f"distinct compilation among the launches of {len(report['cases'])} steps on CUDA's path "
        f"({report['scope']}). Registers are per thread; spilled bytes are the stack and local "
        "memory a thread uses beyond its registers; shared memory is per block, against the "
        "architecture's limit; \"tensor cores\" marks a launch whose products run on them "
        "(`wgmma` or `mma` instructions; the others' run on the FMA units, where they have any).",
        "",
        f"**{report['compiled']} of {report['total']} compilations succeed**; "
        f"{report['failed']} fail, {report['over_shared_limit']} need more shared memory than "
        f"their architecture has, {report['spilling']} spill registers.",
        "",
        "| kernel | tensors; constants | steps (first of them) | "
        + " | ".join(f"sm_{arch} ({GPU_NAMES[arch]})" for arch in archs) + " |",
        "|---|---|---|" + "---|" * len(archs),
    ]
    if report["interpreter_failures"]:
        lines[6:6] = [f"**{len(report['interpreter_failures'])} launches failed in the "
                      "interpreter while recording** (the method then took its other path, so "
                      "the step's later launches are missing):", ""] + [
            f"- `{failure['kernel']}` ({failure['case']}): {failure['error']}"
            for failure in report["interpreter_failures"]] + [""]
    for row in report["compilations"]:
        cases = row["cases"]
        lines.append(f"| `{row['kernel']}` | {row['signature']} | {len(cases)} ({cases[0]}) | "
                     + " | ".join(_cell(row["results"][str(arch)]) for arch in archs) + " |")
    lengths = ", ".join(map(str, report["lengths"]))
    most = max(group["compilations"] for group in report["recompilations"])
    lines += [
        "",
        "## Compilations across sequence lengths",
        "",
        f"Each method's module at D=128, h=2, bfloat16 autocast, run at N = {lengths}: the "
        "distinct compilations Triton makes of each kernel (it specialises integer arguments on "
        "their divisibility by 16, never on their value). At most "
        f"{most} per kernel and step; {report['compiled_per_length']} compile once per length.",
        "",
        "| kernel | step | lengths run | compilations |",
        "|---|---|---:|---:|",
    ] + [f"| `{group['kernel']}` | {group['step']} | {len(group['lengths'])} | "
         f"{group['compilations']} |" for group in report["recompilations"]]
    return "\n".join(lines) + "\n"


def _compilations(launches: list[dict], compiled: dict) -> list[dict]:
    """One row per compilation: its kernel, signature, the steps that launch it, its results."""
    rows: list[dict] = []
    for launch, index in zip(launches, compiled["compilation"], strict=True):
        if index == len(rows):
            rows.append({"kernel": launch["kernel"], "module": launch["module"],
                         "signature": _signature(launch), "args": launch["args"],
                         "constants": launch["constants"], "cases": [],
                         "results": compiled["results"][index]})
        rows[index]["cases"] += [case for case in launch["cases"]
                                 if case not in rows[index]["cases"]]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.compile is not None:
        return _compile_all(args.compile)
    if args.output is None:
        parser.error("--output is required")
    if args.output.exists() and not args.output.is_dir():
        parser.error(f"--output {args.output} exists and is not a folder")
    if args.triton is not None and not (args.triton / "triton" / "__init__.py").is_file():
        parser.error(f"--triton {args.triton} holds no Triton (a folder made by "
                     "`pip install --target DIR triton==X`)")
    os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: kernels on the CPU
    from filterformer.functional.triton_support import triton_available

    if not triton_available():
        print("compile_kernels.py: Triton is not installed (scripts/setup.sh --dev installs it)",
              file=sys.stderr)
        return 2
    import triton

    from filterformer.machine import cpu_name
    from filterformer.provenance import source_revision

    revision = source_revision()  # before this run writes its report into the tree
    launches, cases, interpreter_failures = _record(args.quick)
    sweep, sweep_failures = _length_sweep()
    interpreter_failures += [{**failure, "case": "the sweep over lengths"}
                             for failure in sweep_failures]
    archs = sorted(set(args.arch or [90]))
    args.output.mkdir(parents=True, exist_ok=True)
    job = args.output / "kernel_compilation.json"
    job.write_text(json.dumps({"archs": archs, "launches": launches, "sweep": sweep}))
    # Floating-point fusion as GPUs' Triton (3.6 with torch 2.11) compiles: on, its default.
    env = {"TRITON_DEFAULT_FP_FUSION": "1", **os.environ, "TRITON_INTERPRET": "0"}
    if args.triton is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.triton.resolve()), *filter(None, [env.get("PYTHONPATH")])])
    subprocess.run([sys.executable, __file__, "--compile", str(job)], env=env, check=True)
    compiled = json.loads(job.read_text())
    rows = _compilations(launches, compiled)
    outcomes = [one for row in rows for one in row["results"].values()]
    recompilations = _recompilations(sweep, compiled["sweep_keys"])
    per_length = [group for group in recompilations
                  if len(group["lengths"]) > 2 and group["compilations"] == len(group["lengths"])]
    report = {
        "command": shlex.join(["python", "scripts/compile_kernels.py",
                               *(sys.argv[1:] if argv is None else argv)]),
        "commit": _commit(revision), "recorded_with_triton": triton.__version__,
        "triton": compiled["triton"], "machine": cpu_name(), "archs": archs,
        "scope": _scope(args.quick), "cases": cases,
        "interpreter_failures": interpreter_failures,
        "compilations": rows, "total": len(outcomes),
        "compiled": sum(one["compiled"] for one in outcomes),
        "failed": sum(not one["compiled"] for one in outcomes),
        "over_shared_limit": sum(one["compiled"] and not one["fits"] for one in outcomes),
        "spilling": sum(one["compiled"] and one["local_bytes"] + one["stack_bytes"] > 0
                        for one in outcomes),
        "lengths": list(LENGTHS), "recompilations": recompilations,
        "compiled_per_length": len(per_length),
    }
    job.write_text(json.dumps(report, indent=1))
    (args.output / "kernel_compilation.md").write_text(_markdown(report))
    print(f"{report['compiled']} of {report['total']} compilations succeed; "
          f"{report['over_shared_limit']} over the shared-memory limit; {report['spilling']} "
          f"spill registers ({args.output / 'kernel_compilation.md'})")
    if interpreter_failures:
        print(f"{len(interpreter_failures)} launches failed in Triton's interpreter while "
              "recording (the report lists them)", file=sys.stderr)
    if per_length:
        print(f"{len(per_length)} kernels compile once per sequence length (the report lists "
              "them)", file=sys.stderr)
    return 1 if (report["failed"] or report["over_shared_limit"] or interpreter_failures
                 or per_length) else 0


if __name__ == "__main__":
    sys.exit(main())
