#!/usr/bin/env bash
# Lint and run the whole test suite in ./.venv (made by scripts/setup.sh --dev).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${FILTERFORMER_VENV:-.venv}
"$venv/bin/ruff" check src tests benchmarks scripts
# One test worker per core (pytest-xdist; each torch runs one thread, tests/conftest.py), idle
# workers taking tests from busy ones; FILTERFORMER_TEST_WORKERS=0 runs them all in this process.
"$venv/bin/python" -m pytest -n "${FILTERFORMER_TEST_WORKERS:-auto}" --dist worksteal "$@"
