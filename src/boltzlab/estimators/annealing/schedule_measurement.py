"""Measuring ``g(β)``, the variance that sets an adaptive schedule's speed.

Two ways (docs/algorithms.md §5.3 and §5.4): a pilot AIS run on the linear schedule with
importance weights (:func:`pilot_measurement`, VAROPT) and equilibrium chains at a few knots
(:func:`measure_at_knots`, GMS13). ``statistic="marginal"`` measures the hidden-summed
derivative, ``"joint"`` adds ``Var[Δ | v]`` (computed Rao-Blackwellised, :func:`conditional_variance`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.increments import add_log_f_increment_, reads_current_state
from boltzlab.estimators.annealing.schedules import (
    linear,
)
from boltzlab.models.base import MarginalTerms, TemperedModel, path_derivative
from boltzlab.numerics import log_ess
from boltzlab.operators.base import Operator
from boltzlab.tempering.placement import PilotMeasure, anneal_and_measure, pilot_shard

__all__ = [
    "Measurement",
    "Statistic",
    "check_statistic",
    "conditional_variance",
    "measure_at_knots",
    "pilot_measurement",
    "weighted_variance",
]

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
