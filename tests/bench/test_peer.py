import sys

import pytest

from filterformer.bench import BenchConfig, BenchShape, measure_config
from filterformer.bench.method_table import PeerUnavailable, xtransformers_encoder


@pytest.fixture
def no_xtransformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "x_transformers", None)  # import raises ImportError


def test_missing_peer_library_says_how_to_install_it(no_xtransformers):
    with pytest.raises(PeerUnavailable, match=r"pip install 'filterformer\[bench\]'"):
        xtransformers_encoder(16, 1, 2, 2.0)


def test_missing_peer_library_gives_a_skipped_record(no_xtransformers):
    config = BenchConfig("model-xtransformers", 16, "train", shape=BenchShape.quick())
    record = measure_config(config)
    assert not record.measured and "x-transformers is not installed" in record.skipped
