"""The verdict every estimate leaves ``estimate_log_z`` with (docs/trust.md).

Each check uses what the estimator already produced, plus one independent witness that
costs little next to an estimate: a certified lower bound on ``log Z`` from the states that
chains at β = 1 visit (:mod:`boltzlab.estimators.verdict.lower_bound`). Chains start from ``data``
when the caller gives it (``check_data=``; by default the witness rows the model kept), from
the base otherwise — and then the verdict is ``"unchecked"``, never ``"reliable"``: a mode
that only data reach was not looked for (docs/trust.md, "Three verdicts").

- every stochastic method: a finite, positive standard error;
- then the checks of the estimator's family, which its record names
  (:class:`~boltzlab.estimators.record.EstimatorRecord` ``checks``): for importance-weighted
  methods (:func:`boltzlab.estimators.annealing.chain_budget.annealing_checks`) the effective sample size
  and the agreement of independent chain groups, whose spread also widens the error bar; for
  tempered methods (:func:`boltzlab.estimators.tempered.checks.tempered_verdict_checks`) level
  balance, round trips, chain groups, the pilot's bound and MBAR's overlap of neighbouring
  levels;
- binary RBMs, any method: not below the certified lower bound by more than 3 s.e.;
  models with no certified bound (DBMs, Gaussian-binary RBMs) are ``"unchecked"``.

The verdict imports no estimator family: what differs between families is in their records.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from boltzlab.estimators.record import find_record
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.checks import Verdict, check_lower_bound, check_stderr
from boltzlab.estimators.verdict.lower_bound import LowerBound, certified_lower_bound, supports_lower_bound

__all__ = ["UNCHECKED_NO_DATA", "judge"]

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
        Its ``method`` names the record whose family checks apply; an exact result is
        returned as it is.
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
    record = find_record(estimate.method)
    if record is not None and record.family == "exact":
        return estimate
    verdict = Verdict()
    verdict.check(check_stderr(estimate.stderr))
    if record is None:
        # Which checks apply is the record's to say; without one none of them ran.
        verdict.uncheck(
            f"no estimator is registered as {estimate.method!r}, so its family's checks (effective sample "
            "size, chain groups, level balance) were not run; register it (boltzlab.estimators.record)"
        )
    elif record.checks is not None:
        estimate = record.checks(estimate, verdict)
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
        estimate = dataclasses.replace(estimate, lower_bound=bound)  # where reports can show it
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
