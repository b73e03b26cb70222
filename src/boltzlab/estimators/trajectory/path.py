"""Annealing along a piecewise-linear parameter path: the machinery of trajectory AIS.

A path is a stack of RBM parameter points ``θ_0 … θ_{P−1}`` (``θ = (W, b, c)``); a position
``t ∈ [0, P − 1]`` stands for the straight line ``θ(t) = (1 − s)·θ_i + s·θ_{i+1}`` with
``i = ⌊t⌋``, ``s = t − i``. With the hidden units summed out,

    log f_t(v) = b(t)·v + Σ_j softplus(a_j(t)),   a(t) = (1 − s)·(c_i + v W_i) + s·(c_{i+1} + v W_{i+1}),

so two matrix products per state give ``log f_t`` at every ``t`` of a segment, combined in
float64 (rounding errors then scale with the step, not with the number of steps). AIS
(Neal 2001, eqs. 3–4; docs/algorithms.md §4.1 and §4.6) moves chains along an ascending grid
of positions and adds ``log f_{t_k}(v) − log f_{t_{k−1}}(v)`` at each step.

:func:`walk_segment` is the pilot: it crosses one segment with steps whose log-weight
increment has a standard deviation of at most ``step_std`` across its chains, so the sum of
those deviations estimates the segment's thermodynamic length ``∫ sd_{p_t}[∂_t log f_t] dt``
(Gelman & Meng 1998; Grosse, Maddison & Salakhutdinov 2013). :func:`plan_positions` places a
main run's steps at equal length; :func:`anneal` runs it.

**Summed-out weights, summed-out kernel.** As in :mod:`boltzlab.estimators.annealing.ais`, an operator
whose update reads a unit's current value has the hidden layer redrawn from ``p_t(h | v)``
(from the same pre-activations) before its sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import progress
from boltzlab.chains import Chains
from boltzlab.estimators.annealing.increments import redraw_summed_group
from boltzlab.models.base import MarginalTerms
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import ANCHOR_UPDATE, Trajectory
from boltzlab.numerics import log_ess, softplus
from boltzlab.operators.base import Operator

__all__ = ["anneal", "base_path", "cut_path", "plan_positions"]

# The pilot never splits a step below this fraction of a segment.
MIN_PILOT_STEP = 1.0 / 4096


@dataclass(frozen=True)
class Kernel:
    """How chains move at each point: ``n_sweeps`` sweeps of ``operator`` (hidden redrawn
    first when ``refresh``)."""

    operator: Operator
    n_sweeps: int
    refresh: bool


class PathTensors:
    """A path's stacked parameters and the summed-out pieces at any position.

    Parameters
    ----------
    weights : Tensor, shape (P, n_visible, n_hidden)
    visible_bias : Tensor, shape (P, n_visible)
    hidden_bias : Tensor, shape (P, n_hidden)
        All in the model's dtype and on its device.
    """

    def __init__(self, weights: Tensor, visible_bias: Tensor, hidden_bias: Tensor) -> None:
        self.weights = weights
        self.visible_bias = visible_bias
        self.hidden_bias = hidden_bias
        self.visible_bias64 = visible_bias.to(torch.float64)
        self.n_points = weights.shape[0]
        # A private RBM whose parameters are overwritten at every position (uniform base).
        self.work = RBM(
            weights=weights[0],
            visible_bias=visible_bias[0],
            hidden_bias=hidden_bias[0],
            dtype=weights.dtype,
            device=weights.device,
        )

    @classmethod
    def of(cls, trajectory: Trajectory) -> PathTensors:
        """The path through the points of a :class:`~boltzlab.models.trajectory.Trajectory`."""
        return cls(trajectory.weights, trajectory.visible_bias, trajectory.hidden_bias)

    def segment_of(self, start: float) -> int:
        """The segment a step starting at ``start`` lies in."""
        return min(math.floor(start), self.n_points - 2)

    def ends(self, segment: int, v: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``c + vW`` and ``b·v`` at both ends of ``segment``, float64; two matrix products."""
        left = torch.addmm(self.hidden_bias[segment], v, self.weights[segment]).to(torch.float64)
        right = torch.addmm(self.hidden_bias[segment + 1], v, self.weights[segment + 1]).to(torch.float64)
        v64 = v.to(torch.float64)
        return left, right, v64 @ self.visible_bias64[segment], v64 @ self.visible_bias64[segment + 1]

    def set_work_(self, segment: int, fraction: float) -> RBM:
        """Write ``θ(segment + fraction)`` into the work model's parameters; returns it."""
        with torch.no_grad():
            for parameter, stacked in (
                (self.work.weights, self.weights),
                (self.work.visible_bias, self.visible_bias),
                (self.work.hidden_bias, self.hidden_bias),
            ):
                if fraction == 0.0:
                    parameter.copy_(stacked[segment])
                elif fraction == 1.0:
                    parameter.copy_(stacked[segment + 1])
                else:
                    torch.lerp(stacked[segment], stacked[segment + 1], fraction, out=parameter.data)
        return self.work


