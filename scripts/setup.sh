#!/usr/bin/env bash
# Install filterformer and everything it uses into ./.venv.
#
#   scripts/setup.sh          the library, its command line and every optional feature
#   scripts/setup.sh --dev    the same, plus what the test suite needs
#
# torch is installed first, pinned, so that no dependency pulls an unpinned (CUDA) build:
#   FILTERFORMER_TORCH   the torch requirement to install when none is present (default torch==2.13.0)
#   PYTHON               the interpreter that creates the environment (default python3)
#   FILTERFORMER_VENV    where the environment lives (default .venv)
# An environment that already has torch keeps it: every later install is constrained to it.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
    case "$arg" in
        --dev) dev=1 ;;
        *) echo "setup.sh: unknown option '$arg' (valid: --dev)" >&2; exit 2 ;;
    esac
done

venv=${FILTERFORMER_VENV:-.venv}
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
py="$venv/bin/python"
pip_install() { "$py" -m pip install --quiet --disable-pip-version-check "$@"; }

if ! "$py" -c "import torch" 2>/dev/null; then
    pip_install "${FILTERFORMER_TORCH:-torch==2.13.0}"
fi
constraints="$venv/filterformer-constraints.txt"
"$py" -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > "$constraints"

extras="all"
[ "$dev" = 1 ] && extras="all,dev"
pip_install --constraint "$constraints" --editable ".[$extras]"

# A CUDA-built torchvision wheel beside a CPU torch cannot import; see the module's docstring.
if "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchvision') is None)" \
    && ! "$py" -c "import torchvision" 2>/dev/null; then
    site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cp scripts/torchvision_cpu_import.py "$site/_torchvision_cpu_import.py"
    echo "import _torchvision_cpu_import" > "$site/torchvision_cpu_import.pth"
    "$py" -c "import torchvision" || { echo "setup.sh: torchvision still does not import" >&2; exit 1; }
fi

echo "filterformer is installed in $venv (torch $("$py" -c 'import torch; print(torch.__version__)'))"
