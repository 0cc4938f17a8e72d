import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.nn import InputEmbedding, sinusoidal_positions


def test_sinusoidal_table_closed_form():
    table = sinusoidal_positions(7, 6)
    for pos in range(7):
        for i in range(3):
            angle = torch.tensor(pos / 10000 ** (2 * i / 6))
            torch.testing.assert_close(table[pos, 2 * i], torch.sin(angle))
            torch.testing.assert_close(table[pos, 2 * i + 1], torch.cos(angle))


def test_offset_continues_positions():
    embed = InputEmbedding(8, vocab_size=11, max_len=10)
    ids = torch.randint(0, 11, (2, 6))
    full = embed(ids)
    torch.testing.assert_close(embed(ids[:, 4:], offset=4), full[:, 4:])


def test_embedding_rejects_bad_input():
    embed = InputEmbedding(8, vocab_size=11, max_len=4)
    with pytest.raises(ValueError, match="exactly one of"):
        embed()
    with pytest.raises(ValueError, match="input_dim"):
        embed(inputs=torch.randn(1, 3, 2))
    with pytest.raises(ValueError, match="max_len=4"):
        embed(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"position must be one of"):
        InputEmbedding(8, position="rotary")


def _planted_ids(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random in-range ids with a few out-of-range ones planted; also the planted values."""
    ids = torch.randint(0, vocab, (3, 9))
    bad = torch.cat([-torch.randint(1, 50, (2,)), vocab + torch.randint(0, 50, (2,))])
    where = torch.randperm(ids.numel())[: bad.numel()]
    ids.view(-1)[where] = bad
    return ids, bad


@pytest.mark.parametrize("dtype", [torch.long, torch.int32])
def test_out_of_range_token_ids_are_named_with_the_vocabulary(dtype):
    vocab = int(torch.randint(5, 40, ()).item())
    embed = InputEmbedding(8, vocab_size=vocab, max_len=16)
    ids, bad = _planted_ids(vocab)
    message = (
        rf"input_ids must lie in \[0, vocab_size\) = \[0, {vocab}\); {bad.numel()} id\(s\) out "
        rf"of range, smallest {bad.min().item()}, largest {bad.max().item()}"
    )
    with pytest.raises(ValueError, match=message):
        embed(ids.to(dtype))


def test_the_first_and_last_token_ids_are_embedded():
    vocab = int(torch.randint(5, 40, ()).item())
    embed = InputEmbedding(8, vocab_size=vocab, max_len=16, position="none")
    ids = torch.tensor([[0, vocab - 1]])
    torch.testing.assert_close(embed(ids)[0], embed.tokens.weight[[0, vocab - 1]])
    torch.testing.assert_close(embed(ids.int()), embed(ids))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8])
def test_token_ids_must_be_an_integer_tensor(dtype):
    embed = InputEmbedding(8, vocab_size=11, max_len=16)
    with pytest.raises(TypeError, match=rf"input_ids must be an integer tensor.*got {dtype}"):
        embed(torch.zeros(2, 3, dtype=dtype))


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "none"])
def test_an_empty_sequence_is_refused_for_every_input_kind(position):
    embed = InputEmbedding(8, vocab_size=11, input_dim=3, max_len=16, position=position)
    cases = {
        "input_ids": ((torch.zeros(2, 0, dtype=torch.long),), {}),
        "inputs": ((), {"inputs": torch.randn(2, 0, 3)}),
        "inputs_embeds": ((), {"inputs_embeds": torch.randn(2, 0, 8)}),
    }
    for name, (args, kwargs) in cases.items():
        with pytest.raises(ValueError, match=rf"{name} has sequence length N = 0 \(shape \(2, 0"):
            embed(*args, **kwargs)


def test_an_empty_batch_embeds_to_an_empty_batch():
    embed = InputEmbedding(8, vocab_size=11, max_len=16)
    length = int(torch.randint(1, 16, ()))
    assert embed(torch.zeros(0, length, dtype=torch.long)).shape == (0, length, 8)


def test_compiled_embedding_checks_token_ids_on_the_device_without_a_graph_break():
    """Under torch.compile the id check is a device-side assert, not a host read: one graph
    (TorchDynamo's compile counter, backend aot_eager, whose traced ops run eagerly) that embeds
    in-range ids as eager does and fails on an id outside the vocabulary."""
    torch._dynamo.reset()
    vocab = int(torch.randint(5, 40, ()).item())
    embed = InputEmbedding(8, vocab_size=vocab, max_len=16)
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(embed, backend=counter)
    ids = torch.randint(0, vocab, (3, 9))
    torch.testing.assert_close(compiled(ids), embed(ids))
    bad, _ = _planted_ids(vocab)
    with pytest.raises(RuntimeError, match=rf"input_ids must lie in \[0, vocab_size\) = "
                                           rf"\[0, {vocab}\)"):
        compiled(bad)
    assert counter.frame_count == 1
    torch._dynamo.reset()
