"""Explicit random number generation.

Every stochastic function in boltzlab takes a ``torch.Generator``; nothing touches the global
RNG. This module makes generators, derives independent child generators, snapshots their
state for checkpoints, and draws the centred uniform variates the transition operators use.

Why ``centered_uniform`` instead of ``torch.rand``: on the CPU the Mersenne twister behind
``torch.rand`` costs about 3.5 ns per float32, a quarter of a 784x500 RBM sweep's GEMM time.
Drawing 64 random bits per ``int64`` element and reading them as two ``int32`` values costs
about 2 ns per value plus two cheap passes. A unit is switched on when its uniform integer
falls below ``2^b·(p − 1/2)`` (see :func:`uniform_scale`), which happens with probability
``p`` up to the rounding of the threshold (below 6e-8, the resolution of
``torch.rand(...) < p``), and exactly for ``p = 0`` and ``p = 1``.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "BlockGenerator",
    "block_seed",
    "centered_uniform",
    "counter_bits",
    "counter_keys",
    "fill_centered_uniform_",
    "fork",
    "get_state",
    "make_generator",
    "rand",
    "randint",
    "randn",
    "resolve_generator",
    "sample_bernoulli",
    "sample_categorical",
    "set_state",
    "spawn",
    "uniform_buffer",
    "uniform_scale",
    "uniform_workspace",
]


def make_generator(seed: int | None = None, device: str | torch.device = "cpu") -> torch.Generator:
    """A new generator on ``device``, seeded with ``seed`` (a fresh random seed when ``None``)."""
    # ValueError, not boltzlab's ValidationError (a ValueError too): rng sits below errors in the
    # layers. Public doors check the device first (validation.check_device); this is for direct calls.
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(
            f"device {device!r} is not a device torch knows; use 'cpu', 'cuda' or 'cuda:N' (an NVIDIA GPU), or 'mps'"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        # torch's own message is about a missing shared library (ATen_cuda), not about the device.
        raise ValueError(
            f"device {str(device)!r} asks for a GPU, but this PyTorch sees none (torch.cuda.is_available() "
            "is False); use device='cpu'"
        )
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(seed))
    return generator


def resolve_generator(
    generator: torch.Generator | int | None, device: str | torch.device = "cpu"
) -> torch.Generator:
    """Normalise the one door for randomness: a generator, an integer seed, or ``None``.

    A generator on the wrong device type is refused, because torch would silently fall back
    to (or fail on) a different stream.
    """
    device = torch.device(device)
    if generator is None or isinstance(generator, int):
        return make_generator(generator, device)
    if isinstance(generator, BlockGenerator):
        return generator  # type: ignore[return-value]  # duck-types the generator for rng's draws
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator, an int seed or None, not {type(generator).__name__}"
        )
    if generator.device.type != device.type:
        raise ValueError(
            f"generator is on {generator.device} but the model is on {device}; "
            f"create it with boltzlab.rng.make_generator(seed, device='{device}')"
        )
    return generator


def spawn(generator: torch.Generator, n: int) -> list[torch.Generator]:
    """``n`` child generators seeded from ``generator`` (advances it by ``n`` draws)."""
    seeds = torch.randint(0, 2**62, (n,), generator=generator, device=generator.device)
    return [make_generator(int(s), generator.device) for s in seeds.tolist()]


def fork(generator: torch.Generator, stream: int) -> torch.Generator:
    """A generator for side work (stream ``stream``) seeded from ``generator``'s state, which
    it leaves untouched: the caller's own draws are the same with or without the side work."""
    copy = torch.Generator(device=generator.device)
    copy.set_state(generator.get_state())
    seed = int(torch.randint(0, 2**62, (1,), generator=copy, device=generator.device))
    return make_generator(block_seed(seed, stream), generator.device)


def get_state(generator: torch.Generator) -> Tensor:
    """A CPU uint8 snapshot of the generator's state (for checkpoints)."""
    return generator.get_state().clone()


def set_state(generator: torch.Generator, state: Tensor) -> torch.Generator:
    """Restore a snapshot taken with :func:`get_state`; returns the generator."""
    generator.set_state(state.to(torch.uint8).cpu())
    return generator


def uniform_scale(dtype: torch.dtype) -> float:
    """``2^b``: :func:`centered_uniform` is uniform on ``{-2^(b-1), ..., 2^(b-1) - 1}``.

    ``b = 32`` for float64 and ``b = 24`` otherwise: every value and every threshold
    ``2^b·(p − 1/2)`` at ``p = 0`` and ``p = 1`` is then exact in the dtype used for the
    comparison, so probabilities 0 and 1 are honoured exactly (as with ``torch.rand``,
    whose float32 values are also multiples of 2^-24).
    """
    return 4294967296.0 if dtype == torch.float64 else 16777216.0


