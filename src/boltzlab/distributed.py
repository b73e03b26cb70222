"""Running one command on several processes with ``torch.distributed`` (started by ``torchrun``).

boltzlab does not launch processes: ``torchrun --nproc-per-node N --no-python boltzlab …`` (or
any launcher that sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``) starts them, and :func:`init_from_environment` joins the group: gloo on the CPU,
NCCL when CUDA is present, each process on ``cuda:LOCAL_RANK``. Without a launcher nothing
changes: one process, no group, no communication.

**Work is split by fixed blocks** (docs/architecture.md, "Scaling out"). ``n`` chains (or
examples) are cut into ``n_blocks`` consecutive blocks of near-equal size; block ``b`` draws its
random numbers from its own stream, seeded with ``rng.block_seed(seed, b)``; rank ``r`` of ``W``
takes the consecutive blocks ``⌊b·W/n_blocks⌋ = r``. Gathering the ranks' rows in rank order
gives the blocks in order, so a sharded estimator returns the same numbers on 1, 2 or 4
processes for the same seed and block count. The default block count,
``max(DEFAULT_BLOCKS, world_size)``, makes that hold for every world size up to
:data:`DEFAULT_BLOCKS`.

Every collective goes through this module, which turns a failure (another rank died, a timeout)
into one :class:`~boltzlab.errors.DistributedError` naming this rank, so that a run with a dead
process exits with a message instead of hanging: the group is created with a timeout.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import DistributedError, ValidationError
from boltzlab.rng import BlockGenerator, block_seed, make_generator

__all__ = [
    "DEFAULT_BLOCKS",
    "DEFAULT_TIMEOUT_S",
    "Shard",
    "Topology",
    "agree",
    "all_gather",
    "block_sizes",
    "default_device",
    "example_streams",
    "exit_now",
    "finish",
    "gather_chains",
    "gather_rows",
    "init_from_environment",
    "launched",
    "leave",
    "local",
    "owned_blocks",
    "run_collective",
    "shard",
    "shard_chains",
    "shard_if_requested",
    "shared_seed",
    "sum_in_rank_order",
    "topology",
]

#: Blocks a sharded run is cut into by default: the result is the same on any world size ≤ this.
DEFAULT_BLOCKS = 8
#: Seconds a collective waits for the other processes before the run stops with an error.
DEFAULT_TIMEOUT_S = 600.0
_LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Topology:
    """Where this process stands: ``rank`` of ``world_size``, ``local_rank`` on its node.

    ``active`` says whether work is shared with a process group (also with one process under
    torchrun); inside :func:`local` it is ``False`` and the process counts as alone.
    """

    world_size: int = 1
    rank: int = 0
    local_rank: int = 0
    active: bool = False

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that prints and writes files."""
        return self.rank == 0


def launched() -> bool:
    """Whether a launcher such as torchrun set this process's rank and rendezvous variables."""
    return all(name in os.environ for name in _LAUNCHER_VARIABLES)


_ALONE = threading.local()


def topology() -> Topology:
    """This process's :class:`Topology` (world size 1 outside a process group or inside :func:`local`)."""
    if not (dist.is_available() and dist.is_initialized()) or getattr(_ALONE, "depth", 0):
        return Topology()
    local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    return Topology(
        world_size=dist.get_world_size(), rank=dist.get_rank(), local_rank=local_rank, active=True
    )


@contextlib.contextmanager
def local() -> Iterator[None]:
    """Run the block as if this process were alone: nothing inside is sharded or exchanged.

    Sharded functions (AIS, RAISE, the tempered estimators, the plain sampler, training) are
    collectives in a process group: every process must call them, in the same order. Work that
    one process does by itself — rank 0 drawing samples for a report or for TensorBoard, a
    scikit-learn estimator — goes inside ``with distributed.local():`` and runs unsharded there.
    """
    _ALONE.depth = getattr(_ALONE, "depth", 0) + 1
    try:
        yield
    finally:
        _ALONE.depth -= 1


def init_from_environment(*, timeout_s: float | None = None, backend: str | None = None) -> Topology:
    """Join the process group a launcher prepared; a no-op without one or when already joined.

    Parameters
    ----------
    timeout_s : float, optional
        How long a collective waits for the others before failing; default
        ``BOLTZLAB_DIST_TIMEOUT`` from the environment, else :data:`DEFAULT_TIMEOUT_S`.
    backend : str, optional
        ``"gloo"`` or ``"nccl"``; default NCCL when CUDA is available, else gloo.

    Returns
    -------
    Topology
    """
    if dist.is_available() and dist.is_initialized():
        return topology()
    if not launched():
        return Topology()
    if not dist.is_available():
        raise DistributedError("this PyTorch build has no torch.distributed; run without torchrun")
    if timeout_s is None:
        text = os.environ.get("BOLTZLAB_DIST_TIMEOUT", str(DEFAULT_TIMEOUT_S))
        try:
            timeout_s = float(text)
        except ValueError:
            raise DistributedError(
                f"BOLTZLAB_DIST_TIMEOUT must be a number of seconds, got {text!r}"
            ) from None
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    try:
        if backend == "nccl":
            # NCCL needs each process bound to its own GPU before the group forms (the same
            # device as default_device: more processes than GPUs share them round-robin).
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, ValueError) as error:
        raise DistributedError(
            f"could not join the process group ({backend}, rank {os.environ.get('RANK')} of "
            f"{os.environ.get('WORLD_SIZE')}): {error}; check MASTER_ADDR/MASTER_PORT and that every "
            "process was started"
        ) from error
    return topology()


