"""Exact transition matrices of layerwise operators on tiny models, and their spectra.

The joint state space of a model with ``N`` binary units has ``2^N`` states, ordered as in
:func:`boltzlab.estimators.exact.joint_states` (global unit ``u`` is bit ``u`` of the state
index); a categorical (Potts) site of ``q`` states is one digit of base ``q`` in the same
order (:func:`boltzlab.estimators.exact.model_joint_states`). A row-stochastic matrix ``T[x, y] = P(next = y | now = x)`` acts on row vectors,
``p·T``, and a product ``A @ B`` means "first A, then B" (docs/algorithms.md §2.1).

The matrices are built from the operator's own ``probability_on`` (and
``categorical_probabilities``) and the model's own
``conditional_logits``, which are exactly what the batched sampler uses, so ``p·T = p``
checks the code that runs, not a re-derivation of it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import Tensor

from boltzlab.estimators.exact import as_float64_model, model_joint_states, unit_radices
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import LayerwiseOperator
from boltzlab.validation import require

__all__ = [
    "group_transition_matrix",
    "is_primitive",
    "slem",
    "transition_matrix",
    "unit_transition_matrix",
]

MAX_UNITS = 12


def _units_transition_matrix(
    model: TemperedModel, operator: LayerwiseOperator, units: list[tuple[int, int]], beta: float
) -> Tensor:
    """Matrix of updating the given (layer, unit) pairs simultaneously, all in one group.

    A categorical layer's units are its sites, each moved by the operator's
    ``categorical_probabilities``; binary units by ``probability_on``.
    """
    model64 = as_float64_model(model)
    radices = unit_radices(model64)
    n_joint = math.prod(q for _, _, q in radices)
    require(
        n_joint <= 2**MAX_UNITS,
        f"exact transition matrices are for models with <= 2^{MAX_UNITS} joint states "
        f"(<= {MAX_UNITS} binary units), got {n_joint}",
    )
    layers = model_joint_states(model64)
    n_states = layers[0].shape[0]
    beta_vector = torch.full((n_states,), float(beta), dtype=torch.float64, device=model64.device)
    kinds = getattr(model64, "layer_kinds", None) or ("binary",) * len(layers)
    place_of, place = {}, 1
    for layer, unit, q in radices:
        place_of[(layer, unit)] = (place, q)
        place *= q

    # Each updated unit's distribution over its values, for every state: (n_states, q).
    distributions = []
    cache: dict[int, Tensor] = {}
    for layer, unit in units:
        if layer not in cache:
            logits = model64.conditional_logits(layer, layers, beta_vector)
            if kinds[layer] == "categorical":
                q = int(model64.layer_states[layer])  # type: ignore[attr-defined]
                shape = (n_states, logits.shape[1] // q, q)
                cache[layer] = operator.categorical_probabilities(
                    logits.view(shape), layers[layer].view(shape)
                )
            else:
                on = operator.probability_on(logits, layers[layer])
                cache[layer] = torch.stack([1.0 - on, on], -1)
        distributions.append(cache[layer][:, unit, :].cpu())

    codes = torch.arange(n_states, dtype=torch.int64)
    places = [place_of[key][0] for key in units]
    sizes = [place_of[key][1] for key in units]
    # The code with every updated unit's digit set to 0.
    cleared = codes.clone()
    for position, q in zip(places, sizes, strict=True):
        cleared -= (torch.div(codes, position, rounding_mode="floor") % q) * position
    matrix = torch.zeros(n_states, n_states, dtype=torch.float64)
    for pattern in itertools.product(*(range(q) for q in sizes)):
        probability = torch.ones(n_states, dtype=torch.float64)
        offset = 0
        for value, position, distribution in zip(pattern, places, distributions, strict=True):
            probability = probability * distribution[:, value]
            offset += value * position
        matrix[codes, cleared + offset] += probability
    return matrix


def unit_transition_matrix(
    model: TemperedModel, operator: LayerwiseOperator, layer: int, unit: int, *, beta: float = 1.0
) -> Tensor:
    """``T_i``: update only unit ``unit`` of layer ``layer``; float64, shape ``(2^N, 2^N)``."""
    return _units_transition_matrix(model, operator, [(layer, unit)], beta)


def group_transition_matrix(
    model: TemperedModel, operator: LayerwiseOperator, group: tuple[int, ...], *, beta: float = 1.0
) -> Tensor:
    """Update every unit of the layers in ``group`` at once; float64, ``(2^N, 2^N)``."""
    units = [(layer, unit) for layer, unit, _ in unit_radices(model) if layer in group]
    return _units_transition_matrix(model, operator, units, beta)


def transition_matrix(model: TemperedModel, operator: LayerwiseOperator, *, beta: float = 1.0) -> Tensor:
    """One full sweep ``T = T_{group 1} T_{group 2} ⋯`` in ``model.update_groups`` order.

    For an RBM this is ``T_h T_v``: hidden first, then visible. Float64, ``(2^N, 2^N)``.
    """
    matrix = None
    for group in model.update_groups:
        step = group_transition_matrix(model, operator, group, beta=beta)
        matrix = step if matrix is None else matrix @ step
    return matrix


def slem(matrix: Tensor) -> float:
    """Second-largest eigenvalue *modulus* of a stochastic matrix.

    1 for a reducible or periodic chain; smaller means faster worst-case convergence.
    """
    eigenvalues = np.linalg.eigvals(matrix.detach().cpu().numpy())
    moduli = np.sort(np.abs(eigenvalues))[::-1]
    return float(moduli[1]) if moduli.size > 1 else 0.0


def is_primitive(matrix: Tensor, *, max_power: int | None = None) -> bool:
    """Whether some power ``T^n`` (n ≤ ``max_power``, default N²) is entrywise positive.

    A primitive stochastic matrix is irreducible and aperiodic. Works on the zero pattern
    only (boolean products by repeated squaring), so round-off cannot fake a positive entry.
    """
    n = matrix.shape[0]
    max_power = (n - 1) ** 2 + 1 if max_power is None else max_power  # Wielandt's bound
    pattern = (matrix > 0).to(torch.float64)
    power = pattern.clone()
    exponent = 1
    while exponent < max_power:
        if bool((power > 0).all()):
            return True
        power = ((power @ power) > 0).to(torch.float64)
        exponent *= 2
    return bool((power > 0).all())
