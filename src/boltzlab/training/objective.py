"""The log-likelihood gradient of a Boltzmann machine: data term minus model term.

For an energy linear in its parameters θ, the gradient of the average log-likelihood is

    ∂/∂θ ⟨log p(v)⟩_data = ⟨−∂E/∂θ⟩_data − ⟨−∂E/∂θ⟩_model,

for an RBM ``⟨v hᵀ⟩, ⟨v⟩, ⟨h⟩`` (Hinton 2002, eq. 5; Tieleman 2008, eq. 2; docs/algorithms.md
§3.1). The data term uses ``p(h|v)`` exactly. The model term uses the negative phase's visible
samples ``v⁻`` with their hidden units *Rao-Blackwellised*: ``p(h|v⁻)`` in place of a sampled
``h``, which has the same expectation under the model and lower variance.

``torch.optim`` minimises, so :meth:`RBMObjective.write_gradient_` writes the gradient of the
*negative* average log-likelihood into ``.grad``: model term − data term.

Models know nothing of training (docs/architecture.md, "Layout"): an objective module files
its objective under the model class it trains with :func:`register_objective` (the DBM's
mean-field objective, Salakhutdinov & Hinton 2009; the Gaussian-binary RBM's), and
:func:`objective_for` finds it by the model's class, most specific first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import RBM

__all__ = ["Objective", "RBMObjective", "SufficientStatistics", "objective_for", "register_objective"]


@runtime_checkable
class Objective(Protocol):
    """How a model turns data and negative samples into a log-likelihood gradient.

    ``positive`` and ``negative`` return per-example *layers of expectations* (for an RBM
    ``(v, p(h|v))``); ``write_gradient_`` averages them and writes model − data into
    ``.grad``. Everything runs without autograd.
    """

    def positive(self, model: Any, data: Tensor) -> tuple[Tensor, ...]:
        """Data-term layers for a minibatch ``data`` of shape ``(batch_size, n_visible)``."""
        ...

    def negative(self, model: Any, samples: Chains) -> tuple[Tensor, ...]:
        """Model-term layers for the negative phase's samples (Rao-Blackwellised)."""
        ...

    def write_gradient_(self, model: Any, positive: tuple[Tensor, ...], negative: tuple[Tensor, ...]) -> None:
        """Set every parameter's ``.grad`` to −(data term − model term)."""
        ...

    def reconstruction_error(self, model: Any, data: Tensor) -> Tensor:
        """Mean squared one-step mean-field reconstruction error (a 0-d tensor)."""
        ...

    # An objective may also define ``after_step_(model)``, which the training loop calls after
    # every optimiser step (a Potts RBM's objective puts the parameters back in their gauge).


@dataclass(frozen=True, slots=True)
class SufficientStatistics:
    """Averages of an RBM's sufficient statistics over a batch of layers.

    Attributes
    ----------
    weights : Tensor, shape (n_visible, n_hidden)
        ``⟨v hᵀ⟩``.
    visible : Tensor, shape (n_visible,)
        ``⟨v⟩``.
    hidden : Tensor, shape (n_hidden,)
        ``⟨h⟩``.
    """

    weights: Tensor
    visible: Tensor
    hidden: Tensor


def _grad_buffer(parameter: Tensor) -> Tensor:
    # Reuse the .grad tensor between updates: the hot path writes into it with out=.
    if parameter.grad is None:
        parameter.grad = torch.zeros_like(parameter)
    return parameter.grad