def base_path(trajectory: Trajectory, model: RBM) -> Trajectory:
    """Two points: the base-rate model ``(0, base logits, c_0)`` and ``model``.

    The base logits are the model's fitted ones, else the trajectory's, else the anchor's
    visible bias (then this is the anchor-to-model jump).
    """
    if getattr(model, "base_fitted", False):
        base = model.base_logits.detach().to(trajectory.device, trajectory.dtype)
    elif trajectory.base_logits is not None:
        base = trajectory.base_logits
    else:
        base = trajectory.visible_bias[0]
    last = trajectory.n_points - 1
    return Trajectory(
        weights=torch.stack([torch.zeros_like(trajectory.weights[last]), trajectory.weights[last]]),
        visible_bias=torch.stack([base, trajectory.visible_bias[last]]),
        hidden_bias=torch.stack([trajectory.hidden_bias[0], trajectory.hidden_bias[last]]),
        updates=torch.tensor([ANCHOR_UPDATE, max(0, int(trajectory.updates[last]))]),
        base_logits=trajectory.base_logits,
        metadata=dict(trajectory.metadata),
    )


def cut_path(trajectory: Trajectory, cut: int) -> Trajectory:
    """Points ``0 … cut`` of ``trajectory`` (which ends at the model), then the model."""
    last = trajectory.n_points - 1
    return trajectory if cut >= last - 1 else trajectory.select([*range(cut + 1), last])


def log_f_sums(left: Tensor, right: Tensor, fraction: float) -> Tensor:
    """``Σ_j softplus(a_j(s))`` for ``a(s) = (1 − s)·left + s·right``; float64, shape ``(n,)``."""
    return softplus(torch.lerp(left, right, fraction)).sum(1)


def transition(
    path: PathTensors,
    kernel: Kernel,
    chains: Chains,
    left: Tensor,
    right: Tensor,
    linear: Tensor,
    segment: int,
    fraction: float,
    *,
    generator: torch.Generator,
) -> Chains:
    """``kernel.n_sweeps`` sweeps at ``θ(segment + fraction)``; the first reuses the pre-activations."""
    work = path.set_work_(segment, fraction)
    preactivation = torch.lerp(left, right, fraction).to(work.dtype)
    terms = MarginalTerms(base=torch.zeros_like(linear), linear=linear, preactivation=preactivation)
    if kernel.refresh:
        chains = redraw_summed_group(work, chains, terms, 1.0, generator)
    chains, _ = kernel.operator.step(work, chains, generator=generator, terms=terms)
    for _ in range(kernel.n_sweeps - 1):
        chains, _ = kernel.operator.step(work, chains, generator=generator)
    progress.advance(chains.n_chains * kernel.n_sweeps)
    return chains


def walk_segment(
    path: PathTensors,
    segment: int,
    kernel: Kernel,
    chains: Chains,
    log_weights: Tensor,
    *,
    step_std: float,
    move_at_end: bool,
    generator: torch.Generator,
) -> tuple[Chains, Tensor, list[tuple[float, float, float]], int]:
    """Cross ``segment`` with steps of increment s.d. ≤ ``step_std`` (the pilot).

    Returns the chains, the log-weights (float64, a new tensor), ``(start, end, sd)`` of every
    step and the number of transitions made; the chains are moved at the segment's end too
    when ``move_at_end`` (a later segment or a fork continues from there).
    """
    log_weights = log_weights.clone()
    fraction, delta = 0.0, 1.0
    steps: list[tuple[float, float, float]] = []
    n_transitions = 0
    while fraction < 1.0:
        left, right, linear_left, linear_right = path.ends(segment, chains.layers[0])
        here = log_f_sums(left, right, fraction)
        while True:
            target = min(1.0, fraction + delta)
            increment = (
                (target - fraction) * (linear_right - linear_left) + log_f_sums(left, right, target) - here
            )
            spread = float(increment.std())
            if not math.isfinite(spread) or spread <= step_std or delta <= MIN_PILOT_STEP:
                break
            delta = max(MIN_PILOT_STEP, delta * max(0.1, 0.9 * step_std / spread))
        log_weights += increment
        steps.append((segment + fraction, segment + target, spread if math.isfinite(spread) else 0.0))
        fraction = target
        if fraction < 1.0 or move_at_end:
            linear = torch.lerp(linear_left, linear_right, fraction)
            chains = transition(
                path, kernel, chains, left, right, linear, segment, fraction, generator=generator
            )
            n_transitions += 1
        delta = min(1.0, 2.0 * delta)
    return chains, log_weights, steps, n_transitions


