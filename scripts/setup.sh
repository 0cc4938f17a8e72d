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

# The Triton kernels' tests run them in Triton's interpreter where there is no CUDA: a CPU build of
# torch does not ship Triton (a CUDA build does, at its own version, which is left alone).
if [ "$dev" = 1 ] && ! "$py" -c "import triton" 2>/dev/null; then
    pip_install "${FILTERFORMER_TRITON:-triton==3.9.0}" \
        || echo "setup.sh: installing Triton failed; the Triton kernels' CPU tests will skip" >&2
fi

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
#                         FILTERFORMER_SKIP_DEBIAN=1 skips them.
# A source that cannot be fetched (offline, no apt) does not stop the set-up: its datasets stay
# unavailable, their tests skip, and the set-up ends with a WARNING naming each one. Under CI=true
# the set-up then exits 1 (and those tests fail rather than skip: tests/data/helpers.py).
unfetched=()
sources="${FILTERFORMER_CACHE:-$HOME/.cache/filterformer}/sources"
mkdir -p "$sources"
pip_fetch() { "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$sources" "$@"; }
ls "$sources"/aeon-1.6.0-*.whl >/dev/null 2>&1 || pip_fetch aeon==1.6.0 \
    || unfetched+=("aeon 1.6.0 wheel (UEA JapaneseVowels): pip download aeon==1.6.0 failed")
[ -f "$sources/vaderSentiment-3.3.2.tar.gz" ] \
    || pip_fetch --no-binary :all: vaderSentiment==3.3.2 \
    || unfetched+=("vaderSentiment 3.3.2 sdist (Rotten Tomatoes sentences): pip download failed")
debian_packages=(dataset-fashion-mnist python3.11-doc r-cran-janeaustenr)
if [ "${FILTERFORMER_SKIP_DEBIAN:-0}" = 1 ]; then
    for pkg in "${debian_packages[@]}"; do
        [ -f "$sources/debian/.$pkg" ] \
            || unfetched+=("Debian package $pkg: skipped (FILTERFORMER_SKIP_DEBIAN=1)")
    done
elif ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
    for pkg in "${debian_packages[@]}"; do
        [ -f "$sources/debian/.$pkg" ] \
            || unfetched+=("Debian package $pkg: apt-get or dpkg is not available")
    done
else
    if [ "$(id -u)" = 0 ]; then apt-get update -qq || true; fi
    debs=$(mktemp -d)
    for pkg in "${debian_packages[@]}"; do
        [ -f "$sources/debian/.$pkg" ] && continue
        if (cd "$debs" && apt-get download -qq "$pkg" 2>/dev/null) && mkdir -p "$sources/debian" \
            && dpkg -x "$debs/${pkg}"_*.deb "$sources/debian"; then
            touch "$sources/debian/.$pkg"
        else
            unfetched+=("Debian package $pkg: apt-get download or dpkg -x failed")
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
        || unfetched+=("chromium (for tests/cli/test_compare.py): apt-get install failed")
fi
# --- end of headless Chromium ---------------------------------------------------------------

echo "filterformer is installed in $venv (torch $("$py" -c 'import torch; print(torch.__version__)'))"
if [ "${#unfetched[@]}" -gt 0 ]; then
    {
        echo "WARNING: setup.sh could not fetch ${#unfetched[@]} source(s);" \
            "the datasets and tests that need them are unavailable:"
        printf '  - %s\n' "${unfetched[@]}"
    } >&2
    if [ "${CI:-}" = true ]; then
        echo "setup.sh: CI=true, so a missing source is an error" >&2
        exit 1
    fi
fi
