"""The bucketed decoding cache: buffers grow a bucket at a time and are written in place, a step
attends over the whole buffer, and crops, batch selections and bad writes behave."""

import pytest
import torch

from filterformer.attention import CACHE_BUCKET, DecodingCache, LayerCache


def _step(cache: LayerCache, length: int, batch: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    keys, values = torch.randn(batch, 3, length, 4), torch.randn(batch, 3, length, 4)
    return keys, values


def test_buffers_grow_by_buckets_and_keep_every_position():
    bucket = int(torch.randint(3, 7, ()))
    cache = LayerCache(bucket)
    written_k, written_v = [], []
    spans, helds = [], []
    for length in (5, 1, 1, 3, *[1] * 9):
        k, v = _step(cache, length)
        keys, values = cache.append_kv(k, v)
        written_k.append(k)
        written_v.append(v)
        held = cache.length
        spans.append(keys.shape[-2])
        helds.append(held)
        assert keys.shape[-2] == values.shape[-2] == cache.span
        # A prompt's tensors are kept as they are; buffers are bucketed from the next step on.
        assert cache.capacity == held if len(spans) == 1 else cache.capacity % bucket == 0
        assert cache.capacity >= held
        torch.testing.assert_close(keys[..., :held, :], torch.cat(written_k, dim=-2))
        torch.testing.assert_close(values[..., :held, :], torch.cat(written_v, dim=-2))
        assert not keys[..., held:, :].any() and not values[..., held:, :].any()  # zeros
    assert spans[0] == 5  # a prompt attends over exactly its keys
    # Every step after it attends over the whole buffer: the key length changes once a bucket.
    assert spans[1:] == [-(-held // bucket) * bucket for held in helds[1:]]


def test_a_prompt_is_kept_without_a_copy_and_never_written_into():
    cache = LayerCache(4)
    k, v = _step(cache, 6)
    keys, values = cache.append_kv(k, v)
    power = torch.randn_like(v)
    assert keys is k and values is v and cache.append_power(1, power) is power
    originals = [t.clone() for t in (k, v, power)]
    cache.crop(3)  # the next step writes at positions the prompt's tensors hold
    k2, v2 = _step(cache, 1)
    keys, values = cache.append_kv(k2, v2)
    cache.append_power(1, torch.randn_like(v2))
    for tensor, original in zip((k, v, power), originals, strict=True):
        assert torch.equal(tensor, original)
    torch.testing.assert_close(keys[..., :4, :], torch.cat([k[..., :3, :], k2], dim=-2))


def test_signals_live_in_the_same_buffers():
    cache = LayerCache(4)
    powers = []
    for length in (3, 1, 2, 1):
        cache.append_kv(*_step(cache, length))
        power = torch.randn(2, 3, length, 4)
        powers.append(power)
        got = cache.append_power(1, power)
        assert got.shape[-2] == cache.span
        torch.testing.assert_close(cache.power(1), torch.cat(powers, dim=-2))


def test_a_signal_must_cover_the_positions_just_appended():
    cache = LayerCache(4)
    cache.append_kv(*_step(cache, 3))
    with pytest.raises(ValueError, match=r"power1 is written at the positions last appended \(3"):
        cache.append_power(1, torch.randn(2, 3, 2, 4))


def test_crop_and_map_tensors_follow_positions_and_rows():
    cache = DecodingCache(2, bucket=4)
    k, v = _step(cache.layers[0], 6)
    for layer in cache.layers:
        layer.append_kv(k, v)
    cache.crop(4)
    # The prompt's own tensors, 6 positions (bucketed only when a later step grows them).
    assert cache.length == 4 and all(layer.capacity == 6 for layer in cache.layers)
    rows = torch.tensor([1, 1, 0])
    cache.map_tensors(lambda t: t.index_select(0, rows))
    new_k, new_v = torch.randn(3, 3, 1, 4), torch.randn(3, 3, 1, 4)
    keys, values = cache.layers[1].append_kv(new_k, new_v)
    torch.testing.assert_close(keys[..., :5, :], torch.cat([k[rows, :, :4], new_k], dim=-2))
    torch.testing.assert_close(values[..., :5, :], torch.cat([v[rows, :, :4], new_v], dim=-2))
    cache.layers[0].map_tensors(lambda t: t[..., :2, :])  # a fn that shortens: a crop
    assert cache.layers[0].length == 2


def test_a_write_of_another_batch_or_dtype_names_what_the_cache_holds():
    cache = LayerCache(4)
    cache.append_kv(*_step(cache, 3))
    with pytest.raises(ValueError, match=r"holds keys of shape .* got new positions of shape"):
        cache.append_kv(*_step(cache, 1, batch=3))
    cache = LayerCache(4)
    cache.append_kv(*_step(cache, 3))
    with pytest.raises(ValueError, match=r"torch.float32 .* torch.float64"):
        cache.append_kv(torch.randn(2, 3, 1, 4).double(), torch.randn(2, 3, 1, 4).double())


@pytest.mark.parametrize("bucket", [0, -2, 2.5, True])
def test_a_bad_bucket_is_refused(bucket):
    with pytest.raises(ValueError, match=r"bucket must be a positive integer"):
        DecodingCache(2, bucket=bucket)


def test_the_default_bucket():
    assert LayerCache().bucket == CACHE_BUCKET


def test_gradients_flow_through_cached_steps():
    # Each step writes a copy of the buffer when gradients are tracked: earlier steps' graphs
    # keep the buffer they read.
    cache = LayerCache(4)
    k = torch.randn(1, 2, 6, 4, requires_grad=True)
    outs = []
    for start, end in ((0, 3), (3, 4), (4, 5), (5, 6)):
        keys, _ = cache.append_kv(k[..., start:end, :], k[..., start:end, :] * 2)
        outs.append(keys.square().sum(dim=-2))  # square keeps the keys for its gradient
    torch.stack(outs).sum().backward()
    # Position t is summed by every step from the one that appended it on.
    steps_seeing = torch.tensor([4, 4, 4, 3, 2, 1], dtype=k.dtype)[:, None]
    torch.testing.assert_close(k.grad, 2 * k.detach() * steps_seeing)


def test_inference_mode_buffers_can_be_decoded_outside_it():
    cache = LayerCache(4)
    with torch.inference_mode():
        cache.append_kv(*_step(cache, 3))
    with torch.no_grad():
        keys, _ = cache.append_kv(*_step(cache, 1))
    assert keys.shape[-2] == 4
