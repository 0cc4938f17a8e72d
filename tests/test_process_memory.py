import random

import torch

from filterformer.process_memory import peak_rise_mib, rss_status, start_peak_window

MIB = 2**20


def test_rss_status_reads_resident_and_peak():
    status = rss_status()
    assert status["VmHWM"] >= status["VmRSS"] > 0


def test_a_peak_window_measures_the_rise_of_an_allocation_from_its_start():
    mib = random.randint(48, 96)
    baseline = start_peak_window()
    assert abs(baseline - rss_status()["VmRSS"]) < 8
    assert peak_rise_mib(baseline) < 8  # nothing allocated yet
    torch.ones(mib * MIB // 4).sum()
    assert mib - 4 <= peak_rise_mib(baseline) <= mib + 16
