"""RTS and MBAR along a training trajectory: ``trajectory-rts`` and ``trajectory-mbar``.

The tempered estimators of :mod:`boltzlab.estimators.tempered.rts` and :mod:`boltzlab.estimators.tempered.mbar`
on levels placed along the trajectory ("The levels" below) instead of a temperature ladder
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
   of :func:`boltzlab.estimators.tempered.budget.run_rounds`. An estimate below a certified
   bound or the pilot's floor does not grow the run (the verdict flags it): a mode missing
   from every trajectory path stays missing however long the chains run along it (MNIST
   CD-1: 12.4–12.6 nats low in each of four rounds, 1 to 17 round trips per chain).

The pilot's floor is trajectory AIS's certified check: each pilot ``Ẑ`` is unbiased, so an
estimate more than ``log(m/10⁻³)`` plus four standard errors below the best of ``m`` pilots
has lost mass (:func:`~boltzlab.estimators.trajectory.ais.pilot_check`).

**The levels.** The samplers of :mod:`boltzlab.estimators.tempered.samples` move chains between inverse
temperatures ``β_k`` of one model. On a model trained to sharpness that path can cross a
first-order-like transition: above it most of the mass sits in an ordered phase that chains
climbing from the base enter too rarely, and no weights fix that (docs/trust.md, "Open":
RTS with the exact ``log Z(β_k)`` as its weights was still 1.2 nats low on MNIST CD-25). The
parameters a model visited while it was trained form another path, along which the modes
grow gradually (docs/algorithms.md §4.6). Here the levels are positions ``t_0 = 0 < … <
t_{K−1} = P − 1`` on a piecewise-linear path through ``P`` parameter points
(:mod:`boltzlab.estimators.trajectory.path`): level ``k`` is the RBM ``θ(t_k)``, level 0 the
zero-weight anchor (exact samples, exact ``log Z_0``) and the last level the model.

Simulated tempering on these levels samples ``q(v, k) ∝ f_k(v)·r_k/Ẑ_k`` with the hidden
layer summed out, ``log f_k(v) = b(t_k)·v + Σ_j softplus(a_j(t_k))``. Each step is

1. ``h ~ p_{θ(t_k)}(h | v)`` and ``v ~ p_{θ(t_k)}(v | h)`` at each chain's level (one Gibbs
   sweep; the visible update groups chains by segment, two matrix products per segment);
2. ``c + vW`` and ``b·v`` at all ``P`` points (one matrix product), from which ``log f_k(v)``
   at every level is the softplus of the interpolated pre-activations;
3. a Gibbs draw of the level from ``q(k | v)``.

Collapsed over ``h``, steps 1 and 3 each leave ``q(v, k)`` invariant. The densities are
divided by the anchor's exact ``Z_0``, so level 0 is normalised as RTS's eq. 9 expects and
every level's estimate is an absolute ``log Z``. The initial iterations, the long run and the
statistics kept are those of :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`
(a :class:`~boltzlab.estimators.tempered.samples.TemperedSamples` whose ``betas`` are the
positions divided by ``P − 1``), so RTS, TS and MBAR read them unchanged; path derivatives
(TI) are not recorded. One process runs all chains.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.budget import (
    DEFAULT_N_SWEEPS,
    TemperedBudget,
    joined_start,
    max_chains_for,
    next_log_z_hat,
    run_rounds,
)
from boltzlab.estimators.tempered.checks import tempered_verdict_checks
from boltzlab.estimators.tempered.levels import check_initial_log_z, resolve_log_prior
from boltzlab.estimators.tempered.mbar import mbar_for_groups, mbar_from_samples
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.tempered.sampler import LevelState, SamplerState
from boltzlab.estimators.tempered.samples import RunPlan, TemperedSamples, run_levels
from boltzlab.estimators.trajectory.ais import (
    PathCandidate,
    check_pilot_options,
    pilot_check,
    resolve_trajectory,
    score_paths,
)
from boltzlab.estimators.trajectory.path import Kernel, PathTensors, anneal, plan_positions
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR, check_target_stderr
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory
from boltzlab.numerics import softplus
from boltzlab.rng import rand, resolve_generator
from boltzlab.validation import check_positive_int, require

__all__ = [
    "PathLevels",
    "TrajectoryTemperedInfo",
    "TrajectoryTemperedOptions",
    "collect_trajectory_samples",
    "pilot_level_log_z",
    "trajectory_mbar",
    "trajectory_rts",
]


@dataclass(frozen=True)
class TrajectoryTemperedOptions:
    """Every option of ``trajectory-rts`` and ``trajectory-mbar``, with its default, checked once.

    Built by :meth:`from_given` from what the caller passed (unknown names refused, each value
    checked under its own name); the estimators read nothing else. What each means is in the
    estimators' docstrings. ``None`` is "not given" and keeps the default, except for
    ``target_stderr``, where it means no precision target; ``n_sweeps``, ``max_sweeps`` and
    ``max_chains`` are ``None`` when not given, because a budget given is a budget kept
    (``fixed``, ``max_chains``).
    """

    n_chains: int = 100
    n_levels: int = 100
    n_sweeps: int | None = None
    max_sweeps: int | None = None
    path: str = "auto"
    n_candidates: int = 12
    pilot_chains: int = 64
    pilot_step_std: float = 0.25
    level_pilot_chains: int = 100
    level_pilot_substeps: int = 10
    initial_sweeps: int = 50
    n_initial_iterations: int = 10
    stop_tolerance: float = 0.1
    prior: Any = None
    target_stderr: float | None = DEFAULT_TARGET_STDERR
    max_chains: int | None = None

    @classmethod
    def from_given(cls, given: Mapping[str, Any], method: str, own: Sequence[str] = ()) -> Self:
        """The options of ``given``, every value checked; ValidationError naming the first bad one."""
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            accepted = ", ".join(["trajectory", "generator", *names, *own])
            raise ValidationError(
                f"unknown {method} option(s) {', '.join(unknown)}; {method} takes {accepted}"
            )
        # None is "not given" (as for the temperature route's TemperedOptions): the default holds.
        defaults = {field.name: field.default for field in dataclasses.fields(cls)}
        given = {
            name: value
            for name, value in given.items()
            if value is not None or defaults[name] is None or name == "target_stderr"
        }
        o = cls(**given)
        n_chains = check_positive_int(o.n_chains, "n_chains")
        require(
            n_chains >= 2, f"{method} needs n_chains >= 2 (its error bar comes from chains), got {n_chains}"
        )
        n_levels = check_positive_int(o.n_levels, "n_levels")
        require(n_levels >= 2, f"n_levels must be at least 2 (the anchor and the model), got {n_levels}")
        n_candidates, pilot_chains = check_pilot_options(
            o.path, o.n_candidates, o.pilot_chains, o.pilot_step_std
        )
        level_pilot_chains = check_positive_int(o.level_pilot_chains, "level_pilot_chains")
        level_pilot_substeps = check_positive_int(o.level_pilot_substeps, "level_pilot_substeps")
        n_sweeps = None if o.n_sweeps is None else check_positive_int(o.n_sweeps, "n_sweeps")
        max_sweeps = None if o.max_sweeps is None else check_positive_int(o.max_sweeps, "max_sweeps")
        max_chains = max_chains_for(
            {key: given[key] for key in ("n_chains", "max_chains") if key in given}, n_chains
        )
        # run_rounds drops it where the caller fixed the sweeps or the chains.
        target_stderr = check_target_stderr(o.target_stderr)
        _positive_number(o.stop_tolerance, "stop_tolerance")
        return dataclasses.replace(
            o,
            n_chains=n_chains,
            n_levels=n_levels,
            n_sweeps=n_sweeps,
            max_sweeps=max_sweeps,
            n_candidates=n_candidates,
            pilot_chains=pilot_chains,
            pilot_step_std=float(o.pilot_step_std),
            level_pilot_chains=level_pilot_chains,
            level_pilot_substeps=level_pilot_substeps,
            target_stderr=target_stderr,
            max_chains=max_chains,
        )

    @property
    def fixed(self) -> bool:
        """``n_sweeps`` given without ``max_sweeps``: exactly one round."""
        return self.n_sweeps is not None and self.max_sweeps is None


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
    # Long because it runs the module docstring's steps in order (path, levels, rounds, floor)
    # around closures that share the levels.
    if not isinstance(model, RBM):
        raise ValidationError(f"{method} estimates log Z of an RBM, got a {type(model).__name__}")
    o = TrajectoryTemperedOptions.from_given(
        given, method, own=["max_log_densities"] if max_log_densities is not None else []
    )
    generator = resolve_generator(generator, model.device)
    trajectory, _ = resolve_trajectory(trajectory, model)
    if trajectory.n_points == 1:  # the model is its own zero-weight anchor: log Z is known exactly
        return LogZEstimate(log_z=trajectory.anchor_log_z, stderr=0.0, method=method, info=None)

    scored, path_cost = score_paths(
        trajectory,
        model,
        Kernel(operators.resolve("gibbs"), 1, False),
        o.path,
        n_chains=o.pilot_chains,
        n_candidates=o.n_candidates,
        step_std=o.pilot_step_std,
        generator=generator,
    )
    # The base path is the temperature path, whose transition this route exists to avoid: it
    # is scored (its pilot Ẑ certifies a floor too) but sampled along only when asked for.
    along = [item for item in scored if item[0].cut >= 0] or scored
    best, chosen, pilot_steps = max(along, key=lambda item: item[0].pilot_log_z)
    candidates = tuple(item[0] for item in scored)
    positions, _, _ = plan_positions(pilot_steps, chosen.n_points, o.n_levels - 1)
    levels = PathLevels(chosen, positions)
    pilot_log_z, level_cost = pilot_level_log_z(
        levels, n_chains=o.level_pilot_chains, substeps=o.level_pilot_substeps, generator=generator
    )
    anchor = chosen.anchor_log_z

    # The levels' densities are divided by Z_0, so the estimators give log(Z_k / Z_0).
    def shifted(estimator: Callable[[TemperedSamples], LogZEstimate]) -> Callable[..., LogZEstimate]:
        def estimate(samples: TemperedSamples) -> LogZEstimate:
            found = estimator(samples)
            return dataclasses.replace(found, log_z=found.log_z + anchor)

        return estimate

    sampling = {
        "n_chains": o.n_chains,
        "prior": o.prior,
        "generator": generator,
        "record_log_densities": max_log_densities is not None,
        "max_log_densities": max_log_densities or 1,
    }
    samples = collect_trajectory_samples(
        levels,
        n_sweeps=DEFAULT_N_SWEEPS if o.n_sweeps is None else o.n_sweeps,
        initial_log_z=pilot_log_z,
        n_initial_iterations=o.n_initial_iterations,
        initial_sweeps=o.initial_sweeps,
        stop_tolerance=o.stop_tolerance,
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
        # Fresh chains from the anchor climb for burn_in sweeps, unrecorded (estimators/tempered/budget.py, "More chains").
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
        fixed=o.fixed,
        max_sweeps=o.max_sweeps,
        max_chains=o.max_chains,
        target_stderr=o.target_stderr,
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
        Any field of :class:`TrajectoryTemperedOptions`:

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
    options=TrajectoryTemperedOptions,
    checks=tempered_verdict_checks,
    matched=lambda sweeps_per_chain: {"n_sweeps": sweeps_per_chain},  # the long run's sweeps
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


# Work-space budget (elements of the (chains, K, n_hidden) pre-activations) per chunk of levels.
_CHUNK_ELEMENTS = 1 << 22


class PathLevels:
    """``K`` levels at ascending positions of a parameter path, with the hidden layer summed out.

    Parameters
    ----------
    path : Trajectory
        ``P ≥ 2`` points, from the zero-weight anchor to the model.
    positions : Tensor, shape (K,), float64
        Strictly ascending, from exactly 0 to exactly ``P − 1``.
    """

    def __init__(self, path: Trajectory, positions: Tensor) -> None:
        positions = torch.as_tensor(positions, dtype=torch.float64).cpu()
        n_points = path.n_points
        if n_points < 2:
            raise ValidationError("a path of levels needs at least two points (the anchor and the model)")
        if (
            positions.dim() != 1
            or positions.numel() < 2
            or float(positions[0]) != 0.0
            or float(positions[-1]) != float(n_points - 1)
            or not bool((positions[1:] > positions[:-1]).all())
        ):
            raise ValidationError(
                f"level positions must ascend strictly from 0 to {n_points - 1} (the path's last point)"
            )
        self.path, self.positions = path, positions
        self.n_points, self.n_levels = n_points, positions.numel()
        self.n_visible, self.n_hidden = path.n_visible, path.n_hidden
        device, dtype = path.device, path.dtype
        segment = positions.floor().clamp(max=n_points - 2).to(torch.int64)
        self.segment = segment.to(device)
        self.fraction = (positions - segment.to(torch.float64)).to(device)
        self.fraction_model = self.fraction.to(dtype)
        self.weights, self.visible_bias = path.weights, path.visible_bias
        # (V, P·H): c + vW at every point in one product.
        self.weights_flat = path.weights.permute(1, 0, 2).reshape(self.n_visible, n_points * self.n_hidden)
        self.hidden_flat = path.hidden_bias.reshape(-1)
        self.visible_bias_t = path.visible_bias.to(torch.float64).T.contiguous()
        # Normalises level 0: every level's log Z is then absolute.
        self.anchor_log_z = path.anchor_log_z
        self.betas = positions / (n_points - 1)  # float64, CPU: the levels as the samples report them
        self.chain_betas = self.betas.to(device=device, dtype=dtype)

    @property
    def device(self) -> torch.device:
        return self.path.device

    @property
    def dtype(self) -> torch.dtype:
        return self.path.dtype

    def point_terms(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """``c + vW`` (``(n, P, H)``, model dtype) and ``b·v`` (``(n, P)``, float64) at every point."""
        pre = torch.addmm(self.hidden_flat, v, self.weights_flat).view(
            v.shape[0], self.n_points, self.n_hidden
        )
        return pre, v.to(torch.float64) @ self.visible_bias_t

    def log_f_all(self, terms: tuple[Tensor, Tensor]) -> Tensor:
        """``log f_k(v) − log Z_0`` at every level from :meth:`point_terms`; shape ``(n, K)``, float64."""
        pre, linear = terms
        n = pre.shape[0]
        left, right = self.segment, self.segment + 1
        out = torch.lerp(linear[:, left], linear[:, right], self.fraction[None, :]) - self.anchor_log_z
        size = max(1, _CHUNK_ELEMENTS // max(1, n * self.n_hidden))
        for start in range(0, self.n_levels, size):
            chunk = slice(start, min(start + size, self.n_levels))
            a = torch.lerp(
                pre[:, left[chunk]].to(torch.float64),
                pre[:, right[chunk]].to(torch.float64),
                self.fraction[chunk][None, :, None],
            )
            out[:, chunk] += softplus(a).sum(2)
        return out

    def hidden_logits(self, pre: Tensor, levels: Tensor) -> Tensor:
        """``a(t_k)`` of each chain at its level ``k``; shape ``(n, H)``, model dtype."""
        rows = torch.arange(pre.shape[0], device=pre.device)
        segment = self.segment[levels]
        return torch.lerp(pre[rows, segment], pre[rows, segment + 1], self.fraction_model[levels][:, None])

    def visible_logits(self, h: Tensor, levels: Tensor) -> Tensor:
        """``b(t_k) + h W(t_k)ᵀ`` of each chain at its level; shape ``(n, V)``, model dtype.

        Chains are grouped by segment: two products per occupied segment.
        """
        out = torch.empty((h.shape[0], self.n_visible), dtype=self.dtype, device=self.device)
        segments = self.segment[levels]
        fractions = self.fraction_model[levels][:, None]
        for segment in torch.unique(segments).tolist():
            rows = (segments == segment).nonzero().squeeze(1)
            hidden = h[rows]
            left = torch.addmm(self.visible_bias[segment], hidden, self.weights[segment].T)
            right = torch.addmm(self.visible_bias[segment + 1], hidden, self.weights[segment + 1].T)
            out[rows] = torch.lerp(left, right, fractions[rows])
        return out

    # ------------------------------------------------------------------ the level space
    # (boltzlab.estimators.tempered.sampler.LevelSpace: the tempered family's level sampler
    # runs on these levels as it runs on a model's ladder)
    def start(self, n_chains: int, start: SamplerState | None, *, generator: torch.Generator) -> LevelState:
        """Exact anchor draws at level 0, or ``start`` (a previous run's final state) checked."""
        if start is None:
            v = self.path.sample_anchor(n_chains, generator=generator).layers[0]
            levels = torch.zeros(n_chains, dtype=torch.int64, device=self.device)
        else:
            v, levels = (
                start.chains.layers[0],
                torch.as_tensor(start.levels, dtype=torch.int64).to(self.device),
            )
            if v.shape != (n_chains, self.n_visible) or levels.shape != (n_chains,):
                raise ValidationError(f"start must hold n_chains={n_chains} visible states and levels")
        return self.place((v,), self.terms((v,)), levels, generator=generator)

    def terms(self, layers: tuple[Tensor, ...]) -> tuple[Tensor, Tensor]:
        """:meth:`point_terms` of the visible states."""
        return self.point_terms(layers[0])

    def densities(self, terms: tuple[Tensor, Tensor]) -> tuple[Tensor, None]:
        """:meth:`log_f_all`; a path keeps no path derivatives."""
        return self.log_f_all(terms), None

    def sweep(self, state: LevelState, *, generator: torch.Generator) -> tuple[Tensor, ...]:
        """One Gibbs sweep (hidden, then visible) of every chain at its level; the new ``(v,)``."""
        pre, _ = state.terms
        h = _bernoulli_logits(self.hidden_logits(pre, state.levels), generator)
        return (_bernoulli_logits(self.visible_logits(h, state.levels), generator),)

    def place(
        self,
        layers: tuple[Tensor, ...],
        terms: tuple[Tensor, Tensor],
        levels: Tensor,
        *,
        generator: torch.Generator,
        values_checked: bool = False,
    ) -> LevelState:
        """The states at ``levels``: nothing to redraw (the sweep draws ``h`` from ``v`` at the level).

        ``values_checked`` is accepted for the protocol; this space's sweep draws its own 0/1
        states without an operator, so there is nothing to spare.

        The chains' ``beta`` holds the level positions over ``P − 1``.
        """
        chains = Chains(layers=layers, beta=self.chain_betas[levels])
        return LevelState(chains=chains, terms=terms, levels=levels)


def _bernoulli_logits(logits: Tensor, generator: torch.Generator) -> Tensor:
    uniform = rand(tuple(logits.shape), generator=generator, dtype=logits.dtype, device=logits.device)
    return (torch.sigmoid(logits) > uniform).to(logits.dtype)


def pilot_level_log_z(
    levels: PathLevels, *, n_chains: int, substeps: int, generator: torch.Generator
) -> tuple[Tensor, int]:
    """AIS's running ``log(Ẑ(t_k)/Z_0)`` at every level, from ``n_chains`` exact anchor draws.

    Trajectory AIS's annealing (:func:`~boltzlab.estimators.trajectory.path.anneal`, one Gibbs
    sweep per step) with ``substeps`` equal steps between neighbouring levels; returns the
    estimates (shape ``(K,)``, float64, CPU; level 0 exactly 0) and the chain-sweeps spent.
    The sampler's weights start there.
    """
    positions = levels.positions.tolist()
    fine = [0.0]
    for start, end in itertools.pairwise(positions):
        fine += [start + (end - start) * j / substeps for j in range(1, substeps)] + [end]
    chains = levels.path.sample_anchor(n_chains, generator=generator)
    kernel = Kernel(operators.resolve("gibbs"), 1, False)
    _, running = anneal(
        PathTensors.of(levels.path), kernel, fine, chains, record="log_z", generator=generator
    )
    assert running is not None  # record="log_z" keeps it
    marks = torch.arange(1, levels.n_levels) * substeps - 1  # increments ending at the levels
    return torch.cat([torch.zeros(1, dtype=torch.float64), running[marks]]), n_chains * (len(fine) - 2)


def collect_trajectory_samples(
    levels: PathLevels,
    *,
    n_chains: int = 100,
    n_sweeps: int = 1000,
    prior: object = None,
    generator: torch.Generator,
    initial_log_z: Sequence[float] | Tensor | None = None,
    n_initial_iterations: int = 10,
    initial_sweeps: int = 50,
    stop_tolerance: float = 0.1,
    record_log_densities: bool = False,
    max_log_densities: int = 1_000_000,
    start: SamplerState | None = None,
) -> TemperedSamples:
    """Simulated tempering over ``levels`` (module docstring) with RTS's statistics.

    The options mean what they mean for
    :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples` (initial iterations
    adapt ``log Ẑ`` with the Rao-Blackwellized ``ĉ``; the long run is one batch). ``start``
    continues a previous run's ``final_state`` on the same levels (its chains' β holds the
    level positions divided by ``P − 1``).
    """
    n_chains = check_positive_int(n_chains, "n_chains")
    plan = RunPlan(
        n_sweeps=n_sweeps,
        n_initial_iterations=n_initial_iterations,
        initial_sweeps=initial_sweeps,
        stop_tolerance=stop_tolerance,
        record_log_densities=record_log_densities,
        max_log_densities=max_log_densities,
    )
    log_prior = resolve_log_prior(prior, levels.betas)
    log_z_hat = check_initial_log_z(initial_log_z, levels.n_levels)
    return run_levels(
        levels,
        plan,
        state=levels.start(n_chains, start, generator=generator),
        betas=levels.betas,
        log_prior=log_prior,
        log_z_hat=log_z_hat,
        generator=generator,
        all_chains=n_chains,
        sharded=False,
        operator="gibbs",
    )
