"""Each tracking chain's influence on ``log ĉ``, and the delta-method error bar it gives.

Carlson, Stinson, Pakman & Paninski (2016), App. B, with independent chains as units; used by
the ``"rts"`` negative phase (:mod:`boltzlab.training.tracking`, module docstring, "Noise").
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["chain_influence"]


def chain_influence(log_sums: Tensor) -> Tensor:
    """Each chain's influence on ``log ĉ_k − log ĉ_0``; shape ``(n_chains, K)``, float64.

    Parameters
    ----------
    log_sums : Tensor, shape (n_chains, K), float64
        ``log Σ_t q(β_k | x_t)`` of each chain over the sweeps of one update.

    With per-chain sums ``a_uk`` and ``ĉ_k = mean_u a_uk``, the first-order change of
    ``log ĉ_k − log ĉ_0`` due to chain ``u`` is ``(a_uk/ĉ_k − a_u0/ĉ_0)/n``; returned without
    the ``1/n``. Its mean over chains is 0, column 0 is 0.
    """
    n_chains = log_sums.shape[0]
    scaled = torch.exp(log_sums - torch.logsumexp(log_sums, 0, keepdim=True)) * n_chains
    return scaled - scaled[:, :1]


def influence_variance(influence: Tensor) -> Tensor:
    """Variance of the mean influence over independent chains; shape ``(K,)``, float64.

    ``Σ_u (G_uk − Ḡ_k)²/(n(n − 1))`` (Carlson et al. 2016, App. B, with chains as units).
    """
    n_chains = influence.shape[0]
    centred = influence - influence.mean(0, keepdim=True)
    return centred.square().sum(0) / (n_chains * (n_chains - 1))
