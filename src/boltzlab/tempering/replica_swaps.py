"""What every replica-exchange scheme shares: pair schedules, round trips and the bookkeeping.

Parallel tempering over temperatures (:mod:`boltzlab.tempering.parallel`, docs/algorithms.md
§2.5) and over training snapshots (:mod:`boltzlab.tempering.ptt`, §4.6) differ only in how a
level's density is evaluated. Both keep ``K·n_chains`` replicas level-major in one
:class:`~boltzlab.chains.Chains` batch (slot ``k·n_chains + i`` is level ``k`` of system
``i``), propose exchanges of neighbouring levels in rounds, count round trips with a label
that travels with each replica, and report the same counters. Those parts live here once.

**Pair schedules.** ``"alternating"`` proposes the even pairs ``(0,1), (2,3), …`` on even
rounds and the odd pairs on odd rounds (disjoint, hence proposed at once); ``"all"``
proposes every pair in one round, sequentially from the lowest.

**Round trips.** A replica is *up* once it has touched the bottom (level 0), *down* once an
*up* replica reaches the top (the last level); a *down* replica that reaches the bottom
completes a round trip bottom → top → bottom and is *up* again. Replicas that have not
touched the bottom yet carry no label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel

__all__ = [
    "ReplicaExchangeInfo",
    "ReplicaExchangeState",
    "ReplicaExchangeSummary",
    "SwapRound",
    "layers_from_tensors",
]

#: Round-trip labels of a replica (module docstring): none yet, up (last touched the
#: bottom), down (reached the top after the bottom).
UNLABELLED, UP, DOWN = 0, 1, 2
_PAIR_SCHEDULES = ("alternating", "all")
#: What a saved state holds besides its layers, ``beta`` and any scheme-specific entries.
_REPLICA_ENTRIES = (
    "replica",
    "direction",
    "round_trips",
    "swap_accepted",
    "swap_attempted",
    "n_steps",
    "n_rounds",
)


@dataclass(frozen=True, slots=True)
class ReplicaExchangeState:
    """State of ``n_chains`` independent replica-exchange systems of ``K`` levels each.

    Attributes
    ----------
    chains : Chains
        ``K·n_chains`` replicas, level-major: slot ``k·n_chains + i`` is level ``k`` of
        system ``i``.
    replica : Tensor, shape (K, n_chains), int64
        Which replica (its starting level) occupies each slot.
    direction : Tensor, shape (K, n_chains), int8
        Round-trip label of the replica in each slot: 0 none yet, 1 up (last touched the
        bottom), 2 down (reached the top after the bottom).
    round_trips : Tensor, shape (n_chains,), int64
        Round trips completed in each system since ``init``.
    swap_accepted, swap_attempted : Tensor, shape (K − 1,), int64
        Exchanges accepted and proposed per neighbour pair since ``init``, summed over systems.
    n_steps : int
        Steps taken since ``init``.
    n_rounds : int
        Swap rounds done since ``init`` (its parity picks the pairs of ``"alternating"``).
    """

    chains: Chains
    replica: Tensor
    direction: Tensor
    round_trips: Tensor
    swap_accepted: Tensor
    swap_attempted: Tensor
    n_steps: int
    n_rounds: int

    @property
    def n_levels(self) -> int:
        """``K``, the number of levels."""
        return self.replica.shape[0]

    @property
    def n_chains(self) -> int:
        """Number of independent systems (= number of chains at the last level)."""
        return self.replica.shape[1]


@dataclass(frozen=True, slots=True)
class ReplicaExchangeInfo:
    """Diagnostics of one step; never carried forward.

    Attributes
    ----------
    swap_accepted : Tensor, shape (K − 1, n_chains), bool
        Whether system ``i`` exchanged the states of levels ``(k, k+1)`` in this step's swap
        round (the one following the previous step's sweep).
    swap_attempted : Tensor, shape (K − 1,), bool
        Whether pair ``(k, k+1)`` was proposed in this step (in every system).
    round_trips : Tensor, shape (n_chains,), int64
        Round trips completed in this step, per system.
    flip_rate : Tensor, shape (K,), float64
        Mean fraction of units changed by this step's sweep, per level (swaps excluded).
    """

    swap_accepted: Tensor
    swap_attempted: Tensor
    round_trips: Tensor
    flip_rate: Tensor


@dataclass(frozen=True, slots=True)
class ReplicaExchangeSummary:
    """Swap and sweep diagnostics of a run, as :func:`swap_totals` counts them.

    Attributes
    ----------
    swap_acceptance : Tensor, shape (K − 1,), float64
        Fraction of proposed exchanges of pair ``(k, k+1)`` that were accepted (NaN for a
        pair never proposed).
    swap_attempts : Tensor, shape (K − 1,), int64
        Exchanges proposed per pair, summed over systems.
    round_trips : Tensor, shape (n_chains,), int64
        Round trips (bottom → top → bottom) completed in each system during the steps,
        summed over its K replicas.
    total_round_trips : int
    flip_rate : float
        Mean fraction of units changed per sweep, over steps, levels and chains.
    flip_rate_per_level : Tensor, shape (K,), float64
    n_steps : int
    """

    swap_acceptance: Tensor
    swap_attempts: Tensor
    round_trips: Tensor
    total_round_trips: int
    flip_rate: float
    flip_rate_per_level: Tensor
    n_steps: int


State = TypeVar("State", bound=ReplicaExchangeState)
Info = TypeVar("Info", bound=ReplicaExchangeInfo)


def check_pairs(pairs: Any) -> str:
    """``pairs`` if it is a known pair schedule; a :class:`ValidationError` naming them if not."""
    if pairs not in _PAIR_SCHEDULES:
        raise ValidationError(f"pairs must be one of {', '.join(map(repr, _PAIR_SCHEDULES))}, got {pairs!r}")
    return str(pairs)


def pair_groups(pairs: str, n_levels: int, n_rounds: int) -> list[tuple[int, ...]]:
    """The pairs (by lower level) of swap round ``n_rounds``, as groups proposed one after another.

    Pairs within a group are disjoint and proposed at once (module docstring).
    """
    if pairs == "all":
        return [(k,) for k in range(n_levels - 1)]
    lower = tuple(range(n_rounds % 2, n_levels - 1, 2))
    return [lower] if lower else []


def swap_due(state: ReplicaExchangeState, swap_every: int) -> bool:
    """Whether a swap round follows the sweeps done so far: their number is a positive multiple of ``swap_every``."""
    return state.n_steps > 0 and state.n_steps % swap_every == 0


def _update_directions(direction: Tensor) -> tuple[Tensor, Tensor]:
    """Relabel the replicas at the ends of the ladder; returns (direction, round trips completed).

    ``direction`` has shape ``(K, n_chains)``; the round trips, shape ``(n_chains,)``, int64,
    are those of *down* replicas that have just reached the bottom.
    """
    direction = direction.clone()
    bottom, top = direction[0], direction[-1]
    completed = (bottom == DOWN).to(torch.int64)
    direction[0] = torch.full_like(bottom, UP)
    direction[-1] = torch.where(top == UP, torch.full_like(top, DOWN), top)
    return direction, completed


def fresh_counters(n_levels: int, n_chains: int, device: torch.device) -> dict[str, Any]:
    """Every field of :class:`ReplicaExchangeState` but ``chains`` at ``init``: nothing swapped yet.

    Each replica starts at its own level; those at the bottom are already *up*.
    """
    replica = torch.arange(n_levels, device=device)[:, None].expand(n_levels, n_chains).clone()
    direction = torch.full((n_levels, n_chains), UNLABELLED, dtype=torch.int8, device=device)
    direction[0] = UP
    zeros = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
    return {
        "replica": replica,
        "direction": direction,
        "round_trips": torch.zeros(n_chains, dtype=torch.int64, device=device),
        "swap_accepted": zeros,
        "swap_attempted": zeros.clone(),
        "n_steps": 0,
        "n_rounds": 0,
    }


@dataclass(frozen=True, slots=True)
class SwapRound:
    """What one step's swap round did to the bookkeeping (nothing, when none was due).

    Attributes
    ----------
    accepted : Tensor, shape (K − 1, n_chains), bool
        Exchanges accepted per pair and system.
    attempted : Tensor, shape (K − 1,), bool
        Pairs proposed.
    replica, direction : Tensor, shape (K, n_chains)
        The replica table and round-trip labels after the exchanges.
    completed : Tensor, shape (n_chains,), int64
        Round trips completed by the round.
    n_rounds : int
        Swap rounds done, this one included.
    """

    accepted: Tensor
    attempted: Tensor
    replica: Tensor
    direction: Tensor
    completed: Tensor
    n_rounds: int

    @classmethod
    def skipped(cls, state: ReplicaExchangeState) -> SwapRound:
        """No round this step: the bookkeeping of ``state`` unchanged."""
        n_levels, n_chains = state.n_levels, state.n_chains
        device = state.chains.device
        return cls(
            accepted=torch.zeros(n_levels - 1, n_chains, dtype=torch.bool, device=device),
            attempted=torch.zeros(n_levels - 1, dtype=torch.bool, device=device),
            replica=state.replica,
            direction=state.direction,
            completed=torch.zeros(n_chains, dtype=torch.int64, device=device),
            n_rounds=state.n_rounds,
        )

    @classmethod
    def done(
        cls, state: ReplicaExchangeState, groups: list[tuple[int, ...]], order: Tensor, accepted: Tensor
    ) -> SwapRound:
        """The round that proposed ``groups`` and moved slot ``order[s]``'s state to slot ``s``.

        ``order`` has shape ``(K·n_chains,)``, ``accepted`` shape ``(K − 1, n_chains)``.
        """
        n_levels, n_chains = state.n_levels, state.n_chains
        attempted = torch.zeros(n_levels - 1, dtype=torch.bool, device=state.chains.device)
        for group in groups:
            attempted[list(group)] = True
        direction, completed = _update_directions(state.direction.reshape(-1)[order].view(n_levels, n_chains))
        return cls(
            accepted=accepted,
            attempted=attempted,
            replica=state.replica.reshape(-1)[order].view(n_levels, n_chains),
            direction=direction,
            completed=completed,
            n_rounds=state.n_rounds + 1,
        )

    def advance(
        self, state: State, chains: Chains, flip_rate: Tensor, info_type: type[Info]
    ) -> tuple[State, Info]:
        """The state after this round and the sweep that gave ``chains``, and the step's info.

        ``flip_rate`` has shape ``(K,)``; ``info_type`` is the scheme's info class.
        """
        new_state = replace(
            state,
            chains=chains,
            replica=self.replica,
            direction=self.direction,
            round_trips=state.round_trips + self.completed,
            swap_accepted=state.swap_accepted + self.accepted.sum(1),
            swap_attempted=state.swap_attempted + self.attempted.to(torch.int64) * state.n_chains,
            n_steps=state.n_steps + 1,
            n_rounds=self.n_rounds,
        )
        info = info_type(
            swap_accepted=self.accepted,
            swap_attempted=self.attempted,
            round_trips=self.completed,
            flip_rate=flip_rate,
        )
        return new_state, info


def units_changed(before: Chains, after: Chains) -> Tensor:
    """Units of each chain that differ between ``before`` and ``after``; int64, shape ``(n,)``."""
    return sum(
        (old != new).sum(1, dtype=torch.int64) for old, new in zip(before.layers, after.layers, strict=True)
    )


def swap_totals(step_infos: Sequence[ReplicaExchangeInfo], state: ReplicaExchangeState) -> dict[str, Any]:
    """Every field of :class:`ReplicaExchangeSummary` over ``step_infos`` (of a run ending in ``state``)."""
    n_levels, n_chains = state.n_levels, state.n_chains
    device = state.chains.device
    accepted = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
    attempts = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
    round_trips = torch.zeros(n_chains, dtype=torch.int64, device=device)
    flip_total = torch.zeros(n_levels, dtype=torch.float64, device=device)
    for info in step_infos:
        accepted += info.swap_accepted.sum(1)
        attempts += info.swap_attempted.to(torch.int64) * n_chains
        round_trips += info.round_trips
        flip_total += info.flip_rate
    n_steps = len(step_infos)
    per_level = flip_total / n_steps if n_steps else torch.full_like(flip_total, torch.nan)
    return {
        "swap_acceptance": accepted.to(torch.float64)
        / attempts.to(torch.float64),  # NaN where never proposed
        "swap_attempts": attempts,
        "round_trips": round_trips,
        "total_round_trips": int(round_trips.sum()),
        "flip_rate": float(per_level.mean()),
        "flip_rate_per_level": per_level,
        "n_steps": n_steps,
    }


def replica_state_tensors(state: ReplicaExchangeState, **extra: Tensor) -> dict[str, Tensor]:
    """Every tensor of ``state`` (copies), for safetensors checkpoints; ``extra`` go after ``beta``."""
    tensors = {f"layer.{index}": layer.clone() for index, layer in enumerate(state.chains.layers)}
    tensors["beta"] = state.chains.beta.clone()
    tensors.update({name: tensor.clone() for name, tensor in extra.items()})
    tensors.update(
        replica=state.replica.clone(),
        direction=state.direction.clone(),
        round_trips=state.round_trips.clone(),
        swap_accepted=state.swap_accepted.clone(),
        swap_attempted=state.swap_attempted.clone(),
        n_steps=torch.tensor(state.n_steps, dtype=torch.int64),
        n_rounds=torch.tensor(state.n_rounds, dtype=torch.int64),
    )
    return tensors


def check_entries(
    tensors: dict[str, Tensor], n_layers: int, *, scheme: str, extra: Sequence[str] = ()
) -> None:
    """Raise :class:`ValidationError` naming the entries of a saved state that ``tensors`` lack.

    ``scheme`` names the scheme in the message; ``extra`` are its own entries (after ``beta``).
    """
    required = [f"layer.{index}" for index in range(n_layers)] + ["beta", *extra, *_REPLICA_ENTRIES]
    missing = [key for key in required if key not in tensors]
    if missing:
        raise ValidationError(f"tensors lack the {scheme} entries {missing}")


def layers_from_tensors(tensors: dict[str, Tensor], model: TemperedModel, n_slots: int) -> tuple[Tensor, ...]:
    """The saved layers on the model's device and dtype, each checked to be ``(n_slots, size)``."""
    layers = tuple(
        tensors[f"layer.{index}"].to(device=model.device, dtype=model.dtype)
        for index in range(len(model.layer_sizes))
    )
    for index, (layer, size) in enumerate(zip(layers, model.layer_sizes, strict=True)):
        if tuple(layer.shape) != (n_slots, size):
            raise ValidationError(
                f"saved layer {index} has shape {tuple(layer.shape)}, expected ({n_slots}, {size})"
            )
    return layers


def counters_from_tensors(tensors: dict[str, Tensor], device: torch.device) -> dict[str, Any]:
    """The saved labels and counters (all of :data:`_REPLICA_ENTRIES` but ``replica``) on ``device``."""
    return {
        "direction": tensors["direction"].to(device=device, dtype=torch.int8),
        "round_trips": tensors["round_trips"].to(device=device, dtype=torch.int64),
        "swap_accepted": tensors["swap_accepted"].to(device=device, dtype=torch.int64),
        "swap_attempted": tensors["swap_attempted"].to(device=device, dtype=torch.int64),
        "n_steps": int(tensors["n_steps"]),
        "n_rounds": int(tensors["n_rounds"]),
    }
