"""What every annealing estimator shares: weight increments, the summed-layer redraw, checks.

AIS (docs/algorithms.md §4.1), RAISE (§4.2) and the VAROPT pilot (§5.4) move chains along
a ladder of tempered distributions and accumulate ``log f_{β_k}(x) − log f_{β_{k−1}}(x)``
on the summed-out density. The pieces they have in common live here, public, so that no
estimator reaches into another's private names.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from dataclasses import replace

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import DivergenceError
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.rng import sample_bernoulli

__all__ = ["add_log_f_increment_", "operator_name"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Units per product of softplus ratios in [1/2, 2]: 2^±1000 is inside float64's range.
_PRODUCT_CHUNK = 1000


def add_log_f_increment_(
    log_weights: Tensor, terms: MarginalTerms, beta_from: float, beta_to: float
) -> Tensor:
    """``log_weights += log f_{beta_to}(x) − log f_{beta_from}(x)``, in place, in float64.

    Returns ``log_weights`` (as torch's in-place methods do), so that it serves as a pilot's
    :data:`~boltzlab.tempering.placement.WeightIncrement`.

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
    return log_weights.add_(terms.linear, alpha=step).sub_(terms.base, alpha=step)


def redraw_summed_group(
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


def reads_current_state(transition: Operator) -> bool:
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


def operator_name(transition: Operator) -> str:
    """The name an estimator reports for its transition operator (its ``name``, else its class)."""
    return str(getattr(transition, "name", type(transition).__name__))


def warn_if_uniform_base(model: TemperedModel) -> None:
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


def check_finite_log_weights(log_weights: Tensor) -> None:
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
