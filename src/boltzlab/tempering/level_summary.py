"""What a simulated-tempering run reports: per-step level-move infos and their summary.

Shared by simulated tempering, adaptive ST and CAST's fast chains
(:mod:`boltzlab.tempering.simulated`): occupancy, temperature trajectories, acceptance per
pair of neighbouring levels and round trips between the two ends of the ladder, the
diagnostic the sampler verdict reads (docs/trust.md, "Samplers").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["SimulatedTemperingInfo", "SimulatedTemperingSummary", "round_trips"]


@dataclass(frozen=True, slots=True)
class SimulatedTemperingInfo:
    """Per-step diagnostics of the level move (never carried forward).

    Attributes
    ----------
    previous_levels, proposed_levels, levels : Tensor, shape (n_chains,), int64
        Levels before the move, proposed (for ``"gibbs"`` the level drawn), and after it.
    accepted : Tensor, shape (n_chains,), bool
        Metropolis: whether the proposal was accepted. Gibbs: whether the level changed
        (a Gibbs draw is always accepted).
    """

    previous_levels: Tensor
    proposed_levels: Tensor
    levels: Tensor
    accepted: Tensor


@dataclass(frozen=True)
class SimulatedTemperingSummary:
    """Diagnostics of a simulated-tempering run.

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder (ascending, target last).
    level_move : str
    visits : Tensor, shape (K,), int64
        Chain-steps spent at each level over the run (after each level move).
    occupancy : Tensor, shape (K,), float64
        ``visits`` as fractions; uniform when the log-weights equal ``log Z_k``.
    trajectories : Tensor, shape (n_steps, n_chains), int64
        Level of every chain after every step (the temperature trajectories).
    acceptance_rate : float
        Fraction of level moves accepted (Gibbs moves: fraction that changed level).
    pair_acceptance : Tensor, shape (K − 1,), float64
        Metropolis acceptance of proposals between levels ``k`` and ``k + 1`` (either
        direction); NaN where none was proposed, and for Gibbs level moves.
    round_trips : Tensor, shape (n_chains,), int64
        Completed bottom → top → bottom (or top → bottom → top) trips of each chain.
    log_weights : Tensor, shape (K,) or (n_chains, K), float64
        Log-weights at the end of the run (relative to the target level).
    """

    betas: Tensor
    level_move: str
    visits: Tensor
    occupancy: Tensor
    trajectories: Tensor
    acceptance_rate: float
    pair_acceptance: Tensor
    round_trips: Tensor
    log_weights: Tensor


def round_trips(trajectories: Tensor, n_levels: int) -> Tensor:
    """Completed round trips between the end levels per chain; int64, shape (n_chains,).

    ``trajectories`` has shape ``(n_steps, n_chains)``. A one-way trip ends when a chain reaches
    the end level opposite to the last end it visited; two one-way trips are a round trip.
    """
    if trajectories.numel() == 0:
        return torch.zeros(trajectories.shape[1], dtype=torch.int64, device=trajectories.device)
    ends = torch.full_like(trajectories, -1)
    ends = torch.where(trajectories == 0, 0, ends)
    ends = torch.where(trajectories == n_levels - 1, 1, ends)
    valid = ends >= 0
    time = torch.arange(trajectories.shape[0], device=trajectories.device)[:, None]
    last_valid = torch.where(valid, time, -1).cummax(0).values
    previous = torch.cat([torch.full_like(last_valid[:1], -1), last_valid[:-1]])
    previous_end = ends.gather(0, previous.clamp_min(0))
    one_way = (valid & (previous >= 0) & (previous_end != ends)).sum(0)
    return one_way // 2


def summarize_levels(
    step_infos: list[SimulatedTemperingInfo],
    log_weights: Tensor,
    *,
    betas: Tensor,
    level_move: str,
    device: torch.device,
) -> SimulatedTemperingSummary:
    """:class:`SimulatedTemperingSummary` of level-move infos (shared by ST, AST and CAST)."""
    n_levels = betas.numel()
    if step_infos:
        trajectories = torch.stack([info.levels for info in step_infos])
        start = step_infos[0].previous_levels[None, :]
        previous = torch.stack([info.previous_levels for info in step_infos])
        proposed = torch.stack([info.proposed_levels for info in step_infos])
        accepted = torch.stack([info.accepted for info in step_infos])
    else:
        trajectories = previous = proposed = torch.empty((0, 0), dtype=torch.int64, device=device)
        start = trajectories
        accepted = torch.empty((0, 0), dtype=torch.bool, device=device)
    visits = torch.bincount(trajectories.flatten(), minlength=n_levels)
    total = visits.sum().clamp_min(1)
    acceptance = float(accepted.to(torch.float64).mean()) if accepted.numel() else math.nan
    pair_acceptance = torch.full((max(n_levels - 1, 0),), math.nan, dtype=torch.float64, device=device)
    if level_move == "metropolis" and accepted.numel():
        pair = torch.minimum(previous, proposed).flatten()
        proposals = torch.bincount(pair, minlength=n_levels - 1).to(torch.float64)
        accepts = torch.bincount(pair, weights=accepted.flatten().to(torch.float64), minlength=n_levels - 1)
        pair_acceptance = torch.where(proposals > 0, accepts / proposals.clamp_min(1.0), math.nan)
    with_start = torch.cat([start, trajectories]) if step_infos else trajectories
    return SimulatedTemperingSummary(
        betas=betas.clone(),
        level_move=level_move,
        visits=visits,
        occupancy=visits.to(torch.float64) / total.to(torch.float64),
        trajectories=trajectories,
        acceptance_rate=acceptance,
        pair_acceptance=pair_acceptance,
        round_trips=round_trips(with_start, n_levels),
        log_weights=log_weights.clone(),
    )
