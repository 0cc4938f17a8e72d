import pytest
import torch

from filterformer.machine import DEVICES, resolve_device
from filterformer.training.distributed import setup_distributed

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")


def test_auto_is_the_gpu_when_there_is_one():
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


@pytest.mark.parametrize("device", ["tpu", "CUDA", ""])
def test_unknown_device_names_the_valid_ones(device):
    with pytest.raises(ValueError, match=", ".join(DEVICES)):
        resolve_device(device)


@no_gpu
@pytest.mark.parametrize("choose", [resolve_device, setup_distributed])
def test_cuda_without_a_gpu_is_refused_the_same_way_everywhere(choose):
    with pytest.raises(ValueError, match="CUDA is not available; use cpu or auto"):
        choose("cuda")


def test_training_and_bench_accept_the_same_devices():
    from filterformer.cli.bench import DEVICES as BENCH_DEVICES
    from filterformer.training.run_config import DEVICES as RUN_DEVICES

    assert BENCH_DEVICES is RUN_DEVICES is DEVICES