def uniform_buffer(numel: int, *, dtype: torch.dtype, device: torch.device | str) -> Tensor:
    """An uninitialised flat buffer for :func:`fill_centered_uniform_` holding ``numel`` values.

    float64 when ``dtype`` is float64, float32 otherwise; its length is rounded up to an even
    number so that it can be filled 64 random bits at a time. Use ``buffer[:numel]``.
    """
    work_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.empty(numel + (numel & 1), dtype=work_dtype, device=device)


_WORKSPACES = threading.local()
_MAX_WORKSPACES = 8


def uniform_workspace(numel: int, *, dtype: torch.dtype, device: torch.device | str) -> Tensor:
    """A reusable :func:`uniform_buffer` for this thread, to be filled before every use.

    Samplers draw fresh uniforms every sweep; reusing their buffer avoids a multi-megabyte
    allocation per layer per sweep, which on the CPU costs page faults comparable to a tenth
    of the sweep. Buffers are per thread (no sharing between threads) and the few most
    recently used sizes are kept. The contents are scratch: never keep a reference.
    """
    cache = getattr(_WORKSPACES, "buffers", None)
    if cache is None:
        cache = _WORKSPACES.buffers = OrderedDict()
    work_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    key = (numel, work_dtype, torch.device(device))
    buffer = cache.pop(key, None)
    if buffer is None:
        buffer = uniform_buffer(numel, dtype=dtype, device=device)
        while len(cache) >= _MAX_WORKSPACES:
            cache.popitem(last=False)
    cache[key] = buffer
    return buffer


