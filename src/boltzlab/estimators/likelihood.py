"""Average log-likelihood of data under a model, given log Z."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.base import log_f_marginal
from boltzlab.validation import as_model_data, check_finite_model

__all__ = ["log_likelihood", "log_unnormalized"]


def log_unnormalized(model, data: Tensor, *, batch_size: int = 4096) -> Tensor:
    """``log f(v)`` (hidden units summed out, β = 1) per example; float64, shape ``(n,)``."""
    check_finite_model(model, "log_likelihood")
    data = as_model_data(model, data, "data")
    parts = [log_f_marginal(model.marginal_terms(batch), 1.0) for batch in torch.split(data, batch_size)]
    return torch.cat(parts)


def log_likelihood(model, data: Tensor, log_z: float, *, batch_size: int = 4096) -> float:
    """Mean ``log p(v) = log f(v) − log Z`` over the rows of ``data``, in nats per example.

    Parameters
    ----------
    model : TemperedModel
    data : Tensor, shape (n_examples, n_visible)
        Values 0/1, or real for a model with real-valued visible units (``validate_data``).
    log_z : float
        ``log Z`` of the model (exact, or an estimate's ``log_z``).
    """
    if hasattr(log_z, "log_z"):
        log_z = log_z.log_z  # a LogZEstimate
    if not math.isfinite(float(log_z)):
        raise ValidationError(f"log_likelihood: log_z must be a finite number of nats, got {log_z}")
    return float(log_unnormalized(model, data, batch_size=batch_size).mean()) - float(log_z)
