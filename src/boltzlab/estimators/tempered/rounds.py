"""The rounds of a tempered budget: run, check, then a longer or a wider round, until the checks pass.

Steps 3 and 4 of :mod:`~boltzlab.estimators.tempered.budget` (docs/algorithms.md §4.3, "How
long to run"), shared by the temperature route (``estimate_with_budget``) and the trajectory
route (``trajectory-rts``, ``trajectory-mbar``): :func:`run_rounds` and the records it keeps,
:class:`BudgetRound` and :class:`TemperedBudget`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from boltzlab import distributed
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.chains import (
    Widen,
    burn_in_sweeps,
    chains_for_target,
    precision_stderr,
)
from boltzlab.estimators.tempered.checks import Recompute, TemperedDiagnosis, diagnose
from boltzlab.estimators.tempered.ladders import PlacedLadder
from boltzlab.estimators.tempered.levels import pooled_log_c, rts_log_z
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.verdict.checks import check_lower_bound
from boltzlab.estimators.verdict.lower_bound import LowerBound

__all__ = [
    "DEFAULT_MAX_SWEEPS",
    "BudgetRound",
    "TemperedBudget",
    "bound_failures",
    "next_log_z_hat",
    "run_rounds",
    "stderr_failures",
]

#: Sweeps per chain (initial iterations and every round) the budget may grow to by default:
#: rounds of 1,000, 2,000, 4,000 and 8,000 long-run sweeps after up to 500 initial ones.
DEFAULT_MAX_SWEEPS = 16_000


@dataclass(frozen=True)
class BudgetRound:
    """One round of a tempered run and what its checks said.

    Attributes
    ----------
    initial_sweeps : int
        Sweeps per chain spent in initial iterations (round 0 only).
    long_run_sweeps : int
        Long-run sweeps per chain.
    n_chains : int
        Chains of the round.
    log_z, stderr : float
        The method's estimate from this round.
    diagnosis : TemperedDiagnosis
        What the checks measured.
    failures : tuple of str
        The checks that failed as the budget counts them (empty: all passed; the verdict
        reads ``diagnosis.failures()``, whose round-trip threshold is lower).
    """

    initial_sweeps: int
    long_run_sweeps: int
    n_chains: int
    log_z: float
    stderr: float
    diagnosis: TemperedDiagnosis
    failures: tuple[str, ...]


@dataclass(frozen=True)
class TemperedBudget:
    """What a tempered estimate spent and why it stopped.

    Attributes
    ----------
    ladder : {"adaptive", "linear", "given", "trajectory"}
        How the ladder was chosen.
    placed : PlacedLadder or None
        The pilot and the placed ladder (``ladder="adaptive"``).
    rounds : tuple of BudgetRound
        Every round run; the estimate is the last one's.
    max_sweeps : int
        The cap on sweeps per chain (initial iterations and all rounds).
    sweeps_per_chain : int
        Sweeps per chain spent (the pilot's chains are separate: see ``cost_sweeps``).
    cost_sweeps : int
        Chain-sweeps spent in all, pilot included (the estimate's ``cost_sweeps``).
    passed : bool
        Whether the last round's checks all passed.
    stop_reason : str
        ``"checks passed"``, ``"max_sweeps reached"`` (with the cap), ``"max_chains
        reached"`` (the checks passed, the error bar did not reach the target), or ``"fixed
        budget"``.
    target_stderr : float or None
        The standard error the budget grew towards (``None``: no target).
    max_chains : int
        The cap on chains (the chains run, where the caller fixed them).
    """

    ladder: str
    placed: PlacedLadder | None
    rounds: tuple[BudgetRound, ...]
    max_sweeps: int
    sweeps_per_chain: int
    cost_sweeps: int
    passed: bool
    stop_reason: str
    target_stderr: float | None = None
    max_chains: int = 0


def _sweeps_per_chain(samples: TemperedSamples) -> int:
    return int(samples.block_sweeps.sum())


def next_log_z_hat(samples: TemperedSamples) -> torch.Tensor:
    """RTS's estimate of every level from the long run: the next round's ``log Ẑ``."""
    long_run = samples.n_initial_iterations
    log_c = pooled_log_c(
        samples.log_probability_sums[long_run:].logsumexp(0),
        samples.level_counts[long_run:].sum(0),
        "rb",
    )
    return rts_log_z(samples.log_z_hat, samples.log_prior, log_c)


def run_rounds(
    samples: TemperedSamples,
    *,
    more: Callable[[TemperedSamples, int], TemperedSamples],
    widen: Widen | None = None,
    recompute: Recompute,
    group_recompute: Recompute | None,
    fixed: bool,
    max_sweeps: int | None,
    max_chains: int | None = None,
    target_stderr: float | None,
    bound: LowerBound | None,
    ladder: str,
    placed: PlacedLadder | None,
    earlier: int,
) -> LogZEstimate:
    """Steps 3 and 4 of the module docstring from round 0's ``samples``.

    Parameters
    ----------
    samples : TemperedSamples
        Round 0 (initial iterations and its long run).
    more : callable
        ``more(samples, n_sweeps)``: the next round, a long run of ``n_sweeps`` continuing
        from ``samples.final_state`` with the weights :func:`next_log_z_hat` gives.
    widen : callable, optional
        ``widen(samples, n_chains, n_sweeps, burn_in)``: the next round with ``n_chains``
        chains, ``samples``' own continued and fresh ones after ``burn_in`` unrecorded sweeps,
        and the chain-sweeps of that burn-in (:mod:`~boltzlab.estimators.tempered.chains`).
        Without it a standard error above ``target_stderr`` stops the budget.
    recompute, group_recompute : callable
        The method's estimator from samples, and what the chain-group check runs.
    fixed : bool
        The caller fixed the budget (one round, no target).
    max_sweeps : int or None
        Cap on sweeps per chain (None: :data:`DEFAULT_MAX_SWEEPS`, or round 0's when fixed).
    max_chains : int or None
        Cap on chains (None: round 0's chains, and then no ``target_stderr``).
    target_stderr : float or None
    bound : LowerBound or None
        A certified bound whose failure grows the run.
    ladder : str
        How the levels were chosen (``TemperedBudget.ladder``).
    placed : PlacedLadder or None
    earlier : int
        Chain-sweeps spent before round 0 (pilots).

    Returns
    -------
    LogZEstimate
        ``recompute`` of the last round, with the budget in ``info.budget`` and
        ``info.samples.budget`` and every round counted in ``cost_sweeps``.
    """
    spent = _sweeps_per_chain(samples)
    if max_sweeps is None:
        max_sweeps = spent if fixed else max(DEFAULT_MAX_SWEEPS, spent)
    max_chains = (
        samples.n_chains if max_chains is None or widen is None else max(max_chains, samples.n_chains)
    )
    if fixed or max_chains <= samples.n_chains:
        # A budget given is a budget kept (n_sweeps, or n_chains without max_chains): an error
        # bar that no round may narrow is nothing to grow towards.
        target_stderr = None
    rounds: list[BudgetRound] = []
    while True:
        estimate = recompute(samples)
        diagnosis = diagnose(
            _with_pilot(samples, ladder, placed), recompute, estimate, group_recompute=group_recompute
        )
        checks = diagnosis.failures(strict=True) + bound_failures(estimate, bound)
        imprecise = stderr_failures(estimate, target_stderr)
        rounds.append(
            BudgetRound(
                initial_sweeps=int(samples.block_sweeps[: samples.n_initial_iterations].sum()),
                long_run_sweeps=samples.n_sweeps,
                n_chains=samples.n_chains,
                log_z=estimate.log_z,
                stderr=estimate.stderr,
                diagnosis=diagnosis,
                failures=checks + imprecise,
            )
        )
        # A failing check asks for a longer run; with every check passing, a wide error bar
        # asks for more chains (tempered_chains), each round within max_sweeps per chain.
        longer = bool(checks) and spent + 2 * samples.n_sweeps <= max_sweeps
        wider = (
            not checks
            and bool(imprecise)
            and samples.n_chains < max_chains
            and spent + samples.n_sweeps <= max_sweeps
        )
        if distributed.topology().active:
            # The threshold comparisons (error bar, bound) must come out alike on every process;
            # one that differs would leave the others waiting for a round it never starts.
            longer = distributed.agree(longer, "tempered budget's next round")
            wider = distributed.agree(wider, "tempered budget's chains")
        if not (longer or wider):
            break
        earlier += samples.n_chains * _sweeps_per_chain(samples)
        if longer:
            samples = more(samples, 2 * samples.n_sweeps)
        else:
            assert widen is not None  # max_chains is the round's own chains without it
            n_chains = chains_for_target(
                samples.n_chains, precision_stderr(estimate), float(target_stderr), max_chains
            )
            burn_in = burn_in_sweeps(samples.n_sweeps, diagnosis.round_trips)
            samples, burned = widen(samples, n_chains, samples.n_sweeps, burn_in)
            earlier += burned
        spent += samples.n_sweeps
    passed = not rounds[-1].failures
    if passed:
        reason = "checks passed"
    elif fixed:
        reason = "fixed budget"
    elif not checks and samples.n_chains >= max_chains:  # only the error bar is left wanting
        reason = f"max_chains reached ({max_chains})"
    else:
        reason = f"max_sweeps reached ({max_sweeps})"
    budget = TemperedBudget(
        ladder=ladder,
        placed=placed,
        rounds=tuple(rounds),
        max_sweeps=max_sweeps,
        sweeps_per_chain=spent,
        cost_sweeps=earlier + samples.n_chains * _sweeps_per_chain(samples),
        passed=passed,
        stop_reason=reason,
        target_stderr=target_stderr,
        max_chains=max_chains,
    )
    samples = replace(samples, budget=budget, earlier_cost_sweeps=earlier)
    info = replace(estimate.info, samples=samples, budget=budget)
    return replace(estimate, cost_sweeps=samples.cost_sweeps, info=info)


def bound_failures(estimate: LogZEstimate, bound: LowerBound | None) -> tuple[str, ...]:
    """The certified bound as the budget applies it: an estimate below it grows the run.

    It does not make an estimate unreliable by itself (the verdict applies the bound itself): a
    run below a certified lower bound by more than its error allows has missed mass that more
    sweeps may find.
    """
    message = None if bound is None else check_lower_bound(estimate.log_z, estimate.stderr, bound)
    return (message,) if message else ()


def stderr_failures(estimate: LogZEstimate, target_stderr: float | None) -> tuple[str, ...]:
    """An error bar above ``target_stderr``: the part of it that more chains shrink
    (:func:`~boltzlab.estimators.tempered.chains.precision_stderr`), which adds chains."""
    stderr = precision_stderr(estimate)
    if target_stderr is None or stderr <= target_stderr:
        return ()
    return (f"standard error {stderr:.3g} above the target {target_stderr:g} nats",)


def _with_pilot(samples: TemperedSamples, ladder_kind: str, placed: PlacedLadder | None) -> TemperedSamples:
    """``samples`` carrying a provisional budget so that the checks can see the pilot."""
    if placed is None:
        return samples
    provisional = TemperedBudget(
        ladder=ladder_kind,
        placed=placed,
        rounds=(),
        max_sweeps=0,
        sweeps_per_chain=0,
        cost_sweeps=0,
        passed=False,
        stop_reason="running",
    )
    return replace(samples, budget=provisional)
