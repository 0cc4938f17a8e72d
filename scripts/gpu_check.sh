#!/usr/bin/env bash
# The GPU check, in one go (at most 8 minutes on an H100): first the CUDA test tier, a --quick
# CUDA benchmark and a tiny `train` then `compare` on the GPU, side by side (none of them times
# anything that matters); then, alone on the GPU, the GPU targets' benchmark.
#
#   scripts/gpu_check.sh [OUTPUT_DIR]        (default: gpu-check)
#
# Runs the tree as it is (PYTHONPATH=src), with the interpreter in $PYTHON (default python3).
# Writes OUTPUT_DIR/summary.md (the machine, each step's exit status and time, the CUDA tier's
# result line, the GPU targets' report, what the run measured where a limit stopped it, and the
# quick bench's report) and each step's log and files beside it. Exits 1 when a step failed, 2
# (creating nothing) when there is no CUDA device.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
py=${PYTHON:-python3}
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
summary="$out/summary.md"

if ! "$py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    echo "gpu_check.sh: no CUDA device (torch.cuda.is_available() is False)" >&2
    exit 2
fi
mkdir -p "$out"

{
    echo "# GPU check"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    "$py" - <<'EOF'
import platform, torch
props = torch.cuda.get_device_properties(0)
print(f"- GPU: {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs")
print(f"- torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"Python {platform.python_version()}")
EOF
    echo
    echo "| step | exit | time |"
    echo "|---|---|---|"
} > "$summary"

step() {  # step NAME LIMIT_S COMMAND...: run COMMAND with a time limit, its output in NAME.log;
    # its row of the summary goes to NAME.row
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    rc=$?
    echo "| $name | $rc$([ "$rc" = 124 ] && echo ' (time limit)') | $(( $(date +%s) - start )) s |" > "$out/$name.row"
    echo "gpu_check.sh: $name exit $rc ($(( $(date +%s) - start )) s)"
    return "$rc"
}

bench_report() {  # bench_report TITLE DIR STEP: a bench run's report, its headings nested
    # under TITLE, or the end of its step's log where it wrote none
    echo
    echo "## $1"
    echo
    if [ -f "$out/$2/bench.md" ]; then sed 's/^#/###/' "$out/$2/bench.md"
    else tail -n 20 "$out/$3.log"; fi
}

ff=("$py" -m filterformer.cli)
# The kernels' tests first (what no GPU has run yet), each test's result on its own line as it
# ends, so that a tier stopped by its limit leaves what it ran
tier_files=(tests/cuda/test_triton_cuda.py)
for file in tests/cuda/test_*.py; do
    [ "$file" = tests/cuda/test_triton_cuda.py ] || tier_files+=("$file")
done
step cuda-tier 190 "$py" -m pytest -m cuda "${tier_files[@]}" -v -p no:cacheprovider --durations=5 &
tier=$!
step bench-quick 120 "${ff[@]}" bench --device cuda --quick --output "$out/bench-quick" &
quick=$!
{ step train 60 "${ff[@]}" train --config configs/listops_tiny.yaml \
      --set device=cuda max_steps=30 "output_dir=$out/train" &&
  step compare 90 "${ff[@]}" compare --methods softmax gfsa agf samsa_hard --seeds 0 \
      --set device=cuda max_steps=20 --output-dir "$out/compare" --no-progress; } &
runs=$!
failed=0
for job in "$tier" "$quick" "$runs"; do wait "$job" || failed=1; done
step bench-gpu-targets 290 "${ff[@]}" bench --device cuda --gpu-targets --output "$out/bench-gpu" ||
    failed=1
for name in cuda-tier bench-quick train compare bench-gpu-targets; do
    if [ -f "$out/$name.row" ]; then cat "$out/$name.row"; rm "$out/$name.row"
    else echo "| $name | not run (an earlier step failed) | |"; failed=1; fi
done >> "$summary"

{
    echo
    echo "## CUDA tier"
    echo
    progress=' +\[ *[0-9]+%\]$'  # how pytest -v ends a test's line: " [ 42%]"
    for outcome in PASSED FAILED ERROR SKIPPED; do
        printf '%s %s, ' "$(grep -cE "^tests/cuda/.* $outcome( .*)?$progress" \
            "$out/cuda-tier.log")" "$outcome"
    done | sed 's/, $/ (test by test, as logged)\n/; s/^/    /'
    grep -E "^=+ .* in [0-9.]+s( \([0-9:]+\))? =+$" "$out/cuda-tier.log" | tail -n 1 |
        sed 's/^/    /'  # pytest's own count, absent where the limit stopped it
    grep -E "^tests/cuda/.* (FAILED|ERROR)$progress" "$out/cuda-tier.log" | head -n 20 |
        sed -E "s/$progress//; s/^/    /"
    tail -n 1 "$out/cuda-tier.log" | grep -E "^tests/cuda/[^ ]+ *$" |
        sed -E 's/ *$//; s/^/    stopped by the limit during /'  # a test begun, never ended
    # bench.md is rewritten as the run goes: one stopped by its limit leaves what it measured
    bench_report "GPU targets (filterformer bench --device cuda --gpu-targets)" bench-gpu \
        bench-gpu-targets
    bench_report "Quick bench (filterformer bench --device cuda --quick: tiny sizes, no verdicts)" \
        bench-quick bench-quick
} >> "$summary"
exit "$failed"
