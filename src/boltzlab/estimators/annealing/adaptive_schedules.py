"""Model-dependent annealing schedules for AIS: VAROPT, GMS13, and deceleration.

**VAROPT** — Kiwaki (2015), "Variational optimization of annealing schedules",
arXiv:1502.05313, re-derived in docs/algorithms.md §5.4 (every equation of our copy was lost;
docs/open-questions.md items 1–4). Under perfect transitions the AIS log-weight has variance
``Σ_k Δβ_k²·g(β_{k−1})`` to first order (Eq. 7), ``g(β) = Var_{p_β}[∂_β log f_β]``. For
``β_k = φ(k/K)``, ``K·Var[log w] → ∫ φ'² g(φ) dt`` (Eq. 8), whose Euler–Lagrange equation
``2gφ'' + g'φ'² = 0`` (Eq. 9) has the first integral ``φ'² g(φ) = const``: the optimal
schedule takes equal steps of ``Λ(β) = ∫_0^β √g``,

    β_k = Λ^{-1}((k/K)·Λ(1)),      K·Var[log w] → Λ(1)² ≤ ∫_0^1 g  (Cauchy–Schwarz).

g is measured by a cheap pilot AIS run on the linear schedule from the on-the-fly importance
weights (after increment k the weighted chains represent ``p_{β_k}``, §4.1), smoothed with a
Gaussian kernel on ``√ĝ`` and floored, and inverted in closed form — the exact solution of
the paper's boundary problem, used instead of its fixed-point iteration (docs/open-questions.md item 3).
The statistic is the hidden-summed derivative ``s_β(v)`` (``"marginal"``, the same form as
the AIS weights; docs/open-questions.md item 2) or, with ``statistic="joint"``, ``Var_{p_β(v,h)}[Δ(v,h)]``.

**Deceleration** — Kiwaki's Algorithm 3 as reconstructed (docs/open-questions.md item 4): one forward pass caps
each increment at δ and stretches the *later* increments proportionally by the clipped
excess, so the schedule still ends at 1 with the same K. (The other reading, rescaling all
unclipped increments including earlier ones, is not implemented.) ``K·δ < 1`` is refused.

**GMS13** — Grosse, Maddison & Salakhutdinov (2013), "Annealing between distributions by
averaging moments", NIPS: the asymptotic AIS bias is ``(1/2K)∫ θ̇ᵀ G_θ θ̇ dβ`` and is
smallest at constant speed in the Fisher metric, which for the geometric path on the joint
``(v, h)`` family is ``θ̇ᵀGθ̇ = Var_{p_β(v,h)}[Δ(v,h)]`` (docs/algorithms.md §5.3). As in Kiwaki's
reproduction (docs/open-questions.md item 28) it is measured by chains run at 10 knots, interpolated and
equalised like VAROPT. Grosse et al.'s own practical recipe was not consulted.

For an RBM, ``Δ(v, h) = linear(v) − base(v) + h·a(v)`` with ``h | v`` Bernoulli(σ(βa)), so
``E[Δ | v] = s_β(v)`` and ``Var[Δ | v] = Σ_j a_j² σ(βa_j)(1 − σ(βa_j))``: the joint variance
is computed Rao-Blackwellised from the visible states, for any model whose summed-out group
follows the :class:`~boltzlab.models.base.MarginalTerms` protocol.

**In this module**: measuring ``g(β)`` two ways (docs/algorithms.md §5.3 and §5.4), a pilot
AIS run on the linear schedule with importance weights (:func:`pilot_measurement`, VAROPT)
and equilibrium chains at a few knots (:func:`measure_at_knots`, GMS13); turning it into a
schedule, :func:`schedule_from_g` (equal steps of ``Λ(β) = ∫_0^β √g``, VAROPT's closed-form
solution) after :func:`smooth_g` (smoothing and a floor for a noisy ``ĝ``); and
:func:`decelerated`, which caps every increment at δ. ``statistic="marginal"`` measures the hidden-summed
derivative, ``"joint"`` adds ``Var[Δ | v]`` (computed Rao-Blackwellised, :func:`conditional_variance`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from boltzlab import operators, progress
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.increments import add_log_f_increment_, reads_current_state
from boltzlab.estimators.annealing.schedules import (
    DEFAULT_N_TEMPERATURES,
    available_schedules,
    get_schedule,
    linear,
    validate_schedule,
)
from boltzlab.models.base import MarginalTerms, TemperedModel, path_derivative
from boltzlab.numerics import log_ess
from boltzlab.operators.base import Operator
from boltzlab.registry import Registry
from boltzlab.rng import resolve_generator
from boltzlab.tempering.placement import PilotMeasure, anneal_and_measure, pilot_shard
from boltzlab.validation import check_positive_int

__all__ = [
    "Measurement",
    "ScheduleInfo",
    "adaptive_schedules",
    "build_schedule",
    "check_schedule",
    "decelerated",
    "gms13",
    "register_adaptive_schedule",
    "resolve_schedule",
    "schedule_from_g",
    "smooth_g",
    "varopt",
]

# Points of the grid on which GMS13's knot interpolant is inverted.
_FINE_GRID = 4096

# What build_schedule passes to every builder; the rest of a builder's signature is options.
_BUILDER_ARGUMENTS = frozenset({"model", "n_temperatures", "operator", "generator"})
ScheduleBuilder = Callable[..., "ScheduleInfo"]
_BUILDERS: Registry[ScheduleBuilder] = Registry("schedule")


def register_adaptive_schedule(name: str) -> Callable[[ScheduleBuilder], ScheduleBuilder]:
    """Decorator for ``f(model, n_temperatures, *, operator, generator, **options) -> ScheduleInfo``."""
    return _BUILDERS.register(name)


def adaptive_schedules() -> tuple[str, ...]:
    """Names of the schedules that measure the model first (``"gms13"``, ``"varopt"``)."""
    return _BUILDERS.names()


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """An annealing schedule, how it was made, and what it predicts.

    Attributes
    ----------
    name : str
        ``"linear"``, ``"sm08"``, ``"explicit"``, ``"varopt"``, ``"gms13"``, ...
    betas : Tensor, shape (K + 1,), float64, CPU
        The schedule, after any deceleration: ``0 = β_0 ≤ … ≤ β_K = 1``.
    decelerate : float or None
        The cap δ on every increment, if one was applied.
    knots : Tensor, shape (n_knots,), float64, or None
        βs at which g was measured (the pilot's linear grid, or GMS13's knots).
    g_hat : Tensor, shape (n_knots,), float64, or None
        Raw estimates of ``g(β)`` there, in nats² (the variance of the path derivative).
    g_stderr : Tensor, shape (n_knots,), float64, or None
        Their delta-method standard errors (self-normalised importance sampling for the
        pilot, between-chain for GMS13).
    curve_grid, g_curve : Tensor, shape (n_grid,), float64, or None
        The smoothed, floored g that was inverted, on its grid.
    pilot_log_ess : Tensor, shape (n_knots,), float64, or None
        VAROPT: log of Kish's on-the-fly ESS of the pilot's weights at each knot (ĝ is
        unreliable where it collapses).
    statistic : {"marginal", "joint"} or None
    cost_sweeps : int
        Chain-sweeps spent measuring g (0 for model-free schedules).
    """

    name: str
    betas: Tensor
    decelerate: float | None = None
    knots: Tensor | None = None
    g_hat: Tensor | None = None
    g_stderr: Tensor | None = None
    curve_grid: Tensor | None = None
    g_curve: Tensor | None = None
    pilot_log_ess: Tensor | None = None
    statistic: str | None = None
    cost_sweeps: int = 0

    @property
    def n_temperatures(self) -> int:
        """``K``, the number of increments (the final one, after deceleration)."""
        return self.betas.numel() - 1

    @property
    def predicted_variance(self) -> float | None:
        """``Σ_k Δβ_k²·g(β_{k−1})`` from ``g_curve``: Var[log w] under perfect transitions (Eq. 7).

        For the hidden-summed AIS weights this is the prediction when ``statistic`` is
        ``"marginal"``; with ``"joint"`` it is that of joint-space weights (an upper bound).
        """
        if self.curve_grid is None or self.g_curve is None:
            return None
        betas = self.betas.numpy()
        g = np.interp(betas[:-1], self.curve_grid.numpy(), self.g_curve.numpy())
        return float(np.sum(np.diff(betas) ** 2 * g))


def _temperatures(n_temperatures: int | None) -> int:
    if n_temperatures is None:
        return DEFAULT_N_TEMPERATURES
    return check_positive_int(n_temperatures, "n_temperatures")


# ---------------------------------------------------------------------- the builders
@register_adaptive_schedule("varopt")
def varopt(
    model: TemperedModel,
    n_temperatures: int | None = None,
    *,
    operator: str | Operator = "gibbs",
    generator: torch.Generator | int | None = None,
    pilot_chains: int = 100,
    pilot_temperatures: int = 1000,
    statistic: Statistic = "marginal",
    smoothing: float = 0.015,
    floor: float = 1e-3,
) -> ScheduleInfo:
    """Kiwaki's (2015) variance-optimal schedule from a pilot AIS run (docs/algorithms.md §5.4).

    Parameters
    ----------
    model : TemperedModel
    n_temperatures : int, optional
        ``K`` of the schedule built (default 14,500, as the SM08 grid).
    operator : str or Operator, default "gibbs"
        Transition operator of the pilot (use the main run's).
    generator : torch.Generator or int, optional
    pilot_chains, pilot_temperatures : int, default 100 and 1000
        ``M_p`` and ``K_p`` of the pilot (the paper's were lost, docs/open-questions.md item 3): it costs
        ``M_p·(K_p − 1)`` sweeps, 7 % of AIS's first round (100 chains × 14,500).
    statistic : {"marginal", "joint"}, default "marginal"
        ``g = Var[s_β(v)]`` with the hidden units summed out, like the weights (docs/open-questions.md item 2),
        or the joint ``Var_{p_β(v,h)}[Δ(v,h)]``.
    smoothing : float, default 0.015
        Kernel standard deviation in β (see :func:`smooth_g`); 0 for none.
    floor : float, default 1e-3
        Relative floor on ``√g`` (see :func:`smooth_g`).

    Returns
    -------
    ScheduleInfo
        ``betas`` and the pilot's ``g_hat``, ``g_stderr``, on-the-fly ``pilot_log_ess``.
    """
    n_temperatures = _temperatures(n_temperatures)
    pilot_chains = check_positive_int(pilot_chains, "pilot_chains")
    pilot_temperatures = check_positive_int(pilot_temperatures, "pilot_temperatures")
    statistic = check_statistic(statistic)
    check_smoothing(smoothing, floor)
    transition = operators.get(operator)
    generator = resolve_generator(generator, model.device)
    measured = pilot_measurement(
        model,
        transition,
        n_chains=pilot_chains,
        n_temperatures=pilot_temperatures,
        statistic=statistic,
        generator=generator,
    )
    g_curve = smooth_g(measured.knots, measured.g_hat, width=smoothing, floor=floor)
    return ScheduleInfo(
        name="varopt",
        betas=schedule_from_g(measured.knots, g_curve, n_temperatures),
        knots=measured.knots,
        g_hat=measured.g_hat,
        g_stderr=measured.g_stderr,
        curve_grid=measured.knots,
        g_curve=g_curve,
        pilot_log_ess=measured.log_ess,
        statistic=statistic,
        cost_sweeps=measured.cost_sweeps,
    )


@register_adaptive_schedule("gms13")
def gms13(
    model: TemperedModel,
    n_temperatures: int | None = None,
    *,
    operator: str | Operator = "gibbs",
    generator: torch.Generator | int | None = None,
    n_knots: int = 10,
    knot_chains: int = 100,
    knot_sweeps: int = 600,
    burn_in: int = 100,
    statistic: Statistic = "joint",
    floor: float = 1e-3,
) -> ScheduleInfo:
    """Constant Fisher speed on the joint geometric path (GMS13; docs/algorithms.md §5.3, docs/open-questions.md item 28).

    ``Var_{p_β(v,h)}[Δ]`` is measured by ``knot_chains`` chains at each of ``n_knots``
    equally spaced βs (all knots in one batch), interpolated linearly in ``log g`` and
    inverted like VAROPT. Kiwaki's reproduction used 1,000 chains × 6,000 sweeps (1,000
    burn-in) per knot; the defaults are a tenth of each, 600,000 sweeps in all.

    Parameters
    ----------
    model : TemperedModel
    n_temperatures : int, optional
        ``K`` (default 14,500).
    operator : str or Operator, default "gibbs"
    generator : torch.Generator or int, optional
    n_knots : int, default 10
        At least 2 (β = 0 and β = 1 are always knots).
    knot_chains, knot_sweeps, burn_in : int, default 100, 600, 100
        Chains per knot, sweeps per chain, and the first sweeps not used.
    statistic : {"joint", "marginal"}, default "joint"
        The joint Fisher speed (GMS13), or the hidden-summed one for comparison.
    floor : float, default 1e-3
        Relative floor on ``√g``.

    Returns
    -------
    ScheduleInfo
    """
    n_temperatures = _temperatures(n_temperatures)
    n_knots = check_positive_int(n_knots, "n_knots")
    if n_knots < 2:
        raise ValidationError(f"n_knots must be at least 2 (beta = 0 and 1), got {n_knots}")
    knot_chains = check_positive_int(knot_chains, "knot_chains")
    knot_sweeps = check_positive_int(knot_sweeps, "knot_sweeps")
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < knot_sweeps:
        raise ValidationError(f"burn_in must be an integer in [0, knot_sweeps), got {burn_in!r}")
    statistic = check_statistic(statistic)
    check_smoothing(0.0, floor)
    transition = operators.get(operator)
    generator = resolve_generator(generator, model.device)
    measured = measure_at_knots(
        model,
        transition,
        n_knots=n_knots,
        n_chains=knot_chains,
        n_sweeps=knot_sweeps,
        burn_in=burn_in,
        statistic=statistic,
        generator=generator,
    )
    root = measured.g_hat.clamp_min(0.0).sqrt()
    peak = float(root.max())
    root = root.clamp_min(floor * peak) if peak > 0.0 else torch.ones_like(root)
    fine = torch.linspace(0.0, 1.0, _FINE_GRID + 1, dtype=torch.float64)
    # Geometric interpolation between knots: g often spans orders of magnitude along the path.
    g_curve = np.exp(np.interp(fine.numpy(), measured.knots.numpy(), 2.0 * np.log(root.numpy())))
    g_curve = torch.from_numpy(g_curve)
    return ScheduleInfo(
        name="gms13",
        betas=schedule_from_g(fine, g_curve, n_temperatures),
        knots=measured.knots,
        g_hat=measured.g_hat,
        g_stderr=measured.g_stderr,
        curve_grid=fine,
        g_curve=g_curve,
        statistic=statistic,
        cost_sweeps=measured.cost_sweeps,
    )


# ---------------------------------------------------------------------- one door for AIS and RAISE
def resolve_schedule(
    model: TemperedModel,
    schedule: str | Tensor | Sequence[float],
    n_temperatures: int | None = None,
    *,
    operator: str | Operator = "gibbs",
    generator: torch.Generator | int | None = None,
    decelerate: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> ScheduleInfo:
    """Any schedule by name or value, optionally decelerated, as a :class:`ScheduleInfo`.

    :func:`check_schedule`, then :func:`build_schedule`.

    Parameters
    ----------
    model : TemperedModel
        Measured by the adaptive schedules; unused by the others.
    schedule : str or Tensor or sequence of float
        A model-free name (``"linear"``, ``"sm08"``, see ``schedules.available_schedules``),
        an adaptive one (``"varopt"``, ``"gms13"``), or explicit ascending βs.
    n_temperatures : int, optional
        ``K`` for a named schedule.
    operator : str or Operator, default "gibbs"
        Used by the adaptive schedules' measurements.
    generator : torch.Generator or int, optional
        Consumed only by the adaptive schedules.
    decelerate : float, optional
        Cap every increment at this δ (:func:`decelerated`); needs ``K·δ ≥ 1``.
    options : mapping, optional
        Keyword options of the adaptive builder (e.g. ``{"pilot_chains": 200}``).

    Returns
    -------
    ScheduleInfo
    """
    check_schedule(schedule, n_temperatures, decelerate=decelerate, options=options)
    return build_schedule(
        model,
        schedule,
        n_temperatures,
        operator=operator,
        generator=generator,
        decelerate=decelerate,
        options=options,
    )


def check_schedule(
    schedule: str | Tensor | Sequence[float],
    n_temperatures: int | None = None,
    *,
    decelerate: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> None:
    """What can be checked of a schedule without the model: ValidationError where it is wrong.

    A name must be a registered schedule; ``options`` must be options of an adaptive
    schedule's builder; an adaptive schedule's ``decelerate`` must reach β = 1 in ``K`` steps
    (checked here so that a bad one fails before the measuring run). Explicit βs, a model-free
    schedule's ``n_temperatures`` and its deceleration are checked where
    :func:`build_schedule` makes the ladder. Arguments as for :func:`resolve_schedule`.
    """
    options = options or {}
    if isinstance(schedule, str) and schedule in _BUILDERS:
        accepted = set(inspect.signature(_BUILDERS.get(schedule)).parameters) - _BUILDER_ARGUMENTS
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValidationError(
                f"unknown option(s) {', '.join(unknown)} for schedule {schedule!r}; "
                f"it takes {', '.join(sorted(accepted))}"
            )
        if decelerate is not None:
            check_delta(decelerate, _temperatures(n_temperatures))
        return
    if options:
        raise ValidationError(
            f"schedule options {', '.join(sorted(options))} apply only to the adaptive schedules "
            f"({', '.join(adaptive_schedules())})"
        )
    if isinstance(schedule, str) and schedule.lower().replace("_", "-") not in available_schedules():
        choices = ", ".join(sorted((*available_schedules(), *adaptive_schedules())))
        raise ValidationError(f"unknown schedule {schedule!r}; choose one of {choices}")


def build_schedule(
    model: TemperedModel,
    schedule: str | Tensor | Sequence[float],
    n_temperatures: int | None = None,
    *,
    operator: str | Operator = "gibbs",
    generator: torch.Generator | int | None = None,
    decelerate: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> ScheduleInfo:
    """The schedule of arguments that :func:`check_schedule` passed, as a :class:`ScheduleInfo`.

    For callers that checked them once already (the annealing estimators' options,
    :mod:`~boltzlab.estimators.annealing.options`); arguments as for :func:`resolve_schedule`.
    An adaptive schedule measures ``model``, drawing from ``generator``.
    """
    if isinstance(schedule, str) and schedule in _BUILDERS:
        builder = _BUILDERS.get(schedule)
        info = builder(model, n_temperatures, operator=operator, generator=generator, **dict(options or {}))
    else:
        name = schedule.lower() if isinstance(schedule, str) else "explicit"
        info = ScheduleInfo(name=name, betas=get_schedule(schedule, n_temperatures))
    if decelerate is not None:
        info = replace(info, betas=decelerated(info.betas, decelerate), decelerate=float(decelerate))
    return info


def schedule_from_g(grid: Any, g: Any, n_temperatures: int) -> Tensor:
    """The schedule with equal increments of ``Λ(β) = ∫_0^β √g`` (docs/algorithms.md §5.4, step 3).

    Parameters
    ----------
    grid : array-like, shape (n,)
        Strictly increasing βs from 0 to 1.
    g : array-like, shape (n,)
        Positive ``g(β)`` on ``grid``; ``√g`` is integrated by the trapezoid rule and ``Λ``
        inverted by linear interpolation, exact in the limit of a fine grid.
    n_temperatures : int
        ``K``.

    Returns
    -------
    Tensor, shape (K + 1,), float64
        ``β_k = Λ^{-1}((k/K)·Λ(1))``; increasing from exactly 0 to exactly 1.
    """
    n_temperatures = check_positive_int(n_temperatures, "n_temperatures")
    grid = np.asarray(torch.as_tensor(grid, dtype=torch.float64).cpu(), dtype=np.float64)
    g = np.asarray(torch.as_tensor(g, dtype=torch.float64).cpu(), dtype=np.float64)
    if grid.ndim != 1 or grid.shape != g.shape or grid.size < 2:
        raise ValidationError(f"grid and g must be 1-D of equal length >= 2, got {grid.shape} and {g.shape}")
    if grid[0] != 0.0 or grid[-1] != 1.0 or not bool(np.all(np.diff(grid) > 0)):
        raise ValidationError("grid must increase strictly from 0 to 1")
    if not bool(np.all(np.isfinite(g) & (g > 0))):
        raise ValidationError("g must be finite and positive on the grid; floor it first (smooth_g)")
    speed = np.sqrt(g)
    arc = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * np.diff(grid))])
    targets = np.arange(n_temperatures + 1, dtype=np.float64) / n_temperatures * arc[-1]
    betas = np.interp(targets, arc, grid)
    betas[0], betas[-1] = 0.0, 1.0
    return torch.from_numpy(np.maximum.accumulate(betas))


def smooth_g(grid: Any, g_hat: Any, *, width: float = 0.015, floor: float = 1e-3) -> Tensor:
    """Gaussian-kernel smoothing of ``√ĝ`` on a uniform grid, then a relative floor.

    The estimate is noisiest where the pilot's weights degenerate (near β = 0), and a zero
    would give an infinite step (docs/algorithms.md §5.4, pitfall 1). The kernel average is
    normalised by the kernel mass inside [0, 1] (no shrinkage at the ends) and skips
    non-finite entries.

    Parameters
    ----------
    grid : array-like, shape (n,)
        Uniformly spaced βs from 0 to 1.
    g_hat : array-like, shape (n,)
        Raw estimates of g (negative values are read as 0).
    width : float, default 0.015
        Standard deviation of the kernel in units of β (docs/open-questions.md item 3 suggests
        1–2 % of the range); 0 switches smoothing off.
    floor : float, default 1e-3
        ``√g`` is raised to at least ``floor × max √g``, so no step is more than
        ``1/floor`` times the smallest.

    Returns
    -------
    Tensor, shape (n,), float64
        The smoothed, floored g (all ones, i.e. the linear schedule, if ĝ is zero everywhere).
    """
    grid = torch.as_tensor(grid, dtype=torch.float64).cpu()
    g_hat = torch.as_tensor(g_hat, dtype=torch.float64).cpu()
    if grid.dim() != 1 or grid.shape != g_hat.shape or grid.numel() < 2:
        raise ValidationError("grid and g_hat must be 1-D of equal length >= 2")
    spacing = grid[1:] - grid[:-1]
    if not bool(torch.allclose(spacing, spacing.mean(), rtol=1e-9, atol=0.0)):
        raise ValidationError("smooth_g needs a uniformly spaced grid (the pilot's linear schedule)")
    check_smoothing(width, floor)
    known = torch.isfinite(g_hat)
    root = torch.where(known, g_hat.clamp_min(0.0), torch.zeros_like(g_hat)).sqrt()
    sigma = width / float(spacing.mean())
    if sigma > 0.0:
        radius = max(1, math.ceil(4.0 * sigma))
        offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
        kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)[None, None, :]
        mass = F.conv1d(known.to(torch.float64)[None, None, :], kernel, padding=radius)[0, 0]
        root = F.conv1d(root[None, None, :], kernel, padding=radius)[0, 0] / mass
        root = torch.nan_to_num(root, nan=0.0)
    peak = float(root.max())
    if not peak > 0.0:
        return torch.ones_like(root)
    return root.clamp_min(floor * peak) ** 2


def check_smoothing(width: Any, floor: Any) -> None:
    if not (isinstance(width, (int, float)) and math.isfinite(width) and width >= 0.0):
        raise ValidationError(f"smoothing width must be a finite number >= 0, got {width!r}")
    if not (isinstance(floor, (int, float)) and 0.0 < floor <= 1.0):
        raise ValidationError(f"floor must be in (0, 1], got {floor!r}")


def decelerated(betas: Any, delta: float) -> Tensor:
    """Cap every increment at ``delta``, stretching the later ones to keep the end at 1.

    Kiwaki's deceleration (docs/algorithms.md §5.4, docs/open-questions.md item 4): a single forward
    pass; an increment above δ is clipped to δ and its excess is spread over all later
    increments in proportion to their size (which may push some of them over δ; they are
    clipped in turn). The number of increments K is unchanged. Should excess reach the end
    with no later increment left to take it (possible only when the last increments are
    large), it goes back to the increments below δ in proportion to their room ``δ − Δβ``,
    which ``K·δ ≥ 1`` guarantees is enough.

    Parameters
    ----------
    betas : array-like, shape (K + 1,)
        A valid ascending schedule (see ``schedules.validate_schedule``); not modified.
    delta : float in (0, 1]
        The largest allowed increment; needs ``K·δ ≥ 1``.

    Returns
    -------
    Tensor, shape (K + 1,), float64
        Non-decreasing from 0 to exactly 1 with every increment ≤ δ (up to the rounding of a
        cumulative sum, ``K·ε``);
        equal to ``betas`` when no increment exceeds δ, and unchanged before the first one
        that does unless the end-of-schedule fallback ran.
    """
    betas = validate_schedule(betas)
    delta = check_delta(delta, betas.numel() - 1)
    original = np.diff(betas.numpy())
    # A step above δ by rounding only (e.g. linear(7) against δ = 1/7) is not clipped.
    limit = delta * (1.0 + 1e-12)
    if not bool((original > limit).any()):
        return betas
    first = int(np.argmax(original > limit))
    later = np.concatenate([np.cumsum(original[::-1])[::-1][1:], [0.0]])  # Σ_{j>k} original_j
    steps = original.copy()
    scale, leftover = 1.0, 0.0  # every increment after the current one is original × scale
    for k in range(first, steps.size):
        value = original[k] * scale
        if value > limit:
            excess, value = value - delta, delta
            rest = later[k] * scale
            if rest > 0.0:
                scale *= (rest + excess) / rest
            else:
                leftover += excess
        steps[k] = value
    room = np.clip(delta - steps, 0.0, None)
    if leftover > 0.0 and room.sum() > 0.0:
        steps += leftover * room / room.sum()
        first = 0  # the fallback also lengthens steps before the first clipped one
    result = betas.numpy().copy()
    result[first + 1 :] = result[first] + np.cumsum(steps[first:])
    result = np.maximum.accumulate(np.minimum(result, 1.0))
    result[-1] = 1.0
    return torch.from_numpy(result)


def check_delta(delta: Any, n_temperatures: int) -> float:
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValidationError(f"decelerate must be a number in (0, 1], got {delta!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValidationError(f"decelerate must be in (0, 1], got {value}")
    if n_temperatures * value < 1.0 - 1e-12:
        raise ValidationError(
            f"decelerate={value} caps every increment, so the schedule needs n_temperatures >= "
            f"{math.ceil(1.0 / value - 1e-9)} to reach beta = 1; got {n_temperatures}"
        )
    return value


Statistic = Literal["marginal", "joint"]


@dataclass(frozen=True, slots=True)
class Measurement:
    """``ĝ`` and its standard error at ``knots``, and what measuring it cost.

    Attributes
    ----------
    knots : Tensor, shape (n,), float64
        The β values measured.
    g_hat, g_stderr : Tensor, shape (n,), float64
        ``ĝ(β)`` and its standard error at each knot.
    log_ess : Tensor, shape (n,), float64, or None
        The pilot's log-ESS after each increment (None for knot chains).
    cost_sweeps : int
        Chain sweeps spent.
    """

    knots: Tensor
    g_hat: Tensor
    g_stderr: Tensor
    log_ess: Tensor | None
    cost_sweeps: int


def conditional_variance(terms: MarginalTerms, beta: Tensor | float) -> Tensor:
    """``Var[Δ | kept layers] = Σ_j a_j² σ(βa_j)(1 − σ(βa_j))``; float64, shape ``(n,)``."""
    pre = terms.preactivation.to(torch.float64)
    beta_t = torch.as_tensor(beta, dtype=torch.float64, device=pre.device)
    probability = torch.sigmoid(pre * (beta_t[:, None] if beta_t.dim() else beta_t))
    return (pre * pre * probability * (1.0 - probability)).sum(1)


def weighted_variance(weights: Tensor, terms: MarginalTerms, beta: Tensor, statistic: str) -> Tensor:
    """``[ĝ, se(ĝ)]`` under normalised ``weights``; float64, shape ``(2,)``, no host sync.

    ĝ is a self-normalised importance-sampling estimate of a variance; its delta-method
    variance is ``Σ w_i² ψ_i²`` with influence ``ψ_i = (s_i − m)² [+ Var(Δ|v_i)] − ĝ``.
    """
    return _variance_of_features(weights, _variance_features(terms, beta, statistic))


def _variance_features(terms: MarginalTerms, beta: Tensor, statistic: str) -> Tensor:
    """Per chain: ``s_β`` and, for the joint statistic, ``Var(Δ | v)``; float64, (n, 1 or 2)."""
    derivative = path_derivative(terms, beta)
    if statistic == "joint":
        return torch.stack([derivative, conditional_variance(terms, beta)], 1)
    return derivative[:, None]


def _variance_of_features(weights: Tensor, features: Tensor) -> Tensor:
    """``[ĝ, se(ĝ)]`` from :func:`_variance_features` (the pilot's two-part measure)."""
    derivative = features[:, 0]
    centred = derivative - (weights * derivative).sum()
    spread = centred * centred
    if features.shape[1] > 1:
        spread = spread + features[:, 1]
    g = (weights * spread).sum()
    stderr = ((weights * (spread - g)) ** 2).sum().sqrt()
    return torch.stack([g, stderr])


def pilot_measurement(
    model: TemperedModel,
    transition: Operator,
    *,
    n_chains: int,
    n_temperatures: int,
    statistic: str,
    generator: torch.Generator,
) -> Measurement:
    """Pilot AIS on the linear schedule measuring g at every β of it (§5.4, step 1).

    The chains follow AIS exactly (the same increments and, for state-dependent operators,
    the same redraw of the summed-out layer); only the weighted variance is added. The run is
    the ladder pilots' (:func:`~boltzlab.tempering.placement.anneal_and_measure`) on
    :func:`~boltzlab.estimators.annealing.schedules.linear`'s grid.
    """
    grid = linear(n_temperatures)

    def combine(weights: Tensor, log_weights: Tensor, features: Tensor) -> Tensor:
        # [ĝ, se(ĝ), log ESS]; the ESS from the log-weights, as AIS's trace computes it.
        return torch.cat([_variance_of_features(weights, features), log_ess(log_weights)[None]])

    # In a process group the pilot's chains are sharded like AIS's (placement.pilot_shard).
    part = pilot_shard(n_chains, generator, None, model.device)
    measured = anneal_and_measure(
        model,
        transition,
        grid,
        PilotMeasure(
            features=lambda terms, beta: _variance_features(terms, beta, statistic), combine=combine
        ),
        n_chains=n_chains,
        generator=generator,
        increment=add_log_f_increment_,
        redraw=reads_current_state(transition),
        shard=part,
    )
    return Measurement(
        knots=grid,
        g_hat=measured[:, 0].clone(),
        g_stderr=measured[:, 1].clone(),
        log_ess=measured[:, 2].clone(),
        cost_sweeps=n_chains * max(n_temperatures - 1, 0),
    )


def measure_at_knots(
    model: TemperedModel,
    transition: Operator,
    *,
    n_knots: int,
    n_chains: int,
    n_sweeps: int,
    burn_in: int,
    statistic: str,
    generator: torch.Generator,
) -> Measurement:
    """Equilibrium chains at each knot, all in one batch with per-chain β (§5.3).

    Each chain's time averages of ``s`` and ``s² + Var(Δ|v)`` give ĝ at its knot; the
    standard error comes from the spread between independent chains (delta method for
    ``E[B] − E[A]²``), which accounts for autocorrelation.
    """
    knots = torch.linspace(0.0, 1.0, n_knots, dtype=torch.float64)
    beta64 = knots.to(model.device).repeat_interleave(n_chains)
    chains = model.init_chains(n_knots * n_chains, generator=generator).with_beta(beta64.to(model.dtype))
    sums = torch.zeros(2, n_knots * n_chains, dtype=torch.float64, device=model.device)
    terms = model.marginal_terms(chains.layers)
    for sweep in range(1, n_sweeps + 1):
        chains, _ = transition.step(model, chains, generator=generator, terms=terms)
        progress.advance(chains.n_chains)
        terms = model.marginal_terms(chains.layers)
        if sweep > burn_in:
            derivative = path_derivative(terms, beta64)
            second = derivative * derivative
            if statistic == "joint":
                second = second + conditional_variance(terms, beta64)
            sums[0].add_(derivative)
            sums[1].add_(second)
    first_moment, second_moment = (sums / (n_sweeps - burn_in)).cpu().view(2, n_knots, n_chains)
    mean_first = first_moment.mean(1)
    g_hat = second_moment.mean(1) - mean_first**2
    influence = second_moment - 2.0 * mean_first[:, None] * first_moment
    g_stderr = influence.std(1) / math.sqrt(n_chains) if n_chains > 1 else torch.full_like(g_hat, math.inf)
    return Measurement(
        knots=knots, g_hat=g_hat, g_stderr=g_stderr, log_ess=None, cost_sweeps=n_knots * n_chains * n_sweeps
    )


def check_statistic(statistic: Any) -> str:
    """``statistic`` if it is ``"marginal"`` or ``"joint"``; raises ValidationError otherwise."""
    if statistic not in ("marginal", "joint"):
        raise ValidationError(f"statistic must be 'marginal' or 'joint', got {statistic!r}")
    return str(statistic)