def default_device() -> torch.device:
    """``cuda:LOCAL_RANK`` in a process group when CUDA is present, else the CPU."""
    if dist.is_available() and dist.is_initialized() and torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def block_sizes(n_items: int, n_blocks: int) -> list[int]:
    """Sizes of ``n_blocks`` consecutive blocks of ``n_items``; the first ``n_items % n_blocks`` get one more."""
    base, extra = divmod(n_items, n_blocks)
    return [base + (1 if b < extra else 0) for b in range(n_blocks)]


def owned_blocks(n_blocks: int, where: Topology | None = None) -> range:
    """The consecutive blocks rank ``r`` of ``W`` takes: ``b`` with ``⌊b·W/n_blocks⌋ = r``."""
    where = where or topology()
    world, rank = where.world_size, where.rank
    first = -(-rank * n_blocks // world)  # ceil(rank·n/W)
    last = -(-(rank + 1) * n_blocks // world)
    return range(first, last)


@dataclass(frozen=True, slots=True)
class Shard:
    """This rank's part of a run over ``n_items`` chains or examples cut into blocks.

    Attributes
    ----------
    n_items : int
        All chains (or examples) of the run, over every rank.
    n_blocks : int
    blocks : range
        The global indices of this rank's blocks.
    start, stop : int
        This rank's rows ``[start, stop)`` in the run's global order.
    sizes : tuple of int
        Rows per owned block.
    generator : BlockGenerator or None
        One stream per owned block (``None`` when this rank holds no rows).
    """

    n_items: int
    n_blocks: int
    blocks: range
    start: int
    stop: int
    sizes: tuple[int, ...]
    generator: BlockGenerator | None

    @property
    def rows(self) -> int:
        return self.stop - self.start


def shard(
    n_items: int, *, seed: int, n_blocks: int | None = None, device: torch.device | str = "cpu"
) -> Shard:
    """Cut ``n_items`` into blocks and return this rank's :class:`Shard`.

    ``n_blocks`` defaults to ``min(n_items, max(DEFAULT_BLOCKS, world_size))``. More blocks than
    items, or fewer blocks than processes, is refused: a process without work would only wait.
    """
    world = topology().world_size
    if n_blocks is None:
        n_blocks = min(n_items, max(DEFAULT_BLOCKS, world))
    if not 1 <= n_blocks <= n_items:
        raise ValidationError(f"blocks must be between 1 and the {n_items} chains/examples, got {n_blocks}")
    if n_blocks < world:
        raise ValidationError(
            f"{n_blocks} blocks cannot be shared by {world} processes; use at least {world} blocks "
            f"(and at least {world} chains or examples)"
        )
    sizes = block_sizes(n_items, n_blocks)
    mine = owned_blocks(n_blocks)
    start = sum(sizes[: mine.start])
    own_sizes = tuple(sizes[b] for b in mine)
    generator = BlockGenerator(seed, list(mine), list(own_sizes), device) if own_sizes else None
    return Shard(
        n_items=n_items,
        n_blocks=n_blocks,
        blocks=mine,
        start=start,
        stop=start + sum(own_sizes),
        sizes=own_sizes,
        generator=generator,
    )


def shard_if_requested(
    n_items: int,
    generator: torch.Generator,
    *,
    blocks: int | None,
    device: torch.device | str,
    what: str = "seed of the chain blocks",
) -> Shard | None:
    """This rank's :class:`Shard` of ``n_items`` when blocks are asked for (``blocks`` given) or a
    process group runs, else ``None`` (nothing split). In a group, a collective: the seed of
    the block streams, one draw of ``generator``, is checked to be the same on every process."""
    if blocks is None and not topology().active:
        return None
    return shard(n_items, seed=shared_seed(generator, what), n_blocks=blocks, device=device)


def shared_seed(generator: torch.Generator, what: str = "seed of the chain blocks") -> int:
    """One draw of ``generator`` that seeds the block streams, checked to be the same on every process."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return agree(seed, what)


def shard_chains(
    chains: Chains, generator: torch.Generator, *, n_blocks: int | None = None
) -> tuple[Chains, Shard]:
    """This process's blocks of ``chains`` (drawn alike on every process) and its :class:`Shard`.

    The shard's ``generator`` (a :class:`~boltzlab.rng.BlockGenerator`) is what these chains
    move with; :func:`gather_chains` puts every process's chains back together.
    """
    part = shard(chains.n_chains, seed=shared_seed(generator), n_blocks=n_blocks, device=chains.beta.device)
    return chains.select(slice(part.start, part.stop)), part


def gather_chains(chains: Chains) -> Chains:
    """Every process's chains, in block order (a collective; the identity outside a group)."""
    return Chains(
        layers=tuple(gather_rows(layer, what="gathering the chains") for layer in chains.layers),
        beta=gather_rows(chains.beta, what="gathering the chains"),
    )


def leave() -> None:
    """Leave the process group without exchanging anything: from here this process runs alone.

    For work that only one process does in full (a CLI command that does not split its work):
    every process leaves, the one that does the work carries on as if started without a
    launcher, and the others stop. Nothing is in flight, so no process waits for another.
    """
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def finish(code: int = 0) -> None:
    """End a process-group run: wait for every process, destroy the group, exit with ``code``.

    Call it last: it does not return in a process group (outside one it does nothing).
    Without the wait, a process that tears its connections down while another is still sending
    can make gloo abort the other at exit ("terminate called without an active exception").
    """
    if dist.is_available() and dist.is_initialized():
        if dist.get_world_size() > 1:
            run_collective("finishing the run", dist.barrier)
        dist.destroy_process_group()
        # gloo's background threads can still abort a process at interpreter exit after a
        # clean destroy (seen in about 1 run in 20 with torch 2.13): leave without destructors.
        exit_now(code)


def exit_now(code: int) -> None:
    """End this process at once after an error in a process group (output flushed).

    After a collective failed, the group's connections are broken and gloo's destructors can
    abort the process at interpreter exit, replacing the exit status; ``os._exit`` skips them.
    """
    import sys

    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    os._exit(code)


def example_streams(
    data: Tensor, generator: torch.Generator, n_blocks: int | None
) -> list[tuple[Tensor, torch.Generator]]:
    """This process's blocks of examples (rows of ``data``), each with its own generator.

    For estimators that treat examples independently (RAISE, a DBM's per-example AIS): block
    ``b`` is annealed with a generator seeded ``rng.block_seed(seed, b)``, ``seed`` one draw of
    ``generator`` that every process checks it shares; gather the per-example results with
    :func:`gather_rows`.
    """
    seed = shared_seed(generator, "seed of the example blocks")
    part = shard(data.shape[0], seed=seed, n_blocks=n_blocks, device=data.device)
    streams, row = [], part.start
    for block, size in zip(part.blocks, part.sizes, strict=True):
        streams.append((data[row : row + size], make_generator(block_seed(seed, block), generator.device)))
        row += size
    return streams


def run_collective(what: str, call: Callable[[], T]) -> T:
    """``call()``, with a failure (a dead or timed-out process) turned into one :class:`DistributedError`."""
    try:
        return call()
    except (RuntimeError, ValueError) as error:
        here = topology()
        raise DistributedError(
            f"rank {here.rank} of {here.world_size}: {what} with the other processes failed "
            f"({' '.join(str(error).split())[:300]}); another process probably stopped or timed out, "
            "see its output; this process stops too"
        ) from error


def all_gather(value: Any, *, what: str = "an exchange") -> list[Any]:
    """Every rank's ``value`` (any picklable object; tensors moved to the CPU), in rank order."""
    if not topology().active or topology().world_size == 1:
        return [value]
    gathered: list[Any] = [None] * dist.get_world_size()
    run_collective(what, lambda: dist.all_gather_object(gathered, value))
    return gathered


def gather_rows(tensor: Tensor, *, dim: int = 0, what: str = "gathering results") -> Tensor:
    """All ranks' slices of ``tensor`` along ``dim`` (the chains), concatenated in rank order."""
    if not topology().active or topology().world_size == 1:
        return tensor
    parts = all_gather(tensor.detach().cpu(), what=what)
    return torch.cat(parts, dim=dim).to(tensor.device)


def sum_in_rank_order(tensor: Tensor, *, what: str = "summing results") -> Tensor:
    """The sum over ranks of ``tensor``, added in rank order so that every run adds alike."""
    if not topology().active or topology().world_size == 1:
        return tensor
    parts = all_gather(tensor.detach().cpu(), what=what)
    total = parts[0].clone()
    for part in parts[1:]:
        total += part
    return total.to(tensor.device)


def agree(value: Any, name: str) -> Any:
    """``value``, after checking that every rank holds the same one (e.g. the seed)."""
    values = all_gather(value, what=f"checking the {name}")
    if any(other != values[0] for other in values[1:]):
        raise DistributedError(
            f"the processes disagree on the {name} ({', '.join(map(repr, values))}); start every rank "
            "with the same command line"
        )
    return value
