"""The level moves of simulated tempering: neighbour proposals, their ratio, Gibbs level draws.

Shared by simulated tempering, adaptive ST, CAST (:mod:`boltzlab.tempering.simulated`) and the
tempered estimators' samplers; docs/algorithms.md §2.3.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from boltzlab.rng import rand

__all__ = ["sample_categorical"]


def propose_neighbours(levels: Tensor, n_levels: int, *, generator: torch.Generator) -> Tensor:
    """``k ± 1`` with probability ½ each; the only neighbour at the two ends. int64, shape (n,).

    One uniform is drawn per chain, also at the ends, so the random stream does not depend on
    where the chains are.
    """
    uniform = rand(tuple(levels.shape), generator=generator, dtype=torch.float64, device=levels.device)
    step = torch.where(uniform < 0.5, -1, 1)
    step = torch.where(levels == 0, 1, step)
    step = torch.where(levels == n_levels - 1, -1, step)
    return levels + step


def log_proposal_ratio(levels: Tensor, proposed: Tensor, n_levels: int) -> Tensor:
    """``log q(k | k') − log q(k' | k)`` of the neighbour proposal; float64, shape (n,).

    ``q(· | j) = 1`` from an end level (one neighbour) and ½ inside, so the ratio is 2 when
    the move leaves an end for an inner level, ½ when it enters an end from an inner level,
    and 1 otherwise (docs/algorithms.md §2.3 pitfall).
    """

    def log_q_from(level: Tensor) -> Tensor:
        inner = (level > 0) & (level < n_levels - 1)
        return inner.to(torch.float64) * -math.log(2.0)

    return log_q_from(proposed) - log_q_from(levels)


def sample_categorical(log_probabilities: Tensor, *, generator: torch.Generator) -> Tensor:
    """One draw per row of unnormalised log-probabilities ``(n, K)`` by inverse CDF; int64 (n,)."""
    probabilities = torch.softmax(log_probabilities.to(torch.float64), dim=1)
    cumulative = probabilities.cumsum(1)
    uniform = rand(
        (log_probabilities.shape[0], 1), generator=generator, dtype=torch.float64, device=cumulative.device
    )
    # Round-off can leave the last cumulative value just below 1; clamp to the last level.
    return (cumulative < uniform).sum(1).clamp_max(log_probabilities.shape[1] - 1)
