"""Trajectory AIS: annealed importance sampling through the parameters saved along training.

Neal (2001, "Annealed importance sampling", eqs. 3–4) on a path through the parameters a
model visited while it was trained (its :class:`~boltzlab.models.trajectory.Trajectory`)
instead of a temperature ladder, as proposed for RBMs by Béreux, Decelle, Furtlehner, Rosset
& Seoane (2024, "Fast, accurate training and sampling of Restricted Boltzmann Machines").
docs/algorithms.md §4.6 has the mathematics and the measurements; in short:

**Which path.** Following every snapshot is rarely best. Constant-rate PCD moves the
parameters noisily, so a dense path is long (its thermodynamic length grows with the
density of the snapshots), and late in training every point is sharp: the weights of modes
keep changing from snapshot to snapshot while the chains, stuck in modes, cannot follow
(log-weight standard deviations of 10 nats or more whatever the number of steps). A straight
line from an early snapshot to the model crosses the sharpening once instead. Starting at
the zero-weight anchor and jumping straight to the model is the temperature path from the
base-rate base, whose first-order-like transition loses modes instead. So the estimator
scores candidate paths with a pilot and anneals along the best:

- ``"base"``: from the base-rate model ``(W = 0, b = base logits, c_0)`` straight to the
  model (temperature AIS on a straight parameter line);
- cut ``c``: the trajectory's points ``0 … c``, then straight to the model;
- ``"trajectory"``: every point (the classic trajectory AIS).

The pilot (``pilot_chains`` chains, steps of increment s.d. ≤ ``pilot_step_std``) walks the
trajectory once and forks a jump to the model at each candidate cut; each candidate gets a
pilot ``log Ẑ`` and the one with the largest wins. Missing mass and weight drift both push
AIS estimates *down* (``log Ẑ`` is a stochastic lower bound), so the largest pilot estimate
marks the path that lost least. The main run (``n_chains`` chains, ``n_steps`` increments
placed at equal thermodynamic length along the chosen path, every point of it included)
starts afresh, so its ``Ẑ`` stays unbiased whatever the pilot saw.

**A certified check from the pilot.** Each pilot ``Ẑ_c`` is unbiased, so by Markov's
inequality ``P(max_c log Ẑ_c > log Z + t) ≤ m·e^−t`` for ``m`` candidates. A main estimate
more than ``t = log(m / 10⁻³)`` plus four standard errors below the best pilot has lost mass
with probability ``1 − 10⁻³``; it is marked unreliable.

The increments and sweeps are those of :mod:`boltzlab.estimators.trajectory.path`.
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
from boltzlab.estimators.annealing.chain_budget import annealing_checks
from boltzlab.estimators.annealing.increments import (
    check_finite_log_weights,
    operator_name,
    reads_current_state,
)
from boltzlab.estimators.annealing.schedule_check import (
    SCHEDULE_CHECK_STREAM,
    SCHEDULE_CHECK_STRIDE,
    CoarseRun,
    coarsened,
    is_checked,
)
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.trajectory.path import (
    Kernel,
    PathTensors,
    anneal,
    base_path,
    cut_path,
    plan_positions,
    uniform_positions,
    walk_segment,
)
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory, as_trajectory
from boltzlab.numerics import ess, log_mean_exp, log_mean_exp_stderr
from boltzlab.rng import fork, resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = ["PathCandidate", "TrajectoryAISInfo", "candidate_cuts", "pilot_check", "trajectory_ais"]

PATH_CHOICES = ("auto", "trajectory", "base")
#: Increments of the main run by default: with 256 chains about the sweeps of default AIS.
DEFAULT_STEPS = 6000
#: False-alarm probability of the pilot's certified check.
PILOT_CHECK_ALPHA = 1e-3


@dataclass(frozen=True, slots=True)
class PathCandidate:
    """One path the pilot scored.

    Attributes
    ----------
    label : str
        ``"base"``, ``"trajectory"``, ``"anchor"`` (straight from the anchor) or ``"cut at update U"``.
    cut : int
        Trajectory point after which the path jumps to the model (``−1`` for ``"base"``,
        the last point for ``"trajectory"``).
    pilot_log_z : float
        The pilot's ``log Ẑ`` along this path.
    length : float
        The pilot's thermodynamic length of the path.
    """

    label: str
    cut: int
    pilot_log_z: float
    length: float


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
    path : str
        The path annealed along (a :class:`PathCandidate` label).
    positions : Tensor, shape (K + 1,), float64
        The grid ``t_0 = 0 < … < t_K = P − 1`` on that path (integers are its points).
    steps_per_segment : Tensor, shape (P − 1,), int64
    segment_lengths : Tensor, shape (P − 1,), float64, or None
        Thermodynamic length of each segment measured by the pilot (None without pilot).
    updates : Tensor, shape (P,), int64
        Training update of each point of the path (``−1``: an anchor; the model last).
    appended_model : bool
        Whether the model was appended because the trajectory did not end at it.
    candidates : tuple of PathCandidate
        What the pilot scored (empty without pilot).
    log_ess_trace : Tensor, shape (K,), float64, or None
        ``log ESS`` of the running weights after each increment.
    operator : str
    n_chains, n_sweeps : int
    n_distributions : int
        Distributions on the grid, ``K + 1`` (the anchor and the model included).
    pilot_cost_sweeps : int
        Single-chain sweeps spent by the pilot (included in ``cost_sweeps``).
    schedule_check : CoarseRun or None
        As many independent chains annealed on every fourth point of the grid
        (:mod:`boltzlab.estimators.annealing.schedule_check`; its sweeps are in ``cost_sweeps``);
        ``None`` when turned off or when the grid is too short to coarsen.
    """

    log_weights: Tensor
    ess: float
    anchor_log_z: float
    path: str
    positions: Tensor
    steps_per_segment: Tensor
    segment_lengths: Tensor | None
    updates: Tensor
    appended_model: bool
    candidates: tuple[PathCandidate, ...]
    log_ess_trace: Tensor | None
    operator: str
    n_chains: int
    n_sweeps: int
    n_distributions: int
    pilot_cost_sweeps: int
    schedule_check: CoarseRun | None = None


