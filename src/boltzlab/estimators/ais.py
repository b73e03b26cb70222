"""Annealed importance sampling (AIS) of ``log Z`` on the model's tempered family.

Neal (2001, "Annealed importance sampling", Statistics and Computing 11, eqs. 3–4), as
applied to RBMs by Salakhutdinov & Murray (2008, ICML, §4) and restated in ALGORITHMS.md
§4.1. Chains start from exact samples of the normalised base ``p1`` (``log Z_0 = 0``) and
follow an ascending schedule ``0 = β_0 ≤ … ≤ β_K = 1`` (:mod:`boltzlab.estimators.schedules`).
Each chain carries the log-weight

    log w = Σ_{k=1..K} [log f_{β_k}(x_{k−1}) − log f_{β_{k−1}}(x_{k−1})],

where ``x_k`` is ``x_{k−1}`` moved by one sweep of an operator that leaves ``p_{β_k}``
invariant, and ``Ẑ = mean(w)`` is unbiased for ``Z`` (so ``E[log Ẑ] ≤ log Z`` by Jensen:
the estimate is a stochastic lower bound). ``log f`` is the hidden-summed form of §1.3, whose
increment needs no second matrix product:

    log f_{β_k}(v) − log f_{β_{k−1}}(v) = Δβ_k·(linear − base) + Σ_j [softplus(β_k a_j) − softplus(β_{k−1} a_j)],

with ``a = c + vW`` reused by the following sweep, so one temperature costs two GEMMs.

**Summed-out weights need a summed-out kernel.** The weight above integrates the first
update group (the hidden units) out, which is valid only if the transition reads no stale
hidden state: the weighted chains are distributed as ``p_{β_k}(v)·p_{β_{k−1}}(h | v)``, not
``p_{β_k}(v, h)``. Block Gibbs redraws ``h`` from its conditional first, so it qualifies. An
operator whose update depends on the current value of a unit (flip-the-state, the
α-mixture) does not: on a 2×5 RBM with K = 2, ``E[Ẑ]/Z`` is 1.14 for flip and 1.06 for the
mixture. For such operators the summed group is redrawn from ``p_{β_k}(h | v)`` (from the
same ``a``, no extra GEMM) before each sweep, which makes ``E[Ẑ] = Z`` exact again.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.chains import Chains
from boltzlab.errors import DivergenceError, ValidationError
from boltzlab.estimators.adaptive_schedules import ScheduleInfo, resolve_schedule
from boltzlab.estimators.registry import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.numerics import ess, log_ess, log_mean_exp, log_mean_exp_stderr
from boltzlab.operators.base import Operator
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import check_positive_int

__all__ = ["AISInfo", "ais"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Work-space budget (float64 elements) for the blocks of weight snapshots behind the ESS trace.
_SNAPSHOT_ELEMENTS = 1 << 20
# Units per product of softplus ratios in [1/2, 2]: 2^±1000 is inside float64's range.
_PRODUCT_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class AISInfo:
    """Diagnostics of one AIS run.

    Attributes
    ----------
    log_weights : Tensor, shape (n_chains,), float64, on the CPU
        Final log importance weights ``log w_i``; ``log Ẑ = log mean exp(log_weights)``
        (``log Z_0 = 0`` for the normalised base).
    ess : float
        Kish's effective sample size ``(Σ w)² / Σ w²`` of the final weights, in [1, n_chains].
    schedule : Tensor, shape (K + 1,), float64
        The ladder ``β_0 = 0, …, β_K = 1`` that was used.
    log_ess_trace : Tensor, shape (K,), float64, or None
        ``log ESS`` of the running weights after each increment ``k = 1..K``: the weighted
        chains represent ``p_{β_k}`` (ALGORITHMS.md §4.1, "on-the-fly ESS"). ``None`` when
        ``record_ess=False``.
    operator : str
        Name of the transition operator.
    n_chains : int
    schedule_info : ScheduleInfo or None
        How the schedule was made: for ``"varopt"``/``"gms13"`` the measured g, the pilot's
        on-the-fly ESS and its cost; the deceleration δ if one was applied.
    """

    log_weights: Tensor
    ess: float
    schedule: Tensor
    log_ess_trace: Tensor | None
    operator: str
    n_chains: int
    schedule_info: ScheduleInfo | None = None


@register_estimator("ais")
def ais(
    model: TemperedModel,
    *,
    n_chains: int = 100,
    n_temperatures: int | None = None,
    schedule: str | Tensor | Sequence[float] = "sm08",
    operator: str | Operator = "gibbs",
    generator: torch.Generator | int | None = None,
    record_ess: bool = True,
    decelerate: float | None = None,
    schedule_options: Mapping[str, Any] | None = None,
    **unknown: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` by annealed importance sampling from the model's base.

    Parameters
    ----------
    model : TemperedModel
        Any model on the tempered-family protocol (an RBM, ...). Its base should be fitted
        to data (``model.set_base_rate(train_data)``): on MNIST-sized RBMs AIS from a
        uniform base misses log Z by nats, from the base-rate base by hundredths.
    n_chains : int, default 100
        Independent annealing runs ``M``, all advanced together as one batch.
    n_temperatures : int, optional
        ``K``, the number of increments (schedule length minus one); each chain makes
        ``K − 1`` sweeps. Default: the schedule's own (14,500 for ``"sm08"``, the
        Salakhutdinov & Murray 2008 grid, and for ``"linear"``).
    schedule : {"sm08", "linear", "varopt", "gms13"} or Tensor or sequence of float, default "sm08"
        A registered schedule name or explicit ascending βs from 0 to 1, shape ``(K + 1,)``.
        ``"varopt"`` (Kiwaki 2015) and ``"gms13"`` (Grosse et al. 2013) first measure the
        model with a short run (:mod:`boltzlab.estimators.adaptive_schedules`); its sweeps
        are counted in ``cost_sweeps``.
    operator : str or Operator, default "gibbs"
        Transition operator, by name (``operators.get``) or an instance, e.g.
        ``operators.get("mixture", alpha=0.5)``.
    generator : torch.Generator or int, optional
        Randomness (a seed is accepted); on the model's device.
    record_ess : bool, default True
        Keep the running log-ESS after every temperature in ``info.log_ess_trace``.
    decelerate : float, optional
        Cap every increment of the schedule at this δ, stretching the later ones
        (Kiwaki's deceleration, e.g. ``schedule="varopt", decelerate=0.006``); needs ``K·δ ≥ 1``.
    schedule_options : mapping, optional
        Options of an adaptive schedule, e.g. ``{"pilot_chains": 200, "pilot_temperatures": 500}``
        for ``"varopt"`` (see ``adaptive_schedules.varopt`` and ``gms13``).

    Returns
    -------
    LogZEstimate
        ``log_z = log mean exp(log w)`` in nats; ``stderr`` by the delta method
        (``std(w / mean w) / sqrt(M)``); ``bound="lower"``; ``cost_sweeps = M·(K − 1)``
        plus the adaptive schedule's measuring sweeps; ``info`` an :class:`AISInfo`.

    Raises
    ------
    ValidationError
        For a bad ``n_chains``, schedule, operator or unknown option.
    DivergenceError
        When the log-weights are NaN or ``+inf``, or none of them is finite.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.estimate_log_z(model, method="ais", n_chains=50, n_temperatures=200,
    ...                            schedule="linear", generator=0)
    >>> abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr + 1e-6
    True
    """
    if unknown:
        raise ValidationError(
            f"unknown AIS option(s) {', '.join(sorted(unknown))}; AIS takes n_chains, n_temperatures, "
            "schedule, operator, generator, record_ess, decelerate, schedule_options"
        )
    n_chains = check_positive_int(n_chains, "n_chains")
    transition = operators.get(operator)
    if not callable(getattr(transition, "step", None)):
        raise ValidationError(f"operator must be a name or an object with a step() method, got {operator!r}")
    generator = resolve_generator(generator, model.device)
    schedule_info = resolve_schedule(
        model,
        schedule,
        n_temperatures,
        operator=transition,
        generator=generator,
        decelerate=decelerate,
        options=schedule_options,
    )
    _warn_if_uniform_base(model)
    betas = schedule_info.betas

    log_weights, log_ess_trace = _anneal(
        model,
        transition,
        betas,
        n_chains=n_chains,
        generator=generator,
        record_ess=record_ess,
        refresh_summed=_reads_current_state(transition),
    )
    _check_finite(log_weights)

    info = AISInfo(
        log_weights=log_weights,
        ess=ess(log_weights),
        schedule=betas,
        log_ess_trace=log_ess_trace,
        operator=str(getattr(transition, "name", type(transition).__name__)),
        n_chains=n_chains,
        schedule_info=schedule_info,
    )
    return LogZEstimate(
        log_z=float(log_mean_exp(log_weights)),  # + log Z_0, which is 0 for the normalised base
        stderr=log_mean_exp_stderr(log_weights),
        method="ais",
        cost_sweeps=n_chains * (betas.numel() - 2) + schedule_info.cost_sweeps,
        bound="lower",
        info=info,
    )


