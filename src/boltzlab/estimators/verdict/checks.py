"""The verdict on an estimate: which diagnostics ran, which failed, and why (docs/trust.md).

Every stochastic estimator fills :class:`~boltzlab.estimators.result.LogZEstimate`'s
``reliable`` and ``warnings`` from what it can see. The checks are pure functions of the
estimator's own by-products (log-weights, per-group estimates, level visits, round trips);
each returns ``None`` when it passes or one sentence naming the diagnostic, its value and
the threshold when it fails. :class:`Verdict` collects them and stamps an estimate.

The thresholds below were calibrated on RBMs small enough to enumerate, trained both ways
(CD, which anneals easily, and long PCD, which does not): they are set where the models
whose estimates were right stayed quiet and the confident misses were caught. The figures
behind them are in docs/trust.md.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from scipy import stats
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.numerics import ess, log_mean_exp_stderr

# One definition each, shared with the samplers' verdict (tempering/agreement.py, verdict.py):
# the number of independent chain groups, their agreement p-value, round trips per chain.
from boltzlab.tempering.agreement import GROUP_AGREEMENT_P_VALUE, N_GROUPS
from boltzlab.tempering.verdict import MIN_ROUND_TRIPS

__all__ = [
    "DEFAULT_TARGET_STDERR",
    "GROUP_AGREEMENT_MIN_SPREAD",
    "GROUP_AGREEMENT_P_VALUE",
    "LOWER_BOUND_SLACK",
    "LOWER_BOUND_STDERRS",
    "MAX_LEVEL_IMBALANCE",
    "MIN_ESS",
    "MIN_ESS_FRACTION",
    "MIN_NEIGHBOUR_OVERLAP",
    "MIN_ROUND_TRIPS",
    "MIN_TEMPERED_ROUND_TRIPS",
    "N_GROUPS",
    "PILOT_BOUND_NATS",
    "Verdict",
    "check_ess",
    "check_group_agreement",
    "check_lower_bound",
    "check_stderr",
    "group_log_means",
    "group_spread_stderr",
]

#: Standard error (nats) that a budget which can grow (AIS's chains, the tempered rounds) adds
#: chains towards once its checks pass: within it, an unbiased estimate is within 0.2 nats of
#: log Z 95% of the time.
DEFAULT_TARGET_STDERR = 0.1
#: An importance-weighted estimate needs this many effective samples ...
MIN_ESS = 5.0
#: ... and this fraction of its chains; below either, the weights are degenerate and the
#: delta-method standard error is itself unreliable.
MIN_ESS_FRACTION = 0.01
#: Chain groups (``GROUP_AGREEMENT_P_VALUE``, shared with the samplers' verdict) must also span more than this many nats. Groups of a few chains have poor
#: error bars of their own, so a small but "significant" spread is no evidence of a miss;
#: a miss worth flagging (more than 0.1 nats off) spreads groups by more than this.
GROUP_AGREEMENT_MIN_SPREAD = 0.2
#: Standard errors an estimate may sit below a certified lower bound before it is called
#: wrong. One-sided and fewer than the 4 of a two-sided disagreement, because the bound is
#: certain: an estimate 3 s.e. below the bound is more than 3 s.e. below log Z, which a
#: calibrated error bar allows with probability 0.13% (docs/trust.md, "The certified lower
#: bound", for the calibration on the hard-model suite).
LOWER_BOUND_STDERRS = 3.0
#: How far (nats), besides ``LOWER_BOUND_STDERRS`` standard errors, an estimate may sit below a
#: certified lower bound before it is called wrong (float rounding and nothing else).
LOWER_BOUND_SLACK = 0.01
#: Round trips per chain below which a tempered *estimate* is flagged (the budget grows until
#: ``MIN_ROUND_TRIPS``, the samplers' threshold, is met). Lower, because a short fixed budget
#: leaves right answers with fewer: on the hard-model suite at 250 long-run sweeps the right
#: answers made 0.33–1.1 round trips per chain, the runs off by more than half a nat 0.0–0.26.
MIN_TEMPERED_ROUND_TRIPS = 0.25
#: Largest ``max_k |ĉ_k/r_k − 1|`` of a tempered run's long run: the share of draws each level
#: got against its prior share, i.e. how far the level weights of the previous stage were from
#: this run's own estimates (0.3 ≈ a 0.26-nat disagreement at some level). Both the budget loop
#: and the verdict use it. On the hard-model suite at a fixed 1,000 long-run sweeps, right
#: answers stayed at 0.01–0.17 on 12 of 14 models (two at 0.49 and 0.87 get another round from
#: the budget) and the six runs off by 0.3–12 nats were at 0.40–3.6 (a CD-1 binary-alphadigits
#: RBM 0.62 nats low at z = −8 had 0.40 and passed every other check; docs/trust.md).
MAX_LEVEL_IMBALANCE = 0.3
#: How far (nats), besides 4 standard errors, a tempered estimate may sit below its pilot AIS
#: run's ``log Ẑ`` before it is called wrong: ``P(log Ẑ_AIS > log Z + t) ≤ e^{−t}`` (Markov).
PILOT_BOUND_NATS = 5.0
#: Smallest overlap between neighbouring levels (pymbar's overlap matrix of each pair,
#: ``estimators.tempered.mbar.neighbour_overlap``: 0.5 for identical levels) below which MBAR's levels
#: are not tied together by shared samples; 0.03 is the usual guideline for neighbouring
#: states (Klimovich, Shirts & Mobley 2015, J. Comput.-Aided Mol. Des. 29, 397).
MIN_NEIGHBOUR_OVERLAP = 0.03


@dataclass
class Verdict:
    """Collects failed checks; ``apply`` stamps them on an estimate.

    ``notes`` are sentences worth showing that do not make the estimate unreliable (e.g.
    how the error bar was widened). ``unchecked`` is the sentence of a check that could not
    reach data (the missing-mass witness): it leaves the estimate ``"unchecked"``, never
    ``reliable`` (docs/trust.md, "Three verdicts").
    """

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unchecked: str = ""

    def check(self, message: str | None) -> None:
        """Record ``message`` as a failure unless it is ``None`` (the check passed)."""
        if message is not None:
            self.failures.append(message)

    def note(self, message: str) -> None:
        """Record a sentence that does not change the verdict."""
        self.notes.append(message)

    def uncheck(self, message: str) -> None:
        """Record what could not be checked (and how to check it): the verdict becomes ``"unchecked"``."""
        self.unchecked = message

    def apply(self, estimate: LogZEstimate) -> LogZEstimate:
        """``estimate`` with these failures, the unchecked sentence and the notes added to its own."""
        unchecked = estimate.unchecked or self.unchecked
        new_unchecked = (self.unchecked,) if self.unchecked and not estimate.unchecked else ()
        warnings = tuple(estimate.warnings) + tuple(self.failures) + new_unchecked + tuple(self.notes)
        return dataclasses.replace(
            estimate,
            failed=estimate.failed or bool(self.failures),
            unchecked=unchecked,
            warnings=warnings,
        )


def check_stderr(stderr: float) -> str | None:
    """A stochastic estimate's standard error must be finite and positive."""
    if not math.isfinite(stderr):
        return f"standard error is {stderr} (not finite): the estimate has no usable error bar"
    if stderr <= 0.0:
        return "standard error is 0 although the estimate is random: its spread could not be measured"
    return None