class RBMObjective:
    """The exact data term and Rao-Blackwellised model term of a binary RBM.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training import RBMObjective
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> objective = RBMObjective()
    >>> data = (torch.rand(11, 7, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    >>> positive = objective.positive(model, data)
    >>> objective.write_gradient_(model, positive, positive)  # equal terms: zero up to rounding
    >>> float(model.weights.grad.abs().max()) < 1e-6
    True
    """

    @staticmethod
    def _hidden_probability(model: RBM, v: Tensor) -> Tensor:
        return gemm.addmm(model.hidden_bias, v, model.weights).sigmoid_()

    @torch.no_grad()
    def positive(self, model: RBM, data: Tensor) -> tuple[Tensor, Tensor]:
        """``(v, p(h|v))`` for a minibatch ``v`` of shape ``(batch_size, n_visible)``."""
        return data, self._hidden_probability(model, data)

    @torch.no_grad()
    def negative(self, model: RBM, samples: Chains) -> tuple[Tensor, Tensor]:
        """``(v⁻, p(h|v⁻))`` for β = 1 negative chains; the sampled ``h`` is not used."""
        v = samples.layers[0]
        return v, self._hidden_probability(model, v)

    @staticmethod
    @torch.no_grad()
    def statistics(layers: tuple[Tensor, ...]) -> SufficientStatistics:
        """Averages ``⟨v hᵀ⟩, ⟨v⟩, ⟨h⟩`` over axis 0 of ``layers = (v, h)``."""
        v, h = layers[0], layers[1]
        return SufficientStatistics(weights=v.t() @ h / v.shape[0], visible=v.mean(0), hidden=h.mean(0))

    @torch.no_grad()
    def write_gradient_(self, model: RBM, positive: tuple[Tensor, ...], negative: tuple[Tensor, ...]) -> None:
        """Write ``model term − data term`` into ``weights.grad``, ``visible_bias.grad``, ``hidden_bias.grad``.

        Parameters
        ----------
        model : RBM
        positive : (Tensor, Tensor), shapes (batch_size, n_visible) and (batch_size, n_hidden)
        negative : (Tensor, Tensor), shapes (n_chains, n_visible) and (n_chains, n_hidden)
        """
        v_data, h_data = positive[0], positive[1]
        v_model, h_model = negative[0], negative[1]
        grad_weights = _grad_buffer(model.weights)
        # (1/M)·v⁻ᵀ p(h|v⁻) − (1/B)·vᵀ p(h|v): two GEMMs into the reused buffer.
        gemm.mm_into(grad_weights, v_model.t(), h_model)
        grad_weights.mul_(1.0 / v_model.shape[0])
        gemm.addmm_(grad_weights, v_data.t(), h_data, alpha=-1.0 / v_data.shape[0])
        grad_visible = _grad_buffer(model.visible_bias)
        torch.mean(v_model, 0, out=grad_visible)
        grad_visible.sub_(v_data.mean(0))
        grad_hidden = _grad_buffer(model.hidden_bias)
        torch.mean(h_model, 0, out=grad_hidden)
        grad_hidden.sub_(h_data.mean(0))

    @torch.no_grad()
    def reconstruction_error(self, model: RBM, data: Tensor) -> Tensor:
        """``mean_n Σ_i (v_ni − σ(b + W p(h|v_n))_i)²``: deterministic, draws no random numbers."""
        hidden = self._hidden_probability(model, data)
        reconstruction = gemm.addmm(model.visible_bias, hidden, model.weights.t()).sigmoid_()
        return (data - reconstruction).square_().sum(1).mean()


_OBJECTIVES: dict[type, Callable[[], Objective]] = {}


def register_objective(model_class: type) -> Callable[[Callable[[], Objective]], Callable[[], Objective]]:
    """Decorator: ``factory()`` builds the objective that trains models of ``model_class``.

    >>> from boltzlab.models import RBM
    >>> type(objective_for(RBM(n_visible=7, n_hidden=3, generator=0))).__name__
    'RBMObjective'
    """

    def decorate(factory: Callable[[], Objective]) -> Callable[[], Objective]:
        _OBJECTIVES[model_class] = factory
        return factory

    return decorate


def objective_for(model: Any) -> Objective:
    """The objective registered for the most specific class of ``model`` (its MRO order)."""
    for cls in type(model).__mro__:
        factory = _OBJECTIVES.get(cls)
        if factory is not None:
            return factory()
    raise ValidationError(
        f"cannot train a {type(model).__name__}: no training objective is registered for it "
        "(boltzlab.training.register_objective)"
    )


register_objective(RBM)(RBMObjective)
