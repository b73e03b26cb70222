"""The log-likelihood gradient of models with ±1 spin visible units, in spin coordinates.

A :class:`~boltzlab.models.spin_rbm.SpinRBM`'s energy is linear in its parameters with the
sufficient statistics ``⟨s hᵀ⟩, ⟨s⟩, ⟨h⟩`` (``s = 2v − 1``), so the gradient is the RBM's data
term minus model term with ``s`` in place of ``v`` (docs/algorithms.md §3.1, §1.7): the data
term's hidden probabilities are ``σ(c + sW)`` and the model term's are Rao-Blackwellised as for
the RBM. For a :class:`~boltzlab.models.spin_dbm.SpinDBM` the same holds of the mean-field
objective's visible layer. Both objectives hand the statistics' layers to their binary
parents with the visible layer as spins, so ``write_gradient_`` writes ``⟨s hᵀ⟩_model −
⟨s hᵀ⟩_data`` — the step of training in spin coordinates, which is not the 0/1 model's step.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.models.spin_dbm import SpinDBM
from boltzlab.models.spin_rbm import SpinRBM
from boltzlab.training.mean_field_objective import MeanFieldObjective
from boltzlab.training.objective import RBMObjective, register_objective

__all__ = ["SpinDBMObjective", "SpinRBMObjective"]


class SpinRBMObjective(RBMObjective):
    """The exact data term and Rao-Blackwellised model term of a spin RBM, statistics in ``s``.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training import objective_for
    >>> model = bl.models.SpinRBM(n_visible=5, n_hidden=2, generator=0)
    >>> data = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0]])  # 0/1 inside: 0 is the spin −1
    >>> objective_for(model).positive(model, data)[0]
    tensor([[ 1., -1.,  1.,  1., -1.]])
    """

    @staticmethod
    def _hidden_probability(model: SpinRBM, v: Tensor) -> Tensor:
        return gemm.addmm(model.hidden_bias, model.visible_values(v), model.weights).sigmoid_()

    @torch.no_grad()
    def positive(self, model: SpinRBM, data: Tensor) -> tuple[Tensor, Tensor]:
        """``(s, p(h|s))`` for a minibatch of 0/1 rows ``data`` ``(batch_size, n_visible)``."""
        return model.visible_values(data), self._hidden_probability(model, data)

    @torch.no_grad()
    def negative(self, model: SpinRBM, samples: Chains) -> tuple[Tensor, Tensor]:
        """``(s⁻, p(h|s⁻))`` for β = 1 negative chains; the sampled ``h`` is not used."""
        v = samples.layers[0]
        return model.visible_values(v), self._hidden_probability(model, v)

    @torch.no_grad()
    def reconstruction_error(self, model: SpinRBM, data: Tensor) -> Tensor:
        """``mean_n Σ_i (v_ni − p(v_i = 1 | p(h|v_n)))²`` on the 0/1 rows; deterministic."""
        hidden = self._hidden_probability(model, data)
        ones = torch.ones(data.shape[0], dtype=model.dtype, device=model.device)
        reconstruction = model.conditional_logits(0, (data, hidden), ones).sigmoid_()
        return (data - reconstruction).square_().sum(1).mean()


class SpinDBMObjective(MeanFieldObjective):
    """The DBM's mean-field objective for a DBM with spin visible units, statistics in ``s``."""

    @torch.no_grad()
    def positive(self, model: SpinDBM, data: Tensor) -> tuple[Tensor, ...]:
        """``(s, μ¹, …, μ^L)`` for a minibatch of 0/1 rows ``data``."""
        means = super().positive(model, data)
        return (model.visible_values(means[0]), *means[1:])

    @torch.no_grad()
    def negative(self, model: SpinDBM, samples: Chains) -> tuple[Tensor, ...]:
        """The mean-field objective's model-term layers with the visible layer as spins."""
        layers = super().negative(model, samples)
        return (model.visible_values(layers[0]), *layers[1:])


register_objective(SpinRBM)(SpinRBMObjective)
register_objective(SpinDBM)(SpinDBMObjective)