def plan_positions(
    pilot_steps: list[tuple[float, float, float]], n_points: int, n_steps: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Grid of ``≈ n_steps`` increments at equal thermodynamic length, every integer included.

    Parameters
    ----------
    pilot_steps : list of (start, end, sd)
        Consecutive intervals covering ``[0, n_points − 1]`` with the standard deviation of
        the log-weight increment over each (the pilot's).
    n_points : int
    n_steps : int
        Total increments wanted; each segment gets ``max(1, round(n_steps · L_i / L))``.

    Returns
    -------
    positions : Tensor, shape (K + 1,), float64
    steps_per_segment : Tensor, shape (n_points − 1,), int64
    segment_lengths : Tensor, shape (n_points − 1,), float64
    """
    n_segments = n_points - 1
    by_segment: list[list[tuple[float, float]]] = [[] for _ in range(n_segments)]
    for start, end, spread in pilot_steps:
        by_segment[min(math.floor(start), n_points - 2)].append((end, spread))
    lengths = torch.tensor([sum(spread for _, spread in steps) for steps in by_segment], dtype=torch.float64)
    total = float(lengths.sum())
    if total > 0.0:
        counts = torch.clamp(torch.round(n_steps * lengths / total), min=1).to(torch.int64)
    else:
        counts = torch.full((n_segments,), max(1, n_steps // n_segments), dtype=torch.int64)
    positions = [0.0]
    for segment, inside in enumerate(by_segment):
        knots = [float(segment)] + [end for end, _ in inside]
        cumulative = [0.0]
        for _, spread in inside:
            cumulative.append(cumulative[-1] + spread)
        count, length = int(counts[segment]), cumulative[-1]
        index = 1
        for j in range(1, count):
            if length <= 0.0:
                positions.append(segment + j / count)
                continue
            goal = length * j / count
            # Invert the piecewise-linear cumulative length on the pilot's knots (goals ascend).
            while index < len(cumulative) - 1 and cumulative[index] < goal:
                index += 1
            low, high = cumulative[index - 1], cumulative[index]
            share = 0.0 if high == low else (goal - low) / (high - low)
            positions.append(knots[index - 1] + share * (knots[index] - knots[index - 1]))
        positions.append(float(segment + 1))
    grid = torch.tensor(positions, dtype=torch.float64)
    # Guard against repeated positions (a zero-length pilot interval): keep the grid strictly ascending.
    keep = torch.ones_like(grid, dtype=torch.bool)
    keep[1:] = grid[1:] > grid[:-1]
    grid = grid[keep]
    steps = torch.zeros(n_segments, dtype=torch.int64)
    for start in grid[:-1].tolist():
        steps[min(math.floor(start), n_points - 2)] += 1
    return grid, steps, lengths


def uniform_positions(n_points: int, per_segment: int) -> tuple[Tensor, Tensor]:
    """``per_segment`` equal increments between consecutive points; returns the grid and counts."""
    n_segments = n_points - 1
    grid = torch.arange(n_segments * per_segment + 1, dtype=torch.float64) / per_segment
    grid[-1] = float(n_segments)
    return grid, torch.full((n_segments,), per_segment, dtype=torch.int64)


def anneal(
    path: PathTensors,
    kernel: Kernel,
    positions: list[float],
    chains: Chains,
    *,
    record: str | None,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor | None]:
    """AIS from ``chains`` (exact draws of point 0) along ``positions``; returns the
    log-weights and, after each increment, the log-ESS (``record="ess"``) or the running
    ``log Ẑ/Z_0 = log mean exp(log w)`` (``record="log_z"``), float64, on the CPU."""
    n_chains = chains.layers[0].shape[0]
    log_weights = torch.zeros(n_chains, dtype=torch.float64, device=chains.layers[0].device)
    n_increments = len(positions) - 1
    trace = torch.empty(n_increments, dtype=torch.float64, device=log_weights.device) if record else None
    for k in range(1, n_increments + 1):
        start, end = positions[k - 1], positions[k]
        segment = path.segment_of(start)
        fraction_start, fraction_end = start - segment, end - segment
        left, right, linear_left, linear_right = path.ends(segment, chains.layers[0])
        log_weights.add_(linear_right - linear_left, alpha=fraction_end - fraction_start)
        log_weights.add_(log_f_sums(left, right, fraction_end)).sub_(log_f_sums(left, right, fraction_start))
        if trace is not None and record == "ess":
            trace[k - 1] = log_ess(log_weights)
        elif trace is not None:
            trace[k - 1] = torch.logsumexp(log_weights, 0) - math.log(n_chains)
        if k < n_increments:
            linear = torch.lerp(linear_left, linear_right, fraction_end)
            chains = transition(
                path, kernel, chains, left, right, linear, segment, fraction_end, generator=generator
            )
    return log_weights.cpu(), None if trace is None else trace.cpu()
