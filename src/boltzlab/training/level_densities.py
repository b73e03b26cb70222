"""``log f_β(x)`` at every ladder level, the softplus evaluated in single precision.

The cost that dominates an ``"rts"`` tracking sweep on a CPU (:mod:`boltzlab.training.tracking`,
module docstring, "Cost").
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab.models.base import MarginalTerms

__all__ = ["single_precision_log_f_all"]

# Work-space budget (elements of the (chains, K, units) softplus tensor) per chunk of chains.
_CHUNK_ELEMENTS = 1 << 22


def single_precision_log_f_all(terms: MarginalTerms, betas: Tensor) -> Tensor:
    """``log f_{β_k}(x)`` at every level with the ``n·K·J`` softplus in float32; ``(n, K)``, float64.

    The same function as :func:`~boltzlab.models.base.log_f_marginal_all`,
    ``(1 − β)·base + β·linear + Σ_j softplus(β·a_j)``, with the softplus evaluated in place
    (``logaddexp(βa, 0)``) and summed over units in float32, then widened: about 2.5 times
    faster on a CPU than the float64 path, with errors of order 1e-4 nats for 500 units —
    far below the Monte Carlo error of ``ĉ``. Chunked over chains to bound the work space.
    """
    betas32 = betas.to(device=terms.base.device, dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.float32, device=terms.base.device)
    n_rows, n_units = terms.preactivation.shape
    size = max(1, _CHUNK_ELEMENTS // max(1, betas.numel() * n_units))
    parts = []
    for start in range(0, n_rows, size):
        scaled = terms.preactivation[start : start + size, None, :].to(torch.float32) * betas32[None, :, None]
        torch.logaddexp(scaled, zero, out=scaled)
        parts.append(scaled.sum(2).to(torch.float64))
    summed = torch.cat(parts) if len(parts) > 1 else parts[0]
    betas64 = betas.to(device=terms.base.device, dtype=torch.float64)
    return (1.0 - betas64)[None, :] * terms.base[:, None] + betas64[None, :] * terms.linear[:, None] + summed
