"""RTS and MBAR along a training trajectory: ``trajectory-rts`` and ``trajectory-mbar``.

The tempered estimators of :mod:`boltzlab.estimators.tempered.rts` and :mod:`boltzlab.estimators.tempered.mbar`
on the levels of :mod:`boltzlab.estimators.trajectory.levels` instead of a temperature ladder
(docs/algorithms.md §4.6, docs/trust.md). How the run is set up and sized:

1. **Path.** The pilot of trajectory AIS
   (:func:`~boltzlab.estimators.trajectory.ais.score_paths`) scores the straight base-to-model
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
   tempered checks fail (level balance, round trips, chain groups), another round with the
   long run doubled continues from where the chains are, with the weights updated to the last
   round's estimate, up to ``max_sweeps`` (16,000) sweeps per chain; once they pass, an error
   bar above ``target_stderr`` (0.1 nats) adds chains, up to ``max_chains`` (800): the rounds
   of :func:`boltzlab.estimators.tempered.rounds.run_rounds`. An estimate below a certified
   bound or the pilot's floor does not grow the run (the verdict flags it): a mode missing
   from every trajectory path stays missing however long the chains run along it (MNIST
   CD-1: 12.4–12.6 nats low in each of four rounds, 1 to 17 round trips per chain).

The pilot's floor is trajectory AIS's certified check: each pilot ``Ẑ`` is unbiased, so an
estimate more than ``log(m/10⁻³)`` plus four standard errors below the best of ``m`` pilots
has lost mass (:func:`~boltzlab.estimators.trajectory.ais.pilot_check`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.errors import ValidationError
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.chains import joined_start, max_chains_for
from boltzlab.estimators.tempered.checks import tempered_verdict_checks
from boltzlab.estimators.tempered.mbar import mbar_for_groups, mbar_from_samples
from boltzlab.estimators.tempered.rounds import (
    TemperedBudget,
    next_log_z_hat,
    run_rounds,
)
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.trajectory.ais import (
    PathCandidate,
    check_pilot_options,
    pilot_check,
    resolve_trajectory,
    score_paths,
)
from boltzlab.estimators.trajectory.levels import PathLevels, collect_trajectory_samples, pilot_level_log_z
from boltzlab.estimators.trajectory.path import Kernel, plan_positions
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR, check_target_stderr
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = ["DEFAULT_OPTIONS", "TrajectoryTemperedInfo", "trajectory_mbar", "trajectory_rts"]

#: Every option of both estimators and its default (the docstrings say what each means).
DEFAULT_OPTIONS: dict[str, Any] = {
    "n_chains": 100,
    "n_levels": 100,
    "n_sweeps": None,
    "max_sweeps": None,
    "path": "auto",
    "n_candidates": 12,
    "pilot_chains": 64,
    "pilot_step_std": 0.25,
    "level_pilot_chains": 100,
    "level_pilot_substeps": 10,
    "initial_sweeps": 50,
    "n_initial_iterations": 10,
    "stop_tolerance": 0.1,
    "prior": None,
    "target_stderr": DEFAULT_TARGET_STDERR,
    "max_chains": None,
}
#: MBAR's own: the cap on the ``N × K`` log-densities kept (the long run is thinned to fit).
MBAR_MAX_LOG_DENSITIES = 1_000_000


@dataclass(frozen=True)
class TrajectoryTemperedInfo:
    """Diagnostics of a ``trajectory-rts`` or ``trajectory-mbar`` estimate.

    Attributes
    ----------
    estimator : Any
        The estimator's own info (:class:`~boltzlab.estimators.tempered.rts.RTSInfo` or
        :class:`~boltzlab.estimators.tempered.mbar.MBARInfo`) on the levels, whose ``betas`` are the
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
        The path chosen (a :class:`~boltzlab.estimators.trajectory.ais.PathCandidate` label).
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


