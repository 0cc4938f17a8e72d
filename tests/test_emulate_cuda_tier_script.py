"""``scripts/emulate_cuda_tier.py`` runs the CUDA tier's tests on the CPU, CUDA's kernel path
taken in Triton's interpreter, where plain pytest skips them."""

from __future__ import annotations

from .scripts import load_script, run_script

#: One tier test that asserts GFSA's module takes its Triton kernels on the tier's device and
#: equals its float64 copy (about a second emulated).
SELECTION = ("tests/cuda/test_triton_cuda.py", "-k",
             "test_gfsa_on_cuda_takes_the_kernels_and_equals_float64")


def test_the_tier_runs_emulated_where_plain_pytest_skips_it():
    emulated = run_script("emulate_cuda_tier", "-q", "-p", "no:cacheprovider", *SELECTION)
    assert emulated.returncode == 0, emulated.stdout + emulated.stderr
    assert "1 passed" in emulated.stdout and "skipped" not in emulated.stdout, emulated.stdout


def test_only_the_tier_runs_and_all_of_it_where_no_path_is_named():
    args = load_script("emulate_cuda_tier").pytest_args
    assert args(["-q", "-k", "samsa"]) == ["-q", "-k", "samsa", "-m", "cuda", "tests/cuda"]
    assert args(["tests/cuda/test_triton_cuda.py::test_x", "-x"]) == [
        "tests/cuda/test_triton_cuda.py::test_x", "-x", "-m", "cuda"]
