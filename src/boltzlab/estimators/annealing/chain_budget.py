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
chains are independent and each round's ``Ẑ`` is unbiased; the rounds' weights pool into one
estimate. A given ``n_chains`` gets exactly one round (a budget given is a budget kept), unless
``max_chains`` is given too.

Stopping when the *measured* error is small is a data-dependent rule: it favours runs that
missed the heavy tail, so the pooled ``Ẑ`` is biased slightly low (AIS stays a stochastic
lower bound) and such a run stops with an error bar that is too narrow; the error measure
itself takes the spread of only four chain groups. The chain-group check and the certified
lower bound of the verdict are there for that case.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from boltzlab import distributed, progress
from boltzlab.chains import Chains
from boltzlab.estimators.annealing.increments import check_finite_log_weights
from boltzlab.estimators.annealing.schedule_check import coarse_run_checks
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.checks import (
    DEFAULT_TARGET_STDERR,
    N_GROUPS,
    Verdict,
    check_ess,
    check_group_agreement,
    check_lower_bound,
    group_log_means,
    group_spread_stderr,
)
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.numerics import log_mean_exp, log_mean_exp_stderr

if TYPE_CHECKING:
    # options imports this module (the budget's defaults); plan_chains only reads its fields.
    from boltzlab.estimators.annealing.options import AISOptions

__all__ = [
    "BUDGET_OPTIONS",
    "DEFAULT_CHAINS",
    "DEFAULT_MAX_CHAINS",
    "ChainBudget",
    "annealing_checks",
    "annealing_matched",
    "budget_failures",
    "budget_runs",
    "next_round",
    "plan_chains",
    "without_budget",
]

#: The options that ask for (or shape) the chain budget.
BUDGET_OPTIONS = frozenset({"n_chains", "max_chains", "target_stderr"})

#: Chains of AIS's first round (Salakhutdinov & Murray 2008 used 100).
DEFAULT_CHAINS = 100
#: Chains AIS may grow to when the caller sets no ``n_chains``: 16× the first round.
DEFAULT_MAX_CHAINS = 1600
# A round asks for this much more than the observed error says, so that one extra round
# usually suffices (the error bar of a few hundred heavy-tailed weights is itself noisy).
_MARGIN = 1.25


@dataclass(frozen=True, slots=True)
class ChainPlan:
    """How many chains AIS runs first and at most, and the error bar it grows them to;
    ``fixed`` when the caller fixed ``n_chains`` (one round, whatever the checks say)."""

    first: int
    max_chains: int
    target_stderr: float
    fixed: bool = False


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
        The checks still failing when the budget stopped (empty when they passed; a fixed
        budget records them too, for the record: they do not make it grow).
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


def plan_chains(options: AISOptions) -> ChainPlan:
    """The chain plan of AIS's (checked) ``n_chains``, ``max_chains`` and ``target_stderr``.

    ``None`` is "not given": :data:`DEFAULT_CHAINS` first, up to :data:`DEFAULT_MAX_CHAINS`
    (or ``max_chains``), towards
    :data:`~boltzlab.estimators.verdict.checks.DEFAULT_TARGET_STDERR`. A given ``n_chains``
    without ``max_chains`` is one fixed round.
    """
    target = DEFAULT_TARGET_STDERR if options.target_stderr is None else options.target_stderr
    cap = options.max_chains
    if options.n_chains is None:
        first = DEFAULT_CHAINS if cap is None else min(DEFAULT_CHAINS, cap)
        return ChainPlan(
            first=first, max_chains=DEFAULT_MAX_CHAINS if cap is None else cap, target_stderr=target
        )
    first = options.n_chains
    return ChainPlan(
        first=first, max_chains=first if cap is None else cap, target_stderr=target, fixed=cap is None
    )


def budget_runs(options: Mapping[str, Any]) -> bool:
    """Whether AIS with these options runs its chain budget (no ``n_chains``, or ``max_chains`` too)."""
    return options.get("n_chains") is None or options.get("max_chains") is not None


