"""Exact transition matrices of layerwise operators on tiny models, and their spectra.

The joint state space of a model with ``N`` units has ``2^N`` states, ordered as in
:func:`boltzlab.estimators.exact.joint_states` (global unit ``u`` is bit ``u`` of the state
index). A row-stochastic matrix ``T[x, y] = P(next = y | now = x)`` acts on row vectors,
``p·T``, and a product ``A @ B`` means "first A, then B" (docs/algorithms.md §2.1).

The matrices are built from the operator's own ``probability_on`` and the model's own
``conditional_logits``, which are exactly what the batched sampler uses, so ``p·T = p``
checks the code that runs, not a re-derivation of it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from boltzlab.estimators.exact import as_float64_model, joint_states
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


def _layer_offsets(layer_sizes: tuple[int, ...]) -> list[int]:
    offsets, total = [], 0
    for size in layer_sizes:
        offsets.append(total)
        total += size
    return offsets


def _units_transition_matrix(
    model: TemperedModel, operator: LayerwiseOperator, units: list[tuple[int, int]], beta: float
) -> Tensor:
    """Matrix of updating the given (layer, unit) pairs simultaneously, all in one group."""
    model64 = as_float64_model(model)
    sizes = tuple(model64.layer_sizes)
    total = sum(sizes)
    require(
        total <= MAX_UNITS,
        f"exact transition matrices are for models with <= {MAX_UNITS} units, got {total}",
    )
    layers = joint_states(sizes, device=model64.device)
    n_states = 2**total
    beta_vector = torch.full((n_states,), float(beta), dtype=torch.float64, device=model64.device)
    offsets = _layer_offsets(sizes)

    # P(unit = 1 after its update) for every state, for the units being updated.
    probability_columns = []
    cache: dict[int, Tensor] = {}
    for layer, unit in units:
        if layer not in cache:
            logits = model64.conditional_logits(layer, layers, beta_vector)
            cache[layer] = operator.probability_on(logits, layers[layer])
        probability_columns.append(cache[layer][:, unit])
    probability_on = torch.stack(probability_columns, 1).cpu()  # (n_states, n_units_updated)

    bit_positions = torch.tensor([offsets[layer] + unit for layer, unit in units], dtype=torch.int64)
    codes = torch.arange(n_states, dtype=torch.int64)
    mask = int(sum(1 << int(position) for position in bit_positions))
    matrix = torch.zeros(n_states, n_states, dtype=torch.float64)
    n_updated = len(units)
    for pattern in range(2**n_updated):
        pattern_bits = torch.tensor([(pattern >> i) & 1 for i in range(n_updated)], dtype=torch.float64)
        probability = torch.where(pattern_bits.bool(), probability_on, 1.0 - probability_on).prod(1)
        target_bits = sum(
            int(bit) << int(pos)
            for bit, pos in zip(pattern_bits.tolist(), bit_positions.tolist(), strict=True)
        )
        targets = (codes & ~mask) | target_bits
        matrix[codes, targets] += probability
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
    units = [(layer, unit) for layer in group for unit in range(model.layer_sizes[layer])]
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
