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

__all__ = [
    "as_float64_model",
    "exact_log_z",
    "joint_log_probabilities",
    "joint_states",
    "model_joint_states",
    "unit_radices",
]


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


def unit_radices(model: TemperedModel) -> list[tuple[int, int, int]]:
    """``(layer, unit, states)`` of every unit, layer by layer: a binary unit has 2 states, a
    categorical site (``layer_kinds`` ``"categorical"``) ``layer_states[layer]``."""
    kinds = getattr(model, "layer_kinds", None) or ("binary",) * len(model.layer_sizes)
    radices = []
    for layer, (kind, size) in enumerate(zip(kinds, model.layer_sizes, strict=True)):
        if kind == "categorical":
            q = int(model.layer_states[layer])  # type: ignore[attr-defined]
            radices.extend((layer, site, q) for site in range(size // q))
        else:
            radices.extend((layer, unit, 2) for unit in range(size))
    return radices


def model_joint_states(model: TemperedModel, *, dtype: torch.dtype = torch.float64) -> tuple[Tensor, ...]:
    """Every joint state of a tiny model in its own representation (one-hot categorical sites).

    State ``s`` is read in mixed radix over :func:`unit_radices` (the first unit the least
    significant digit); for a binary model this is :func:`joint_states`. At most ``2^24`` states.
    """
    radices = unit_radices(model)
    n_states = math.prod(q for _, _, q in radices)
    require(n_states <= 2**24, f"joint enumeration is for tiny models (<= 2^24 states), got {n_states}")
    codes = torch.arange(n_states, dtype=torch.int64, device=model.device)
    layers = [torch.zeros(n_states, size, dtype=dtype, device=model.device) for size in model.layer_sizes]
    place = 1
    for layer, unit, q in radices:
        digit = torch.div(codes, place, rounding_mode="floor") % q
        if _is_categorical(model, layer):
            layers[layer][torch.arange(n_states, device=model.device), unit * q + digit] = 1.0
        else:
            layers[layer][:, unit] = digit.to(dtype)
        place *= q
    return tuple(layers)


def _is_categorical(model: TemperedModel, layer: int) -> bool:
    kinds = getattr(model, "layer_kinds", None)
    return kinds is not None and kinds[layer] == "categorical"


def joint_log_probabilities(model: TemperedModel, beta: float = 1.0) -> Tensor:
    """Normalised ``log p_β(x)`` of every joint state (order of :func:`model_joint_states`); float64."""
    model64 = as_float64_model(model)
    layers = model_joint_states(model64)
    log_f = model64.log_f(layers, beta)
    return (log_f - torch.logsumexp(log_f, 0)).cpu()
