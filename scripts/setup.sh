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
    pip_install "${FILTERFORMER_TORCH:-torch==2.13.0}" numpy
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

# --- Data sources for filterformer.data ---------------------------------------------------
# Files the dataset loaders read offline, kept in $FILTERFORMER_CACHE/sources (default
# ~/.cache/filterformer/sources); nothing here is installed into the environment or the system.
#   aeon wheel            the UEA JapaneseVowels .ts files, read straight from the wheel
#   vaderSentiment sdist  the Rotten Tomatoes sentences (only the sdist ships them)
#   Debian packages       Fashion-MNIST, the Python 3.11 docs and Jane Austen's novels, unpacked
#                         with dpkg -x; needs apt-get (and root for apt-get update).
#                         FILTERFORMER_SKIP_DEBIAN=1 skips them; their tests then skip.
sources="${FILTERFORMER_CACHE:-$HOME/.cache/filterformer}/sources"
mkdir -p "$sources"
pip_fetch() { "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$sources" "$@"; }
ls "$sources"/aeon-1.6.0-*.whl >/dev/null 2>&1 || pip_fetch aeon==1.6.0
[ -f "$sources/vaderSentiment-3.3.2.tar.gz" ] || pip_fetch --no-binary :all: vaderSentiment==3.3.2
if [ "${FILTERFORMER_SKIP_DEBIAN:-0}" != 1 ] && command -v apt-get >/dev/null \
    && command -v dpkg >/dev/null; then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq || true; fi
    debs=$(mktemp -d)
    for pkg in dataset-fashion-mnist python3.11-doc r-cran-janeaustenr; do
        [ -f "$sources/debian/.$pkg" ] && continue
        if (cd "$debs" && apt-get download -qq "$pkg" 2>/dev/null); then
            mkdir -p "$sources/debian"
            dpkg -x "$debs/${pkg}"_*.deb "$sources/debian" && touch "$sources/debian/.$pkg"
        else
            echo "setup.sh: could not fetch the Debian package $pkg; its datasets stay unavailable" >&2
        fi
    done
    rm -rf "$debs"
fi
# --- end of data sources --------------------------------------------------------------------

# --- Headless Chromium for the report test (--dev only) --------------------------------------
# tests/cli/test_compare.py opens the comparison report in headless Chromium and checks that the
# table and every figure render. Installed from Debian's archive when running as root with
# apt-get (as CI does); elsewhere install a Chromium yourself or the test fails saying so.
if [ "$dev" = 1 ] && ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
        || echo "setup.sh: could not install chromium; the report test will fail" >&2
fi
# --- end of headless Chromium ---------------------------------------------------------------

echo "filterformer is installed in $venv (torch $("$py" -c 'import torch; print(torch.__version__)'))"
