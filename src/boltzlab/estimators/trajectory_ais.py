"""Trajectory AIS: annealed importance sampling through the parameters saved along training.

Neal (2001, "Annealed importance sampling", eqs. 3–4) on the path of a training trajectory
instead of a temperature ladder, as proposed for RBMs by Béreux, Decelle, Furtlehner, Rosset
& Seoane (2024, "Fast, accurate training and sampling of Restricted Boltzmann
Machines"): the chains follow the model through the updates it went through, which on their
training recipe avoids the first-order-like transitions of the temperature path.

**When it helps, measured.** On boltzlab's hard-model benchmark (20 enumerable RBMs,
benchmarks/hard_models.py, 19 saved snapshots each) it agreed with the exact value on about
half the models but was more precise than default AIS on one only (MNIST CD-25: +0.006 ± 0.06
against −0.36 ± 0.33), and missed by 1 to 46 nats on 7 to 9, by budget (Fashion-MNIST, binary alphadigits
PCD, MNIST CD-1), each marked unreliable by the verdict (ESS, group agreement or the certified
lower bound); a −0.9 ± 0.25 miss on binary alphadigits CD-25 went through. Two mechanisms: noisy
constant-rate PCD makes the parameter path long (its thermodynamic length grows with the
density of the snapshots: 193 with 19 snapshots, 7,256 with one every 10 updates, on
Fashion-MNIST 784×20), and late in training every intermediate model is sharp, so chains
stuck in modes cannot follow mode weights that drift (on a CD-1 MNIST model, states the
chains never reach along training hold all but e^−13.6 of the mass). Use it beside, not
instead of, temperature AIS, and trust the verdict.

**Path.** :class:`~boltzlab.models.trajectory.Trajectory` points ``θ_0 … θ_{P−1}`` (point 0
the zero-weight anchor, exact ``log Z_0`` and exact draws), with the model itself appended
when it differs from the last point. A position ``t ∈ [0, P − 1]`` stands for the linear
interpolation ``θ(t)`` between points ``⌊t⌋`` and ``⌊t⌋ + 1``. The chains follow an
ascending grid ``0 = t_0 < t_1 < … < t_K = P − 1`` that contains every integer, and carry

    log w = Σ_{k=1..K} [log f_{t_k}(v_{k−1}) − log f_{t_{k−1}}(v_{k−1})],
    log f_t(v) = b(t)·v + Σ_j softplus(c_j(t) + (v W(t))_j)     (hidden units summed out),

where ``v_k`` is ``v_{k−1}`` moved by ``n_sweeps`` sweeps of an operator leaving ``p_{t_k}``
invariant. ``Ẑ = Z_0 · mean(w)`` is unbiased for ``Z``, so ``log Ẑ`` is a stochastic lower
bound. Within a segment ``[i, i + 1]`` the pre-activations are linear in ``s = t − i``:
``a(t) = (1 − s)·(c_i + v W_i) + s·(c_{i+1} + v W_{i+1})``, so both ends of an increment come
from two matrix products per step, combined in float64 (their rounding errors then scale
with the step, not with the number of steps). With the sweep's visible update, a step costs
three matrix products, against two for temperature AIS.

**Where the points go.** Consecutive snapshots can be far apart late in training and
nearly equal early on. A pilot run (``pilot_chains`` chains, its sweeps counted in
``cost_sweeps``) walks the path with steps whose log-weight increment has a standard
deviation of at most ``pilot_step_std``, shrinking a step until it does: the sum of those
deviations over a segment estimates its thermodynamic length ``L_i = ∫ sd_{p_t}[∂_t log f_t] dt``
(Gelman & Meng 1998; Grosse, Maddison & Salakhutdinov 2013). The main run then places its
``K`` steps at equal length, ``K_i ∝ L_i`` per segment (at least one), which equalises the
increment variances and makes ``Var(log w) ≈ L²/K`` for well-mixed chains; by default ``K``
is chosen so that this is ``target_variance``. The grid is fixed before the main chains
start, so the estimate stays unbiased whatever the pilot saw.

**Summed-out weights, summed-out kernel.** As in :mod:`boltzlab.estimators.ais`, an operator
whose update reads a unit's current value has the hidden layer redrawn from ``p_t(h | v)``
(from the same pre-activations) before its sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing import check_finite_log_weights, reads_current_state, redraw_summed_group
from boltzlab.estimators.registry import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.base import MarginalTerms
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory, as_trajectory
from boltzlab.numerics import ess, log_ess, log_mean_exp, log_mean_exp_stderr, softplus
from boltzlab.operators.base import Operator
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = ["TrajectoryAISInfo", "plan_positions", "resolve_trajectory", "trajectory_ais"]

# The pilot never splits a step below this fraction of a segment.
_MIN_PILOT_STEP = 1.0 / 4096


@dataclass(frozen=True, slots=True)
class TrajectoryAISInfo:
    """Diagnostics of one trajectory-AIS run.

    Attributes
    ----------
    log_weights : Tensor, shape (n_chains,), float64, on the CPU
        ``log w_i``, so that ``log Ẑ = anchor_log_z + log mean exp(log_weights)``.
    ess : float
        Kish's effective sample size of the final weights, in [1, n_chains].
    anchor_log_z : float
        Exact ``log Z`` of the zero-weight point the chains start from.
    positions : Tensor, shape (K + 1,), float64
        The grid ``t_0 = 0 < … < t_K = P − 1`` on the path (integers are the points).
    steps_per_segment : Tensor, shape (P − 1,), int64
        Increments spent between points ``i`` and ``i + 1``.
    segment_lengths : Tensor, shape (P − 1,), float64, or None
        Thermodynamic length of each segment measured by the pilot (None without pilot).
    updates : Tensor, shape (P,), int64
        Training update of each point of the path (``−1``: the prepended anchor).
    appended_model : bool
        Whether the model was appended because the trajectory did not end at it.
    log_ess_trace : Tensor, shape (K,), float64, or None
        ``log ESS`` of the running weights after each increment.
    operator : str
    n_chains, n_sweeps : int
    n_distributions : int
        Distributions on the grid, ``K + 1`` (the anchor and the model included).
    pilot_cost_sweeps : int
        Single-chain sweeps spent by the pilot (included in ``cost_sweeps``).
    """

    log_weights: Tensor
    ess: float
    anchor_log_z: float
    positions: Tensor
    steps_per_segment: Tensor
    segment_lengths: Tensor | None
    updates: Tensor
    appended_model: bool
    log_ess_trace: Tensor | None
    operator: str
    n_chains: int
    n_sweeps: int
    n_distributions: int
    pilot_cost_sweeps: int


def resolve_trajectory(trajectory: Any, model: RBM) -> tuple[Trajectory, bool]:
    """The path for ``model``: ``trajectory`` (anything :func:`~boltzlab.models.trajectory.as_trajectory`
    reads) in the model's dtype and device, ending at the model; returns it and whether the
    model had to be appended."""
    if trajectory is None:
        raise ValidationError(
            "trajectory-ais needs trajectory= (a boltzlab Trajectory, a trajectory.safetensors file, a "
            "run directory holding one, or the snapshots as models); record it by training with the "
            "snapshot recorder (boltzlab.training.snapshots.SnapshotRecorder)"
        )
    trajectory = as_trajectory(trajectory)
    trajectory.check_model(model)
    trajectory = trajectory.to(device=model.device, dtype=model.dtype)
    ended = trajectory.ending_at(model)
    return ended, ended is not trajectory


class _Path:
    """The path's tensors in the model's dtype, and the summed-out pieces at a position."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.weights = trajectory.weights
        self.visible_bias = trajectory.visible_bias
        self.hidden_bias = trajectory.hidden_bias
        self.visible_bias64 = trajectory.visible_bias.to(torch.float64)
        self.n_points = trajectory.n_points

    def ends(self, segment: int, v: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``c + vW`` and ``b·v`` at both ends of ``segment``, float64; two matrix products."""
        left = torch.addmm(self.hidden_bias[segment], v, self.weights[segment]).to(torch.float64)
        right = torch.addmm(self.hidden_bias[segment + 1], v, self.weights[segment + 1]).to(torch.float64)
        v64 = v.to(torch.float64)
        return left, right, v64 @ self.visible_bias64[segment], v64 @ self.visible_bias64[segment + 1]

    def set_work_(self, work: RBM, segment: int, fraction: float) -> None:
        """Write ``θ(segment + fraction)`` into the work model's parameters, in place."""
        with torch.no_grad():
            for parameter, stacked in (
                (work.weights, self.weights),
                (work.visible_bias, self.visible_bias),
                (work.hidden_bias, self.hidden_bias),
            ):
                if fraction == 0.0:
                    parameter.copy_(stacked[segment])
                elif fraction == 1.0:
                    parameter.copy_(stacked[segment + 1])
                else:
                    torch.lerp(stacked[segment], stacked[segment + 1], fraction, out=parameter.data)


def _segment_of(start: float, n_points: int) -> int:
    return min(math.floor(start), n_points - 2)


def _log_f_sums(left: Tensor, right: Tensor, fraction: float) -> Tensor:
    """``Σ_j softplus(a_j(s))`` for ``a(s) = (1 − s)·left + s·right``; float64, shape ``(n,)``."""
    return softplus(torch.lerp(left, right, fraction)).sum(1)


def _transition(
    path: _Path,
    work: RBM,
    transition: Operator,
    chains: Any,
    left: Tensor,
    right: Tensor,
    linear: Tensor,
    segment: int,
    fraction: float,
    *,
    n_sweeps: int,
    refresh: bool,
    generator: torch.Generator,
) -> Any:
    """``n_sweeps`` sweeps at ``θ(segment + fraction)``; the first reuses the pre-activations."""
    path.set_work_(work, segment, fraction)
    preactivation = torch.lerp(left, right, fraction).to(work.dtype)
    terms = MarginalTerms(base=torch.zeros_like(linear), linear=linear, preactivation=preactivation)
    if refresh:
        chains = redraw_summed_group(work, chains, terms, 1.0, generator)
    chains, _ = transition.step(work, chains, generator=generator, terms=terms)
    for _ in range(n_sweeps - 1):
        chains, _ = transition.step(work, chains, generator=generator)
    return chains


def _work_model(trajectory: Trajectory) -> RBM:
    """A private RBM whose parameters are overwritten at every position (uniform base)."""
    return RBM(
        weights=trajectory.weights[0],
        visible_bias=trajectory.visible_bias[0],
        hidden_bias=trajectory.hidden_bias[0],
        dtype=trajectory.dtype,
        device=trajectory.device,
    )


def _pilot(
    trajectory: Trajectory,
    transition: Operator,
    *,
    n_chains: int,
    step_std: float,
    n_sweeps: int,
    refresh: bool,
    generator: torch.Generator,
) -> tuple[list[tuple[float, float, float]], int]:
    """Walk the path with steps of increment s.d. ≤ ``step_std``; returns ``(start, end, sd)``
    of every step and the sweeps spent."""
    path, work = _Path(trajectory), _work_model(trajectory)
    chains = trajectory.sample_anchor(n_chains, generator=generator)
    steps: list[tuple[float, float, float]] = []
    n_transitions = 0
    last = trajectory.n_points - 2
    for segment in range(trajectory.n_points - 1):
        fraction, delta = 0.0, 1.0
        while fraction < 1.0:
            left, right, linear_left, linear_right = path.ends(segment, chains.layers[0])
            here = _log_f_sums(left, right, fraction)
            while True:
                target = min(1.0, fraction + delta)
                increment = (
                    (target - fraction) * (linear_right - linear_left)
                    + _log_f_sums(left, right, target)
                    - here
                )
                spread = float(increment.std())
                if not math.isfinite(spread) or spread <= step_std or delta <= _MIN_PILOT_STEP:
                    break
                delta = max(_MIN_PILOT_STEP, delta * max(0.1, 0.9 * step_std / spread))
            steps.append((segment + fraction, segment + target, spread if math.isfinite(spread) else 0.0))
            fraction = target
            if segment < last or fraction < 1.0:
                linear = torch.lerp(linear_left, linear_right, fraction)
                chains = _transition(
                    path,
                    work,
                    transition,
                    chains,
                    left,
                    right,
                    linear,
                    segment,
                    fraction,
                    n_sweeps=n_sweeps,
                    refresh=refresh,
                    generator=generator,
                )
                n_transitions += 1
            delta = min(1.0, 2.0 * delta)
    return steps, n_transitions * n_chains * n_sweeps


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
        by_segment[_segment_of(start, n_points)].append((end, spread))
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
        steps[_segment_of(start, n_points)] += 1
    return grid, steps, lengths


def _uniform_positions(n_points: int, per_segment: int) -> tuple[Tensor, Tensor]:
    n_segments = n_points - 1
    grid = torch.arange(n_segments * per_segment + 1, dtype=torch.float64) / per_segment
    grid[-1] = float(n_segments)
    return grid, torch.full((n_segments,), per_segment, dtype=torch.int64)


def _anneal(
    trajectory: Trajectory,
    transition: Operator,
    positions: list[float],
    *,
    n_chains: int,
    n_sweeps: int,
    refresh: bool,
    record_ess: bool,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor | None]:
    """The AIS loop along ``positions``; returns the log-weights and log-ESS trace (CPU)."""
    path, work = _Path(trajectory), _work_model(trajectory)
    n_points = trajectory.n_points
    chains = trajectory.sample_anchor(n_chains, generator=generator)
    log_weights = torch.zeros(n_chains, dtype=torch.float64, device=trajectory.device)
    n_increments = len(positions) - 1
    trace = torch.empty(n_increments, dtype=torch.float64, device=trajectory.device) if record_ess else None
    for k in range(1, n_increments + 1):
        start, end = positions[k - 1], positions[k]
        segment = _segment_of(start, n_points)
        fraction_start, fraction_end = start - segment, end - segment
        left, right, linear_left, linear_right = path.ends(segment, chains.layers[0])
        log_weights.add_(linear_right - linear_left, alpha=fraction_end - fraction_start)
        log_weights.add_(_log_f_sums(left, right, fraction_end)).sub_(
            _log_f_sums(left, right, fraction_start)
        )
        if trace is not None:
            trace[k - 1] = log_ess(log_weights)
        if k < n_increments:
            chains = _transition(
                path,
                work,
                transition,
                chains,
                left,
                right,
                torch.lerp(linear_left, linear_right, fraction_end),
                segment,
                fraction_end,
                n_sweeps=n_sweeps,
                refresh=refresh,
                generator=generator,
            )
    return log_weights.cpu(), None if trace is None else trace.cpu()


@register_estimator("trajectory-ais")
def trajectory_ais(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    n_chains: int = 256,
    n_steps: int | None = None,
    n_steps_per_segment: int | None = None,
    target_variance: float = 0.5,
    max_steps: int = 6000,
    n_sweeps: int = 1,
    operator: str | Operator = "gibbs",
    pilot_chains: int = 64,
    pilot_step_std: float = 0.5,
    record_ess: bool = True,
    generator: torch.Generator | int | None = None,
) -> LogZEstimate:
    """Estimate ``log Z`` by AIS along a training trajectory (see the module docstring).

    Parameters
    ----------
    model : RBM
        The model whose ``log Z`` is wanted: the end of the path. Appended to the trajectory
        when its last point differs from it.
    trajectory : Trajectory, str, Path, or sequence of RBMs or paths
        The snapshots saved while training ``model`` (same sizes): a :class:`Trajectory`, a
        ``trajectory.safetensors`` file, a run directory holding one, a directory of model
        files (one per snapshot), or the snapshot models in training order
        (:func:`~boltzlab.models.trajectory.as_trajectory`).
    n_chains : int, default 256
        Independent annealing runs.
    n_steps : int, optional
        Total increments ``K``, placed by the pilot at equal thermodynamic length (at least
        one per segment). Default: ``K ≈ L² / target_variance`` from the pilot's path length
        ``L``, within ``[P − 1, max_steps]``.
    n_steps_per_segment : int, optional
        Instead of the pilot: this many equally spaced increments between consecutive points.
    target_variance : float, default 0.5
        Predicted ``Var(log w)`` that sets the default ``K``.
    max_steps : int, default 6000
        Cap on the default ``K`` (with 256 chains, about the sweeps of default AIS).
    n_sweeps : int, default 1
        Operator sweeps per intermediate distribution.
    operator : str or Operator, default "gibbs"
    pilot_chains : int, default 64
    pilot_step_std : float, default 0.5
        Largest standard deviation of a pilot step's log-weight increment.
    record_ess : bool, default True
    generator : torch.Generator or int, optional

    Returns
    -------
    LogZEstimate
        ``log_z = log Z_0 + log mean exp(log w)``; ``stderr`` by the delta method
        (``std(w / mean w) / sqrt(M)``); ``bound="lower"``; ``cost_sweeps = M·(K − 1)·n_sweeps``
        plus the pilot's sweeps; ``info`` a :class:`TrajectoryAISInfo`.

    Raises
    ------
    ValidationError
        No or a mismatched trajectory, a model that is not an RBM, bad numbers of chains or steps.
    ModelFileError
        An unreadable trajectory file.
    DivergenceError
        NaN or ``+inf`` log-weights.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.models.trajectory import Trajectory, as_trajectory
    >>> model = bl.RBM(n_visible=6, n_hidden=3, generator=0, weight_std=1.0)
    >>> path = Trajectory.from_models([bl.RBM(weights=s * model.weights.detach()) for s in (0.3, 0.6)])
    >>> result = bl.estimate_log_z(model, method="trajectory-ais", trajectory=path, n_chains=100,
    ...                            n_steps_per_segment=20, generator=0, lower_bound_sweeps=0)
    >>> abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr
    True
    """
    n_chains = check_positive_int(n_chains, "n_chains")
    n_sweeps = check_positive_int(n_sweeps, "n_sweeps")
    max_steps = check_positive_int(max_steps, "max_steps")
    pilot_chains = check_positive_int(pilot_chains, "pilot_chains")
    require(pilot_chains >= 2, f"pilot_chains must be at least 2 (a spread is measured), got {pilot_chains}")
    for value, name in ((target_variance, "target_variance"), (pilot_step_std, "pilot_step_std")):
        require(
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > 0,
            f"{name} must be a positive number, got {value!r}",
        )
    require(
        n_steps is None or n_steps_per_segment is None,
        f"give n_steps or n_steps_per_segment, not both (got {n_steps!r} and {n_steps_per_segment!r})",
    )
    if not isinstance(model, RBM):
        raise ValidationError(f"trajectory-ais estimates log Z of an RBM, got a {type(model).__name__}")
    path, appended = resolve_trajectory(trajectory, model)
    transition = operators.resolve(operator)
    generator = resolve_generator(generator, model.device)
    refresh = reads_current_state(transition)
    n_points = path.n_points
    operator_name = str(getattr(transition, "name", type(transition).__name__))
    if n_points == 1:  # the model is its own zero-weight anchor: log Z is known exactly
        return LogZEstimate(log_z=path.anchor_log_z, stderr=0.0, method="trajectory-ais", info=None)

    lengths = None
    pilot_cost = 0
    if n_steps_per_segment is not None:
        grid, per_segment = _uniform_positions(
            n_points, check_positive_int(n_steps_per_segment, "n_steps_per_segment")
        )
    else:
        pilot_steps, pilot_cost = _pilot(
            path,
            transition,
            n_chains=pilot_chains,
            step_std=float(pilot_step_std),
            n_sweeps=n_sweeps,
            refresh=refresh,
            generator=generator,
        )
        if n_steps is None:
            length = sum(spread for _, _, spread in pilot_steps)
            n_steps = int(min(max_steps, max(n_points - 1, math.ceil(length**2 / float(target_variance)))))
        else:
            n_steps = check_positive_int(n_steps, "n_steps")
        grid, per_segment, lengths = plan_positions(pilot_steps, n_points, n_steps)

    log_weights, trace = _anneal(
        path,
        transition,
        grid.tolist(),
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        refresh=refresh,
        record_ess=record_ess,
        generator=generator,
    )
    check_finite_log_weights(log_weights)
    n_increments = grid.numel() - 1
    info = TrajectoryAISInfo(
        log_weights=log_weights,
        ess=ess(log_weights),
        anchor_log_z=path.anchor_log_z,
        positions=grid,
        steps_per_segment=per_segment,
        segment_lengths=lengths,
        updates=path.updates.clone(),
        appended_model=appended,
        log_ess_trace=trace,
        operator=operator_name,
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        n_distributions=n_increments + 1,
        pilot_cost_sweeps=pilot_cost,
    )
    return LogZEstimate(
        log_z=path.anchor_log_z + float(log_mean_exp(log_weights)),
        stderr=log_mean_exp_stderr(log_weights),
        method="trajectory-ais",
        cost_sweeps=n_chains * (n_increments - 1) * n_sweeps + pilot_cost,
        bound="lower",
        info=info,
    )