def resolve_trajectory(trajectory: Any, model: RBM) -> tuple[Trajectory, bool]:
    """The path for ``model``: ``trajectory`` (anything
    :func:`~boltzlab.models.trajectory.as_trajectory` reads) in the model's dtype and
    device, ending at the model; returns it and whether the model had to be appended."""
    if trajectory is None:
        raise ValidationError(
            "trajectory-ais needs trajectory= (a boltzlab Trajectory, a trajectory.safetensors file, a "
            "run directory holding one, or the snapshots as models); bl.train and boltzlab train record "
            "one by default (snapshots=64)"
        )
    trajectory = as_trajectory(trajectory)
    trajectory.check_model(model)
    trajectory = trajectory.to(device=model.device, dtype=model.dtype)
    ended = trajectory.ending_at(model)
    return ended, ended is not trajectory


def candidate_cuts(n_points: int, n_candidates: int) -> list[int]:
    """Cuts the pilot scores: up to ``n_candidates − 2`` points spread evenly over
    ``1 … P − 3`` (point ``P − 2`` jumps along the last segment: the full trajectory)."""
    inner = list(range(1, n_points - 2))
    wanted = max(0, n_candidates - 2)
    if len(inner) <= wanted:
        return inner
    picks = torch.linspace(0, len(inner) - 1, wanted).round().to(torch.int64).tolist()
    return sorted({inner[index] for index in picks})


def check_pilot_options(
    path: Any, n_candidates: Any, pilot_chains: Any, pilot_step_std: Any
) -> tuple[int, int]:
    """The path pilot's options checked (:class:`ValidationError` naming the bad one);
    returns ``n_candidates`` and ``pilot_chains`` as ints."""
    n_candidates = check_positive_int(n_candidates, "n_candidates")
    pilot_chains = check_positive_int(pilot_chains, "pilot_chains")
    require(pilot_chains >= 2, f"pilot_chains must be at least 2 (a spread is measured), got {pilot_chains}")
    require(
        isinstance(pilot_step_std, (int, float))
        and not isinstance(pilot_step_std, bool)
        and math.isfinite(pilot_step_std)
        and pilot_step_std > 0,
        f"pilot_step_std must be a positive number, got {pilot_step_std!r}",
    )
    require(
        path in PATH_CHOICES or (isinstance(path, int) and not isinstance(path, bool) and path >= 0),
        f"path must be one of {', '.join(map(repr, PATH_CHOICES))} or a point index >= 0, got {path!r}",
    )
    return n_candidates, pilot_chains


def _label(cut: int, trajectory: Trajectory) -> str:
    if cut < 0:
        return "base"
    if cut >= trajectory.n_points - 2:
        return "trajectory"
    return "anchor" if cut == 0 else f"cut at update {int(trajectory.updates[cut])}"


