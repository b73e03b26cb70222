"""More chains when a tempered estimate's error bar is too wide: the budget's precision step.

docs/algorithms.md §4.3 ("How long to run") and docs/trust.md ("Tempered estimators"). The
rounds of :func:`~boltzlab.estimators.tempered.rounds.run_rounds` double the *length* of the
run while a check fails. Once the checks pass, a standard error above ``target_stderr``
(:data:`~boltzlab.estimators.verdict.checks.DEFAULT_TARGET_STDERR`, AIS's 0.1 nats) adds *chains* instead: where chains rarely
cross the ladder, a longer run of the same chains buys little precision, and independent
chains buy it at ``1/√n`` (on a CD-1 RBM of binary alphadigits, MBAR's error bar went from
0.17 to 0.12 nats for twice the sweeps per chain, but to 0.07–0.11 with 400 chains instead
of 100).

The wider round keeps the earlier chains, which are at equilibrium under the weights, and
adds fresh ones: exact base samples at level 0, run first for about one round trip's worth
of sweeps (:func:`burn_in_sweeps`) that are not recorded, so that the round does not count
their climb up the ladder. Every chain then runs the last round's length with the weights
the last round estimated (RTS's ``log Ẑ``), and the estimate is that round alone, as after
any round.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from boltzlab.chains import Chains
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.tempered.step import SamplerState
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_MAX_CHAINS",
    "GROWTH_MARGIN",
    "Widen",
    "burn_in_sweeps",
    "chains_for_target",
    "joined_start",
    "max_chains_for",
    "precision_stderr",
]

#: Chains a tempered budget may grow to by default (8× the 100 it starts with).
DEFAULT_MAX_CHAINS = 800
#: Asked-for chains are this much more than ``1/√n`` says, as AIS's budget does.
GROWTH_MARGIN = 1.25

#: ``widen(samples, n_chains, n_sweeps, burn_in) -> (wider round, chain-sweeps of the burn-in)``.
Widen = Callable[[TemperedSamples, int, int, int], tuple[TemperedSamples, int]]


def precision_stderr(estimate: LogZEstimate) -> float:
    """The part of the error bar that more chains shrink (nats).

    TI's error bar carries its ladder's discretisation error in quadrature
    (``info.statistical_stderr`` is the rest); more chains do not touch that part.
    """
    return float(getattr(estimate.info, "statistical_stderr", estimate.stderr))


def max_chains_for(options: dict, n_chains: int) -> int:
    """The chain cap from the caller's options: ``max_chains``, else fixed at a given ``n_chains``.

    A caller who gives ``n_chains`` and not ``max_chains`` gets that many chains (a budget given
    is a budget kept); otherwise :data:`DEFAULT_MAX_CHAINS`, never below the chains run.
    """
    given = options.pop("max_chains", None)
    if given is not None:
        return max(check_positive_int(given, "max_chains"), n_chains)
    if "n_chains" in options:
        return n_chains
    return max(DEFAULT_MAX_CHAINS, n_chains)


def chains_for_target(n_chains: int, stderr: float, target: float, max_chains: int) -> int:
    """Chains for the next round: ``1/√n`` scaling to ``target`` with a margin, at least doubling.

    Parameters
    ----------
    n_chains : int
        Chains of the round just run.
    stderr, target : float
        Its standard error (the part chains shrink) and the target, nats.
    max_chains : int

    Returns
    -------
    int
        At most ``max_chains``.
    """
    wanted = n_chains * GROWTH_MARGIN * (stderr / target) ** 2 if math.isfinite(stderr) else math.inf
    return int(min(max_chains, max(2 * n_chains, math.ceil(min(wanted, 1e12)))))


def burn_in_sweeps(n_sweeps: int, round_trips: float) -> int:
    """Unrecorded sweeps for fresh chains: one round trip at the last round's pace, at most its length.

    ``round_trips`` is the last round's mean round trips per chain over its ``n_sweeps``.
    """
    if not round_trips > 1.0:
        return n_sweeps
    return max(1, math.ceil(n_sweeps / round_trips))


def joined_start(earlier: SamplerState, fresh: SamplerState) -> SamplerState:
    """The earlier chains' states followed by the fresh chains' (one start for the wider round)."""
    chains = Chains.concatenate((earlier.chains, fresh.chains.to(device=earlier.chains.device)))
    levels = torch.cat([earlier.levels, fresh.levels.to(earlier.levels.device)])
    return SamplerState(chains=chains, levels=levels)
