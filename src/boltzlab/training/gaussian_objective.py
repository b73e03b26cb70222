"""The log-likelihood gradient of a Gaussian-binary RBM: data term minus model term.

For ``E(v, h) = Σ_i (v_i − b_i)²/(2σ_i²) − Σ_ij (v_i/σ_i) W_ij h_j − Σ_j c_j h_j``
(:mod:`boltzlab.models.gaussian_rbm`; Hinton 2010, §13.2; Krizhevsky 2009, §1.4) the
sufficient statistics ``−∂E/∂θ`` are

    W_ij:      (v_i/σ_i)·h_j
    b_i:       (v_i − b_i)/σ_i²
    c_j:       h_j
    log σ_i:   (v_i − b_i)²/σ_i² − (v_i/σ_i)·(Wh)_i        (only with ``learn_std=True``;
                                                          Cho, Raiko & Ilin 2011 learn log σ² alike)

and ``∂/∂θ ⟨log p(v)⟩_data = ⟨−∂E/∂θ⟩_data − ⟨−∂E/∂θ⟩_model`` (docs/algorithms.md §3.1). Every
statistic is linear in ``h``, so both terms use ``p(h = 1 | v)`` in place of ``h`` — exact for
the data term, a Rao-Blackwellisation for the model term. As with
:class:`~boltzlab.training.objective.RBMObjective`, ``write_gradient_`` writes the gradient of
the *negative* average log-likelihood (model − data) into ``.grad`` for ``torch.optim``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.training.objective import register_objective

__all__ = ["GaussianRBMObjective", "GaussianSufficientStatistics"]


@dataclass(frozen=True, slots=True)
class GaussianSufficientStatistics:
    """Averages of a Gaussian-binary RBM's sufficient statistics over a batch.

    Attributes
    ----------
    weights : Tensor, shape (n_visible, n_hidden)
        ``⟨(v/σ) hᵀ⟩``.
    visible_bias : Tensor, shape (n_visible,)
        ``⟨(v − b)/σ²⟩``.
    hidden_bias : Tensor, shape (n_hidden,)
        ``⟨h⟩``.
    log_std : Tensor, shape (n_visible,)
        ``⟨(v − b)²/σ² − (v/σ)(Wh)⟩``.
    """

    weights: Tensor
    visible_bias: Tensor
    hidden_bias: Tensor
    log_std: Tensor


def _grad_buffer(parameter: Tensor) -> Tensor:
    # Reuse the .grad tensor between updates: the hot path writes into it.
    if parameter.grad is None:
        parameter.grad = torch.zeros_like(parameter)
    return parameter.grad


class GaussianRBMObjective:
    """Exact data term and Rao-Blackwellised model term of a :class:`~boltzlab.models.GaussianRBM`.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.models.GaussianRBM(n_visible=7, n_hidden=3, generator=0)
    >>> objective = bl.training.objective_for(model)
    >>> data = torch.randn(11, 7, generator=torch.Generator().manual_seed(0))
    >>> positive = objective.positive(model, data)
    >>> objective.write_gradient_(model, positive, positive)  # equal terms: zero up to rounding
    >>> float(model.weights.grad.abs().max()) < 1e-6
    True
    """

    @staticmethod
    def _hidden_probability(model: Any, v: Tensor) -> Tensor:
        scaled_weights = model.weights * torch.exp(-model.log_std)[:, None]
        return torch.sigmoid(torch.addmm(model.hidden_bias, v, scaled_weights))

    @torch.no_grad()
    def positive(self, model: Any, data: Tensor) -> tuple[Tensor, Tensor]:
        """``(v, p(h|v))`` for a minibatch ``v`` of shape ``(batch_size, n_visible)``."""
        return data, self._hidden_probability(model, data)

    @torch.no_grad()
    def negative(self, model: Any, samples: Chains) -> tuple[Tensor, Tensor]:
        """``(v⁻, p(h|v⁻))`` for β = 1 negative chains; the sampled ``h`` is not used."""
        v = samples.layers[0]
        return v, self._hidden_probability(model, v)

    @staticmethod
    @torch.no_grad()
    def statistics(model: Any, layers: tuple[Tensor, ...]) -> GaussianSufficientStatistics:
        """Averages of the sufficient statistics over axis 0 of ``layers = (v, h)``.

        Parameters
        ----------
        model : GaussianRBM
        layers : (Tensor, Tensor), shapes (n, n_visible) and (n, n_hidden)
            ``h`` may be probabilities (the statistics are linear in ``h``).
        """
        v, h = layers[0], layers[1]
        std = torch.exp(model.log_std)
        scaled_v = v / std
        centred = (v - model.visible_bias) / std
        n = v.shape[0]
        return GaussianSufficientStatistics(
            weights=scaled_v.t() @ h / n,
            visible_bias=(centred / std).mean(0),
            hidden_bias=h.mean(0),
            log_std=(centred.square() - scaled_v * (h @ model.weights.t())).mean(0),
        )

    @torch.no_grad()
    def write_gradient_(self, model: Any, positive: tuple[Tensor, ...], negative: tuple[Tensor, ...]) -> None:
        """Write ``model term − data term`` into the ``.grad`` of every parameter.

        Parameters
        ----------
        model : GaussianRBM
        positive : (Tensor, Tensor), shapes (batch_size, n_visible) and (batch_size, n_hidden)
        negative : (Tensor, Tensor), shapes (n_chains, n_visible) and (n_chains, n_hidden)
        """
        v_data, h_data = positive[0], positive[1]
        v_model, h_model = negative[0], negative[1]
        inverse_std = torch.exp(-model.log_std)
        grad_weights = _grad_buffer(model.weights)
        # (1/M)·(v⁻/σ)ᵀ p(h|v⁻) − (1/B)·(v/σ)ᵀ p(h|v), with the 1/σ_i applied to the rows after.
        torch.mm(v_model.t(), h_model, out=grad_weights)
        grad_weights.mul_(1.0 / v_model.shape[0])
        grad_weights.addmm_(v_data.t(), h_data, alpha=-1.0 / v_data.shape[0])
        grad_weights.mul_(inverse_std[:, None])
        grad_visible = _grad_buffer(model.visible_bias)
        torch.mean(v_model, 0, out=grad_visible)
        grad_visible.sub_(v_data.mean(0)).mul_(inverse_std.square())
        grad_hidden = _grad_buffer(model.hidden_bias)
        torch.mean(h_model, 0, out=grad_hidden)
        grad_hidden.sub_(h_data.mean(0))
        if model.log_std.requires_grad:
            grad_log_std = _grad_buffer(model.log_std)
            grad_log_std.copy_(
                self.statistics(model, (v_model, h_model)).log_std
                - self.statistics(model, (v_data, h_data)).log_std
            )

    @torch.no_grad()
    def reconstruction_error(self, model: Any, data: Tensor) -> Tensor:
        """``mean_n Σ_i (v_ni − (b + σ·W p(h|v_n))_i)²``: deterministic, draws no random numbers."""
        hidden = self._hidden_probability(model, data)
        std = torch.exp(model.log_std)
        reconstruction = torch.addmm(model.visible_bias, hidden, (model.weights * std[:, None]).t())
        return (data - reconstruction).square_().sum(1).mean()


register_objective(GaussianRBM)(GaussianRBMObjective)
