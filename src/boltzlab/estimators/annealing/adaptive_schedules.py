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
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.schedule_measurement import (
    Statistic,
    check_statistic,
    measure_at_knots,
    pilot_measurement,
)
from boltzlab.estimators.annealing.schedule_shaping import (
    check_delta,
    check_smoothing,
    decelerated,
    schedule_from_g,
    smooth_g,
)
from boltzlab.estimators.annealing.schedules import (
    DEFAULT_N_TEMPERATURES,
    available_schedules,
    get_schedule,
)
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.registry import Registry
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

# schedule_from_g, smooth_g and decelerated live in schedule_shaping.py; they stay importable
# here, where estimators/__init__.py, tempered_ladders.py, tests and experiments import them.
__all__ = [
    "ScheduleInfo",
    "adaptive_schedules",
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

# What resolve_schedule passes to every builder; the rest of a builder's signature is options.
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
    options = dict(options or {})
    if isinstance(schedule, str) and schedule in _BUILDERS:
        builder = _BUILDERS.get(schedule)
        accepted = set(inspect.signature(builder).parameters) - _BUILDER_ARGUMENTS
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValidationError(
                f"unknown option(s) {', '.join(unknown)} for schedule {schedule!r}; "
                f"it takes {', '.join(sorted(accepted))}"
            )
        if decelerate is not None:
            check_delta(decelerate, _temperatures(n_temperatures))
        info = builder(model, n_temperatures, operator=operator, generator=generator, **options)
    else:
        if options:
            raise ValidationError(
                f"schedule options {', '.join(sorted(options))} apply only to the adaptive schedules "
                f"({', '.join(adaptive_schedules())})"
            )
        if isinstance(schedule, str) and schedule.lower().replace("_", "-") not in available_schedules():
            choices = ", ".join(sorted((*available_schedules(), *adaptive_schedules())))
            raise ValidationError(f"unknown schedule {schedule!r}; choose one of {choices}")
        name = schedule.lower() if isinstance(schedule, str) else "explicit"
        info = ScheduleInfo(name=name, betas=get_schedule(schedule, n_temperatures))
    if decelerate is not None:
        info = replace(info, betas=decelerated(info.betas, decelerate), decelerate=float(decelerate))
    return info
