"""boltzlab.rng: explicit generators, checkpointable state, and the uniforms behind every draw.

Properties checked: generators are reproducible from their seed and independent across
seeds and children; state snapshots restore a stream exactly; the centred uniforms are
integers on exactly ``{-2^(b-1), …, 2^(b-1) - 1}``, uniform over that range; Bernoulli draws
through the threshold path fire with probability ``p`` — never for ``p = 0`` and always for
``p = 1`` — in float32 and float64; generators on the wrong device are refused.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch

from boltzlab import rng
from harness import assert_counts_match
from tolerances import MAX_Z

DTYPES = (torch.float32, torch.float64)


# ---------------------------------------------------------------------------- generators
def test_same_seed_same_stream_and_different_seeds_differ():
    first = torch.rand(1000, generator=rng.make_generator(7))
    again = torch.rand(1000, generator=rng.make_generator(7))
    other = torch.rand(1000, generator=rng.make_generator(8))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    # Seeding is torch's own: the stream is that of torch.Generator().manual_seed(seed).
    assert torch.equal(first, torch.rand(1000, generator=torch.Generator().manual_seed(7)))


def test_unseeded_generators_are_fresh():
    a, b = rng.make_generator(), rng.make_generator()
    assert not torch.equal(torch.rand(64, generator=a), torch.rand(64, generator=b))


def test_generators_live_on_the_requested_device():
    for device in ("cpu", torch.device("cpu")):
        generator = rng.make_generator(0, device)
        assert generator.device.type == "cpu"
        assert rng.resolve_generator(3, device).device.type == "cpu"


def test_resolve_generator_is_the_one_door():
    generator = torch.Generator().manual_seed(1)
    assert rng.resolve_generator(generator) is generator, "a generator passes through untouched"
    seeded = rng.resolve_generator(5)
    assert torch.equal(torch.rand(10, generator=seeded), torch.rand(10, generator=rng.make_generator(5)))
    assert isinstance(rng.resolve_generator(None), torch.Generator)
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator"):
        rng.resolve_generator("seed")
    with pytest.raises(TypeError, match="float"):
        rng.resolve_generator(1.5)
    # A CPU generator for a model elsewhere is refused, with the fix in the message.
    with pytest.raises(ValueError, match="make_generator"):
        rng.resolve_generator(generator, "meta")


def test_spawned_children_are_reproducible_independent_and_advance_the_parent():
    parent = rng.make_generator(11)
    before = rng.get_state(parent)
    children = rng.spawn(parent, 3)
    assert len(children) == 3 and all(child.device.type == "cpu" for child in children)
    assert not torch.equal(rng.get_state(parent), before), "spawning must advance the parent"
    streams = [torch.rand(100, generator=child) for child in children]
    for index in range(3):
        for other in range(index + 1, 3):
            assert not torch.equal(streams[index], streams[other])
    again = rng.spawn(rng.make_generator(11), 3)
    for child, stream in zip(again, streams, strict=True):
        assert torch.equal(torch.rand(100, generator=child), stream)


def test_state_snapshot_restores_the_stream():
    generator = rng.make_generator(4)
    torch.rand(17, generator=generator)
    snapshot = rng.get_state(generator)
    assert snapshot.dtype == torch.uint8 and snapshot.device.type == "cpu"
    expected = torch.rand(50, generator=generator)
    assert not torch.equal(rng.get_state(generator), snapshot), "the snapshot is a copy"
    restored = rng.set_state(rng.make_generator(99), snapshot)
    assert torch.equal(torch.rand(50, generator=restored), expected)
    # Restoring also accepts the snapshot in another integer dtype (as read from a file).
    assert torch.equal(torch.rand(50, generator=rng.set_state(generator, snapshot.to(torch.int64))), expected)


# ---------------------------------------------------------------------------- uniforms
@pytest.mark.parametrize("dtype", [*DTYPES, torch.bfloat16])
def test_uniform_scale_makes_every_value_and_threshold_exact(dtype):
    scale = rng.uniform_scale(dtype)
    assert scale == (2.0**32 if dtype == torch.float64 else 2.0**24)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    # The extreme values and the thresholds at p = 0 and p = 1 are exact in the work dtype.
    for value in (-scale / 2, scale / 2 - 1, scale / 2):
        assert float(torch.tensor(value, dtype=work)) == value


@pytest.mark.parametrize("dtype", DTYPES)
def test_centered_uniform_covers_its_integer_range_uniformly(dtype):
    scale = rng.uniform_scale(dtype)
    n = 200_001  # odd: the buffer is filled 64 bits at a time and cut to size
    values = rng.centered_uniform(
        (n,), generator=rng.make_generator(3), dtype=dtype, device=torch.device("cpu")
    )
    assert values.shape == (n,) and values.device.type == "cpu"
    assert values.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    values = values.to(torch.float64)
    assert bool((values == values.round()).all()), "values must be integers"
    assert values.min() >= -scale / 2 and values.max() <= scale / 2 - 1
    # Both ends of the range are reached (within 0.1% of it, probability 1 − 1e-87 each).
    assert values.min() < -scale / 2 * 0.999 and values.max() > scale / 2 * 0.999
    # Mean −1/2, variance (scale² − 1)/12: the discrete uniform on the range.
    z = (values.mean() + 0.5) / math.sqrt((scale**2 - 1) / 12 / n)
    assert abs(float(z)) < MAX_Z
    # 64 equal bins of the range: every count matches its binomial law.
    bins = ((values + scale / 2) // (scale / 64)).to(torch.int64)
    assert_counts_match(torch.bincount(bins, minlength=64), torch.full((64,), 1 / 64), label="uniform bins")


@pytest.mark.parametrize("dtype", DTYPES)
def test_buffers_and_in_place_fill(dtype):
    buffer = rng.uniform_buffer(7, dtype=dtype, device="cpu")
    assert buffer.numel() == 8, "rounded up to an even length"
    assert buffer.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    filled = rng.fill_centered_uniform_(buffer, generator=rng.make_generator(0))
    assert filled is buffer
    again = rng.fill_centered_uniform_(
        rng.uniform_buffer(7, dtype=dtype, device="cpu"), generator=rng.make_generator(0)
    )
    assert torch.equal(filled, again), "same seed, same values"
    first = rng.centered_uniform(
        (7,), generator=rng.make_generator(0), dtype=dtype, device=torch.device("cpu")
    )
    assert torch.equal(first, filled[:7])


def test_workspaces_are_reused_per_size_and_per_thread():
    first = rng.uniform_workspace(1000, dtype=torch.float32, device="cpu")
    assert rng.uniform_workspace(1000, dtype=torch.float32, device="cpu") is first
    assert rng.uniform_workspace(1000, dtype=torch.float64, device="cpu") is not first
    assert rng.uniform_workspace(1001, dtype=torch.float32, device="cpu") is not first
    # The cache is bounded: after many other sizes, the first one is allocated afresh.
    for size in range(2000, 2100):
        rng.uniform_workspace(size, dtype=torch.float32, device="cpu")
    assert rng.uniform_workspace(1000, dtype=torch.float32, device="cpu") is not first
    mine = rng.uniform_workspace(3000, dtype=torch.float32, device="cpu")
    other: list[torch.Tensor] = []
    thread = threading.Thread(
        target=lambda: other.append(rng.uniform_workspace(3000, dtype=torch.float32, device="cpu"))
    )
    thread.start()
    thread.join()
    assert other[0] is not mine, "threads must not share scratch buffers"


# ---------------------------------------------------------------------------- Bernoulli draws
@pytest.mark.parametrize("dtype", DTYPES)
def test_probability_zero_never_fires_and_one_always_fires(dtype):
    # Through the library's threshold path: u < 2^b·(p − 1/2) with u on the full range.
    generator = rng.make_generator(12)
    for _ in range(5):
        zeros = rng.sample_bernoulli(torch.zeros(1000, 301, dtype=dtype), generator=generator)
        ones = rng.sample_bernoulli(torch.ones(1000, 301, dtype=dtype), generator=generator)
        assert not bool(zeros.any()), "p = 0 fired"
        assert bool(ones.all()), "p = 1 failed to fire"


@pytest.mark.parametrize("dtype", DTYPES)
def test_bernoulli_frequencies_match_their_probabilities(dtype):
    probability = torch.tensor([1e-3, 0.1, 0.25, 0.5, 0.7, 0.999], dtype=dtype)
    n = 100_000
    before = probability.clone()
    draws = rng.sample_bernoulli(probability.expand(n, -1).contiguous(), generator=rng.make_generator(5))
    assert draws.dtype == dtype and draws.shape == (n, 6)
    assert bool(((draws == 0) | (draws == 1)).all())
    assert torch.equal(probability, before), "the input must not be modified"
    p = probability.to(torch.float64)
    z = (draws.to(torch.float64).mean(0) - p) / torch.sqrt(p * (1 - p) / n)
    assert z.abs().max().item() < MAX_Z, z


def test_bernoulli_is_reproducible_from_the_seed():
    probability = torch.full((13, 7), 0.4)
    first = rng.sample_bernoulli(probability, generator=rng.make_generator(2))
    second = rng.sample_bernoulli(probability, generator=rng.make_generator(2))
    third = rng.sample_bernoulli(probability, generator=rng.make_generator(3))
    assert torch.equal(first, second) and not torch.equal(first, third)


def test_fork_leaves_the_parent_stream_alone_and_is_reproducible():
    parent = rng.make_generator(11)
    before = parent.get_state().clone()
    child = rng.fork(parent, 3)
    assert torch.equal(parent.get_state(), before)
    again = rng.fork(rng.make_generator(11), 3)
    assert torch.equal(torch.rand(5, generator=child), torch.rand(5, generator=again))
    other = rng.fork(rng.make_generator(11), 4)
    assert not torch.equal(
        torch.rand(5, generator=rng.fork(rng.make_generator(11), 3)), torch.rand(5, generator=other)
    )