def without_budget(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with a fixed ``DEFAULT_CHAINS`` chains, unless they already say how many.

    For callers whose AIS is a part or a periodic measurement (the DBM bound tracker; anchored
    AIS's options, :class:`~boltzlab.estimators.annealing.options.AnchoredAISOptions`, apply the
    same rule): a fixed cost, not the budget's growth, unless a budget option was given.
    """
    # A budget option given as None is "not given", as in the option classes.
    given = {name for name in BUDGET_OPTIONS & options.keys() if options[name] is not None}
    return dict(options) if given else {**options, "n_chains": DEFAULT_CHAINS}


@dataclass(frozen=True)
class WeightChecks:
    """The checks of one set of importance weights, shared by the chain budget and the verdict.

    Attributes
    ----------
    failures : tuple of str
        The effective sample size's and the chain groups' failures, in that order.
    spread : float
        The spread of the ``n_groups`` chain groups' estimates as a standard error (nats);
        NaN where there are too few chains for groups.
    n_groups : int
        0 where there are fewer than ``8·N_GROUPS`` weights.
    """

    failures: tuple[str, ...]
    spread: float
    n_groups: int


def check_weights(log_weights: Tensor, *, what: str) -> WeightChecks:
    """ESS and chain-group agreement of one-per-chain ``log_weights`` (shape ``(n_chains,)``)."""
    failures = [message for message in (check_ess(log_weights, what=what),) if message]
    if log_weights.numel() < 8 * N_GROUPS:
        return WeightChecks(tuple(failures), math.nan, 0)
    values, stderrs = group_log_means(log_weights, N_GROUPS)
    message = check_group_agreement(values, stderrs, what="chain groups")
    if message:
        failures.append(message)
    return WeightChecks(tuple(failures), group_spread_stderr(values), values.numel())


def budget_failures(
    log_weights: Tensor, target_stderr: float, bound: LowerBound | None = None
) -> tuple[list[str], float]:
    """The budget's failing checks on pooled ``log_weights`` and the standard error it measured.

    The standard error is the larger of the delta method's and the chain groups' spread (as the
    verdict reports it); the ESS, group and lower-bound checks are the verdict's own. A
    certified lower bound ``bound`` (``estimate_log_z`` passes the verdict's witness) catches
    the run whose chains all missed the heavy tail: its error bar looks fine, its estimate
    sits below the bound (a CD-1 RBM of binary alphadigits: −0.39 ± 0.07 at 100 chains).
    """
    checks = check_weights(log_weights, what="ais weights")
    failures = list(checks.failures)
    stderr = log_mean_exp_stderr(log_weights)
    if checks.n_groups:
        stderr = max(stderr, checks.spread)
    if not stderr <= target_stderr:
        failures.append(f"standard error {stderr:.3g} above the target {target_stderr:g} nats")
    if bound is not None:
        message = check_lower_bound(float(log_mean_exp(log_weights)), stderr, bound)
        if message:
            failures.append(message)
    return failures, stderr


def next_round(total: int, stderr: float, plan: ChainPlan) -> int:
    """Chains of the next round: what ``stderr`` says is needed to reach the target (error ∝
    1/√chains), at least as many as have run, within ``plan.max_chains``.

    A round never leaves fewer than ``plan.first`` chains under the cap: it takes them too,
    rather than leaving a last round of a handful of chains, which costs a full round's
    time on a GPU and has fewer chains than a sharded run has blocks.
    """
    if math.isfinite(stderr) and stderr > 0.0:
        wanted = math.ceil(total * (stderr / plan.target_stderr) ** 2 * _MARGIN) - total
    else:
        wanted = total
    left = max(0, plan.max_chains - total)
    chains = min(max(wanted, total), left)
    return left if left - chains < plan.first else chains


def run_budget(
    run_round: Callable[[int], tuple[Tensor, Tensor | None, Chains]],
    plan: ChainPlan,
    bound: LowerBound | None = None,
) -> tuple[Tensor, Tensor | None, Chains, ChainBudget]:
    """Rounds of ``run_round(chains)`` until the pooled weights pass or ``plan.max_chains`` ran.

    ``run_round`` returns one round's log-weights (shape ``(chains,)``, float64), its per-
    temperature ``logsumexp`` sums of ``log w`` and ``2·log w`` (shape ``(K, 2)``, or ``None``)
    and its final chains. Returns the pooled weights, the pooled sums (``logsumexp`` over
    rounds), the final chains in the weights' order and the :class:`ChainBudget`. ``bound``: a
    certified lower bound the pooled estimate must not sit below (:func:`budget_failures`).
    """
    weights: list[Tensor] = []
    sums: list[Tensor | None] = []
    finals: list[Chains] = []
    rounds: list[int] = []
    stderrs: list[float] = []
    chains = plan.first
    while True:
        round_weights, round_sums, round_final = run_round(chains)
        weights.append(round_weights)
        sums.append(round_sums)
        finals.append(round_final)
        rounds.append(chains)
        pooled = torch.cat(weights)
        check_finite_log_weights(pooled)
        failures, stderr = budget_failures(pooled, plan.target_stderr, bound)
        stderrs.append(stderr)
        chains = next_round(pooled.numel(), stderr, plan) if failures else 0
        if distributed.topology().active:
            # Every process decides from the same gathered weights; a disagreement (float
            # rounding that depends on the batch) would leave one process waiting for a
            # round the others never start, so it is an error here instead of a hang.
            chains = distributed.agree(chains, "AIS chain budget's next round")
        if chains == 0:
            break
        progress.emit(progress.RoundStarted(len(rounds) + 1, chains, None, failures[0]))
    stopped = "fixed budget" if plan.fixed else ("max_chains reached" if failures else "checks passed")
    budget = ChainBudget(
        rounds=tuple(rounds),
        stderrs=tuple(stderrs),
        stopped=stopped,
        max_chains=plan.max_chains,
        target_stderr=plan.target_stderr,
        failures=tuple(failures),
    )
    # Every round records the ESS sums or none does (one record_ess for the run).
    pooled_sums = None if sums[0] is None else torch.logsumexp(torch.stack(sums), 0)  # type: ignore[arg-type]
    final = finals[0] if len(finals) == 1 else Chains.concatenate(finals)
    return pooled, pooled_sums, final, budget


# What to do when a schedule check says the run has not converged in its schedule.
_SCHEDULE_ADVICE = {
    "ais": "use more temperatures (n_temperatures; CLI --temperatures), or compare RAISE and anchored AIS",
    "trajectory-ais": "use more steps (n_steps; CLI --temperatures), or compare AIS and RAISE",
}


def annealing_checks(estimate: LogZEstimate, verdict: Verdict) -> LogZEstimate:
    """The importance-weighted family's part of the verdict (the records' ``checks``; docs/trust.md).

    With one weight per chain (AIS, anchored and trajectory AIS): the effective sample size and
    the agreement of independent chain groups, whose spread widens the error bar where it is
    larger than the delta method's (heavy-tailed weights make the delta method too narrow: on
    the hard-model suite AIS's ±2 s.e. intervals covered 0.79–0.83 of the truth); then the
    schedule check, where the run made one (:func:`~boltzlab.estimators.annealing.schedule_check.coarse_run_checks`),
    on that error bar. A note where
    AIS's chain budget reached ``max_chains`` with a check still failing. (RAISE, with one row of
    weights per example, has its own: :func:`~boltzlab.estimators.annealing.raise_.raise_checks`.)
    """
    log_weights = getattr(estimate.info, "log_weights", None)  # None: an estimate built by hand
    if isinstance(log_weights, Tensor) and log_weights.dim() == 1 and log_weights.numel() >= 2:
        checks = check_weights(log_weights, what=f"{estimate.method} weights")
        for message in checks.failures:
            verdict.check(message)
        if checks.n_groups and checks.spread > estimate.stderr:
            verdict.note(
                f"standard error {checks.spread:.3g} is the spread of the {checks.n_groups} chain groups' "
                f"estimates, larger than the delta-method {estimate.stderr:.3g} (the larger of the "
                "two is reported)"
            )
            estimate = dataclasses.replace(estimate, stderr=checks.spread)
    estimate = coarse_run_checks(
        estimate,
        verdict,
        what="trajectory AIS" if estimate.method == "trajectory-ais" else "AIS",
        advice=_SCHEDULE_ADVICE.get(estimate.method, _SCHEDULE_ADVICE["ais"]),
    )
    chain_budget = getattr(estimate.info, "budget", None)
    if isinstance(chain_budget, ChainBudget) and chain_budget.stopped == "max_chains reached":
        verdict.note(
            f"AIS's chain budget ran {sum(chain_budget.rounds)} chains in {len(chain_budget.rounds)} rounds "
            f"(max_chains {chain_budget.max_chains}) with a check still failing: {chain_budget.failures[0]}"
        )
    return estimate


def annealing_matched(sweeps_per_chain: int) -> dict[str, int]:
    """An annealing method at ``sweeps_per_chain``: that many temperatures (RTS paper, Fig. 3)."""
    return {"n_temperatures": sweeps_per_chain}


def ais_matched(sweeps_per_chain: int) -> dict[str, int]:
    """AIS at ``sweeps_per_chain``: that many temperatures and a fixed ``DEFAULT_CHAINS`` chains.

    A matched budget is a kept budget: AIS's chain budget would add chains.
    """
    return {"n_temperatures": sweeps_per_chain, "n_chains": DEFAULT_CHAINS}
