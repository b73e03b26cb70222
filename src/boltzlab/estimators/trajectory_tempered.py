"""RTS and MBAR along a training trajectory: ``trajectory-rts`` and ``trajectory-mbar``.

The tempered estimators of :mod:`boltzlab.estimators.rts` and :mod:`boltzlab.estimators.mbar`
on the levels of :mod:`boltzlab.estimators.trajectory_levels` instead of a temperature ladder
(docs/algorithms.md §4.6, docs/trust.md). How the run is set up and sized:

1. **Path.** The pilot of trajectory AIS
   (:func:`~boltzlab.estimators.trajectory_ais.score_paths`) scores the straight base-to-model
   path, the whole trajectory and cuts of it, and of the trajectory's paths the one whose
   pilot ``log Ẑ`` is largest is kept (missing mass pushes an AIS estimate down). Unlike
   trajectory AIS it does not sample along the base path unless ``path="base"``: that is the
   temperature path, and on MNIST CD-25 (docs/trust.md) MBAR along it, chosen by a pilot that
   happened to score it best, was 6.5 nats low after the whole budget. Its pilot still counts
   for the certified floor below: on MNIST CD-1 every trajectory path missed a mode by 12
   nats that the temperature path finds.
2. **Levels.** ``n_levels`` (100) positions at equal thermodynamic length along that path,
   measured by the same pilot (every point of the path is a level), as the temperature route
   places its ladder; then an AIS run of ``level_pilot_chains`` chains through them, with
   ``level_pilot_substeps`` steps between neighbours, gives every level's starting ``log Ẑ``.
3. **Rounds.** RTS's initial iterations and a long run of ``n_sweeps`` (1,000); while the
   tempered checks fail (level balance, round trips, chain groups, a ``target_stderr``), another round
   with the long run doubled continues from where the chains are, with the weights updated to
   the last round's estimate, up to ``max_sweeps`` (16,000) sweeps per chain: the budget of
   :mod:`boltzlab.estimators.tempered_budget`.

The pilot's floor is trajectory AIS's certified check: each pilot ``Ẑ`` is unbiased, so an
estimate more than ``log(m/10⁻³)`` plus four standard errors below the best of ``m`` pilots
has lost mass (:func:`~boltzlab.estimators.trajectory_ais.pilot_check`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.errors import ValidationError
from boltzlab.estimators.lower_bound import LowerBound
from boltzlab.estimators.mbar import mbar_for_groups, mbar_from_samples
from boltzlab.estimators.registry import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.rts import rts_from_samples
from boltzlab.estimators.tempered_budget import (
    DEFAULT_MAX_SWEEPS,
    BudgetRound,
    TemperedBudget,
    check_target_stderr,
    next_log_z_hat,
    precision_failures,
)
from boltzlab.estimators.tempered_checks import diagnose
from boltzlab.estimators.tempered_samples import TemperedSamples
from boltzlab.estimators.trajectory_ais import (
    PATH_CHOICES,
    PathCandidate,
    pilot_check,
    resolve_trajectory,
    score_paths,
)
from boltzlab.estimators.trajectory_levels import PathLevels, collect_trajectory_samples, pilot_level_log_z
from boltzlab.estimators.trajectory_path import Kernel, plan_positions
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = ["TrajectoryTemperedInfo", "trajectory_mbar", "trajectory_rts"]

#: Levels on the path by default (the temperature route's K).
DEFAULT_LEVELS = 100


@dataclass(frozen=True)
class TrajectoryTemperedInfo:
    """Diagnostics of a ``trajectory-rts`` or ``trajectory-mbar`` estimate.

    Attributes
    ----------
    estimator : Any
        The estimator's own info (:class:`~boltzlab.estimators.rts.RTSInfo` or
        :class:`~boltzlab.estimators.mbar.MBARInfo`) on the levels, whose ``betas`` are the
        positions divided by ``P − 1``; its per-level values are ``log(Z_k / Z_0)``.
    anchor_log_z : float
        Exact ``log Z_0`` of the path's first point (the estimate is ``log(Z/Z_0) + log Z_0``).
    samples : TemperedSamples
        The last round's samples.
    budget : TemperedBudget
        Rounds, sweeps and why the run stopped (``ladder="trajectory"``).
    neighbour_overlap : Tensor or None
        MBAR's overlap of neighbouring levels, shape ``(K − 1,)`` (None for RTS).
    path : str
        The path chosen (a :class:`~boltzlab.estimators.trajectory_ais.PathCandidate` label).
    positions : Tensor, shape (K,), float64
        The levels' positions on that path (integers are its points).
    updates : Tensor, shape (P,), int64
        Training update of each point of the path.
    candidates : tuple of PathCandidate
        What the path pilot scored.
    pilot_log_z : Tensor, shape (K,), float64
        The level pilot's AIS ``log(Ẑ_k / Z_0)`` at every level (the weights the run started from).
    pilot_cost_sweeps : int
        Chain-sweeps of both pilots (included in ``cost_sweeps``).
    """

    estimator: Any
    anchor_log_z: float
    samples: TemperedSamples
    budget: TemperedBudget
    neighbour_overlap: Tensor | None
    path: str
    positions: Tensor
    updates: Tensor
    candidates: tuple[PathCandidate, ...]
    pilot_log_z: Tensor
    pilot_cost_sweeps: int


def _check_real(value: Any, name: str) -> float:
    require(
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0,
        f"{name} must be a positive number, got {value!r}",
    )
    return float(value)


def _estimate(
    model: RBM,
    method: str,
    recompute: Callable[[TemperedSamples], LogZEstimate],
    group_recompute: Callable[[TemperedSamples], LogZEstimate],
    *,
    trajectory: Any,
    generator: torch.Generator | int | None,
    n_chains: int,
    n_levels: int,
    n_sweeps: int | None,
    max_sweeps: int | None,
    path: str | int,
    n_candidates: int,
    pilot_chains: int,
    pilot_step_std: float,
    level_pilot_chains: int,
    level_pilot_substeps: int,
    initial_sweeps: int,
    n_initial_iterations: int,
    stop_tolerance: float,
    prior: Any,
    target_stderr: float | None,
    lower_bound: LowerBound | None,
    record_log_densities: bool,
    max_log_densities: int,
) -> LogZEstimate:
    if not isinstance(model, RBM):
        raise ValidationError(f"{method} estimates log Z of an RBM, got a {type(model).__name__}")
    n_chains = check_positive_int(n_chains, "n_chains")
    require(n_chains >= 2, f"{method} needs n_chains >= 2 (its error bar comes from chains), got {n_chains}")
    n_levels = check_positive_int(n_levels, "n_levels")
    require(n_levels >= 2, f"n_levels must be at least 2 (the anchor and the model), got {n_levels}")
    n_candidates = check_positive_int(n_candidates, "n_candidates")
    pilot_chains = check_positive_int(pilot_chains, "pilot_chains")
    require(pilot_chains >= 2, f"pilot_chains must be at least 2 (a spread is measured), got {pilot_chains}")
    step_std = _check_real(pilot_step_std, "pilot_step_std")
    level_pilot_chains = check_positive_int(level_pilot_chains, "level_pilot_chains")
    level_pilot_substeps = check_positive_int(level_pilot_substeps, "level_pilot_substeps")
    require(
        path in PATH_CHOICES or (isinstance(path, int) and not isinstance(path, bool) and path >= 0),
        f"path must be one of {', '.join(map(repr, PATH_CHOICES))} or a point index >= 0, got {path!r}",
    )
    target_stderr = check_target_stderr(target_stderr)
    if lower_bound is not None and not isinstance(lower_bound, LowerBound):
        raise ValidationError(
            f"lower_bound must be a LowerBound (certified_lower_bound's), got {type(lower_bound).__name__}"
        )
    fixed = n_sweeps is not None and max_sweeps is None
    n_sweeps = 1000 if n_sweeps is None else check_positive_int(n_sweeps, "n_sweeps")
    if fixed:
        target_stderr = None  # a budget given is a budget kept
    generator = resolve_generator(generator, model.device)
    trajectory, _ = resolve_trajectory(trajectory, model)
    if trajectory.n_points == 1:  # the model is its own zero-weight anchor: log Z is known exactly
        return LogZEstimate(log_z=trajectory.anchor_log_z, stderr=0.0, method=method, info=None)

    kernel = Kernel(operators.resolve("gibbs"), 1, False)
    scored, path_cost = score_paths(
        trajectory,
        model,
        kernel,
        path,
        n_chains=pilot_chains,
        n_candidates=n_candidates,
        step_std=step_std,
        generator=generator,
    )
    # The base path is the temperature path, whose transition this route exists to avoid: it
    # is scored (its pilot Ẑ certifies a floor too) but sampled along only when asked for.
    along = [item for item in scored if item[0].cut >= 0] or scored
    best, chosen, pilot_steps = max(along, key=lambda item: item[0].pilot_log_z)
    candidates = tuple(item[0] for item in scored)
    positions, _, _ = plan_positions(pilot_steps, chosen.n_points, n_levels - 1)
    levels = PathLevels(chosen, positions)
    anchor = chosen.anchor_log_z
    own_recompute, own_group_recompute = recompute, group_recompute

    # The levels' densities are divided by Z_0, so the estimators give log(Z_k / Z_0).
    def recompute(samples: TemperedSamples) -> LogZEstimate:
        estimate = own_recompute(samples)
        return dataclasses.replace(estimate, log_z=estimate.log_z + anchor)

    def group_recompute(samples: TemperedSamples) -> LogZEstimate:
        estimate = own_group_recompute(samples)
        return dataclasses.replace(estimate, log_z=estimate.log_z + anchor)

    pilot_log_z, level_cost = pilot_level_log_z(
        levels, n_chains=level_pilot_chains, substeps=level_pilot_substeps, generator=generator
    )
    earlier = path_cost + level_cost

    options: dict[str, Any] = {
        "n_chains": n_chains,
        "prior": prior,
        "generator": generator,
        "record_log_densities": record_log_densities,
        "max_log_densities": max_log_densities,
    }
    samples = collect_trajectory_samples(
        levels,
        n_sweeps=n_sweeps,
        initial_log_z=pilot_log_z,
        n_initial_iterations=n_initial_iterations,
        initial_sweeps=initial_sweeps,
        stop_tolerance=stop_tolerance,
        **options,
    )
    spent = int(samples.block_sweeps.sum())
    if max_sweeps is None:
        max_sweeps = spent if fixed else max(DEFAULT_MAX_SWEEPS, spent)
    max_sweeps = check_positive_int(max_sweeps, "max_sweeps")
    rounds: list[BudgetRound] = []
    while True:
        estimate = recompute(samples)
        diagnosis = diagnose(samples, recompute, estimate, group_recompute=group_recompute)
        # Neither the pilot's floor nor the certified bound is a reason to grow here (the
        # verdict still applies both): a mode missing from every trajectory path stays missing
        # however long the chains run along it (MNIST CD-1: 12.4–12.6 nats low in each of four
        # rounds, 1 to 17 round trips per chain).
        failures = diagnosis.failures(strict=True) + precision_failures(estimate, target_stderr, None)
        rounds.append(
            BudgetRound(
                initial_sweeps=int(samples.block_sweeps[: samples.n_initial_iterations].sum()),
                long_run_sweeps=samples.n_sweeps,
                log_z=estimate.log_z,
                stderr=estimate.stderr,
                diagnosis=diagnosis,
                failures=failures,
            )
        )
        next_sweeps = 2 * samples.n_sweeps
        if not failures or spent + next_sweeps > max_sweeps:
            break
        earlier += samples.n_chains * int(samples.block_sweeps.sum())
        samples = collect_trajectory_samples(
            levels,
            n_sweeps=next_sweeps,
            initial_log_z=next_log_z_hat(samples),
            n_initial_iterations=0,
            start=samples.final_state,
            **options,
        )
        spent += next_sweeps
    passed = not rounds[-1].failures
    budget = TemperedBudget(
        ladder="trajectory",
        placed=None,
        rounds=tuple(rounds),
        max_sweeps=max_sweeps,
        sweeps_per_chain=spent,
        cost_sweeps=earlier + samples.n_chains * int(samples.block_sweeps.sum()),
        passed=passed,
        stop_reason="checks passed"
        if passed
        else ("fixed budget" if fixed else f"max_sweeps reached ({max_sweeps})"),
        target_stderr=target_stderr,
    )
    samples = dataclasses.replace(samples, budget=budget, earlier_cost_sweeps=earlier)
    inner = dataclasses.replace(estimate.info, samples=samples, budget=budget)
    info = TrajectoryTemperedInfo(
        estimator=inner,
        anchor_log_z=anchor,
        samples=samples,
        budget=budget,
        neighbour_overlap=getattr(inner, "neighbour_overlap", None),
        path=best.label,
        positions=positions,
        updates=chosen.updates.clone(),
        candidates=candidates,
        pilot_log_z=pilot_log_z,
        pilot_cost_sweeps=path_cost + level_cost,
    )
    floor = pilot_check(estimate.log_z, estimate.stderr, candidates)
    return dataclasses.replace(
        estimate,
        method=method,
        cost_sweeps=samples.cost_sweeps,
        info=info,
        reliable=estimate.reliable and floor is None,
        warnings=tuple(estimate.warnings) + ((floor,) if floor else ()),
    )


_OPTIONS_DOC = """
    Parameters
    ----------
    model : RBM
        The model whose ``log Z`` is wanted: the end of every path.
    trajectory : Trajectory, str, Path, or sequence of RBMs or paths
        The snapshots saved while training ``model`` (as for ``trajectory-ais``).
    generator : torch.Generator or int, optional
    n_chains : int, default 100
    n_levels : int, default 100
        Levels at equal thermodynamic length (at least every point of the chosen path).
    n_sweeps : int, optional
        Long-run sweeps of round 0 (1,000). Given without ``max_sweeps``, the only round.
    max_sweeps : int, optional
        Sweeps per chain the budget may grow to (16,000).
    path : {"auto", "trajectory", "base"} or int, default "auto"
    n_candidates : int, default 12
    pilot_chains : int, default 64
    pilot_step_std : float, default 0.25
        The path pilot's (as for ``trajectory-ais``).
    level_pilot_chains : int, default 100
    level_pilot_substeps : int, default 10
        The AIS run that gives the levels' starting weights.
    initial_sweeps : int, default 50
    n_initial_iterations : int, default 10
    stop_tolerance : float, default 0.1
    prior : optional
        Over the levels (uniform; as for ``rts``).
    target_stderr : float, optional
        A standard error (nats) the budget grows towards.
    lower_bound : LowerBound, optional
        A certified bound (``estimate_log_z`` passes its witness); accepted for the common
        interface, it does not grow this budget: a mode the path misses stays missed, and the
        verdict applies the bound.
