"""Telling model families apart imports neither transformers nor timm."""

import subprocess
import sys

SCRIPT = """
import sys, torch
from filterformer.families import is_huggingface_model, is_timm_vision_transformer
module = torch.nn.Linear(2, 2)
assert not is_huggingface_model(module) and not is_timm_vision_transformer(module)
assert 'transformers' not in sys.modules and 'timm' not in sys.modules, 'imported'
"""


def test_detection_imports_neither_library():
    subprocess.run([sys.executable, "-c", SCRIPT], check=True)