def _anneal(
    model: TemperedModel,
    transition: Operator,
    betas: Tensor,
    *,
    n_chains: int,
    generator: torch.Generator,
    record_ess: bool,
    refresh_summed: bool,
) -> tuple[Tensor, Tensor | None]:
    """The AIS loop; returns the final log-weights and the log-ESS trace, both on the CPU.

    Nothing here reads a value back to the host, so on a GPU the temperatures are queued
    without waiting; the βs are host floats computed once.
    """
    n_increments = betas.numel() - 1
    beta_values = betas.tolist()
    # The per-chain β tensors are sliced from one device copy of the ladder: building them
    # from host floats would be a blocking host-to-device copy per temperature on a GPU.
    betas_on_device = betas.to(device=model.device, dtype=model.dtype)
    chains = model.init_chains(n_chains, generator=generator)
    log_weights = torch.zeros(n_chains, dtype=torch.float64, device=model.device)
    trace = snapshots = None
    if record_ess:
        # The running log-ESS is computed for blocks of temperatures at once from snapshots
        # of the weights: two small reductions per temperature are a visible share of the
        # loop on small models, one copy is not.
        block = max(1, min(256, _SNAPSHOT_ELEMENTS // n_chains))
        snapshots = torch.empty(block, n_chains, dtype=torch.float64, device=model.device)
        trace = torch.empty(n_increments, dtype=torch.float64, device=model.device)

    for k in range(1, n_increments + 1):
        terms = model.marginal_terms(chains.layers)
        _add_log_f_increment_(log_weights, terms, beta_values[k - 1], beta_values[k])
        if trace is not None and snapshots is not None:
            row = (k - 1) % snapshots.shape[0]
            snapshots[row].copy_(log_weights)
            if row == snapshots.shape[0] - 1 or k == n_increments:
                trace[k - row - 1 : k] = log_ess(snapshots[: row + 1].t())
        if k < n_increments:
            chains = chains.with_beta(betas_on_device[k])
            if refresh_summed:
                chains = _redraw_summed_group(model, chains, terms, beta_values[k], generator)
            chains, _ = transition.step(model, chains, generator=generator, terms=terms)

    return log_weights.cpu(), None if trace is None else trace.cpu()


def _add_log_f_increment_(
    log_weights: Tensor, terms: MarginalTerms, beta_from: float, beta_to: float
) -> None:
    """``log_weights += log f_{beta_to}(x) − log f_{beta_from}(x)``, in place, in float64.

    The increment is formed from its parts rather than as the difference of two ``log f``
    values: those are hundreds of nats for an MNIST RBM while an increment is often below
    1e-3, and 14,500 such cancellations in float32 would cost more than the estimator's error.

    With ``0 ≤ β ≤ β'``, ``u = e^{−β|a|}`` and ``u' = e^{−β'|a|}`` (both in (0, 1]: no
    overflow), ``softplus(x) = max(x, 0) + log(1 + e^{−|x|})`` gives

        Σ_j [softplus(β'a_j) − softplus(β a_j)] = (β' − β)·Σ_j max(a_j, 0) + log Π_j (1 + u'_j)/(1 + u_j).

    Each ratio lies in [1/2, 2], so a product of up to 1,000 of them stays inside float64's
    range (2^±1000) and its log costs one transcendental per chain rather than per unit: two
    ``exp`` per unit instead of two softplus (an ``exp`` and a ``log1p`` each). float64
    transcendentals take ~4 ns per element on the CPU, and two softplus per temperature cost
    half of a 784×500 sweep's GEMM time. The absolute error is about ``J·ε`` (1e-13 nats
    per temperature for J = 500), smaller than that of ``F.softplus``, whose
    ``threshold=20`` shortcut drops ``e^{−x}`` (2e-9 per unit above 20).
    """
    step = beta_to - beta_from
    preactivation = terms.preactivation
    magnitude = preactivation.to(torch.float64, copy=True).abs_()
    one_plus_u_from = torch.mul(magnitude, -beta_from).exp_().add_(1.0)
    ratio = magnitude.mul_(-beta_to).exp_().add_(1.0).div_(one_plus_u_from)
    for chunk in ratio.split(_PRODUCT_CHUNK, dim=1):
        log_weights.add_(chunk.prod(1).log_())
    log_weights.add_(preactivation.clamp_min(0.0).sum(1, dtype=torch.float64), alpha=step)
    log_weights.add_(terms.linear, alpha=step).sub_(terms.base, alpha=step)


def _redraw_summed_group(
    model: TemperedModel, chains: Chains, terms: MarginalTerms, beta: float, generator: torch.Generator
) -> Chains:
    """Chains whose first update group is redrawn from ``p_β(group | rest)`` (see module docstring).

    The group's log-odds at β are ``β·a`` with ``a = terms.preactivation`` (the protocol of
    :class:`~boltzlab.models.base.MarginalTerms`), so no matrix product is needed.
    """
    group = model.update_groups[0]
    probability = torch.sigmoid(terms.preactivation * beta)
    sizes = [model.layer_sizes[index] for index in group]
    layers = list(chains.layers)
    for index, part in zip(group, torch.split(probability, sizes, dim=1), strict=True):
        layers[index] = sample_bernoulli(part.contiguous(), generator=generator)
    return replace(chains, layers=tuple(layers))


def _reads_current_state(transition: Operator) -> bool:
    """Whether ``transition``'s unit update depends on the unit's current value.

    Probed once on a few log-odds (ties included). Operators that do not expose
    ``probability_on`` are assumed to depend on it, which is always safe.
    """
    probability_on = getattr(transition, "probability_on", None)
    if probability_on is None:
        return True
    logits = torch.linspace(-6.0, 6.0, 13, dtype=torch.float64)[None, :]
    when_off = probability_on(logits, torch.zeros_like(logits))
    when_on = probability_on(logits, torch.ones_like(logits))
    return not torch.equal(when_off, when_on)


def _warn_if_uniform_base(model: TemperedModel) -> None:
    """Warn, at the user's calling line, when ``model.base_fitted`` is False."""
    if getattr(model, "base_fitted", True) is not False:
        return
    # Point the warning at the first frame outside boltzlab (the user's call of ais or
    # estimate_log_z), so that it names their line and the default filter shows it once there.
    stacklevel, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, stacklevel = frame.f_back, stacklevel + 1
    warnings.warn(
        "AIS is starting from a uniform base because the model's base was never fitted to data; "
        "on data-trained models this can miss log Z by several nats (by 53 on a 784x20 MNIST RBM). "
        "Call model.set_base_rate(train_data) first (the base-rate base of Salakhutdinov & Murray 2008).",
        UserWarning,
        stacklevel=stacklevel,
    )


def _check_finite(log_weights: Tensor) -> None:
    finite = torch.isfinite(log_weights)
    if bool(finite.all()):
        return
    n_nan = int(torch.isnan(log_weights).sum())
    n_positive_inf = int((log_weights == math.inf).sum())
    if n_nan or n_positive_inf or not bool(finite.any()):
        raise DivergenceError(
            f"AIS produced non-finite log-weights ({n_nan} NaN, {n_positive_inf} +inf, "
            f"{int(finite.sum())} finite of {log_weights.numel()}); check the model's parameters "
            "for NaN/inf or extreme values",
            partial=log_weights,
        )