"""


@register_estimator("trajectory-rts")
def trajectory_rts(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    generator: torch.Generator | int | None = None,
    n_chains: int = 100,
    n_levels: int = DEFAULT_LEVELS,
    n_sweeps: int | None = None,
    max_sweeps: int | None = None,
    path: str | int = "auto",
    n_candidates: int = 12,
    pilot_chains: int = 64,
    pilot_step_std: float = 0.25,
    level_pilot_chains: int = 100,
    level_pilot_substeps: int = 10,
    initial_sweeps: int = 50,
    n_initial_iterations: int = 10,
    stop_tolerance: float = 0.1,
    prior: Any = None,
    target_stderr: float | None = None,
    lower_bound: LowerBound | None = None,
) -> LogZEstimate:
    return _estimate(
        model,
        "trajectory-rts",
        rts_from_samples,
        rts_from_samples,
        record_log_densities=False,
        max_log_densities=1,
        **_locals_without_model(locals()),
    )


@register_estimator("trajectory-mbar")
def trajectory_mbar(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    generator: torch.Generator | int | None = None,
    n_chains: int = 100,
    n_levels: int = DEFAULT_LEVELS,
    n_sweeps: int | None = None,
    max_sweeps: int | None = None,
    path: str | int = "auto",
    n_candidates: int = 12,
    pilot_chains: int = 64,
    pilot_step_std: float = 0.25,
    level_pilot_chains: int = 100,
    level_pilot_substeps: int = 10,
    initial_sweeps: int = 50,
    n_initial_iterations: int = 10,
    stop_tolerance: float = 0.1,
    prior: Any = None,
    target_stderr: float | None = None,
    lower_bound: LowerBound | None = None,
    max_log_densities: int = 1_000_000,
) -> LogZEstimate:
    return _estimate(
        model,
        "trajectory-mbar",
        mbar_from_samples,
        mbar_for_groups,
        record_log_densities=True,
        **_locals_without_model(locals()),
    )


def _locals_without_model(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name != "model"}


trajectory_rts.__doc__ = (
    """Estimate ``log Z`` by RTS (Carlson et al. 2016) on levels along a training trajectory.

    The module docstring says how the path, the levels and the budget are chosen."""
    + _OPTIONS_DOC
    + """
    Returns
    -------
    LogZEstimate
        ``method="trajectory-rts"``; ``info`` a :class:`TrajectoryTemperedInfo`; ``cost_sweeps``
        counts both pilots and every round.
    """
)
trajectory_mbar.__doc__ = (
    """Estimate ``log Z`` by MBAR (pymbar) on the samples of ``trajectory-rts``'s sampler.
"""
    + _OPTIONS_DOC
    + """    max_log_densities : int, default 1,000,000
        Cap on the ``N × K`` log-densities kept for MBAR (the long run is thinned to fit).

    Returns
    -------
    LogZEstimate
        ``method="trajectory-mbar"``; ``info`` a :class:`TrajectoryTemperedInfo`.
    """
)
