import random

import torch

from filterformer.process_memory import release_free_memory, reset_peak_rss, rss_status

MIB = 2**20


def test_rss_status_reads_resident_and_peak():
    status = rss_status()
    assert status["VmHWM"] >= status["VmRSS"] > 0


def test_the_peak_resets_and_then_sees_a_new_allocation():
    mib = random.randint(48, 96)
    release_free_memory()
    assert reset_peak_rss()
    before = rss_status()
    assert before["VmHWM"] - before["VmRSS"] < 8  # the mark now sits at the resident set
    torch.ones(mib * MIB // 4).sum()  # writes every page, then frees them
    rise = rss_status()["VmHWM"] - before["VmRSS"]
    assert mib - 4 <= rise <= mib + 16
