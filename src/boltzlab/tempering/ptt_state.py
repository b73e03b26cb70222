"""The state, step diagnostics and summary of parallel tempering across training snapshots.

What :class:`~boltzlab.tempering.ptt.TrajectoryTempering` (docs/algorithms.md §4.6) carries
from step to step and reports, and its state as safetensors-ready tensors for checkpoints.
The fields and the checkpoint entries it shares with parallel tempering are declared once in
:mod:`boltzlab.tempering.replica_swaps`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory
from boltzlab.tempering.replica_swaps import (
    ReplicaExchangeInfo,
    ReplicaExchangeState,
    ReplicaExchangeSummary,
    check_entries,
    counters_from_tensors,
    layers_from_tensors,
    replica_state_tensors,
)

__all__ = [
    "LevelSelection",
    "TrajectoryTemperingInfo",
    "TrajectoryTemperingState",
    "TrajectoryTemperingSummary",
    "state_from_tensors",
    "state_tensors",
]


@dataclass(frozen=True, slots=True)
class TrajectoryTemperingState(ReplicaExchangeState):
    """State of ``n_chains`` independent PTT systems of ``K`` levels each.

    Attributes
    ----------
    chains : Chains
        ``K·n_chains`` replicas, level-major (slot ``k·n_chains + i`` is level ``k`` of system
        ``i``), all at β = 1.
    replica, direction, round_trips, swap_accepted, swap_attempted, n_steps, n_rounds
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeState`.
    positions : Tensor, shape (K,), float64, on the CPU
        Trajectory position of every level, ascending from 0 (the anchor). The last level is
        the model given to :meth:`TrajectoryTempering.step`: its entry is the last point's
        position when the trajectory ends at the model, NaN when the model was appended.
    """

    positions: Tensor


@dataclass(frozen=True, slots=True)
class TrajectoryTemperingInfo(ReplicaExchangeInfo):
    """Diagnostics of one step; never carried forward.

    Attributes
    ----------
    swap_accepted, swap_attempted, round_trips, flip_rate
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeInfo`; the round trips
        go anchor → model → anchor.
    """


@dataclass(frozen=True, slots=True)
class LevelSelection:
    """How ``levels="acceptance"`` chose its levels (the pilot's findings).

    Attributes
    ----------
    candidates : Tensor, shape (C,), float64
        Positions considered (every trajectory point; the model is the last candidate).
    kept : Tensor, shape (K,), int64
        Indices into ``candidates`` of the levels kept, the model's last.
    acceptance : Tensor, shape (K − 1,), float64
        Pilot estimate of the exchange acceptance between consecutive kept levels.
    min_acceptance : float
    cost_sweeps : int
        Single-chain sweeps the pilot spent.
    """

    candidates: Tensor
    kept: Tensor
    acceptance: Tensor
    min_acceptance: float
    cost_sweeps: int


@dataclass(frozen=True, slots=True)
class TrajectoryTemperingSummary(ReplicaExchangeSummary):
    """Diagnostics of a run (from :meth:`TrajectoryTempering.summarize`).

    Attributes
    ----------
    swap_acceptance, swap_attempts, round_trips, total_round_trips, flip_rate, flip_rate_per_level, n_steps
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeSummary`.
    positions : Tensor, shape (K,), float64
        Trajectory position of each level; the last is NaN when the model is not a point of
        the trajectory (it was appended).
    updates : Tensor, shape (K,), float64
        Training update of each level (interpolated for fractional positions; ``nan`` for an
        appended model).
    selection : LevelSelection or None
    """

    positions: Tensor
    updates: Tensor
    selection: LevelSelection | None


def state_tensors(state: TrajectoryTemperingState) -> dict[str, Tensor]:
    """Every tensor of ``state`` (copies), for safetensors checkpoints."""
    return replica_state_tensors(state, positions=state.positions)


def state_from_tensors(
    trajectory: Trajectory, model: RBM, tensors: dict[str, Tensor]
) -> TrajectoryTemperingState:
    """The state saved by :func:`state_tensors`, on the model's device and dtype.

    Raises :class:`ValidationError` when the tensors do not fit this trajectory or model.
    """
    trajectory.check_model(model)
    check_entries(tensors, len(model.layer_sizes), scheme="trajectory-tempering", extra=("positions",))
    positions = tensors["positions"].to(device="cpu", dtype=torch.float64)
    below = positions[:-1]
    if (
        positions.dim() != 1
        or positions.numel() < 2
        or not bool(torch.isfinite(below).all())
        or float(below.max()) > trajectory.n_points - 1
    ):
        raise ValidationError(
            f"the saved levels {positions.tolist()[:8]} do not fit this trajectory of "
            f"{trajectory.n_points} points"
        )
    device, dtype = model.device, model.dtype
    replica = tensors["replica"].to(device=device, dtype=torch.int64)
    n_levels = positions.numel()
    if replica.dim() != 2 or replica.shape[0] != n_levels:
        raise ValidationError(
            f"the saved replica table has shape {tuple(replica.shape)}, expected ({n_levels}, n)"
        )
    n_chains = replica.shape[1]
    layers = layers_from_tensors(tensors, model, n_levels * n_chains)
    return TrajectoryTemperingState(
        chains=Chains(layers=layers, beta=tensors["beta"].to(device=device, dtype=dtype)),
        positions=positions,
        replica=replica,
        **counters_from_tensors(tensors, device),
    )