def check_ess(log_weights: Tensor, *, what: str = "importance weights") -> str | None:
    """The effective sample size of ``log_weights`` is at least ``MIN_ESS`` and ``MIN_ESS_FRACTION``."""
    n = log_weights.numel()
    value = ess(log_weights)
    need = max(MIN_ESS, MIN_ESS_FRACTION * n) if n >= MIN_ESS else 1.0
    if value < need:
        return (
            f"effective sample size of the {what} is {value:.1f} of {n} chains, below {need:.0f}: "
            "a few chains carry the estimate and its error bar"
        )
    return None


def group_log_means(log_weights: Tensor, n_groups: int) -> tuple[Tensor, Tensor]:
    """Per-group ``log mean exp`` of log-weights and its delta-method standard error.

    Chains are split into ``n_groups`` contiguous groups (chains are independent, so any
    split is). Returns two float64 tensors of shape ``(n_groups,)``.
    """
    lw = log_weights.to(torch.float64).flatten()
    groups = lw[: (lw.numel() // n_groups) * n_groups].view(n_groups, -1)
    log_mean = torch.logsumexp(groups, 1) - math.log(groups.shape[1])
    stderr = torch.tensor([log_mean_exp_stderr(group) for group in groups], dtype=torch.float64)
    return log_mean, stderr


def group_spread_stderr(values: Sequence[float] | Tensor) -> float:
    """Standard error of a pooled estimate from the spread of ``G`` independent group estimates.

    ``sd(values) / sqrt(G)`` (unbiased sd): each group estimate has about ``sqrt(G)`` times the
    pooled one's error, so their spread measures that error without the delta method's
    reliance on the weights' variance, which heavy-tailed importance weights understate.
    Returns 0 for fewer than two values.
    """
    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    if x.numel() < 2 or not bool(torch.isfinite(x).all()):
        return 0.0
    return float(x.std() / math.sqrt(x.numel()))


def check_group_agreement(
    values: Sequence[float] | Tensor, stderrs: Sequence[float] | Tensor, *, what: str = "chain groups"
) -> str | None:
    """Independent estimates agree within their error bars (chi-square about their weighted mean).

    A group with a zero or non-finite error bar makes the test meaningless, so the spread of
    the values themselves is used for every group then.
    """
    x = torch.as_tensor(values, dtype=torch.float64).flatten()
    s = torch.as_tensor(stderrs, dtype=torch.float64).flatten()
    g = x.numel()
    if g < 2:
        return None
    if not bool(torch.isfinite(x).all()):
        return f"{what} gave non-finite estimates"
    if not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
        return None
    weights = 1.0 / s**2
    mean = float((weights * x).sum() / weights.sum())
    chi2 = float((((x - mean) / s) ** 2).sum())
    p_value = float(stats.chi2.sf(chi2, g - 1))
    spread = float(x.max() - x.min())
    if p_value < GROUP_AGREEMENT_P_VALUE and spread > GROUP_AGREEMENT_MIN_SPREAD:
        return (
            f"{g} independent {what} disagree: their estimates span {spread:.3g} nats (more than "
            f"{GROUP_AGREEMENT_MIN_SPREAD:g}), chi-square {chi2:.1f} on {g - 1} degrees of freedom "
            f"(p = {p_value:.1e} < {GROUP_AGREEMENT_P_VALUE:g})"
        )
    return None


def check_lower_bound(log_z: float, stderr: float, bound: LowerBound) -> str | None:
    """``log_z`` is not below a certified lower bound by more than ``LOWER_BOUND_STDERRS`` s.e. + slack."""
    margin = LOWER_BOUND_STDERRS * (stderr if math.isfinite(stderr) else 0.0) + LOWER_BOUND_SLACK
    gap = bound.log_z - log_z
    if gap > margin:
        return (
            f"estimate is {gap:.3g} nats below a certified lower bound on log Z ({bound.log_z:.4f}, "
            f"summed over {bound.n_states} {bound.layer} states visited by chains started from "
            f"{bound.started_from}), more than {LOWER_BOUND_STDERRS:g} standard errors: it misses probability mass"
        )
    return None


def check_target_stderr(value: Any) -> float | None:
    """``target_stderr`` as a float of nats (finite, positive) or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < math.inf:
        raise ValidationError(
            f"target_stderr must be a positive, finite number of nats or None, got {value!r}"
        )
    return float(value)
