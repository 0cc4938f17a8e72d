"""Compare's cost measurement and the benchmark's classifier case take the one training step
(:mod:`filterformer.training.training_steps`), built by the one builder.

Calls are recorded by the interpreter's profiler, by code object: a path that built its own step
(even from the same optimiser and clipping pieces) would not show up as a call.
"""

from __future__ import annotations

import random

import torch

from filterformer.bench import BenchShape, build_case
from filterformer.training.compare import load_compare_config
from filterformer.training.compare.cost import measure_cost
from filterformer.training.optimization import training_step
from filterformer.training.training_steps import TrainingStep

from ..call_recording import recorded_calls
from .helpers import majority_task

BUILD, STEP = TrainingStep.__init__, TrainingStep.step
TINY = ["task=majority", "model.dim=16", "model.depth=1", "model.num_heads=2", "batch_size=8",
        "max_steps=2", "progress=false"]


def test_compare_cost_times_the_steps_the_one_builder_builds(tmp_path):
    methods, warmup, rounds = ["softmax", "gfsa", "neutreno"], random.randint(1, 2), 2
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"], methods=methods,
                                 seeds=[random.randint(0, 99)], cost_rounds=rounds,
                                 cost_warmup_steps=warmup)
    with recorded_calls(BUILD, STEP, training_step) as calls:
        cost = measure_cost(config, majority_task(num_train=32, num_eval=8,
                                                  seed=random.randint(0, 99)),
                            echo=lambda line: None)
    assert calls[BUILD] == len(methods)
    (per_seed,) = cost["seeds"].values()
    # Every step taken, warm-up and timed, is the built step's, and each is the trainer's.
    taken = len(methods) * warmup + rounds * sum(per_seed["steps_per_round"].values())
    assert calls[STEP] == calls[training_step] == taken


def test_the_bench_classifier_case_steps_through_the_one_builder():
    N = random.randint(8, 24)
    with recorded_calls(BUILD, STEP, training_step) as calls:
        case = build_case(random.choice(["bert-softmax", "bert-gfsa"]), BenchShape.quick(), N,
                          "train")
        before = [p.detach().clone() for p in case.module.parameters()]
        case.step()
    assert calls[BUILD] == 1 and calls[STEP] == calls[training_step] == 1
    assert any(not torch.equal(a, p) for a, p in zip(before, case.module.parameters(),
                                                     strict=True))
