"""CausalLM decoding with the bucketed cache across many bucket boundaries equals decoding that
recomputes the whole prefix every step (greedy, sampled, beams, padded blocks, gradients), and
a decoding step attends over the positions held only, on the kernels that build nothing per
shape."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import VOCAB, causal_lm

BUCKET = 8
METHODS = ["softmax", "gfsa", "gfsa_exact", "gfsa+neutreno"]


@pytest.mark.parametrize("kind", METHODS)
def test_greedy_and_sampled_generation_across_buckets_equal_recomputation(kind):
    model = causal_lm(kind)
    prompt = torch.randint(0, VOCAB, (3, int(torch.randint(5, 12, ()))))
    new = 30  # crosses three or four bucket boundaries after the prompt
    cached = model.generate(prompt, new, cache_bucket=BUCKET)
    assert torch.equal(cached, model.generate(prompt, new, use_cache=False))
    seed = int(torch.randint(0, 2**31, ()))
    sampled = [
        model.generate(prompt, new, do_sample=True, use_cache=use, cache_bucket=BUCKET,
                       generator=torch.Generator().manual_seed(seed))
        for use in (True, False)
    ]
    assert torch.equal(*sampled)


def _beam_search(model, prompt, beams, steps, *, use_cache):
    """Beam search from one prompt ``(1, T)``: the ``beams`` best continuations by summed
    log-probability, ``(beams, T + steps)``, their scores, and every step's chosen beams."""
    vocab = model.config.vocab_size
    sequences = prompt.repeat(beams, 1)
    scores = torch.full((beams,), float("-inf"), dtype=torch.float64)
    scores[0] = 0.0  # the copies of the prompt start as one beam
    cache = model.new_cache(BUCKET) if use_cache else None
    step_input, chosen = sequences, []
    for _ in range(steps):
        logp = model(step_input, cache=cache).logits[:, -1].log_softmax(-1)
        best = (scores[:, None] + logp).flatten().topk(beams)
        beam, token = best.indices // vocab, best.indices % vocab
        chosen.append(beam)
        sequences = torch.cat([sequences[beam], token[:, None]], dim=1)
        scores = best.values
        if cache is not None:
            cache.map_tensors(lambda t, beam=beam: t.index_select(0, beam))
        step_input = token[:, None] if cache is not None else sequences
    return sequences, scores, chosen


@pytest.mark.parametrize("kind", METHODS)
def test_beam_search_across_buckets_equals_recomputation(kind):
    model = causal_lm(kind)
    prompt = torch.randint(0, VOCAB, (1, 6))
    with torch.no_grad():
        cached = _beam_search(model, prompt, 4, 20, use_cache=True)
        recomputed = _beam_search(model, prompt, 4, 20, use_cache=False)
    assert torch.equal(cached[0], recomputed[0])
    torch.testing.assert_close(cached[1], recomputed[1], rtol=0, atol=1e-10)
    identity = torch.arange(4)
    assert any(not torch.equal(beam, identity) for beam in cached[2][1:])  # beams swapped


@pytest.mark.parametrize("kind", ["softmax", "gfsa+neutreno"])
def test_padded_blocks_across_buckets_equal_the_full_pass(kind):
    # Left padding over the past, blocks of several new tokens that straddle a boundary (their
    # causal mask sits at the cache's offset inside the buffer), then single tokens.
    model = causal_lm(kind)
    ids = torch.randint(0, VOCAB, (2, 29))
    mask = torch.ones(2, 29, dtype=torch.bool)
    mask[1, :5] = False
    with torch.no_grad():
        full = model(ids, padding_mask=mask).logits
        cache = model.new_cache(4)
        steps, start = [], 0
        for end in (6, 11, 13, 19, *range(20, 30)):
            steps.append(model(ids[:, start:end], padding_mask=mask[:, :end], cache=cache).logits)
            start = end
    got = torch.cat(steps, dim=1)
    torch.testing.assert_close(got[0], full[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(got[1, 5:], full[1, 5:], rtol=0, atol=1e-10)


def test_gradients_through_cached_steps_equal_the_full_pass():
    model = causal_lm("gfsa+neutreno").train(False)
    ids = torch.randint(0, VOCAB, (2, 13))
    full = model(ids).logits.square().sum()
    want = torch.autograd.grad(full, list(model.parameters()))
    cache = model.new_cache(4)
    steps = [model(ids[:, :3], cache=cache).logits]
    steps += [model(ids[:, t : t + 1], cache=cache).logits for t in range(3, 13)]
    got = torch.autograd.grad(torch.cat(steps, 1).square().sum(), list(model.parameters()))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", ["softmax", "gfsa"])
def test_a_decoding_step_attends_over_the_positions_held_on_the_decoding_kernels(
    kind, monkeypatch
):
    from filterformer.functional import softmax as softmax_module

    model = causal_lm(kind)
    key_lengths, kernel_choices = [], []
    sdpa = F.scaled_dot_product_attention
    choose = softmax_module.decoding_kernels

    def spy_sdpa(q, k, *args, **kwargs):
        if q.shape[-2] == 1:  # decoding steps
            key_lengths.append(k.shape[-2])
            assert kwargs.get("attn_mask") is None  # nothing left to mask for one query
        return sdpa(q, k, *args, **kwargs)

    def spy_choice(q):
        kernel_choices.append(q.shape[-2])
        return choose(q)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy_sdpa)
    monkeypatch.setattr(softmax_module, "decoding_kernels", spy_choice)
    prompt_len, new = int(torch.randint(3, 9, ())), 27
    model.generate(torch.randint(0, VOCAB, (2, prompt_len)), new, cache_bucket=BUCKET)
    # Steps hold prompt + 1 .. prompt + new - 1 positions (the last token is never fed back);
    # each layer attends once (softmax) or twice (GFSA's two passes) per step.
    held = list(range(prompt_len + 1, prompt_len + new))
    passes = model.config.depth * (1 if kind == "softmax" else 2)
    assert key_lengths == [n for n in held for _ in range(passes)]
    # Every call through the cache, the prompt's too, chooses the decoding kernels.
    assert kernel_choices == [prompt_len] * passes + [1] * len(key_lengths)
