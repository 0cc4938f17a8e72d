import json
import os

import torch

from filterformer.bench import machine_info


def test_machine_info_records_what_timings_depend_on():
    info = machine_info("cpu")
    assert info["device"] == "cpu"
    assert info["torch"] == torch.__version__
    assert info["torch_threads"] == torch.get_num_threads()
    assert info["cpu_count"] == os.cpu_count()
    assert info["cpu"] and len(info["load_average"]) == 3
    json.dumps(info)  # plain data
