"""The verdict every estimate leaves ``estimate_log_z`` with (docs/trust.md).

Each check uses what the estimator already produced, plus one independent witness that
costs little next to an estimate: a certified lower bound on ``log Z`` from the states that
chains at β = 1 visit (:mod:`boltzlab.estimators.lower_bound`). Chains start from ``data``
when the caller gives it (``check_data=``; by default the witness rows the model kept), from
the base otherwise — and then the verdict is ``"unchecked"``, never ``"reliable"``: a mode
that only data reach was not looked for (docs/trust.md, "Three verdicts").

- every stochastic method: a finite, positive standard error;
- importance-weighted methods with one weight per chain (AIS, trajectory AIS): effective sample size
  and agreement of independent chain groups, whose spread also widens the error bar when it
  is larger than the delta-method one;
- tempered methods (RTS, TS, TI, TI-RB, MBAR): the checks of
  :mod:`boltzlab.estimators.tempered_checks` — level balance after the run, round trips per
  chain, the same estimator recomputed on independent groups of chains, the pilot's bound —
  as the budget loop last ran them (:mod:`boltzlab.estimators.tempered_budget`), and for MBAR
  the overlap of neighbouring levels; whether the initial iterations met their stopping rule
  and whether the budget ran out are notes;
- binary RBMs, any method: not below the certified lower bound by more than 3 s.e.;
  models with no certified bound (DBMs, Gaussian-binary RBMs) are ``"unchecked"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from boltzlab.estimators.ais_budget import ChainBudget
from boltzlab.estimators.lower_bound import LowerBound, certified_lower_bound, supports_lower_bound
from boltzlab.estimators.mbar import mbar_for_groups
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.rts import rts_from_samples
from boltzlab.estimators.tempered_checks import tempered_failures
from boltzlab.estimators.tempered_samples import TemperedSamples
from boltzlab.estimators.ti import ti_from_samples, ti_rb_from_samples
from boltzlab.estimators.trust import (
    MIN_NEIGHBOUR_OVERLAP,
    N_GROUPS,
    Verdict,
    check_ess,
    check_group_agreement,
    check_lower_bound,
    check_stderr,
    group_log_means,
    group_spread_stderr,
)

__all__ = ["N_GROUPS", "UNCHECKED_NO_DATA", "check_neighbour_overlap", "judge"]

#: What an estimate whose witness started from the base says (its verdict is ``"unchecked"``).
UNCHECKED_NO_DATA = (
    "the missing-mass witness started from the base, not from data, so a mode that only "
    "data reach was not looked for (no check_data was given and the model keeps no witness rows); "
    "pass check_data=<training rows> (CLI: --data), or fit the base with model.set_base_rate(train), "
    "which keeps witness rows in the model"
)


def judge(
    model: Any,
    estimate: LogZEstimate,
    *,
    check_data: Any = None,
    lower_bound_chains: int = 1000,
    lower_bound_sweeps: int = 200,
    generator: torch.Generator | int | None = None,
    bound: LowerBound | None = None,
    data_label: str = "data",
) -> LogZEstimate:
    """``estimate`` with ``reliable`` and ``warnings`` filled from every check that applies.

    Parameters
    ----------
    model : TemperedModel
    estimate : LogZEstimate
    check_data : Tensor, shape (n_examples, n_visible), optional
        Where the lower-bound chains start (data finds modes annealing may miss).
    lower_bound_chains, lower_bound_sweeps : int
        Budget of the lower-bound witness; ``lower_bound_sweeps=0`` turns it off.
    generator : torch.Generator or int, optional
    bound : LowerBound, optional
        The witness, when the caller already ran it (``estimate_log_z`` does for a budget
        that can grow: AIS's chain budget, the tempered budget); otherwise it is run here.
    data_label : str, default "data"
        What ``check_data`` is, for the bound's ``started_from`` (``"witness rows"``).
    """
    if estimate.method == "exact":
        return estimate
    verdict = Verdict()
    verdict.check(check_stderr(estimate.stderr))
    log_weights = getattr(estimate.info, "log_weights", None)
    if isinstance(log_weights, torch.Tensor) and log_weights.dim() == 1 and log_weights.numel() >= 2:
        verdict.check(check_ess(log_weights, what=f"{estimate.method} weights"))
        if log_weights.numel() >= 8 * N_GROUPS:
            values, stderrs = group_log_means(log_weights, N_GROUPS)
            verdict.check(check_group_agreement(values, stderrs, what="chain groups"))
            estimate = _widened_by_groups(estimate, values, verdict)
    chain_budget = getattr(estimate.info, "budget", None)
    if isinstance(chain_budget, ChainBudget) and chain_budget.stopped == "max_chains reached":
        verdict.note(
            f"AIS's chain budget ran {sum(chain_budget.rounds)} chains in {len(chain_budget.rounds)} rounds "
            f"(max_chains {chain_budget.max_chains}) with a check still failing: {chain_budget.failures[0]}"
        )
    samples = getattr(estimate.info, "samples", None)
    if isinstance(samples, TemperedSamples):
        for message in _tempered_checks(samples, estimate):
            verdict.check(message)
        verdict.notes.extend(_budget_notes(samples))
    overlap = getattr(estimate.info, "neighbour_overlap", None)
    if isinstance(overlap, torch.Tensor):
        verdict.check(check_neighbour_overlap(overlap))
    if isinstance(samples, TemperedSamples):
        # A continued round has no initial iterations of its own: its weights come from the
        # previous round, whose balance the checks above judged.
        stopped = samples.stopped if samples.n_initial_iterations > 0 else None
    else:
        stopped = getattr(estimate.info, "stopped", None)
    if stopped is False:
        verdict.note(
            "the initial iterations did not meet their stopping rule (max_k |ĉ_k/r_k − 1| < 0.1): "
            "the level weights were still moving when the run began"
        )
    if bound is None and lower_bound_sweeps > 0 and supports_lower_bound(model):
        bound = certified_lower_bound(
            model,
            data=check_data,
            n_chains=lower_bound_chains,
            n_sweeps=lower_bound_sweeps,
            generator=generator,
            data_label=data_label,
        )
    if bound is not None:
        verdict.check(check_lower_bound(estimate.log_z, estimate.stderr, bound))
        if bound.started_from == "base":
            # Measured (docs/trust.md): a 784×20 Fashion-MNIST PCD model's AIS was 12.5 nats low
            # with every other check passing; only chains started from data reach the mode it missed.
            verdict.uncheck(UNCHECKED_NO_DATA)
        estimate = _with_bound(estimate, bound)
    elif not supports_lower_bound(model):
        verdict.uncheck(
            f"no certified lower bound exists for a {type(model).__name__}, so missing probability mass "
            "(a mode the estimator never reached) was not looked for; compare independent methods "
            "(boltzlab evaluate) before relying on it"
        )
    else:
        verdict.uncheck(
            "the missing-mass witness was turned off (lower_bound_sweeps=0), so a mode the estimator "
            "never reached was not looked for; leave lower_bound_sweeps at its default to check"
        )
    return verdict.apply(estimate)


def _rts(samples: TemperedSamples) -> LogZEstimate:
    return rts_from_samples(samples, statistic="rb")


def _ts(samples: TemperedSamples) -> LogZEstimate:
    return rts_from_samples(samples, statistic="counts")


# The estimate of each tempered method from a set of samples, for the chain-group check.
_FROM_SAMPLES: dict[str, Callable[[TemperedSamples], LogZEstimate]] = {
    "rts": _rts,
    "ts": _ts,
    "ti": ti_from_samples,
    "ti-rb": ti_rb_from_samples,
    "mbar": mbar_for_groups,
}


def _tempered_checks(samples: TemperedSamples, estimate: LogZEstimate) -> list[str]:
    """The tempered checks' failures: as the budget loop last ran them on these samples (with the
    estimator's own options), or run now with each method's defaults."""
    budget = samples.budget
    rounds = getattr(budget, "rounds", ())
    if rounds and rounds[-1].log_z == estimate.log_z:
        return list(rounds[-1].diagnosis.failures())
    recompute = _FROM_SAMPLES.get(estimate.method)
    if recompute is None:
        return []
    return tempered_failures(samples, recompute, estimate)


def _budget_notes(samples: TemperedSamples) -> list[str]:
    """A note when the budget grew to its cap with its own (stricter) checks still failing."""
    budget = samples.budget
    if budget is None or budget.passed or len(budget.rounds) < 2:
        return []
    chains = budget.rounds[-1].n_chains
    more = f" and {chains} chains" if chains != budget.rounds[0].n_chains else ""
    return [
        f"the budget grew over {len(budget.rounds)} rounds to {budget.sweeps_per_chain} sweeps per chain"
        f"{more} and stopped ({budget.stop_reason}) with its checks still failing ({budget.rounds[-1].failures[0]})"
    ]


def check_neighbour_overlap(neighbour_overlap: torch.Tensor) -> str | None:
    """Every pair of neighbouring levels overlaps by at least ``MIN_NEIGHBOUR_OVERLAP`` (MBAR).

    ``neighbour_overlap`` has shape ``(K − 1,)``: ``min(O[k, k+1], O[k+1, k])`` of pymbar's
    overlap matrix.
    """
    if neighbour_overlap.numel() == 0:
        return None
    worst = int(torch.argmin(neighbour_overlap))
    value = float(neighbour_overlap[worst])
    if not value >= MIN_NEIGHBOUR_OVERLAP:
        return (
            f"neighbouring levels {worst} and {worst + 1} overlap by {value:.3g} in MBAR's overlap matrix, "
            f"below {MIN_NEIGHBOUR_OVERLAP:g}: the levels are not tied together by shared samples"
        )
    return None


def _widened_by_groups(estimate: LogZEstimate, group_values: torch.Tensor, verdict: Verdict) -> LogZEstimate:
    """The larger of the delta-method error and the chain groups' spread (docs/trust.md).

    Heavy-tailed importance weights make the delta-method error bar too narrow (on the
    hard-model suite the AIS family's ±2 s.e. intervals covered 0.79–0.83 of the truth); the
    spread of independent groups is a second, model-free estimate of the same error, and
    the error bar reported is the larger of the two.
    """
    spread = group_spread_stderr(group_values)
    if not spread > estimate.stderr:
        return estimate
    verdict.note(
        f"standard error {spread:.3g} is the spread of the {group_values.numel()} chain groups' estimates, "
        f"larger than the delta-method {estimate.stderr:.3g} (the larger of the two is reported)"
    )
    return dataclasses.replace(estimate, stderr=spread)


def _with_bound(estimate: LogZEstimate, bound: Any) -> LogZEstimate:
    """Keep the witness where reports can show it (``LogZEstimate.lower_bound``)."""
    return dataclasses.replace(estimate, lower_bound=bound)
