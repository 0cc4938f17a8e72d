"""``torch.compile`` with inductor on CUDA (the project's :func:`compile_model`): a small
classifier's logits and gradients equal eager execution on the same device, in one graph for two
sequence lengths, for the methods with their own kernels (GFSA with NeuTRENO, AGF, SAMSA hard)."""

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.models import SequenceClassifier
from filterformer.training import TrainConfig, compilation
from filterformer.training.compilation import compile_model, mark_sequence_dynamic

from ..training.compilation_cases import (
    CLASSES,
    MAX_LEN,
    VOCAB,
    padded_batch,
    perturb,
    run,
    two_lengths,
)
from .parity import assert_relative_close, inputs_on

pytestmark = pytest.mark.cuda

#: The compiler the tier checks: what ``compile: true`` runs.
BACKEND = "inductor"


@pytest.fixture
def inductor_counter(monkeypatch):
    """Counts the graphs ``compile_model`` compiles with :data:`BACKEND`, from a clean cache;
    random operations (SAMSA's noise) run as in eager mode, so one seed gives both the same."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(BACKEND)
    monkeypatch.setattr(compilation, "BACKEND", counter)
    with torch._inductor.config.patch(fallback_random=True):
        yield counter
    torch._dynamo.reset()


@pytest.mark.parametrize("method", ["gfsa+neutreno", "agf", "samsa_hard"])
def test_compiled_classifier_matches_eager_in_one_graph(method, cuda_device, inductor_counter):
    config = TrainConfig(method=method, model={"dim": 16, "depth": 2, "num_heads": 2})
    backbone = config.transformer_config(vocab_size=VOCAB, max_len=MAX_LEN)
    model = SequenceClassifier(backbone, CLASSES)
    perturb(model)
    model.to(cuda_device).train()
    compiled = compile_model(model)
    for length in two_lengths():
        batch = inputs_on(padded_batch(VOCAB, length), cuda_device, torch.float32)
        mark_sequence_dynamic(batch)
        seed = int(torch.randint(0, 2**31, ()))
        eager_logits, eager_grads = run(model, batch, seed)
        logits, grads = run(compiled, batch, seed)
        assert_relative_close(logits, eager_logits, f"logits at N={length}")
        assert [g is None for g in grads] == [g is None for g in eager_grads]
        names = [name for name, p in model.named_parameters() if p.requires_grad]
        for name, grad, expected in zip(names, grads, eager_grads, strict=True):
            if expected is not None:
                assert_relative_close(grad, expected, f"gradient of {name} at N={length}")
    assert inductor_counter.frame_count == 1, "a graph break or a recompile for another length"
