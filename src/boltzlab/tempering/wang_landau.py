"""Adaptive simulated tempering with Wang-Landau weights (Salakhutdinov 2010, Algorithm 1).

Simulated tempering (:mod:`boltzlab.tempering.simulated`) whose log-weights ``w_k = log g_k``
learn themselves (Wang & Landau 2001; Atchadé & Liu 2010; docs/algorithms.md §2.4). After each
level move the weight of the level now occupied grows:

    log g_{k_new} ← log g_{k_new} + log(1 + γ_t),

which lowers that level's probability ``q(x, k) ∝ f_k(x)/g_k`` and pushes the chain on (the
sign matters: ``−log g`` in the target, ``+`` in the update; the reverse makes chains stick).
Only differences of ``log g`` matter, so after every update the weights are re-anchored at
the target level (``log g_{K−1} = 0``), which keeps them from drifting in float64.

**Adaptation factor** (docs/open-questions.md item 13). The paper prints ``γ_t = 10`` with no
decay, and that is the default here: the weights keep moving, forcing systematic sweeps
through the temperatures — what learning wants (the model changes under the chains anyway),
but not an exact sampler of any fixed target. For estimation give a decaying schedule,
``gamma_decay=t0`` (``γ_t = γ·t0/(t0 + t)``, so ``Σγ_t = ∞`` and ``γ_t → 0``) or any callable
``gamma(t)``; then ``log g_k − log g_{K−1} → log Z_k − log Z_{K−1}`` and the level histogram
becomes flat. With ``γ = 0`` the sampler is simulated tempering with fixed weights, bit for bit.

**One weight vector per chain** by default (docs/open-questions.md item 14: the faithful reading of
"single adaptive chain"): ``n_chains`` independent adaptive chains. ``shared_weights=True``
gives one vector updated by every chain's level (``log g_k += η_t·#{chains at k}``).

**Ladder.** The paper's 20 inverse temperatures from 1 down to 0.9 are, in boltzlab's
ascending order, ``ladders.uniform(20, low=0.9)``; its target level ``k = 1`` is our ``K − 1``.

**Learning with adaptive ST** (docs/algorithms.md §3.3) alternates plain sweeps with AST runs whose
weights carry over; a trainer does that by threading this scheme's state. The last β = 1 state
of each chain, ``last_target``, is what CAST (:mod:`boltzlab.tempering.cast`) feeds to its slow
chains.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.tempering import ladders
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.registry import register_scheme
from boltzlab.tempering.simulated import SimulatedTempering, SimulatedTemperingState

__all__ = ["AdaptiveSimulatedTempering", "decaying_gamma", "wang_landau_update"]

GammaSchedule = float | Callable[[int], float]


def decaying_gamma(gamma: float, t0: float) -> Callable[[int], float]:
    """The schedule ``γ_t = γ·t0/(t0 + t)``: constant for ``t ≪ t0``, then ``∝ 1/t``."""
    gamma, t0 = _check_gamma(gamma), float(t0)
    if not (math.isfinite(t0) and t0 > 0.0):
        raise ValidationError(f"gamma_decay (t0) must be a positive number, got {t0}")

    def schedule(t: int) -> float:
        return gamma * t0 / (t0 + t)

    return schedule


def wang_landau_update(log_weights: Tensor, levels: Tensor, log_increment: float, *, anchor: int) -> Tensor:
    """``log g_k += log_increment`` for each chain's occupied level, re-anchored; a new tensor.

    Parameters
    ----------
    log_weights : Tensor, shape (n_chains, K) or (K,), float64
        One vector per chain, or one shared by all chains (then each chain at level ``k``
        adds one increment to ``k``).
    levels : Tensor, shape (n_chains,), int64
        The levels after the move.
    log_increment : float
        ``η_t = log(1 + γ_t)``.
    anchor : int
        Level whose weight is set to 0 afterwards (only differences matter).
    """
    n_levels = log_weights.shape[-1]
    if log_weights.dim() == 1:
        counts = torch.bincount(levels, minlength=n_levels).to(torch.float64)
        updated = log_weights + log_increment * counts
        return updated - updated[anchor]
    updated = log_weights.scatter_add(1, levels[:, None], torch.full_like(log_weights[:, :1], log_increment))
    return updated - updated[:, anchor : anchor + 1]


class AdaptiveSimulatedTempering(SimulatedTempering):
    """Adaptive simulated tempering with Wang-Landau weights (registered ``"ast"``).

    Parameters
    ----------
    operator : Operator or str
    ladder : Ladder or sequence of float, optional
        Ascending, ending at 1. Default ``ladders.uniform(n_levels, low=low)``.
    n_levels : int, optional
        Levels of the default ladder (20, as in the CAST paper).
    low : float, default 0.9
        Lowest inverse temperature of the default ladder (the paper's 0.9).
    gamma : float or callable, default 10.0
        Adaptation factor: a constant ``γ ≥ 0`` (the paper's 10) or a function ``t ↦ γ_t``
        of the step count ``t = 0, 1, …``.
    gamma_decay : float, optional
        ``t0`` of the decaying schedule ``γ_t = gamma·t0/(t0 + t)`` (``gamma`` a number).
    shared_weights : bool, default False
        One weight vector for all chains instead of one per chain.
    log_weights : sequence of float or Tensor, shape (K,), optional
        Initial ``log g`` (default zeros), e.g. from a previous run or exact ``log Z_k``.
    level_move : {"metropolis", "gibbs"}, default "metropolis"
    target_refresh : {"swap", "copy"}, default "swap"
        See :class:`~boltzlab.tempering.simulated.SimulatedTempering`.

    Notes
    -----
    With a constant γ > 0 the weights never settle, so the chains are not an exact sampler of
    any fixed distribution (docs/algorithms.md §2.4 pitfalls); use a decaying γ to estimate
    ``log Z_k`` from :meth:`relative_log_z`, and γ = 0 with known weights for exact sampling.
    A level that is never visited keeps its weight.
    """

    name = "ast"

    def __init__(
        self,
        operator: Operator | str,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        *,
        n_levels: int | None = None,
        low: float = 0.9,
        gamma: GammaSchedule = 10.0,
        gamma_decay: float | None = None,
        shared_weights: bool = False,
        log_weights: Sequence[float] | Tensor | None = None,
        level_move: str = "metropolis",
        target_refresh: str = "swap",
    ) -> None:
        super().__init__(
            operator,
            ladders.resolve(ladder, n_levels=n_levels, default_levels=20, low=low),
            log_weights=log_weights,
            level_move=level_move,
            target_refresh=target_refresh,
        )
        if not isinstance(shared_weights, bool):
            raise ValidationError(f"shared_weights must be True or False, got {shared_weights!r}")
        self.shared_weights = shared_weights
        if callable(gamma):
            if gamma_decay is not None:
                raise ValidationError(
                    "give gamma_decay only with a numeric gamma, not with a schedule function"
                )
            self.gamma_schedule: Callable[[int], float] = gamma
        elif gamma_decay is not None:
            self.gamma_schedule = decaying_gamma(gamma, gamma_decay)
        else:
            self.gamma_schedule = _constant(_check_gamma(gamma))
        self.gamma = gamma
        self.gamma_decay = gamma_decay

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(operator={self.operator!r}, n_levels={self.n_levels}, "
            f"gamma={self.gamma!r}, gamma_decay={self.gamma_decay!r}, "
            f"shared_weights={self.shared_weights}, level_move={self.level_move!r}, "
            f"target_refresh={self.target_refresh!r})"
        )

    def gamma_at(self, t: int) -> float:
        """The adaptation factor ``γ_t`` at step ``t`` (validated: finite and ≥ 0)."""
        value = float(self.gamma_schedule(t))
        if not (math.isfinite(value) and value >= 0.0):
            raise ValidationError(f"the gamma schedule gave {value} at step {t}; it must be finite and >= 0")
        return value

    def initial_log_weights(self, model: TemperedModel, n_chains: int) -> Tensor:
        """``(K,)`` when shared, else one copy per chain ``(n_chains, K)``; relative to the target."""
        weights = super().initial_log_weights(model, n_chains)
        return weights if self.shared_weights else weights.expand(n_chains, -1).clone()

    def after_sweep(self, state: SimulatedTemperingState, swept: Any) -> SimulatedTemperingState:
        """As in simulated tempering, then the Wang-Landau update for the levels just occupied."""
        log_increment = math.log1p(self.gamma_at(state.n_steps))
        log_weights = wang_landau_update(state.log_weights, state.levels, log_increment, anchor=self.top)
        return super().after_sweep(replace(state, log_weights=log_weights), swept)

    def state_from_tensors(self, model: TemperedModel, tensors: dict[str, Tensor]) -> SimulatedTemperingState:
        """Inverse of :meth:`state_tensors`; the weights must be shared or per chain as configured."""
        state = super().state_from_tensors(model, tensors)
        expected = 1 if self.shared_weights else 2
        if state.log_weights.dim() != expected:
            kind = "one shared weight vector" if self.shared_weights else "one weight vector per chain"
            raise ValidationError(
                f"the state's log_weights have shape {tuple(state.log_weights.shape)}; this scheme uses {kind}"
            )
        return state

    def relative_log_z(self, state: SimulatedTemperingState) -> Tensor:
        """Estimates of ``log Z(β_k) − log Z(1)``: the weights (averaged over chains); float64 (K,)."""
        weights = state.log_weights
        return weights if weights.dim() == 1 else weights.mean(0)


@register_scheme("ast")
def _adaptive_simulated_tempering(operator: Operator, **options: Any) -> AdaptiveSimulatedTempering:
    """Factory behind ``bl.sample(model, sampler="ast", ...)`` when it does not adapt first (a
    ``gamma`` schedule or ``log_weights`` given, or ``adapt=False``: the paper's scheme, as the
    trainer runs it) and behind ``sampling.make_scheme("ast")``; by default ``bl.sample``
    adapts, then freezes (:mod:`boltzlab.tempering.adaptation`)."""
    return AdaptiveSimulatedTempering(operator, **options)


def _constant(value: float) -> Callable[[int], float]:
    def schedule(t: int) -> float:
        return value

    return schedule


def _check_gamma(gamma: Any) -> float:
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        raise ValidationError(
            f"gamma must be a number >= 0 or a function of the step, got {gamma!r}"
        ) from None
    if not (math.isfinite(value) and value >= 0.0):
        raise ValidationError(f"gamma must be finite and >= 0, got {value}")
    return value
