"""AIS's chain budget: more independent chains until the error bar and the weights pass (docs/trust.md).

AIS with the paper's 100 chains is right on models that anneal easily, but on some trained
ones its weights are heavy-tailed: a few chains carry the estimate, the error bar is wide
and the estimate lands a few tenths of a nat low (on the hard-model suite, a CD-1 RBM of
binary alphadigits had standard errors of 0.07–0.30 nats and a run 0.39 nats low; a CD-25
MNIST RBM a run 0.86 low at ± 0.43). More temperatures barely help there (4× left a standard
error of 0.18 on the first); more chains do (1,000 chains: ± 0.10, within 0.12 of exact, at
2.5× the time of 100, since chains are batched). Figures in docs/trust.md, "AIS's chain
budget".

So when the caller leaves ``n_chains`` unset, AIS runs in rounds. The first has
``DEFAULT_CHAINS`` chains; after each, the pooled weights are checked: effective sample size,
agreement of independent chain groups, and the standard error (the larger of the delta
method's and the groups' spread) against ``target_stderr``. While a check fails and fewer
than ``max_chains`` chains have run, another round adds as many chains as the observed error
says are needed (at least doubling, within the cap), on the same schedule. All rounds'
chains are independent, so their weights pool into one unbiased ``Ẑ``. A given ``n_chains``
gets exactly one round (a budget given is a budget kept), unless ``max_chains`` is given too.

Stopping when the *measured* error is small is a data-dependent rule: a round that misses the
heavy tail stops with an error bar that is too narrow. The chain-group check and the
certified lower bound of the verdict are there for that case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.trust import (
    N_GROUPS,
    check_ess,
    check_group_agreement,
    group_log_means,
    group_spread_stderr,
)
from boltzlab.numerics import log_mean_exp_stderr
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_CHAINS",
    "DEFAULT_MAX_CHAINS",
    "TARGET_STDERR",
    "ChainBudget",
    "ChainPlan",
    "budget_failures",
    "next_round",
    "plan_chains",
]

#: Chains of AIS's first round (Salakhutdinov & Murray 2008 used 100).
DEFAULT_CHAINS = 100
#: Chains AIS may grow to when the caller sets no ``n_chains``: 16× the first round.
DEFAULT_MAX_CHAINS = 1600
#: Standard error (nats) a default AIS run grows its chains to reach: within it, an unbiased
#: estimate is within 0.2 nats of log Z 95% of the time.
TARGET_STDERR = 0.1
# A round asks for this much more than the observed error says, so that one extra round
# usually suffices (the error bar of a few hundred heavy-tailed weights is itself noisy).
_MARGIN = 1.25


@dataclass(frozen=True, slots=True)
class ChainPlan:
    """How many chains AIS runs first and at most, and the error bar it grows them to."""

    first: int
    max_chains: int
    target_stderr: float

    @property
    def fixed(self) -> bool:
        """One round only (the caller fixed ``n_chains``)."""
        return self.max_chains == self.first


@dataclass(frozen=True, slots=True)
class ChainBudget:
    """What AIS's chain budget did (``AISInfo.budget``).

    Attributes
    ----------
    rounds : tuple of int
        Chains run in each round; their sum is ``AISInfo.n_chains``.
    stderrs : tuple of float
        The pooled standard error (nats) after each round, as the budget measured it.
    stopped : str
        ``"checks passed"``, ``"max_chains reached"`` or ``"fixed budget"``.
    max_chains : int
    target_stderr : float
    failures : tuple of str
        The checks still failing when the budget stopped (empty when they passed).
    """

    rounds: tuple[int, ...]
    stderrs: tuple[float, ...]
    stopped: str
    max_chains: int
    target_stderr: float
    failures: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.stopped == "checks passed"


def plan_chains(n_chains: int | None, max_chains: int | None, target_stderr: float | None) -> ChainPlan:
    """The chain plan for AIS's ``n_chains``, ``max_chains`` and ``target_stderr`` options."""
    first = DEFAULT_CHAINS if n_chains is None else check_positive_int(n_chains, "n_chains")
    target = TARGET_STDERR if target_stderr is None else float(target_stderr)
    if not target > 0.0:
        raise ValidationError(f"target_stderr must be a positive number of nats, got {target_stderr!r}")
    if max_chains is None:
        cap = first if n_chains is not None else max(first, DEFAULT_MAX_CHAINS)
    else:
        cap = max(first, check_positive_int(max_chains, "max_chains"))
    return ChainPlan(first=first, max_chains=cap, target_stderr=target)


def budget_failures(log_weights: Tensor, target_stderr: float) -> tuple[list[str], float]:
    """The budget's failing checks on pooled ``log_weights`` and the standard error it measured.

    The standard error is the larger of the delta method's and the chain groups' spread (as the
    verdict reports it); the ESS and group checks are the verdict's own.
    """
    failures = [message for message in (check_ess(log_weights, what="ais weights"),) if message]
    stderr = log_mean_exp_stderr(log_weights)
    if log_weights.numel() >= 8 * N_GROUPS:
        values, stderrs = group_log_means(log_weights, N_GROUPS)
        message = check_group_agreement(values, stderrs, what="chain groups")
        if message:
            failures.append(message)
        stderr = max(stderr, group_spread_stderr(values))
    if not stderr <= target_stderr:
        failures.append(f"standard error {stderr:.3g} above the target {target_stderr:g} nats")
    return failures, stderr


def next_round(total: int, stderr: float, plan: ChainPlan) -> int:
    """Chains of the next round: what ``stderr`` says is needed to reach the target (error ∝
    1/√chains), at least as many as have run, within ``plan.max_chains``."""
    if math.isfinite(stderr) and stderr > 0.0:
        wanted = math.ceil(total * (stderr / plan.target_stderr) ** 2 * _MARGIN) - total
    else:
        wanted = total
    return max(0, min(max(wanted, total), plan.max_chains - total))
