import pytest
import torch

from filterformer.attention import merge_heads
from filterformer.bench import BENCH_METHODS, BenchShape, build_case, get_method, method_names
from filterformer.methods import NEUTRENO_LAMBDA

SHAPE = BenchShape(batch=2, heads=2, head_dim=4, depth=2, mlp_ratio=2.0)
N = 12


def _case(name, mode, seed=0):
    torch.manual_seed(seed)
    return build_case(name, SHAPE, N, mode)


@pytest.mark.parametrize("name", method_names())
def test_train_step_reaches_every_input_and_weight(name):
    case = _case(name, "train")
    case.step()
    grads = [leaf.grad for leaf in case.leaves if leaf.grad is not None]
    # Every kernel input and at least the projections get a gradient; all finite.
    assert len(grads) >= 3
    assert all(torch.isfinite(g).all() for g in grads)
    if case.module is None:
        assert all(leaf.grad is not None for leaf in case.leaves)
    else:
        assert case.module.training
    case.reset()
    assert all(leaf.grad is None for leaf in case.leaves)


@pytest.mark.parametrize("name", method_names())
def test_inference_step_builds_no_graph(name):
    case = _case(name, "inference")
    case.step()
    assert case.grad_output is None
    assert all(not t.requires_grad for t in case.inputs.values())
    if case.module is not None:
        assert not case.module.training
        assert all(p.grad is None for p in case.module.parameters())
    with torch.inference_mode():
        out = case.forward()[0]
    width = SHAPE.head_dim if get_method(name).level == "kernel" else SHAPE.width
    assert out.shape[-2:] == (N, width)


def test_explicit_and_two_pass_gfsa_cases_are_fed_identically():
    explicit, two_pass = _case("gfsa-explicit", "train"), _case("gfsa", "train")
    for name, tensor in explicit.inputs.items():
        assert torch.equal(tensor, two_pass.inputs[name]), name
    torch.testing.assert_close(explicit.forward()[0], two_pass.forward()[0])


def test_neutreno_case_differs_from_softmax_only_by_the_fidelity_term():
    softmax, neutreno = _case("softmax-module", "inference"), _case("neutreno", "inference")
    for name, tensor in softmax.inputs.items():
        assert torch.equal(tensor, neutreno.inputs[name]), name
    module = neutreno.module
    with torch.inference_mode():
        _, _, values = module.project_qkv(neutreno.inputs["x"])
        term = NEUTRENO_LAMBDA * (neutreno.inputs["first_values"] - values)
        expected = softmax.forward()[0] + merge_heads(term) @ module.proj.weight.T
        torch.testing.assert_close(neutreno.forward()[0], expected, rtol=1e-5, atol=1e-5)


def test_agf_case_puts_its_regulariser_into_the_backward():
    outputs = _case("agf", "train").forward()
    assert len(outputs) == 2 and outputs[1].dim() == 0 and outputs[1].requires_grad


def test_peer_model_has_our_shape_less_the_biases_it_omits():
    ours = _case("model-softmax", "train").module
    peer = _case("model-xtransformers", "train").module
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    D = SHAPE.width
    # x-transformers has no bias in its LayerNorms (2 per block + final) or attention output.
    assert count(ours) - count(peer) == SHAPE.depth * 3 * D + D


def test_model_cases_feed_both_models_the_same_embeddings():
    ours, peer = _case("model-softmax", "train"), _case("model-xtransformers", "train")
    assert torch.equal(ours.inputs["x"], peer.inputs["x"])
    assert torch.equal(ours.grad_output, peer.grad_output)


def test_every_method_has_a_known_baseline_and_level():
    for method in BENCH_METHODS.values():
        assert method.level in ("kernel", "module", "model")
        assert method.baseline is None or method.baseline in BENCH_METHODS


def test_unknown_method_lists_the_valid_ones():
    with pytest.raises(ValueError, match="valid choices: sdpa, gfsa"):
        get_method("flash")
