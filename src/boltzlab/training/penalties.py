"""Penalties on the weight matrices: L2, L1, and the L1² of protein RBMs.

With ``W`` each weight matrix of the model (every parameter with two or more dimensions, as for
the optimiser's weight decay; biases are never penalised), shape ``(n_rows, n_columns)``, the
training objective *minimised* is ``−⟨log p(v)⟩ + R(W)`` with

    R(W) = λ₂/2·Σ_ij W_ij²  +  λ₁·Σ_ij |W_ij|  +  λ₁²/(2·n_rows)·Σ_j (Σ_i |W_ij|)².

* **L2** (``weight_decay``) shrinks every weight in proportion to its size; without centring it
  is ``torch.optim.SGD``'s own weight decay (:mod:`boltzlab.training.optim`), with centring it
  is added here so that the centred direction covers it (:mod:`boltzlab.training.centering`).
* **L1** (``l1``) pushes small weights to exactly zero (in expectation: with SGD they oscillate
  around it by one step).
* **L1²** (``l1_squared``) is Tubiana, Cocco & Monasson (2019, *Learning protein constitutive
  motifs from sequence data*, eLife 8:e39397, Methods, "Regularization"): the square of each
  hidden unit's L1 norm, so a unit's effective L1 strength grows with its own total weight.
  It lets a few units carry large weights while keeping each one sparse: *localised,
  interpretable* features, rather than all units equally small. For a Potts RBM
  ``n_rows = L·q`` (the one-hot width; ``Σ_i`` runs over sites and states, the paper's
  ``Σ_{i,a}`` and ``1/(2·N·q)``); for a binary RBM ``n_rows = n_visible`` (``q = 1``); for a
  DBM each matrix uses its lower layer's width.

The gradients added to ``.grad`` (which holds the gradient of the minimised objective) are
``λ₂·W``, ``λ₁·sign(W)`` (0 at 0, a subgradient) and ``λ₁²/n_rows·(Σ_i |W_ij|)·sign(W_ij)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.errors import ValidationError

__all__ = ["Penalties", "check_penalty", "penalised_parameters"]


def check_penalty(value: Any, name: str) -> float:
    """A finite float ``>= 0``; :class:`ValidationError` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValidationError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def penalised_parameters(model: nn.Module) -> list[Tensor]:
    """The weight matrices of ``model``: its parameters of two or more dimensions, in order."""
    return [parameter for parameter in model.parameters() if parameter.dim() >= 2]


@dataclass(frozen=True, slots=True)
class Penalties:
    """Coefficients of the penalties on the weight matrices (module docstring).

    Attributes
    ----------
    l2 : float >= 0, default 0
        λ₂ of ``λ₂/2·Σ W²``. The trainer leaves it 0 here and lets SGD apply ``weight_decay``,
        except under centring.
    l1 : float >= 0, default 0
        λ₁ of ``λ₁·Σ |W|``.
    l1_squared : float >= 0, default 0
        λ₁² of ``λ₁²/(2·n_rows)·Σ_j (Σ_i |W_ij|)²``.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> Penalties(l1=0.1).value(model) == 0.1 * float(model.weights.abs().sum())
    True
    """

    l2: float = 0.0
    l1: float = 0.0
    l1_squared: float = 0.0

    def __post_init__(self) -> None:
        for name in ("l2", "l1", "l1_squared"):
            check_penalty(getattr(self, name), name)

    @property
    def active(self) -> bool:
        """Whether any coefficient is non-zero (else :meth:`add_gradient_` is skipped)."""
        return self.l2 > 0.0 or self.l1 > 0.0 or self.l1_squared > 0.0

    def value(self, model: nn.Module) -> float:
        """``R(W)`` summed over the model's weight matrices, in nats (the units of −log p)."""
        total = 0.0
        with torch.no_grad():
            for weights in penalised_parameters(model):
                w = weights.detach().to(torch.float64).reshape(weights.shape[0], -1)
                column_norms = w.abs().sum(0)
                total += 0.5 * self.l2 * float(w.square().sum())
                total += self.l1 * float(column_norms.sum())
                total += self.l1_squared / (2.0 * w.shape[0]) * float(column_norms.square().sum())
        return total

    @torch.no_grad()
    def add_gradient_(self, model: nn.Module) -> None:
        """Add ``∇R`` to the ``.grad`` of every weight matrix (which must exist)."""
        for weights in penalised_parameters(model):
            grad = weights.grad
            if grad is None:
                raise ValidationError(
                    "Penalties.add_gradient_ needs .grad set (write the objective's gradient first)"
                )
            if self.l2 > 0.0:
                grad.add_(weights, alpha=self.l2)
            if self.l1 > 0.0 or self.l1_squared > 0.0:
                sign = torch.sign(weights)
                if self.l1 > 0.0:
                    grad.add_(sign, alpha=self.l1)
                if self.l1_squared > 0.0:
                    # λ/n_rows · (Σ_i |W_ij|) · sign(W_ij): one column norm per hidden unit j.
                    column_norms = weights.abs().reshape(weights.shape[0], -1).sum(0).view(weights.shape[1:])
                    grad.addcmul_(sign, column_norms, value=self.l1_squared / weights.shape[0])