def _positive_number(value: Any, name: str) -> float:
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0,
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
    given: dict[str, Any],
    max_log_densities: int | None,
) -> LogZEstimate:
    unknown = sorted(set(given) - set(DEFAULT_OPTIONS))
    if unknown:
        own = ["max_log_densities"] if max_log_densities is not None else []
        accepted = ", ".join(["trajectory", "generator", *DEFAULT_OPTIONS, *own])
        raise ValidationError(f"unknown {method} option(s) {', '.join(unknown)}; {method} takes {accepted}")
    if not isinstance(model, RBM):
        raise ValidationError(f"{method} estimates log Z of an RBM, got a {type(model).__name__}")
    o = {**DEFAULT_OPTIONS, **given}
    n_chains = check_positive_int(o["n_chains"], "n_chains")
    require(n_chains >= 2, f"{method} needs n_chains >= 2 (its error bar comes from chains), got {n_chains}")
    n_levels = check_positive_int(o["n_levels"], "n_levels")
    require(n_levels >= 2, f"n_levels must be at least 2 (the anchor and the model), got {n_levels}")
    n_candidates, pilot_chains = check_pilot_options(
        o["path"], o["n_candidates"], o["pilot_chains"], o["pilot_step_std"]
    )
    level_pilot_chains = check_positive_int(o["level_pilot_chains"], "level_pilot_chains")
    level_pilot_substeps = check_positive_int(o["level_pilot_substeps"], "level_pilot_substeps")
    fixed = o["n_sweeps"] is not None and o["max_sweeps"] is None
    n_sweeps = 1000 if o["n_sweeps"] is None else check_positive_int(o["n_sweeps"], "n_sweeps")
    max_sweeps = None if o["max_sweeps"] is None else check_positive_int(o["max_sweeps"], "max_sweeps")
    max_chains = max_chains_for(
        {key: given[key] for key in ("n_chains", "max_chains") if key in given}, n_chains
    )
    # run_rounds drops it where the caller fixed the sweeps or the chains.
    target_stderr = check_target_stderr(o["target_stderr"])
    _positive_number(o["stop_tolerance"], "stop_tolerance")
    generator = resolve_generator(generator, model.device)
    trajectory, _ = resolve_trajectory(trajectory, model)
    if trajectory.n_points == 1:  # the model is its own zero-weight anchor: log Z is known exactly
        return LogZEstimate(log_z=trajectory.anchor_log_z, stderr=0.0, method=method, info=None)

    scored, path_cost = score_paths(
        trajectory,
        model,
        Kernel(operators.resolve("gibbs"), 1, False),
        o["path"],
        n_chains=pilot_chains,
        n_candidates=n_candidates,
        step_std=float(o["pilot_step_std"]),
        generator=generator,
    )
    # The base path is the temperature path, whose transition this route exists to avoid: it
    # is scored (its pilot Ẑ certifies a floor too) but sampled along only when asked for.
    along = [item for item in scored if item[0].cut >= 0] or scored
    best, chosen, pilot_steps = max(along, key=lambda item: item[0].pilot_log_z)
    candidates = tuple(item[0] for item in scored)
    positions, _, _ = plan_positions(pilot_steps, chosen.n_points, n_levels - 1)
    levels = PathLevels(chosen, positions)
    pilot_log_z, level_cost = pilot_level_log_z(
        levels, n_chains=level_pilot_chains, substeps=level_pilot_substeps, generator=generator
    )
    anchor = chosen.anchor_log_z

    # The levels' densities are divided by Z_0, so the estimators give log(Z_k / Z_0).
    def shifted(estimator: Callable[[TemperedSamples], LogZEstimate]) -> Callable[..., LogZEstimate]:
        def estimate(samples: TemperedSamples) -> LogZEstimate:
            found = estimator(samples)
            return dataclasses.replace(found, log_z=found.log_z + anchor)

        return estimate

    sampling = {
        "n_chains": n_chains,
        "prior": o["prior"],
        "generator": generator,
        "record_log_densities": max_log_densities is not None,
        "max_log_densities": max_log_densities or 1,
    }
    samples = collect_trajectory_samples(
        levels,
        n_sweeps=n_sweeps,
        initial_log_z=pilot_log_z,
        n_initial_iterations=o["n_initial_iterations"],
        initial_sweeps=o["initial_sweeps"],
        stop_tolerance=o["stop_tolerance"],
        **sampling,
    )

    def more(samples: TemperedSamples, n_sweeps: int, **changes: Any) -> TemperedSamples:
        return collect_trajectory_samples(
            levels,
            **{
                **sampling,
                "n_chains": samples.n_chains,
                "n_sweeps": n_sweeps,
                "initial_log_z": next_log_z_hat(samples),
                "n_initial_iterations": 0,
                "start": samples.final_state,
                **changes,
            },
        )

    def widen(
        samples: TemperedSamples, n_chains: int, n_sweeps: int, burn_in: int
    ) -> tuple[TemperedSamples, int]:
        # Fresh chains from the anchor climb for burn_in sweeps, unrecorded (tempered_chains).
        fresh = more(
            samples, burn_in, n_chains=n_chains - samples.n_chains, start=None, record_log_densities=False
        )
        start = joined_start(samples.final_state, fresh.final_state)
        return more(samples, n_sweeps, n_chains=n_chains, start=start), fresh.n_chains * burn_in

    estimate = run_rounds(
        samples,
        more=more,
        widen=widen,
        recompute=shifted(recompute),
        group_recompute=shifted(group_recompute),
        fixed=fixed,
        max_sweeps=max_sweeps,
        max_chains=max_chains,
        target_stderr=target_stderr,
        bound=None,  # see the module docstring: the verdict applies it, the budget does not
        ladder="trajectory",
        placed=None,
        earlier=path_cost + level_cost,
    )
    inner = estimate.info
    info = TrajectoryTemperedInfo(
        estimator=inner,
        anchor_log_z=anchor,
        samples=inner.samples,
        budget=inner.budget,
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
        info=info,
        failed=estimate.failed or floor is not None,
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
    **options
        Any of :data:`DEFAULT_OPTIONS`:

        - ``n_chains`` (100); given without ``max_chains``, the chains run;
        - ``max_chains`` (800): chains the budget may grow to;
        - ``n_levels`` (100): levels at equal thermodynamic length (at least every point of
          the chosen path);
        - ``n_sweeps``: long-run sweeps of round 0 (1,000); given without ``max_sweeps``, the
          only round;
        - ``max_sweeps``: sweeps per chain the budget may grow to (16,000);
        - ``path`` ("auto"), ``n_candidates`` (12), ``pilot_chains`` (64), ``pilot_step_std``
          (0.25): the path pilot's, as for ``trajectory-ais``;
        - ``level_pilot_chains`` (100), ``level_pilot_substeps`` (10): the AIS run that gives
          the levels' starting weights;
        - ``initial_sweeps`` (50), ``n_initial_iterations`` (10), ``stop_tolerance`` (0.1),
          ``prior`` (uniform): as for ``rts``;
        - ``target_stderr`` (0.1): the standard error (nats) that more chains are added
          towards once the checks pass.
"""


#: The ``boltzlab logz`` flags of the tempered methods along the trajectory (they sweep with Gibbs).
TRAJECTORY_TEMPERED_FLAGS = frozenset({"chains", "temperatures", "sweeps", "target-stderr", "max-chains"})
# The record of a tempered method along the trajectory: the tempered family's checks, and
# ``--temperatures`` sets its levels along the path.
_register_along_trajectory = functools.partial(
    register_estimator,
    family="trajectory",
    needs_trajectory=True,
    checks=tempered_verdict_checks,
    flags=TRAJECTORY_TEMPERED_FLAGS,
    keywords={"temperatures": "n_levels"},
)


@_register_along_trajectory("trajectory-rts")
def trajectory_rts(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    generator: torch.Generator | int | None = None,
    **options: Any,
) -> LogZEstimate:
    return _estimate(
        model,
        "trajectory-rts",
        rts_from_samples,
        rts_from_samples,
        trajectory=trajectory,
        generator=generator,
        given=options,
        max_log_densities=None,
    )


@_register_along_trajectory("trajectory-mbar")
def trajectory_mbar(
    model: RBM,
    *,
    trajectory: Trajectory | str | Path | Sequence[Any] | None = None,
    generator: torch.Generator | int | None = None,
    max_log_densities: int = MBAR_MAX_LOG_DENSITIES,
    **options: Any,
) -> LogZEstimate:
    return _estimate(
        model,
        "trajectory-mbar",
        mbar_from_samples,
        mbar_for_groups,
        trajectory=trajectory,
        generator=generator,
        given=options,
        max_log_densities=check_positive_int(max_log_densities, "max_log_densities"),
    )


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
