"""The state, step diagnostics and summary of parallel tempering across training snapshots.

What :class:`~boltzlab.tempering.ptt.TrajectoryTempering` (docs/algorithms.md §4.6) carries
from step to step and reports, and its state as safetensors-ready tensors for checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory

__all__ = [
    "LevelSelection",
    "TrajectoryTemperingInfo",
    "TrajectoryTemperingState",
    "TrajectoryTemperingSummary",
    "state_from_tensors",
    "state_tensors",
]


@dataclass(frozen=True, slots=True)
class TrajectoryTemperingState:
    """State of ``n_chains`` independent PTT systems of ``K`` levels each.

    Attributes
    ----------
    chains : Chains
        ``K·n_chains`` replicas, level-major (slot ``k·n_chains + i`` is level ``k`` of system
        ``i``), all at β = 1.
    positions : Tensor, shape (K,), float64, on the CPU
        Trajectory position of every level, ascending from 0 (the anchor). The last level is
        the model given to :meth:`TrajectoryTempering.step`: its entry is the last point's
        position when the trajectory ends at the model, NaN when the model was appended.
    replica, direction, round_trips, swap_accepted, swap_attempted, n_steps, n_rounds
        As in :class:`~boltzlab.tempering.parallel.ParallelTemperingState`.
    """

    chains: Chains
    positions: Tensor
    replica: Tensor
    direction: Tensor
    round_trips: Tensor
    swap_accepted: Tensor
    swap_attempted: Tensor
    n_steps: int
    n_rounds: int

    @property
    def n_levels(self) -> int:
        return self.replica.shape[0]

    @property
    def n_chains(self) -> int:
        return self.replica.shape[1]


@dataclass(frozen=True, slots=True)
class TrajectoryTemperingInfo:
    """Diagnostics of one step; never carried forward.

    Attributes
    ----------
    swap_accepted : Tensor, shape (K − 1, n_chains), bool
    swap_attempted : Tensor, shape (K − 1,), bool
    round_trips : Tensor, shape (n_chains,), int64
        Round trips (anchor → model → anchor) completed in this step, per system.
    flip_rate : Tensor, shape (K,), float64
        Mean fraction of units changed by this step's sweep, per level.
    """

    swap_accepted: Tensor
    swap_attempted: Tensor
    round_trips: Tensor
    flip_rate: Tensor


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
class TrajectoryTemperingSummary:
    """Diagnostics of a run (from :meth:`TrajectoryTempering.summarize`).

    Attributes
    ----------
    positions : Tensor, shape (K,), float64
        Trajectory position of each level; the last is NaN when the model is not a point of
        the trajectory (it was appended).
    updates : Tensor, shape (K,), float64
        Training update of each level (interpolated for fractional positions; ``nan`` for an
        appended model).
    swap_acceptance : Tensor, shape (K − 1,), float64
        Accepted / proposed exchanges per neighbour pair (NaN for a pair never proposed).
    swap_attempts : Tensor, shape (K − 1,), int64
    round_trips : Tensor, shape (n_chains,), int64
    total_round_trips : int
    flip_rate : float
    flip_rate_per_level : Tensor, shape (K,), float64
    n_steps : int
    selection : LevelSelection or None
    """

    positions: Tensor
    updates: Tensor
    swap_acceptance: Tensor
    swap_attempts: Tensor
    round_trips: Tensor
    total_round_trips: int
    flip_rate: float
    flip_rate_per_level: Tensor
    n_steps: int
    selection: LevelSelection | None


def state_tensors(state: TrajectoryTemperingState) -> dict[str, Tensor]:
    """Every tensor of ``state`` (copies), for safetensors checkpoints."""
    tensors = {f"layer.{index}": layer.clone() for index, layer in enumerate(state.chains.layers)}
    tensors.update(
        beta=state.chains.beta.clone(),
        positions=state.positions.clone(),
        replica=state.replica.clone(),
        direction=state.direction.clone(),
        round_trips=state.round_trips.clone(),
        swap_accepted=state.swap_accepted.clone(),
        swap_attempted=state.swap_attempted.clone(),
        n_steps=torch.tensor(state.n_steps, dtype=torch.int64),
        n_rounds=torch.tensor(state.n_rounds, dtype=torch.int64),
    )
    return tensors


def state_from_tensors(
    trajectory: Trajectory, model: RBM, tensors: dict[str, Tensor]
) -> TrajectoryTemperingState:
    """The state saved by :func:`state_tensors`, on the model's device and dtype.

    Raises :class:`ValidationError` when the tensors do not fit this trajectory or model.
    """
    trajectory.check_model(model)
    required = ["layer.0", "layer.1", "beta", "positions", "replica", "direction", "round_trips"]
    required += ["swap_accepted", "swap_attempted", "n_steps", "n_rounds"]
    missing = [key for key in required if key not in tensors]
    if missing:
        raise ValidationError(f"tensors lack the trajectory-tempering entries {missing}")
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
    layers = tuple(tensors[f"layer.{index}"].to(device=device, dtype=dtype) for index in range(2))
    for index, (layer, size) in enumerate(zip(layers, model.layer_sizes, strict=True)):
        if tuple(layer.shape) != (n_levels * n_chains, size):
            raise ValidationError(
                f"saved layer {index} has shape {tuple(layer.shape)}, "
                f"expected ({n_levels * n_chains}, {size})"
            )
    return TrajectoryTemperingState(
        chains=Chains(layers=layers, beta=tensors["beta"].to(device=device, dtype=dtype)),
        positions=positions,
        replica=replica,
        direction=tensors["direction"].to(device=device, dtype=torch.int8),
        round_trips=tensors["round_trips"].to(device=device, dtype=torch.int64),
        swap_accepted=tensors["swap_accepted"].to(device=device, dtype=torch.int64),
        swap_attempted=tensors["swap_attempted"].to(device=device, dtype=torch.int64),
        n_steps=int(tensors["n_steps"]),
        n_rounds=int(tensors["n_rounds"]),
    )