def _walk(
    path: Trajectory,
    kernel: Kernel,
    *,
    n_chains: int,
    step_std: float,
    generator: torch.Generator,
    stop: Any = None,
) -> tuple[Tensor, list[tuple[float, float, float]], int]:
    """The pilot along every segment of ``path`` from exact anchor draws; returns the
    log-weights, the steps and the transitions made. ``stop(point, chains, log_weights,
    steps)`` is called at each inner point and ends the walk early by returning True."""
    along = PathTensors.of(path)
    last = path.n_points - 1
    chains = path.sample_anchor(n_chains, generator=generator)
    log_weights = torch.zeros(n_chains, dtype=torch.float64, device=path.device)
    walked: list[tuple[float, float, float]] = []
    transitions = 0
    for segment in range(last):
        chains, log_weights, steps, moves = walk_segment(
            along,
            segment,
            kernel,
            chains,
            log_weights,
            step_std=step_std,
            move_at_end=segment < last - 1,
            generator=generator,
        )
        transitions += moves
        walked += steps
        if segment < last - 1 and stop is not None and stop(segment + 1, chains, log_weights, walked):
            return log_weights, walked, transitions
    return log_weights, walked, transitions


def score_paths(
    trajectory: Trajectory,
    model: RBM,
    kernel: Kernel,
    choice: str | int,
    *,
    n_chains: int,
    n_candidates: int,
    step_std: float,
    generator: torch.Generator,
) -> tuple[list[tuple[PathCandidate, Trajectory, list[tuple[float, float, float]]]], int]:
    """Score the candidate paths (module docstring); returns ``(candidate, path, pilot steps)``
    for each, in the path's own positions, and the sweeps spent.

    ``choice`` is ``"auto"``, ``"trajectory"``, ``"base"`` or a cut point; the pilot's steps
    ``(start, end, sd)`` cover the path and give its thermodynamic length per segment
    (:func:`~boltzlab.estimators.trajectory.path.plan_positions`).
    """
    results = []
    transitions = 0

    def record(cut: int, path: Trajectory, log_weights: Tensor, steps: list) -> None:
        log_z = path.anchor_log_z + float(log_mean_exp(log_weights))
        length = sum(spread for _, _, spread in steps)
        results.append((PathCandidate(_label(cut, trajectory), cut, log_z, length), path, steps))

    options = {"n_chains": n_chains, "step_std": step_std, "generator": generator}
    last = trajectory.n_points - 1
    if choice != "auto":  # one path, walked to place its steps
        cut = -1 if choice == "base" else last if choice == "trajectory" else min(int(choice), last)
        path = base_path(trajectory, model) if cut < 0 else cut_path(trajectory, cut)
        log_weights, steps, transitions = _walk(path, kernel, **options)
        record(cut, path, log_weights, steps)
        return results, transitions * n_chains * kernel.n_sweeps
    path = base_path(trajectory, model)
    log_weights, steps, transitions = _walk(path, kernel, **options)
    record(-1, path, log_weights, steps)
    cuts = candidate_cuts(trajectory.n_points, n_candidates)

    def fork(point: int, chains: Any, log_weights: Tensor, walked: list) -> bool:
        nonlocal transitions
        if point in cuts:
            jump = PathTensors(*(torch.stack([t[point], t[last]]) for t in _stacks(trajectory)))
            _, jumped, jump_steps, moves = walk_segment(
                jump,
                0,
                kernel,
                chains,
                log_weights,
                step_std=step_std,
                move_at_end=False,
                generator=generator,
            )
            transitions += moves
            shifted = [(point + start, point + end, spread) for start, end, spread in jump_steps]
            record(point, cut_path(trajectory, point), jumped, walked + shifted)
        return False

    log_weights, steps, moves = _walk(trajectory, kernel, stop=fork, **options)
    transitions += moves
    record(last, trajectory, log_weights, steps)
    return results, transitions * n_chains * kernel.n_sweeps


def _stacks(trajectory: Trajectory) -> tuple[Tensor, Tensor, Tensor]:
    return trajectory.weights, trajectory.visible_bias, trajectory.hidden_bias


def pilot_check(log_z: float, stderr: float, candidates: Sequence[PathCandidate]) -> str | None:
    """The certified check of the module docstring; a sentence when it fails."""
    finite = [c.pilot_log_z for c in candidates if math.isfinite(c.pilot_log_z)]
    if not finite:
        return None
    slack = math.log(len(finite) / PILOT_CHECK_ALPHA)
    floor = max(finite) - slack
    if log_z + 4.0 * stderr < floor:
        return (
            f"estimate is {floor - log_z:.3g} nats below what a pilot path certifies (log Z ≥ {floor:.4f} with "
            f"probability {1 - PILOT_CHECK_ALPHA:g}), more than 4 standard errors: the chosen path lost mass"
        )
    return None


