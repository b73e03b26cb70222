"""The state, per-step info and summary of parallel tempering, and its swap log-ratio.

:mod:`boltzlab.tempering.parallel` holds the scheme; this module holds the values it threads
and reports (docs/algorithms.md §2.5), so that summaries can be read (plots, the command
line) without the scheme.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.models.base import MarginalTerms
from boltzlab.numerics import softplus

__all__ = [
    "DOWN",
    "UNLABELLED",
    "UP",
    "ParallelTemperingInfo",
    "ParallelTemperingState",
    "ParallelTemperingSummary",
    "log_f_change",
]

#: Round-trip labels of a replica (:mod:`boltzlab.tempering.parallel`, "Round trips"): none
#: yet, up (last touched the bottom), down (reached the top after the bottom).
UNLABELLED, UP, DOWN = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ParallelTemperingState:
    """State of ``n_chains`` independent parallel-tempering systems of ``K`` levels each.

    Attributes
    ----------
    chains : Chains
        ``K·n_chains`` replicas, level-major: slot ``k·n_chains + i`` is level ``k`` of system
        ``i``, at β = ``β_k`` (in the model's dtype).
    replica : Tensor, shape (K, n_chains), int64
        Which replica (its starting level) occupies each slot.
    direction : Tensor, shape (K, n_chains), int8
        Round-trip label of the replica in each slot: 0 none yet, 1 up (last touched the
        bottom), 2 down (reached the top after the bottom).
    round_trips : Tensor, shape (n_chains,), int64
        Round trips completed in each system since ``init``.
    swap_accepted, swap_attempted : Tensor, shape (K − 1,), int64
        Exchanges accepted and proposed per neighbour pair since ``init``, summed over systems.
    n_steps : int
        Steps taken since ``init``.
    n_rounds : int
        Swap rounds done since ``init`` (its parity picks the pairs of ``"alternating"``).
    """

    chains: Chains
    replica: Tensor
    direction: Tensor
    round_trips: Tensor
    swap_accepted: Tensor
    swap_attempted: Tensor
    n_steps: int
    n_rounds: int

    @property
    def n_levels(self) -> int:
        return self.replica.shape[0]

    @property
    def n_chains(self) -> int:
        """Number of independent systems (= number of β = 1 chains)."""
        return self.replica.shape[1]


@dataclass(frozen=True, slots=True)
class ParallelTemperingInfo:
    """Diagnostics of one step; never carried forward.

    Attributes
    ----------
    swap_accepted : Tensor, shape (K − 1, n_chains), bool
        Whether system ``i`` exchanged the states of levels ``(k, k+1)`` in this step's swap
        round (the one following the previous step's sweep).
    swap_attempted : Tensor, shape (K − 1,), bool
        Whether pair ``(k, k+1)`` was proposed in this step (in every system).
    round_trips : Tensor, shape (n_chains,), int64
        Round trips completed in this step, per system.
    flip_rate : Tensor, shape (K,), float64
        Mean fraction of units changed by this step's sweep, per level (swaps excluded).
    """

    swap_accepted: Tensor
    swap_attempted: Tensor
    round_trips: Tensor
    flip_rate: Tensor


@dataclass(frozen=True, slots=True)
class ParallelTemperingSummary:
    """Diagnostics of a run (from :meth:`ParallelTempering.summarize`).

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder, ascending.
    swap_acceptance : Tensor, shape (K − 1,), float64
        Fraction of proposed exchanges of pair ``(k, k+1)`` that were accepted (NaN for a
        pair never proposed).
    swap_attempts : Tensor, shape (K − 1,), int64
        Exchanges proposed per pair, summed over systems.
    round_trips : Tensor, shape (n_chains,), int64
        Round trips (bottom → top → bottom) completed in each system during the steps,
        summed over its K replicas.
    total_round_trips : int
    flip_rate : float
        Mean fraction of units changed per sweep, over steps, levels and chains.
    flip_rate_per_level : Tensor, shape (K,), float64
    n_steps : int
    """

    betas: Tensor
    swap_acceptance: Tensor
    swap_attempts: Tensor
    round_trips: Tensor
    total_round_trips: int
    flip_rate: float
    flip_rate_per_level: Tensor
    n_steps: int


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
