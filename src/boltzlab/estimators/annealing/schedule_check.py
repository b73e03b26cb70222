"""The schedule check of the annealing family: the same run on every fourth step, and what it says.

An annealing estimate's error bar is the spread of its weights (AIS, trajectory AIS) or of its
examples (RAISE). Its bias is not in it. For AIS, ``E[Ẑ] = Z`` but ``log Ẑ`` is low by the
mass the chains did not follow (Jensen over the chains, and, where the schedule is too short
for the chains to keep up, mass that no chain reaches); for RAISE from held-out data it has
either sign. Both parts shrink with the number of steps ``K``, as ``1/K`` once the schedule is
long (they follow the variance of ``log w``). So the estimator also runs on every
``SCHEDULE_CHECK_STRIDE``-th step of its own schedule (a quarter more sweeps), and the shift
``S`` between the coarse and the full run estimates the full run's bias: with
``b(K) ∝ 1/K``, ``b(K_c) − b(K) = b(K)·(K/K_c − 1)``, so

    b(K) = S·K_c / (K − K_c)        (S/3 for a stride of 4).

:func:`judge_shift` turns a shift into the verdict (docs/trust.md, "The schedule check"):

- ``S`` within ``SHIFT_SIGNIFICANCE`` standard errors of 0: the runs agree; a note says so;
- significant: ``b`` joins the error bar in quadrature, ``√(s.e.² + b²)``;
- significant and ``|S|`` above a limit (``MAX_SCHEDULE_SHIFT`` = 1 nat for RAISE,
  ``MAX_ANNEALING_SHIFT`` = 3 nats, a bias of one nat, for AIS and trajectory AIS):
  **unreliable**, the method has not converged in its schedule; that far from convergence the
  ``1/K`` extrapolation is not to be trusted.

RAISE pairs its two runs example by example (:mod:`.raise_`), so the spread between examples
cancels; AIS and trajectory AIS run independent chains on the coarse schedule
(:class:`CoarseRun`), and the shift's error is the two runs' errors combined. What the check
cannot see is a bias that does not shrink with ``K`` at all: a mode that no schedule length
reaches. The certified lower bound (:mod:`boltzlab.estimators.verdict.lower_bound`) is there for that.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.checks import N_GROUPS, Verdict, group_log_means, group_spread_stderr
from boltzlab.numerics import log_mean_exp, log_mean_exp_stderr

__all__ = [
    "MAX_ANNEALING_SHIFT",
    "MAX_SCHEDULE_SHIFT",
    "SCHEDULE_CHECK_MIN_TEMPERATURES",
    "SCHEDULE_CHECK_STREAM",
    "SCHEDULE_CHECK_STRIDE",
    "SHIFT_SIGNIFICANCE",
    "CoarseRun",
    "coarse_run_checks",
    "coarsened",
    "is_checked",
    "judge_shift",
]

#: The schedule check runs on every this-many-th step of the schedule.
SCHEDULE_CHECK_STRIDE = 4
#: Schedules shorter than this many steps are not coarsened (a handful of steps says nothing
#: about how the bias scales).
SCHEDULE_CHECK_MIN_TEMPERATURES = 40
#: The check's chains draw from a fork of the run's stream (``rng.fork``), taken before the full
#: run draws, so that neither run's draws, nor the caller's generator afterwards (the verdict's
#: witness), depend on whether the check runs.
SCHEDULE_CHECK_STREAM = 0x5C4E
#: Standard errors the shift must exceed to count: below it the two runs agree.
SHIFT_SIGNIFICANCE = 2.0
#: A significant shift (nats) beyond which the ``1/K`` extrapolation of the bias is not trusted:
#: the coarse run is far from converged, and so may the full one be. On the hard-model suite the
#: one significant RAISE shift above it (−3.4 ± 1.1) came with an estimate 18 nats low; the right
#: answers' significant shifts were −0.35 to −0.94 (docs/trust.md, "The schedule check").
MAX_SCHEDULE_SHIFT = 1.0
#: The same for AIS and trajectory AIS: three nats, a bias of one nat at the full schedule. Their
#: bias has one expected sign (``log Ẑ`` low), and on a sharp 784×500 PCD-1 MNIST RBM the ``1/K``
#: extrapolation matched what was measured: trajectory AIS shifted −4.95 (bias −1.65 predicted,
#: −1.3 measured against long AIS runs), AIS at 100 chains −1.38 ± 0.52 (bias −0.46 predicted,
#: +0.34 ± 0.28 measured), so a shift of one to three nats widens the error bar instead of
#: flagging a right answer (docs/trust.md, "The schedule check").
MAX_ANNEALING_SHIFT = 3.0


def is_checked(enabled: bool, n_steps: int) -> bool:
    """Whether a run of ``n_steps`` steps gets its schedule check (``enabled`` and long enough)."""
    return enabled and n_steps >= SCHEDULE_CHECK_MIN_TEMPERATURES


def coarsened(positions: Tensor, stride: int) -> Tensor:
    """Every ``stride``-th point of an ascending schedule, keeping both ends; shape ``(⌈K/stride⌉ + 1,)``.

    ``positions``: βs (AIS, RAISE) or positions along a trajectory (trajectory AIS). The coarse
    schedule has the full one's shape (an adaptive schedule's density where the model changes
    fast), so the two differ in length alone.
    """
    kept = positions[::stride]
    return kept if kept[-1] == positions[-1] else torch.cat([kept, positions[-1:]])


@dataclass(frozen=True, slots=True)
class CoarseRun:
    """AIS or trajectory AIS rerun with independent chains on every ``stride``-th step of its schedule.

    Attributes
    ----------
    stride : int
    n_steps : int
        ``K_c``, the coarse run's steps, ``⌈K / stride⌉``.
    log_z : float
        Its ``log Ẑ`` (nats).
    stderr : float
        Its standard error: the larger of the delta method's and the spread of ``N_GROUPS``
        chain groups (as the full run's, docs/trust.md, "Importance weights").
    n_chains : int
        The full run's number of chains, so that the two errors are alike.
    n_full_steps : int
        ``K`` of the full run.
    cost_sweeps : int
        ``n_chains·(K_c − 1)`` sweeps.
    """

    stride: int
    n_steps: int
    log_z: float
    stderr: float
    n_chains: int
    n_full_steps: int
    cost_sweeps: int

    @classmethod
    def of(
        cls,
        log_weights: Tensor,
        *,
        offset: float,
        stride: int,
        n_steps: int,
        n_full_steps: int,
        n_sweeps: int = 1,
    ) -> CoarseRun:
        """The coarse run from its final log-weights (shape ``(n_chains,)``); ``offset``: the
        anchor's ``log Z`` added to ``log mean exp`` (0 for AIS's normalised base)."""
        n_chains = log_weights.numel()
        stderr = log_mean_exp_stderr(log_weights)
        if n_chains >= 2 * N_GROUPS:
            stderr = max(stderr, group_spread_stderr(group_log_means(log_weights, N_GROUPS)[0]))
        return cls(
            stride=stride,
            n_steps=n_steps,
            log_z=offset + float(log_mean_exp(log_weights)),
            stderr=stderr,
            n_chains=n_chains,
            n_full_steps=n_full_steps,
            cost_sweeps=n_chains * max(n_steps - 1, 0) * n_sweeps,
        )


def judge_shift(
    estimate: LogZEstimate,
    verdict: Verdict,
    *,
    shift: float,
    shift_stderr: float,
    n_steps: int,
    coarse: int,
    stride: int,
    what: str,
    advice: str,
    max_shift: float = MAX_SCHEDULE_SHIFT,
) -> LogZEstimate:
    """The verdict on a schedule check's shift ``S`` (coarse minus full ``log Ẑ``, nats); module docstring.

    Parameters
    ----------
    estimate : LogZEstimate
        The full run's, its error bar already final but for this check.
    verdict : Verdict
        Gets a note always, a failure where the shift is significant and beyond ``max_shift``.
    shift, shift_stderr : float
        ``S`` and its standard error.
    n_steps, coarse : int
        ``K`` and ``K_c``.
    stride : int
    what : str
        The method as the failure names it ("RAISE", "AIS").
    advice : str
        What to do when it has not converged (the option to raise, another method).
    max_shift : float, default ``MAX_SCHEDULE_SHIFT``
        The significant ``|S|`` (nats) beyond which the estimate is unreliable.

    Returns
    -------
    LogZEstimate
        ``estimate`` with its error bar widened to ``√(s.e.² + b²)`` where the shift is significant.
    """
    where = f"on every {stride}th step ({coarse:,} of {n_steps:,})"
    if not math.isfinite(shift_stderr):
        # One example with one chain: nothing to tell a shift from noise with.
        verdict.note(
            f"schedule check: {where} the estimate moves by {shift:+.3g} nats; with no error bar, not judged"
        )
        return estimate
    # Bias ∝ 1/K: b(K_c) − b(K) = b(K)·(K/K_c − 1), so b(K) = S·K_c/(K − K_c).
    bias = shift * coarse / (n_steps - coarse)
    verdict.note(
        f"schedule check: {where} the estimate moves by {shift:+.3g} ± {shift_stderr:.2g} nats, a bias of about "
        f"{bias:+.3g} at the full schedule"
    )
    if not abs(shift) > SHIFT_SIGNIFICANCE * shift_stderr:
        return estimate
    if abs(shift) > max_shift:
        verdict.check(
            f"{what} has not converged in its schedule: {where} the estimate moves by {shift:+.3g} ± "
            f"{shift_stderr:.2g} nats (more than {max_shift:g}), so its bias at the full schedule "
            f"cannot be bounded; {advice}"
        )
    widened = math.hypot(estimate.stderr, bias)
    verdict.note(
        f"standard error {widened:.3g} includes the schedule check's bias estimate {bias:+.3g} (the run's own "
        f"error bar was {estimate.stderr:.3g})"
    )
    return dataclasses.replace(estimate, stderr=widened)


def coarse_run_checks(estimate: LogZEstimate, verdict: Verdict, *, what: str, advice: str) -> LogZEstimate:
    """The schedule check of AIS and trajectory AIS, from ``estimate.info.schedule_check`` (a
    :class:`CoarseRun`, or ``None`` when it did not run); ``what`` and ``advice`` as for
    :func:`judge_shift`.

    The two runs are independent, so the shift's error is ``√(s.e.² + s.e._c²)``, with the full
    run's error bar as the verdict has made it so far (the chain groups' spread included); the
    limit is ``MAX_ANNEALING_SHIFT``.
    """
    coarse = getattr(estimate.info, "schedule_check", None)
    if not isinstance(coarse, CoarseRun):
        return estimate
    return judge_shift(
        estimate,
        verdict,
        shift=coarse.log_z - estimate.log_z,
        shift_stderr=math.hypot(estimate.stderr, coarse.stderr),
        n_steps=coarse.n_full_steps,
        coarse=coarse.n_steps,
        stride=coarse.stride,
        what=what,
        advice=advice,
        max_shift=MAX_ANNEALING_SHIFT,
    )
