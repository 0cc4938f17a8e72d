#!/usr/bin/env bash
# Lint and run the whole test suite in ./.venv (made by scripts/setup.sh --dev).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${FILTERFORMER_VENV:-.venv}
"$venv/bin/ruff" check src tests benchmarks scripts
"$venv/bin/python" -m pytest "$@"
