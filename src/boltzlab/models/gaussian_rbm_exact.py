"""The Gaussian-binary RBM with its visible layer integrated out: exact sums over hidden states.

With the parameters of :mod:`boltzlab.models.gaussian_rbm` (``W``, ``b``, ``c``, ``σ`` and the
base ``N(μ, s²)``), ``log f_β(v, h)`` is, for each ``h``, a quadratic in each ``v_i`` with
precision ``λ_i = β/σ_i² + (1 − β)/s_i²``, and
``∫ exp(−λv²/2 + ηv) dv = √(2π/λ)·exp(η²/(2λ))``. So

    log f_β(h) = β c·h − (1 − β) J log 2 + Σ_i [η_i(h)²/(2λ_i) + ½ log(2π/λ_i)
                 − β b_i²/(2σ_i²) − (1 − β)(μ_i²/(2s_i²) + ½ log 2π s_i²)],

    η_i(h) = β·(b_i/σ_i² + (Wh)_i/σ_i) + (1 − β)·μ_i/s_i²,

a quadratic form in ``h`` (:func:`hidden_quadratic_form`). Summing it over the ``2^J``
hidden states (:func:`enumerate_hidden_log_f`) gives ``log Z(β)`` exactly, which makes
:func:`boltzlab.exact_log_z` work for small ``J`` (docs/algorithms.md §1.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.models.rbm import all_binary_states
from boltzlab.validation import check_positive_int, require

__all__ = ["GaussianParameters64", "HiddenQuadraticForm"]

#: Exact enumeration of the hidden layer: 2^30 states is already minutes of work.
_MAX_ENUMERATED_HIDDEN = 30


@dataclass(frozen=True, slots=True)
class GaussianParameters64:
    """A Gaussian-binary RBM's parameters in float64 (detached): what exact computations read.

    Attributes
    ----------
    weights : Tensor, shape (D, J)
        ``W``.
    visible_bias : Tensor, shape (D,)
        ``b``.
    hidden_bias : Tensor, shape (J,)
        ``c``.
    std : Tensor, shape (D,)
        ``σ``, positive.
    base_mean : Tensor, shape (D,)
        ``μ`` of the Gaussian base.
    base_std : Tensor, shape (D,)
        ``s`` of the Gaussian base, positive.
    """

    weights: Tensor
    visible_bias: Tensor
    hidden_bias: Tensor
    std: Tensor
    base_mean: Tensor
    base_std: Tensor

    @property
    def scaled_weights(self) -> Tensor:
        """``W_ij / σ_i``: the coupling of ``v`` to ``h``; shape (D, J)."""
        return self.weights / self.std[:, None]


@dataclass(frozen=True, slots=True)
class HiddenQuadraticForm:
    """``log f_β(h) = constant + linear·h + ½ hᵀ matrix h``; float64.

    Attributes
    ----------
    constant : Tensor, 0-dim
    linear : Tensor, shape (J,)
    matrix : Tensor, shape (J, J), symmetric
    """

    constant: Tensor
    linear: Tensor
    matrix: Tensor

    def log_f(self, h: Tensor) -> Tensor:
        """The form at hidden states ``h`` (float64, shape ``(n, J)``); float64, shape ``(n,)``."""
        return self.constant + h @ self.linear + 0.5 * ((h @ self.matrix) * h).sum(1)


def hidden_quadratic_form(parameters: GaussianParameters64, beta: float) -> HiddenQuadraticForm:
    """``log f_β(h)`` of the module docstring as a :class:`HiddenQuadraticForm`, at one ``beta``.

    Parameters
    ----------
    parameters : GaussianParameters64
    beta : float in [0, 1]
    """
    p = parameters
    n_hidden = p.weights.shape[1]
    scaled = p.scaled_weights
    inverse_variance = p.std.reciprocal().square()
    base_precision = p.base_std.reciprocal().square()
    precision = beta * inverse_variance + (1.0 - beta) * base_precision  # λ, (D,)
    eta0 = beta * p.visible_bias * inverse_variance + (1.0 - beta) * p.base_mean * base_precision
    per_unit = (
        eta0.square() / (2.0 * precision)
        + 0.5 * torch.log(2.0 * math.pi / precision)
        - beta * p.visible_bias.square() * inverse_variance * 0.5
        - (1.0 - beta)
        * (
            p.base_mean.square() * base_precision * 0.5
            + torch.log(p.base_std)
            + 0.5 * math.log(2.0 * math.pi)
        )
    )
    constant = per_unit.sum() - (1.0 - beta) * n_hidden * math.log(2.0)
    linear = beta * p.hidden_bias + beta * (scaled.t() @ (eta0 / precision))
    matrix = (beta * beta) * (scaled.t() @ (scaled / precision[:, None]))
    return HiddenQuadraticForm(constant=constant, linear=linear, matrix=matrix)


def enumerate_hidden_log_f(
    parameters: GaussianParameters64, beta: float, *, chunk_states: int | None
) -> Iterator[Tensor]:
    """Yield ``log f_β(h)`` of every hidden state, chunk by chunk; float64.

    States in the order of :func:`~boltzlab.models.rbm.all_binary_states`, made on the
    parameters' device in chunks of ``chunk_states`` (default about 32 MB of work space).
    The chunks' ``logsumexp`` is ``log Z(β)``. At most :data:`_MAX_ENUMERATED_HIDDEN` hidden
    units, checked before any work is done.
    """
    n_hidden = parameters.weights.shape[1]
    require(
        n_hidden <= _MAX_ENUMERATED_HIDDEN,
        f"exact enumeration needs n_hidden <= {_MAX_ENUMERATED_HIDDEN}, got {n_hidden}",
    )
    quadratic = hidden_quadratic_form(parameters, beta)
    if chunk_states is None:
        chunk_states = max(1, (1 << 22) // max(n_hidden, 1))
    chunk_states = check_positive_int(chunk_states, "chunk_states")
    total = 1 << n_hidden
    for start in range(0, total, chunk_states):
        stop = min(total, start + chunk_states)
        h = all_binary_states(n_hidden, start=start, stop=stop, device=parameters.weights.device)
        yield quadratic.log_f(h)
