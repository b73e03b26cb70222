"""The verdict every estimate leaves ``estimate_log_z`` with (docs/trust.md).

Each check uses what the estimator already produced, plus one independent witness that
costs little next to an estimate: a certified lower bound on ``log Z`` from the states that
chains at β = 1 visit (:mod:`boltzlab.estimators.lower_bound`). Chains start from ``data``
when the caller gives it (``check_data=``), from the base otherwise.

- every stochastic method: a finite, positive standard error;
- importance-weighted methods (AIS, RAISE's log Z, trajectory AIS): effective sample size
  and agreement of independent chain groups;
- tempered methods (RTS, TS, TI, TI-RB, MBAR): whether the initial iterations met their
  stopping rule (a note: on its own it flags too many right answers, see docs/trust.md);
- binary RBMs, any method: not below the certified lower bound by more than 4 s.e.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from boltzlab.estimators.lower_bound import certified_lower_bound, supports_lower_bound
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.trust import (
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


def _with_bound(estimate: LogZEstimate, bound: Any) -> LogZEstimate:
    """Keep the witness where reports can show it (``LogZEstimate.lower_bound``)."""
    return dataclasses.replace(estimate, lower_bound=bound)
