"""Average log-likelihood of data under a model, given log Z: plain or weighted by example.

With per-example weights ``w`` (e.g. the sequence weights of an alignment,
:func:`boltzlab.data.sequence_weights.sequence_weights`) the average is
``Σ_n w_n log p(v_n) / Σ_n w_n``: integer weights give exactly the mean over the data with
every row repeated ``w_n`` times (docs/training.md, "Sequence weights").
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.base import log_f_marginal
from boltzlab.validation import as_model_data, check_finite_model, check_sample_weights

__all__ = ["log_likelihood", "log_unnormalized"]


def log_unnormalized(model, data: Tensor, *, batch_size: int = 4096) -> Tensor:
    """``log f(v)`` (hidden units summed out, β = 1) per example; float64, shape ``(n,)``."""
    check_finite_model(model, "log_likelihood")
    data = as_model_data(model, data, "data")
    parts = [log_f_marginal(model.marginal_terms(batch), 1.0) for batch in torch.split(data, batch_size)]
    return torch.cat(parts)


def log_likelihood(
    model, data: Tensor, log_z: float, *, sample_weights: Tensor | None = None, batch_size: int = 4096
) -> float:
    """Mean ``log p(v) = log f(v) − log Z`` over the rows of ``data``, in nats per example.

    Parameters
    ----------
    model : TemperedModel
    data : Tensor, shape (n_examples, n_visible)
        Values 0/1, or what the model's ``validate_data`` accepts (real values for a
        Gaussian-binary RBM; sequences for a Potts RBM).
    log_z : float
        ``log Z`` of the model (exact, or an estimate's ``log_z``).
    sample_weights : Tensor of shape (n_examples,), optional
        Non-negative weights with a positive sum: the result is the weighted mean
        ``Σ_n w_n log p(v_n) / Σ_n w_n`` (float64 throughout). Default: the plain mean.
    batch_size : int, default 4096
        Rows per pass (memory only; the result does not depend on it).

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.RBM(n_visible=5, n_hidden=3, generator=0)
    >>> data = torch.tensor([[1.0, 0, 1, 0, 0], [0, 1, 1, 0, 1]])
    >>> log_z = bl.exact_log_z(model)
    >>> doubled = torch.cat([data, data[1:]])
    >>> weighted = bl.log_likelihood(model, data, log_z, sample_weights=torch.tensor([1.0, 2.0]))
    >>> abs(weighted - bl.log_likelihood(model, doubled, log_z)) < 1e-12
    True
    """
    if hasattr(log_z, "log_z"):
        log_z = log_z.log_z  # a LogZEstimate
    if not math.isfinite(float(log_z)):
        raise ValidationError(f"log_likelihood: log_z must be a finite number of nats, got {log_z}")
    log_f = log_unnormalized(model, data, batch_size=batch_size)
    if sample_weights is None:
        return float(log_f.mean()) - float(log_z)
    weights = check_sample_weights(sample_weights, log_f.shape[0], device=log_f.device)
    return float((weights @ log_f) / weights.sum()) - float(log_z)
