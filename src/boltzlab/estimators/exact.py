"""Exact partition functions and distributions by enumeration (the test oracles).

``exact_log_z`` enumerates the smallest set of layers whose enumeration gives Z (for an RBM
the smaller layer, the other summed out analytically) in chunks, in float64: a 784×20 RBM
(2^20 states) takes a few seconds and 2^24 states never hold more than one chunk in memory.
``joint_log_probabilities`` enumerates every joint state of a tiny model (≤ 24 units) for
exact transition matrices and distribution checks.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import Tensor

from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.base import TemperedModel
from boltzlab.models.rbm import all_binary_states
from boltzlab.validation import check_finite_model, require

__all__ = ["as_float64_model", "exact_log_z", "joint_log_probabilities", "joint_states"]


def as_float64_model(model: TemperedModel) -> TemperedModel:
    """A float64 copy of ``model`` (the original is untouched) for exact computations."""
    if model.dtype == torch.float64:
        return model
    return copy.deepcopy(model).to(torch.float64)  # type: ignore[attr-defined]


def exact_log_z(model: TemperedModel, beta: float = 1.0, *, chunk_states: int | None = None) -> float:
    """``log Z(β)`` of the tempered family by enumeration, in nats.

    A model with its own ``exact_log_z(beta)`` (a continuous family such as
    :class:`~boltzlab.models.toy.GaussianMixtureFamily`) is asked for it instead.

    Parameters
    ----------
    model : TemperedModel
    beta : float, default 1.0
        1 gives the model's own ``log Z``; 0 gives the base's (0 for a normalised base).
    chunk_states : int, optional
        States per chunk; the default keeps the work space near 8 MB on the CPU and 32 MB on a GPU (an RBM).
    """
    require(0.0 <= float(beta) <= 1.0, f"beta must be in [0, 1], got {beta}")
    check_finite_model(model, "exact_log_z")
    closed_form = getattr(model, "exact_log_z", None)
    if closed_form is not None:  # a continuous family (models/toy.py): no states to enumerate
        return float(closed_form(float(beta)))
    running = torch.tensor(-math.inf, dtype=torch.float64)
    for chunk in model.enumerate_log_f(float(beta), chunk_states=chunk_states):
        running = torch.logaddexp(running, torch.logsumexp(chunk.cpu(), 0))
    return float(running)


@register_estimator("exact", family="exact")
def estimate_exact(model: TemperedModel, *, chunk_states: int | None = None, **_: object) -> LogZEstimate:
    """:func:`exact_log_z` as a :class:`LogZEstimate` (standard error 0)."""
    return LogZEstimate(log_z=exact_log_z(model, chunk_states=chunk_states), stderr=0.0, method="exact")


def joint_states(
    layer_sizes: tuple[int, ...],
    *,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> tuple[Tensor, ...]:
    """Every joint state of a layered binary model, as a tuple of layers.

    State ``s`` has bit ``u`` of ``s`` as global unit ``u``, units numbered layer by layer
    from the visible layer. Each layer has shape ``(2^total, size)``.
    """
    total = sum(layer_sizes)
    require(total <= 24, f"joint enumeration is for tiny models (<= 24 units), got {total}")
    states = all_binary_states(total, dtype=dtype, device=device)
    return tuple(torch.split(states, list(layer_sizes), dim=1))


def joint_log_probabilities(model: TemperedModel, beta: float = 1.0) -> Tensor:
    """Normalised ``log p_β(x)`` of every joint state (order of :func:`joint_states`); float64."""
    model64 = as_float64_model(model)
    layers = joint_states(model64.layer_sizes, device=model64.device)
    log_f = model64.log_f(layers, beta)
    return (log_f - torch.logsumexp(log_f, 0)).cpu()
