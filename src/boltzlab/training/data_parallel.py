"""Data-parallel training over a ``torch.distributed`` process group (docs/architecture.md, "Scaling out").

Every process holds the whole model, the whole training set and the same generator (the same
seed), so all of them draw the same minibatch permutation. Each update, rank ``r`` of ``W`` takes

* its ``batch_size / W`` consecutive rows of the minibatch for the data term, and
* its share of the negative chains: whole *blocks* of the persistent chains (PCD), or of the
  minibatch rows (CD, whose chains start at the data), each block advanced with its own random
  stream, re-seeded every update from one draw of the shared generator.

The gradients are averaged with one all-reduce, so every process applies the same step and the
parameters stay identical on all of them. With equal shares, the average of the ranks'
gradients is the gradient of the whole minibatch and all chains: ``W`` processes compute what
one process computes with the same total minibatch, chains and block count, up to float
rounding of the sums. Checkpoints hold all chains (gathered; rank 0 writes them), so a run
resumes on any number of processes that divides its block count.

Only CD and PCD (and SAP, its other name) are data-parallel: the tempered phases (PT, AST,
CAST) and FPCD are refused with a message rather than run with a wrong split.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from boltzlab import distributed
from boltzlab.errors import ValidationError
from boltzlab.rng import BlockGenerator
from boltzlab.training.cd import CDState, ContrastiveDivergence
from boltzlab.training.pcd import PersistentContrastiveDivergence, PersistentState

__all__ = ["DataParallel", "check_data_parallel_algorithm"]

#: The algorithms (negative phases) that train data-parallel under torchrun.
_DATA_PARALLEL_ALGORITHMS = ("cd", "pcd", "sap")


def check_data_parallel_algorithm(name: str) -> None:
    """Refuse, in a process group of several processes, an algorithm that is not data-parallel."""
    if distributed.topology().world_size > 1 and name.lower() not in _DATA_PARALLEL_ALGORITHMS:
        raise ValidationError(
            f"data-parallel training (torchrun) supports cd and pcd (sap), not {name!r}; "
            "run this algorithm in one process"
        )


@dataclass(frozen=True, slots=True)
class DataParallel:
    """This process's share of a data-parallel run.

    Attributes
    ----------
    world_size, rank : int
    n_blocks : int
        Blocks the chains are cut into (a multiple of ``world_size``).
    batch_rows : (int, int)
        This rank's rows ``[start, stop)`` of every minibatch (data term).
    chain_rows : (int, int)
        This rank's rows of the persistent chains (PCD) or of the minibatch (CD).
    blocks : range
        The global indices of this rank's chain blocks.
    block_size : int
    persistent : bool
        Whether the chains persist (PCD) or restart at the data (CD).
    """

    world_size: int
    rank: int
    n_blocks: int
    batch_rows: tuple[int, int]
    chain_rows: tuple[int, int]
    blocks: range
    block_size: int
    persistent: bool

    def chain_generator(self, generator: torch.Generator, device: torch.device) -> BlockGenerator:
        """This update's streams of this rank's chain blocks, seeded from one shared draw."""
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
        return BlockGenerator(seed, list(self.blocks), [self.block_size] * len(self.blocks), device)

    def local_state(self, state: Any) -> Any:
        """The phase state restricted to this rank's chains (a full state, as init or a checkpoint give)."""
        if isinstance(state, PersistentState):
            start, stop = self.chain_rows
            return PersistentState(chains=state.chains.select(slice(start, stop)))
        return state

    def full_state(self, state: Any) -> Any:
        """The phase state with every rank's chains, in block order (a collective: all ranks call it)."""
        if isinstance(state, PersistentState):
            return PersistentState(chains=distributed.gather_chains(state.chains))
        if isinstance(state, CDState) and state.chains is not None:
            return CDState(chains=distributed.gather_chains(state.chains))
        return state

    def check_agreement(self, model: Any, data_fingerprint: Any, generator: torch.Generator) -> None:
        """Refuse to train unless every process holds the same parameters, data and generator state.

        Processes started with different seeds (or data, or model files) would otherwise
        train apart silently: each averages its gradient with the others' but applies it to its
        own parameters, and only rank 0's model is saved.
        """
        digest = hashlib.sha256(repr(data_fingerprint).encode())
        for tensor in [*model.state_dict().values(), generator.get_state()]:
            digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        distributed.agree(
            digest.hexdigest()[:16], "model parameters, training data and seed at the start of training"
        )

    def average_gradients_(self, parameters: list[Tensor]) -> None:
        """Replace every ``.grad`` by its mean over the processes (one all-reduce of a flat buffer)."""
        self.average_([parameter.grad for parameter in parameters if parameter.grad is not None])

    def average_(self, tensors: list[Tensor], what: str = "averaging the gradients") -> None:
        """Replace every tensor by its mean over the processes, in place (one all-reduce).

        Every rank holds an equal share of each minibatch, so the mean of the ranks' batch
        means is the whole minibatch's mean (the centring offsets use this).
        """
        if self.world_size == 1 or not tensors:
            return
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
        distributed.run_collective(what, lambda: dist.all_reduce(flat))
        flat.div_(self.world_size)
        offset = 0
        for tensor in tensors:
            tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()


def plan_data_parallel(
    phase: Any, *, batch_size: int, n_chains: int, chain_blocks: int | None
) -> DataParallel | None:
    """This rank's :class:`DataParallel` share in a process group; ``None`` outside one.

    Raises
    ------
    ValidationError
        For a phase that is not data-parallel, or sizes that do not split evenly.
    """
    here = distributed.topology()
    if not here.active:
        if chain_blocks is not None:
            # Not an error: a run started under torchrun with --chain-blocks may resume in one process.
            warnings.warn(
                f"chain_blocks={chain_blocks} is ignored: it applies to data-parallel training under torchrun",
                stacklevel=3,
            )
        return None
    world = here.world_size
    if type(phase) not in (ContrastiveDivergence, PersistentContrastiveDivergence):
        if world == 1:
            return None  # one process is the whole run: it trains as without torchrun
        check_data_parallel_algorithm(str(getattr(phase, "name", phase)))
        raise ValidationError(f"{phase!r} cannot train data-parallel: use cd or pcd under torchrun")
    persistent = isinstance(phase, PersistentContrastiveDivergence)
    n_blocks = world if chain_blocks is None else int(chain_blocks)
    rows = n_chains if persistent else batch_size
    what = "n_chains (--chains)" if persistent else "batch_size (CD runs one chain per example)"
    if n_blocks < 1 or n_blocks % world:
        raise ValidationError(
            f"chain_blocks must be a positive multiple of the {world} processes, got {n_blocks}"
        )
    if rows % n_blocks:
        raise ValidationError(f"{what} = {rows} must be a multiple of the {n_blocks} chain blocks")
    if batch_size % world:
        raise ValidationError(f"batch_size = {batch_size} must be a multiple of the {world} processes")
    per_rank = n_blocks // world
    blocks = range(here.rank * per_rank, (here.rank + 1) * per_rank)
    block_size = rows // n_blocks
    share = batch_size // world
    return DataParallel(
        world_size=world,
        rank=here.rank,
        n_blocks=n_blocks,
        batch_rows=(here.rank * share, (here.rank + 1) * share),
        chain_rows=(blocks.start * block_size, blocks.stop * block_size),
        blocks=blocks,
        block_size=block_size,
        persistent=persistent,
    )
