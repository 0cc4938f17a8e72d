"""A patched grouped-query Llama decoding with GFSA's powers in bucketed buffers, across many
bucket boundaries, equals generation without a cache (greedy, sampled, beams); its decoding
steps over transformers' growing keys use the SDPA kernels chosen for them."""

import pytest
import torch
import transformers
from torch.nn.attention import SDPBackend

from filterformer import CausalLM, patch, patched_parameters
from filterformer.attention import decoding_cache
from filterformer.functional import sdpa_backends
from filterformer.models import TransformerConfig
from filterformer.patching.huggingface import CACHE_ATTRIBUTE

from .helpers import randomise_patch
from .test_hf_decoding import DECODING_TOLERANCE, assert_same_generation

VOCAB = 50
#: Small enough that a 7-token prompt and 20 new tokens cross three boundaries.
BUCKET = 8

CASES = [
    ("gfsa", {"K": 3}),
    ("gfsa", {"K": 4, "exact_power": True}),  # ĀV, Ā²V and Ā³V kept per position
    ("gfsa", {"K": 3, "layers": [1]}),  # layer 0 stays softmax attention
    ("gfsa+neutreno", {"K": 3, "neutreno_lambda": 0.4}),
]


def grouped_query_llama(method: str, options: dict) -> transformers.LlamaForCausalLM:
    """A 2-layer float64 Llama, 4 query heads sharing 2 key/value heads, patched."""
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config).to(torch.float64).eval()
    patch(model, method, **options)
    randomise_patch(patched_parameters(model))
    return model


def prompts() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, VOCAB, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture
def small_buckets(monkeypatch):
    monkeypatch.setattr(decoding_cache, "CACHE_BUCKET", BUCKET)


@pytest.mark.parametrize(("method", "options"), CASES)
@pytest.mark.parametrize("search", ["greedy", "sampled", "beams"])
def test_generation_across_buckets_equals_recomputation(method, options, search, small_buckets):
    model = grouped_query_llama(method, options)
    inputs = prompts()
    settings = dict(max_new_tokens=20, min_new_tokens=20, output_scores=True,
                    return_dict_in_generate=True, do_sample=search == "sampled")
    if search == "beams":
        settings["num_beams"] = 4
    seed = int(torch.randint(0, 2**31, ()))
    runs = []
    for use_cache in (True, False):
        torch.manual_seed(seed)  # generate() samples from torch's global generator
        runs.append(model.generate(**inputs, use_cache=use_cache, **settings))
    assert_same_generation(*runs)
    if search == "beams":
        torch.testing.assert_close(
            runs[0].sequences_scores, runs[1].sequences_scores, **DECODING_TOLERANCE
        )


def test_cached_powers_fill_bucketed_buffers(small_buckets):
    model = grouped_query_llama("gfsa", {"K": 3})
    out = model(**prompts(), use_cache=True)
    ids, mask = prompts()["input_ids"], torch.ones(2, 7, dtype=torch.long)
    for _ in range(12):
        mask = torch.cat([mask, torch.ones(2, 1, dtype=torch.long)], dim=1)
        out = model(input_ids=ids[:, :1], attention_mask=mask, past_key_values=out.past_key_values)
    store = getattr(out.past_key_values, CACHE_ATTRIBUTE)[0]
    assert store.length == 19 and store.capacity == 24 and store.power(1).shape[-2] == 19


def test_the_backends_for_growing_keys():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert sdpa_backends.growing_keys_backends(cuda, 1, 40) == [
        SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH
    ]
    assert SDPBackend.CUDNN_ATTENTION not in sdpa_backends.growing_keys_backends(cuda, 3, 40)
    assert sdpa_backends.growing_keys_backends(cuda, 40, 40) is None  # a prompt: SDPA chooses
    assert sdpa_backends.growing_keys_backends(cpu, 1, 40) is None


def test_only_decoding_steps_of_the_patched_model_take_the_choice(monkeypatch):
    # On the CPU, the choice is replaced by a kernel the CPU lacks: a call that takes it fails.
    def cpu_lacks(device, query_len, key_len):
        return None if query_len >= key_len else [SDPBackend.EFFICIENT_ATTENTION]

    monkeypatch.setattr(sdpa_backends, "growing_keys_backends", cpu_lacks)
    model = grouped_query_llama("gfsa", {"K": 3, "layers": [1]})
    inputs = prompts()
    out = model(**inputs, use_cache=True)  # the prompt: square, SDPA's own choice
    with pytest.raises(RuntimeError, match="No viable backend"):
        model(input_ids=inputs["input_ids"][:, :1], past_key_values=out.past_key_values)
    # Our own model's bucketed cache keeps SDPA's choice.
    native = CausalLM(TransformerConfig(causal=True, vocab_size=VOCAB, dim=32, num_heads=4,
                                        depth=2)).eval()
    assert native.generate(inputs["input_ids"], 3, cache_bucket=4).shape == (2, 10)

