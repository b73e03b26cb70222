"""Log-space numerical primitives shared by every estimator.

All reductions over exponentials go through ``torch.logsumexp``; results that estimators
accumulate (log-weights, log Z) are float64. Effective sample sizes follow Kish's form
``ESS = 1 / sum(w_i^2)`` for normalised weights (Neal 2001 uses ``M / (1 + s^2)``, which
differs only by the 1/(M-1) versus 1/M variance convention).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "as_float64",
    "ess",
    "log_ess",
    "log_mean_exp",
    "log_mean_exp_stderr",
    "normalized_weights",
]


def as_float64(x: Tensor) -> Tensor:
    """Return ``x`` as float64 (no copy when it already is)."""
    return x if x.dtype == torch.float64 else x.to(torch.float64)


def log_mean_exp(log_values: Tensor, dim: int = 0) -> Tensor:
    """``log(mean(exp(log_values)))`` along ``dim``, computed stably in float64."""
    log_values = as_float64(log_values)
    return torch.logsumexp(log_values, dim) - math.log(log_values.shape[dim])


def normalized_weights(log_weights: Tensor) -> Tensor:
    """Softmax of 1-D log-weights in float64: importance weights that sum to one."""
    return torch.softmax(as_float64(log_weights), dim=0)


def log_ess(log_weights: Tensor) -> Tensor:
    """Log of Kish's effective sample size, ``2*logsumexp(w) - logsumexp(2w)``."""
    log_weights = as_float64(log_weights)
    return 2.0 * torch.logsumexp(log_weights, 0) - torch.logsumexp(2.0 * log_weights, 0)


def ess(log_weights: Tensor) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of 1-D log-weights."""
    return float(torch.exp(log_ess(log_weights)))


def log_mean_exp_stderr(log_weights: Tensor) -> float:
    """Delta-method standard error of ``log_mean_exp(log_weights)``.

    With normalised weights ``w_i / mean(w)`` having sample standard deviation ``s``, the
    standard error of ``log(mean(w))`` is ``s / sqrt(M)`` to first order. Computed without
    leaving log space for the large values. Returns ``inf`` for fewer than two weights.
    """
    log_weights = as_float64(log_weights).flatten()
    m = log_weights.numel()
    if m < 2:
        return math.inf
    relative = torch.exp(log_weights - log_mean_exp(log_weights))  # w_i / mean(w), mean 1
    return float(relative.std(unbiased=True) / math.sqrt(m))


def softplus(x: Tensor) -> Tensor:
    """``log(1 + e^x)`` to full precision in ``x``'s dtype.

    ``F.softplus`` returns ``x`` itself above its default cut-off of 20, which is off by
    ``e^-20 ≈ 2e-9``: invisible in float32, but a per-unit bias in float64 sums over hundreds
    of units (exact log Z, AIS weights). Above 36, ``e^-x`` is below float64's resolution.
    """
    return F.softplus(x, threshold=36.0 if x.dtype == torch.float64 else 20.0)