def _matched_steps(sweeps_per_chain: int) -> dict[str, int]:
    # Like AIS's temperatures, S sweeps per chain are S increments along the path.
    return {"n_steps": sweeps_per_chain}


@register_estimator(
    "trajectory-ais",
    family="trajectory",
    needs_trajectory=True,
    checks=annealing_checks,
    matched=_matched_steps,
    flags={"chains", "temperatures", "operator", "alpha"},
    keywords={"temperatures": "n_steps"},  # its increments K along the path
)
def trajectory_ais(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    n_chains: int = 256,
    n_steps: int | None = None,
    n_steps_per_segment: int | None = None,
    path: str | int = "auto",
    n_candidates: int = 12,
    n_sweeps: int = 1,
    operator: str | operators.Operator = "gibbs",
    pilot_chains: int = 64,
    pilot_step_std: float = 0.25,
    record_ess: bool = True,
    schedule_check: bool = True,
    generator: torch.Generator | int | None = None,
) -> LogZEstimate:
    """Estimate ``log Z`` by AIS along a path chosen from a training trajectory (module docstring).

    Parameters
    ----------
    model : RBM
        The model whose ``log Z`` is wanted: the end of every path. Appended to the trajectory
        when its last point differs from it.
    trajectory : Trajectory, str, Path, or sequence of RBMs or paths
        The snapshots saved while training ``model`` (same sizes): a :class:`Trajectory`, a
        ``trajectory.safetensors`` file, a run directory holding one, a directory of model
        files (one per snapshot), or the snapshot models in training order
        (:func:`~boltzlab.models.trajectory.as_trajectory`).
    n_chains : int, default 256
        Independent annealing runs of the main run.
    n_steps : int, optional
        Increments ``K`` of the main run, placed at equal thermodynamic length (at least one
        per segment). Default 6000: with 256 chains about the sweeps of default AIS.
    n_steps_per_segment : int, optional
        Instead of the pilot: this many equal increments between consecutive points of the
        path (``path="auto"`` then means ``"trajectory"``).
    path : {"auto", "trajectory", "base"} or int, default "auto"
        ``"auto"`` lets the pilot choose; an int ``c`` anneals through points ``0 … c`` and then
        straight to the model.
    n_candidates : int, default 12
        Paths the pilot scores with ``path="auto"``: ``"base"``, ``"trajectory"`` and up to
        ``n_candidates − 2`` cuts spread over the trajectory's points.
    n_sweeps : int, default 1
        Operator sweeps per intermediate distribution.
    operator : str or Operator, default "gibbs"
    pilot_chains : int, default 64
    pilot_step_std : float, default 0.25
        Largest standard deviation of a pilot step's log-weight increment.
    record_ess : bool, default True
    schedule_check : bool, default True
        Also anneal as many independent chains along the same path on every fourth point of
        its grid (a quarter more sweeps; grids under 40 steps are not checked): the shift
        between the two runs estimates the bias the error bar leaves out, which the verdict
        adds to the error bar or, beyond a nat, flags
        (:mod:`boltzlab.estimators.annealing.schedule_check`). On a sharp 784×500 PCD-1 MNIST
        RBM the default 6,000 steps came out about 1 nat low with a passing verdict before.
    generator : torch.Generator or int, optional

    Returns
    -------
    LogZEstimate
        ``log_z = log Z_0 + log mean exp(log w)``; ``stderr`` by the delta method
        (``std(w / mean w) / sqrt(M)``); ``bound="lower"``; ``cost_sweeps = M·(K − 1)·n_sweeps``
        plus the pilot's and the schedule check's sweeps; ``info`` a :class:`TrajectoryAISInfo`; ``reliable=False``
        when the pilot's certified check fails.

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
    >>> from boltzlab.models.trajectory import Trajectory
    >>> model = bl.RBM(n_visible=6, n_hidden=3, generator=0, weight_std=1.0)
    >>> path = Trajectory.from_models([bl.RBM(weights=s * model.weights.detach()) for s in (0.3, 0.6)])
    >>> result = bl.estimate_log_z(model, method="trajectory-ais", trajectory=path, n_chains=100,
    ...                            n_steps_per_segment=20, generator=0, lower_bound_sweeps=0)
    >>> abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr
    True
    """
    # Long because it runs the module docstring's steps in order (path pilot, positions, anneal,
    # checks); each is a call.
    n_chains = check_positive_int(n_chains, "n_chains")
    require(
        n_steps is None or n_steps_per_segment is None,
        f"give n_steps or n_steps_per_segment, not both (got {n_steps!r} and {n_steps_per_segment!r})",
    )
    n_steps = DEFAULT_STEPS if n_steps is None else check_positive_int(n_steps, "n_steps")
    n_sweeps = check_positive_int(n_sweeps, "n_sweeps")
    n_candidates, pilot_chains = check_pilot_options(path, n_candidates, pilot_chains, pilot_step_std)
    if not isinstance(model, RBM):
        raise ValidationError(f"trajectory-ais estimates log Z of an RBM, got a {type(model).__name__}")
    trajectory, appended = resolve_trajectory(trajectory, model)
    transition = operators.resolve(operator)
    kernel = Kernel(transition, n_sweeps, reads_current_state(transition))
    generator = resolve_generator(generator, model.device)
    transition_name = operator_name(transition)
    if trajectory.n_points == 1:  # the model is its own zero-weight anchor: log Z is known exactly
        return LogZEstimate(log_z=trajectory.anchor_log_z, stderr=0.0, method="trajectory-ais", info=None)

    lengths, pilot_cost, candidates = None, 0, ()
    if n_steps_per_segment is not None:
        per_segment = check_positive_int(n_steps_per_segment, "n_steps_per_segment")
        if path == "base":
            chosen, label = base_path(trajectory, model), "base"
        elif path in ("auto", "trajectory"):
            chosen, label = trajectory, "trajectory"
        else:
            chosen, label = cut_path(trajectory, int(path)), _label(int(path), trajectory)
        grid, steps_per_segment = uniform_positions(chosen.n_points, per_segment)
    else:
        scored, pilot_cost = score_paths(
            trajectory,
            model,
            kernel,
            path,
            n_chains=pilot_chains,
            n_candidates=n_candidates,
            step_std=float(pilot_step_std),
            generator=generator,
        )
        best, chosen, pilot_steps = max(scored, key=lambda item: item[0].pilot_log_z)
        candidates, label = tuple(item[0] for item in scored), best.label
        grid, steps_per_segment, lengths = plan_positions(pilot_steps, chosen.n_points, n_steps)

    if not isinstance(schedule_check, bool):
        raise ValidationError(f"schedule_check must be True or False, got {schedule_check!r}")
    # Forked before the main run draws: its draws are the same with or without the check.
    check_generator = fork(generator, SCHEDULE_CHECK_STREAM)
    tensors = PathTensors.of(chosen)
    chains = chosen.sample_anchor(n_chains, generator=generator)
    log_weights, trace = anneal(
        tensors, kernel, grid.tolist(), chains, record="ess" if record_ess else None, generator=generator
    )
    check_finite_log_weights(log_weights)
    n_increments = grid.numel() - 1
    coarse_run = None
    if is_checked(schedule_check, n_increments):
        # Every point of the path stays on the grid: a step spans one segment only (path.anneal).
        points = grid[grid == grid.round()]
        coarse = torch.unique(torch.cat([coarsened(grid, SCHEDULE_CHECK_STRIDE), points]))
        coarse_chains = chosen.sample_anchor(n_chains, generator=check_generator)
        coarse_weights, _ = anneal(
            tensors, kernel, coarse.tolist(), coarse_chains, record=None, generator=check_generator
        )
        check_finite_log_weights(coarse_weights)
        coarse_run = CoarseRun.of(
            coarse_weights,
            offset=chosen.anchor_log_z,
            stride=SCHEDULE_CHECK_STRIDE,
            n_steps=coarse.numel() - 1,
            n_full_steps=n_increments,
            n_sweeps=n_sweeps,
        )
    info = TrajectoryAISInfo(
        log_weights=log_weights,
        ess=ess(log_weights),
        anchor_log_z=chosen.anchor_log_z,
        path=label,
        positions=grid,
        steps_per_segment=steps_per_segment,
        segment_lengths=lengths,
        updates=chosen.updates.clone(),
        appended_model=appended,
        candidates=candidates,
        log_ess_trace=trace,
        operator=transition_name,
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        n_distributions=n_increments + 1,
        pilot_cost_sweeps=pilot_cost,
        schedule_check=coarse_run,
    )
    log_z = chosen.anchor_log_z + float(log_mean_exp(log_weights))
    stderr = log_mean_exp_stderr(log_weights)
    problem = pilot_check(log_z, stderr, candidates)
    return LogZEstimate(
        log_z=log_z,
        stderr=stderr,
        method="trajectory-ais",
        cost_sweeps=n_chains * (n_increments - 1) * n_sweeps
        + pilot_cost
        + (coarse_run.cost_sweeps if coarse_run is not None else 0),
        bound="lower",
        info=info,
        reliable=problem is None,
        warnings=() if problem is None else (problem,),
    )
