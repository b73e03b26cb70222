"""The log-likelihood gradient of a Potts RBM, and the gauge it is trained in.

A :class:`~boltzlab.models.potts_rbm.PottsRBM` has the binary RBM's energy on its one-hot
visible layer, so its sufficient statistics are the RBM's, ``⟨v hᵀ⟩, ⟨v⟩, ⟨h⟩``, with ``v``
one-hot (docs/algorithms.md §3.1), and :class:`~boltzlab.training.objective.RBMObjective`'s
data term, Rao-Blackwellised model term and gradient hold as they are. Two things differ:

- the reconstruction error uses each site's softmax, not a per-column sigmoid;
- after every update the parameters go back to the zero-sum gauge
  (:meth:`~boltzlab.models.potts_rbm.PottsRBM.apply_gauge_`), which leaves the distribution
  unchanged. Without it the redundant directions (``Σ_a W_iaj`` against ``c_j``, ``Σ_a g_ia``
  against a constant) drift with the gradient's noise; with it every parameter is identified
  and a penalty on ``W`` means what it says.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.models.potts_dbm import PottsDBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.training.mean_field_objective import MeanFieldObjective
from boltzlab.training.objective import RBMObjective, register_objective

__all__ = ["PottsDBMObjective", "PottsRBMObjective"]


class PottsRBMObjective(RBMObjective):
    """The exact data term and Rao-Blackwellised model term of a Potts RBM, kept in the zero-sum gauge.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training import objective_for
    >>> model = bl.models.PottsRBM(n_sites=5, n_states=3, n_hidden=2, generator=0)
    >>> type(objective_for(model)).__name__
    'PottsRBMObjective'
    """

    @torch.no_grad()
    def reconstruction_error(self, model: PottsRBM, data: Tensor) -> Tensor:
        """``mean_n Σ_ia (v_nia − softmax_a(g_i + W_i p(h|v_n)))²``: deterministic."""
        hidden = self._hidden_probability(model, data)
        logits = gemm.addmm(model.visible_bias, hidden, model.weights.t())
        shape = (data.shape[0], model.n_sites, model.n_states)
        reconstruction = torch.softmax(logits.view(shape), 2).view(data.shape)
        return (data - reconstruction).square_().sum(1).mean()

    @torch.no_grad()
    def after_step_(self, model: PottsRBM) -> None:
        """Back to the zero-sum gauge after the optimiser's step (the distribution is unchanged)."""
        model.apply_gauge_()


class PottsDBMObjective(MeanFieldObjective):
    """The DBM's mean-field objective for a Potts DBM, kept in the zero-sum gauge of its sites."""

    @torch.no_grad()
    def after_step_(self, model: PottsDBM) -> None:
        """Back to the zero-sum gauge after the optimiser's step (the distribution is unchanged)."""
        model.apply_gauge_()


register_objective(PottsRBM)(PottsRBMObjective)
register_objective(PottsDBM)(PottsDBMObjective)
