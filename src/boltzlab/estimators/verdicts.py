"""The verdict every estimate leaves ``estimate_log_z`` with (docs/trust.md).

Each check uses what the estimator already produced, plus one independent witness that
costs little next to an estimate: a certified lower bound on ``log Z`` from the states that
chains at β = 1 visit (:mod:`boltzlab.estimators.lower_bound`). Chains start from ``data``
when the caller gives it (``check_data=``), from the base otherwise.

- every stochastic method: a finite, positive standard error;
- importance-weighted methods (AIS, RAISE's log Z, trajectory AIS): effective sample size
  and agreement of independent chain groups;
- tempered methods (RTS, TS, TI, TI-RB): the same estimator recomputed on independent
  groups of chains must agree; whether the initial iterations met their stopping rule and
  how many chains visited both ends of the ladder are notes (on their own they flag too many
  right answers, see docs/trust.md);
- binary RBMs, any method: not below the certified lower bound by more than 4 s.e.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from boltzlab.estimators.lower_bound import certified_lower_bound, supports_lower_bound
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.rts import rts_from_samples
from boltzlab.estimators.tempered_samples import TemperedSamples
from boltzlab.estimators.ti import ti_from_samples, ti_rb_from_samples
from boltzlab.estimators.trust import (
    GROUP_AGREEMENT_MIN_SPREAD,
    Verdict,
    check_ess,
    check_group_agreement,
    check_lower_bound,
    check_stderr,
    group_log_means,
)

__all__ = ["N_GROUPS", "judge"]

#: Independent chain groups compared by the group-agreement check.
N_GROUPS = 4


def judge(
    model: Any,
    estimate: LogZEstimate,
    *,
    check_data: Any = None,
    lower_bound_chains: int = 1000,
    lower_bound_sweeps: int = 200,
    generator: torch.Generator | int | None = None,
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
    samples = getattr(estimate.info, "samples", None)
    recompute = _FROM_SAMPLES.get(estimate.method)
    if isinstance(samples, TemperedSamples) and recompute is not None and samples.n_chains >= 2 * N_GROUPS:
        verdict.check(_tempered_group_check(samples, recompute, estimate))
        verdict.notes.extend(_ends_note(samples))
    stopped = getattr(estimate.info, "stopped", None)
    if stopped is False:
        verdict.note(
            "the initial iterations did not meet their stopping rule (max_k |ĉ_k/r_k − 1| < 0.1): "
            "the level weights were still moving when the run began"
        )
    if lower_bound_sweeps > 0 and supports_lower_bound(model):
        bound = certified_lower_bound(
            model,
            data=check_data,
            n_chains=lower_bound_chains,
            n_sweeps=lower_bound_sweeps,
            generator=generator,
        )
        verdict.check(check_lower_bound(estimate.log_z, estimate.stderr, bound))
        estimate = _with_bound(estimate, bound)
    elif not supports_lower_bound(model):
        verdict.note(f"no certified lower bound for a {type(model).__name__}: missing mass was not checked")
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
}


def _tempered_group_check(
    samples: TemperedSamples, recompute: Callable[[TemperedSamples], LogZEstimate], estimate: LogZEstimate
) -> str | None:
    """Recompute the estimate on ``N_GROUPS`` disjoint groups of chains; they must agree.

    Chains stuck in different modes give groups that disagree far beyond their error bars.
    When the groups' own error bars are unusable (zero), their spread is compared with the
    full estimate's error bar instead (4 of them, plus ``GROUP_AGREEMENT_MIN_SPREAD`` nats).
    """
    groups = torch.arange(samples.n_chains).tensor_split(N_GROUPS)
    results = [recompute(samples.chain_subset(group)) for group in groups]
    values = [result.log_z for result in results]
    stderrs = [result.stderr for result in results]
    if all(math.isfinite(s) and s > 0 for s in stderrs):
        return check_group_agreement(
            values, stderrs, what=f"chain groups ({estimate.method} recomputed on each)"
        )
    spread = max(values) - min(values)
    allowed = 4.0 * (estimate.stderr if math.isfinite(estimate.stderr) else 0.0) + GROUP_AGREEMENT_MIN_SPREAD
    if spread > allowed:
        return (
            f"{N_GROUPS} independent chain groups give {estimate.method} estimates spanning {spread:.3g} nats, "
            f"more than {allowed:.3g} (4 standard errors + {GROUP_AGREEMENT_MIN_SPREAD:g}): the chains disagree"
        )
    return None


def _ends_note(samples: TemperedSamples) -> list[str]:
    """A note when fewer than half the chains visited both ends of the ladder in the long run."""
    long_run = samples.block_stage == samples.block_stage.max()
    counts = samples.level_counts[long_run].sum(0)  # (n_chains, K)
    both = float(((counts[:, 0] > 0) & (counts[:, -1] > 0)).to(torch.float64).mean())
    if both < 0.5:
        return [
            f"only {both:.0%} of the chains visited both ends of the ladder (β = 0 and β = 1) in the long run"
        ]
    return []


def _with_bound(estimate: LogZEstimate, bound: Any) -> LogZEstimate:
    """Keep the witness where reports can show it (``LogZEstimate.lower_bound``)."""
    return dataclasses.replace(estimate, lower_bound=bound)