def fill_centered_uniform_(buffer: Tensor, *, generator: torch.Generator, rows: int | None = None) -> Tensor:
    """Fill a buffer from :func:`uniform_buffer` with uniform integers; returns it.

    Values are uniform on ``{-2^(b-1), ..., 2^(b-1) - 1}`` with ``2^b = uniform_scale(dtype)``,
    so ``P(value < uniform_scale·(p − 1/2)) = p``. A :class:`BlockGenerator` fills each
    block's rows from that block's own stream; ``rows``, the first dimension of the draw the
    buffer holds, tells it when the draw stacks several copies of the chains.
    """
    if isinstance(generator, BlockGenerator):
        return generator.fill_centered_uniform_(buffer, rows=rows)
    numel = buffer.numel()
    if buffer.dtype == torch.float64:
        bits = torch.empty((numel + 1) // 2, dtype=torch.int64, device=buffer.device)
        bits.random_(-(2**63), None, generator=generator)
        return buffer.copy_(bits.view(torch.int32)[:numel])
    # 64 random bits per pair of values, drawn straight into the buffer's memory; the top 24
    # bits of each 32-bit half (an arithmetic shift keeps them centred) are converted in
    # place, so there is no second allocation and float32 represents every value exactly.
    halves = buffer.view(torch.int32)
    buffer.view(torch.int64).random_(-(2**63), None, generator=generator)
    halves.bitwise_right_shift_(8)
    return buffer.copy_(halves)


def centered_uniform(
    shape: tuple[int, ...], *, generator: torch.Generator, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """A new tensor of :func:`fill_centered_uniform_` values; float64 if ``dtype`` is, else float32."""
    numel = math.prod(shape)
    buffer = fill_centered_uniform_(
        uniform_buffer(numel, dtype=dtype, device=device),
        generator=generator,
        rows=shape[0] if shape else None,
    )
    return buffer[:numel].view(shape)


def _per_block(draw: Any, shape: tuple[int, ...], generator: Any, **options: Any) -> Tensor:
    """``draw(shape, generator=generator, **options)``; for a :class:`BlockGenerator`, each block's
    rows (the first dimension: chains) from that block's stream, concatenated."""
    if isinstance(generator, BlockGenerator):
        copies, sizes = generator.rows_of(shape)
        # Each block draws all its copies at once, so its stream does not depend on the others.
        parts = [
            draw((copies, size, *shape[1:]), generator=g, **options)
            for g, size in zip(generator.generators, sizes, strict=True)
        ]
        return torch.cat(parts, dim=1).reshape(shape)
    return draw(shape, generator=generator, **options)


def rand(
    shape: tuple[int, ...], *, generator: torch.Generator, dtype: torch.dtype, device: torch.device | str
) -> Tensor:
    """``torch.rand(shape)``, drawn block by block (rows = chains) for a :class:`BlockGenerator`."""
    return _per_block(torch.rand, shape, generator, dtype=dtype, device=device)


def randn(
    shape: tuple[int, ...], *, generator: torch.Generator, dtype: torch.dtype, device: torch.device | str
) -> Tensor:
    """``torch.randn(shape)``, drawn block by block (rows = chains) for a :class:`BlockGenerator`."""
    return _per_block(torch.randn, shape, generator, dtype=dtype, device=device)


def randint(
    high: int, shape: tuple[int, ...], *, generator: torch.Generator, device: torch.device | str
) -> Tensor:
    """``torch.randint(high, shape)`` (int64), drawn block by block for a :class:`BlockGenerator`."""

    def draw(size: tuple[int, ...], **options: Any) -> Tensor:
        return torch.randint(high, size, **options)

    return _per_block(draw, shape, generator, device=device)


def sample_bernoulli(probability: Tensor, *, generator: torch.Generator) -> Tensor:
    """0/1 samples, ``P(1) = probability``, in ``probability``'s dtype (a new tensor).

    Uses :func:`centered_uniform`; 3-4x cheaper than ``torch.bernoulli`` on the CPU.
    """
    threshold = (probability - 0.5).mul_(uniform_scale(probability.dtype))
    uniform = centered_uniform(
        tuple(probability.shape),
        generator=generator,
        dtype=probability.dtype,
        device=probability.device,
    )
    return uniform.lt_(threshold).to(probability.dtype)


def sample_categorical(probabilities: Tensor, *, generator: torch.Generator) -> Tensor:
    """One-hot draws from the categorical distributions along the last axis (a new tensor).

    ``probabilities`` has shape ``(n, …, q)`` (rows need not be normalised exactly: each is
    scaled by its own sum); the result has the same shape and dtype, with one 1 per row.
    One uniform per row, compared with the running sums, so the sampled kernel is exactly
    the one the probabilities describe (up to rounding).
    """
    cumulative = probabilities.cumsum(-1)
    uniform = rand(
        (*probabilities.shape[:-1], 1),
        generator=generator,
        dtype=probabilities.dtype,
        device=probabilities.device,
    )
    uniform.mul_(cumulative[..., -1:])
    index = (cumulative <= uniform).sum(-1, keepdim=True).clamp_(max=probabilities.shape[-1] - 1)
    return torch.zeros_like(probabilities).scatter_(-1, index, 1.0)


# ----------------------------------------------------------------- counter-based random bits
_MASK32 = 0xFFFFFFFF


def _hash32(x: Tensor) -> Tensor:
    """A 32-bit integer hash, a bijection of [0, 2^32); int64 in and out.

    ``x ^= x >> 16; x *= 0x21f0aaad; x ^= x >> 15; x *= 0x735a2d97; x ^= x >> 15``: one of
    the functions found by Wellons's hash-prospector, in its widely used variant whose
    second multiplier is 0x735a2d97 (the published one, 0xd35a2d97, is above 2^31).

    Both multipliers are below 2^31, so for ``x < 2^32`` every product stays below 2^63: no
    int64 overflow, which would be undefined behaviour in the C++ torch.compile generates.
    """
    x = x ^ (x >> 16)
    x = (x * 0x21F0AAAD) & _MASK32
    x = x ^ (x >> 15)
    x = (x * 0x735A2D97) & _MASK32
    return x ^ (x >> 15)


def counter_bits(index: Tensor, keys: Tensor) -> Tensor:
    """32 random bits per element from a counter: ``H(H(index ⊕ k0) ⊕ k1)``, int64 in [0, 2^32).

    A counter-based generator (the idea of Salmon et al. 2011's Philox, with a cheaper hash):
    element ``i`` of a draw depends only on ``i`` and the draw's two 32-bit ``keys`` (from
    :func:`counter_keys`), so any number of threads can fill any part of a tensor and the
    result is the same for every thread count. ``H`` is :func:`_hash32`, two rounds each
    keyed by one word; for fixed keys the map from ``index`` is a bijection, so no two elements of
    one draw share a value. Pure torch operations, so torch.compile fuses it into the kernel
    that uses the bits (:mod:`boltzlab.operators.fused`); ``index`` must be in [0, 2^32).
    """
    return _hash32(_hash32(index ^ keys[0]) ^ keys[1])


def counter_keys(generator: torch.Generator) -> Tensor:
    """Two fresh 32-bit keys for :func:`counter_bits`, drawn from ``generator``; int64, shape ``(2,)``."""
    return torch.randint(0, 1 << 32, (2,), generator=generator, dtype=torch.int64, device=generator.device)


# ----------------------------------------------------------------- per-block streams
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def block_seed(seed: int, block: int) -> int:
    """A 63-bit seed for chain block ``block`` of a run seeded with ``seed`` (SplitMix64 finaliser).

    Blocks get unrelated streams, and block ``b``'s stream depends on ``(seed, b)`` only, not on
    how many blocks a process holds (docs/architecture.md, "Scaling out").
    """
    z = (int(seed) + (int(block) + 1) * _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 1


class BlockGenerator:
    """Several generators, each owning a block of consecutive chains (rows).

    A draw for ``n`` rows (``n = sum(sizes)``) takes block ``b``'s rows from generator ``b``,
    so a chain's random numbers depend on its block's stream alone: a batch of blocks 0–3 and
    a batch of blocks 0–7 give blocks 0–3 the same numbers. That is what lets a run sharded
    over processes by whole blocks reproduce the one-process result (docs/architecture.md,
    "Scaling out"). Accepted wherever boltzlab's operators and models take a generator: their
    draws go through :func:`fill_centered_uniform_`. A draw may also stack ``m`` copies of the
    chains (first dimension ``m·n``, copy-major, as parallel tempering keeps its levels and
    CAST its slow and fast chains): block ``b`` then fills its rows of every copy from one
    draw of its stream, copy after copy. A draw whose first dimension is neither (or a direct
    ``torch.rand(..., generator=...)``) is refused.

    Parameters
    ----------
    seed : int
        The run's seed; block ``b``'s generator is seeded with ``block_seed(seed, b)``.
    blocks : sequence of int
        The global indices of the blocks held, in row order.
    sizes : sequence of int
        Rows (chains) per held block.
    device : torch.device or str
    """

    def __init__(
        self, seed: int, blocks: list[int] | tuple[int, ...], sizes: list[int] | tuple[int, ...], device="cpu"
    ) -> None:
        if len(blocks) != len(sizes) or not blocks:
            raise ValueError(f"one size per block is needed, got {len(blocks)} blocks and {len(sizes)} sizes")
        self.seed = int(seed)
        self.blocks = tuple(int(b) for b in blocks)
        self.sizes = tuple(int(n) for n in sizes)
        self.device = torch.device(device)
        self.generators = tuple(make_generator(block_seed(self.seed, b), self.device) for b in self.blocks)

    @property
    def rows(self) -> int:
        return sum(self.sizes)

    def rows_of(self, shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """``(copies, sizes)`` of a draw of ``shape``: its first dimension stacks ``copies`` batches
        of the chains (one per level of parallel tempering, say), each cut into the blocks."""
        if not shape or shape[0] == 0 or shape[0] % self.rows:
            raise ValueError(
                f"a block-generator draw needs its first dimension to be the {self.rows} chains or "
                f"a stack of copies of them, got {shape}"
            )
        return shape[0] // self.rows, self.sizes

    def fill_centered_uniform_(self, buffer: Tensor, *, rows: int | None = None) -> Tensor:
        """Fill ``buffer`` (a flat draw of ``rows`` rows, default one per chain) block by block."""
        numel = buffer.numel()
        copies, _ = self.rows_of((rows if rows is not None else self.rows,))
        stacked_rows = copies * self.rows
        # uniform_buffer rounds its length up to an even number, so one trailing pad value may
        # follow the rows. A block drawing L or L + 1 values consumes the same ceil(L/2) 64-bit
        # words, so the pad never shifts a block's stream.
        per_row, pad = divmod(numel, stacked_rows)
        if pad > 1:
            raise ValueError(
                f"a block-generator draw of {numel} values does not split into {stacked_rows} chain rows; "
                "draws must cover every chain of the batch"
            )
        if copies > 1:
            # Block b's values for every copy come from one draw of its stream (copy after
            # copy), whatever other blocks the batch holds; one strided copy places them.
            view = buffer[: stacked_rows * per_row].view(copies, self.rows * per_row)
            start = 0
            for generator, size in zip(self.generators, self.sizes, strict=True):
                length = size * per_row
                if length:
                    scratch = uniform_buffer(copies * length, dtype=buffer.dtype, device=buffer.device)
                    values = fill_centered_uniform_(scratch, generator=generator)[: copies * length]
                    view[:, start : start + length] = values.view(copies, length)
                start += length
            return buffer
        start = 0
        for generator, size in zip(self.generators, self.sizes, strict=True):
            length = size * per_row
            if length:
                part = buffer[start : start + length]
                if start % 2 == 0 and length % 2 == 0:
                    # 64-bit aligned and whole words: filled in place, no allocation.
                    fill_centered_uniform_(part, generator=generator)
                else:
                    scratch = uniform_buffer(length, dtype=buffer.dtype, device=buffer.device)
                    part.copy_(fill_centered_uniform_(scratch, generator=generator)[:length])
            start += length
        return buffer

    def __repr__(self) -> str:
        return f"BlockGenerator(seed={self.seed}, blocks={self.blocks}, sizes={self.sizes}, device={self.device})"
