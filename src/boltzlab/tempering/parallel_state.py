"""The state, per-step info and summary of parallel tempering, and its swap log-ratio.

:mod:`boltzlab.tempering.parallel` holds the scheme; this module holds the values it threads
and reports (docs/algorithms.md §2.5), so that summaries can be read (plots, the command
line) without the scheme. Their fields shared with trajectory tempering are declared once in
:mod:`boltzlab.tempering.replica_swaps`; the round-trip labels are re-exported from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.models.base import MarginalTerms
from boltzlab.numerics import softplus
from boltzlab.tempering.replica_swaps import (
    ReplicaExchangeInfo,
    ReplicaExchangeState,
    ReplicaExchangeSummary,
)

__all__ = ["ParallelTemperingInfo", "ParallelTemperingState", "ParallelTemperingSummary"]


@dataclass(frozen=True, slots=True)
class ParallelTemperingState(ReplicaExchangeState):
    """State of ``n_chains`` independent parallel-tempering systems of ``K`` levels each.

    Attributes
    ----------
    chains, replica, direction, round_trips, swap_accepted, swap_attempted, n_steps, n_rounds
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeState`; the replica in
        slot ``k·n_chains + i`` is at β = ``β_k`` (in the model's dtype), so the last
        ``n_chains`` slots are the β = 1 chains.
    """


@dataclass(frozen=True, slots=True)
class ParallelTemperingInfo(ReplicaExchangeInfo):
    """Diagnostics of one step; never carried forward.

    Attributes
    ----------
    swap_accepted, swap_attempted, round_trips, flip_rate
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeInfo`.
    """


@dataclass(frozen=True, slots=True)
class ParallelTemperingSummary(ReplicaExchangeSummary):
    """Diagnostics of a run (from :meth:`ParallelTempering.summarize`).

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder, ascending.
    swap_acceptance, swap_attempts, round_trips, total_round_trips, flip_rate, flip_rate_per_level, n_steps
        As in :class:`~boltzlab.tempering.replica_swaps.ReplicaExchangeSummary`.
    """

    betas: Tensor


def log_f_change(terms: MarginalTerms, beta_from: Tensor, beta_to: Tensor) -> Tensor:
    """``log f_{β_to}(x) − log f_{β_from}(x)`` in the summed-out form; float64, shape ``(n,)``.

    The same quantity as two :func:`~boltzlab.models.base.log_f_marginal` calls, with the
    softplus evaluated in the pre-activations' dtype (the model's: float64 models stay exact
    in float64; float32 models get the precision of their own sweep's logits at a third of
    the cost) and every sum accumulated in float64.
    """
    pre = terms.preactivation
    change = (beta_to - beta_from) * (terms.linear - terms.base)
    high = softplus(pre * beta_to.to(pre.dtype)[:, None]).sum(1, dtype=torch.float64)
    low = softplus(pre * beta_from.to(pre.dtype)[:, None]).sum(1, dtype=torch.float64)
    return change + (high - low)
