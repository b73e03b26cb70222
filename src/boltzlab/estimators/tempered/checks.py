"""Diagnostics of a tempered-sampling run, shared by its budget loop and by the verdict.

docs/trust.md, "Tempered estimators". Each check is a function of the collected
:class:`~boltzlab.estimators.tempered.samples.TemperedSamples` (and, for the group check, of
the estimator that reads them) returning ``None`` when it passes or one sentence naming the
diagnostic, its value and the threshold (the thresholds live in
:mod:`boltzlab.estimators.verdict.checks`):

- **level balance after the run**: the long run's Rao-Blackwellized ``ĉ_k`` against the
  prior ``r_k``. With ``Ẑ`` from an equilibrated run the levels are visited in proportion to
  ``r``; a level visited several times too often holds chains that found mass the weights do
  not know about (the paper's stopping rule, applied to the long run);
- **round trips** of each chain between the ends of the ladder (the budget grows until they
  reach ``MIN_ROUND_TRIPS``; the verdict fails only below ``MIN_TEMPERED_ROUND_TRIPS``);
- **chain groups agree**: the estimate recomputed on ``N_GROUPS`` disjoint groups of chains;
- **the pilot's bound**: an estimate far below the pilot AIS's ``log Ẑ`` has missed mass
  (Markov's inequality, :mod:`boltzlab.estimators.tempered.ladders`).

:func:`group_standard_error` turns the spread of more, smaller groups into a standard error
for estimators whose own is degenerate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from boltzlab.estimators.record import find_record
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.levels import stopping_statistic
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.verdict.checks import (
    GROUP_AGREEMENT_MIN_SPREAD,
    MAX_LEVEL_IMBALANCE,
    MIN_NEIGHBOUR_OVERLAP,
    MIN_ROUND_TRIPS,
    MIN_TEMPERED_ROUND_TRIPS,
    N_GROUPS,
    PILOT_BOUND_NATS,
    Verdict,
    check_group_agreement,
)

__all__ = [
    "TemperedDiagnosis",
    "check_level_balance",
    "check_neighbour_overlap",
    "check_pilot_bound",
    "check_tempered_groups",
    "check_tempered_round_trips",
    "crossing_advice",
    "group_standard_error",
    "level_imbalance",
    "pilot_log_z",
    "tempered_failures",
    "tempered_verdict_checks",
]

#: Length growth over the rounds beyond which round trips that lag far behind mean trapped chains.
TRAPPED_MIN_GROWTH = 4

#: An estimator of one tempered method from collected samples (e.g. ``rts_from_samples``).
Recompute = Callable[[TemperedSamples], LogZEstimate]


def level_imbalance(samples: TemperedSamples) -> float:
    """``max_k |ĉ_k/r_k − 1|`` of the long run (Rao-Blackwellized ``ĉ``, all chains pooled)."""
    long_run = samples.block_stage == samples.block_stage.max()
    log_c = torch.logsumexp(samples.log_probability_sums[long_run].flatten(0, 1), 0)
    return stopping_statistic(log_c, samples.log_prior)


def check_level_balance(samples: TemperedSamples) -> str | None:
    """The long run visited every level within ``MAX_LEVEL_IMBALANCE`` of its prior share."""
    return _balance_message(level_imbalance(samples))


def _balance_message(value: float) -> str | None:
    if not value <= MAX_LEVEL_IMBALANCE:
        return (
            f"level balance after the run: max_k |ĉ_k/r_k − 1| = {value:.2f} > {MAX_LEVEL_IMBALANCE:g} "
            "(the levels were not visited as the weights from the previous stage predicted: the "
            "estimates were still moving)"
        )
    return None


def mean_round_trips(samples: TemperedSamples) -> float:
    """Mean round trips per chain in the long run (``NaN`` when not recorded)."""
    return float(samples.round_trips.mean())


def check_tempered_round_trips(
    samples: TemperedSamples, *, minimum: float = MIN_TEMPERED_ROUND_TRIPS
) -> str | None:
    """Chains made at least ``minimum`` round trips each, on average, in the long run."""
    return _round_trip_message(mean_round_trips(samples), samples.n_levels, minimum)


def _round_trip_message(mean: float, n_levels: int, minimum: float) -> str | None:
    if math.isnan(mean):
        return None
    if mean < minimum:
        return (
            f"chains made {mean:.2f} round trips each between β = 0 and β = 1 in the long run "
            f"({n_levels} levels), below {minimum:g}: the ladder was not crossed"
        )
    return None


def _groups(samples: TemperedSamples, n_groups: int) -> list[torch.Tensor]:
    return list(torch.arange(samples.n_chains).tensor_split(n_groups))


def check_tempered_groups(
    samples: TemperedSamples, recompute: Recompute, estimate: LogZEstimate, *, n_groups: int = N_GROUPS
) -> str | None:
    """Recompute the estimate on ``n_groups`` disjoint groups of chains; they must agree.

    Chains stuck in different modes give groups that disagree far beyond their error bars:
    this catches estimates *above* log Z, which no lower bound can. When a group's own error
    bar is unusable (zero or not finite) their spread is compared with the full estimate's
    error bar instead (4 of them, plus ``GROUP_AGREEMENT_MIN_SPREAD`` nats).
    """
    if samples.n_chains < 2 * n_groups:
        return None
    results = [recompute(samples.chain_subset(group)) for group in _groups(samples, n_groups)]
    values = [result.log_z for result in results]
    stderrs = [result.stderr for result in results]
    if not all(math.isfinite(value) for value in values):
        return f"{n_groups} independent chain groups gave non-finite {estimate.method} estimates"
    if all(math.isfinite(s) and s > 0 for s in stderrs):
        return check_group_agreement(
            values, stderrs, what=f"chain groups ({estimate.method} recomputed on each)"
        )
    spread = max(values) - min(values)
    allowed = 4.0 * (estimate.stderr if math.isfinite(estimate.stderr) else 0.0) + GROUP_AGREEMENT_MIN_SPREAD
    if spread > allowed:
        return (
            f"{n_groups} independent chain groups give {estimate.method} estimates spanning {spread:.3g} nats, "
            f"more than {allowed:.3g} (4 standard errors + {GROUP_AGREEMENT_MIN_SPREAD:g}): the chains disagree"
        )
    return None


def check_pilot_bound(log_z: float, stderr: float, pilot_log_z: float | None) -> str | None:
    """``log_z`` is not below the pilot AIS's ``log Ẑ`` by more than ``PILOT_BOUND_NATS`` + 4 s.e.

    ``P(log Ẑ_AIS > log Z + t) ≤ e^{−t}``: with ``t = PILOT_BOUND_NATS`` a wrong alarm has
    probability below ``e^{−t}``.
    """
    if pilot_log_z is None or not math.isfinite(pilot_log_z):
        return None
    margin = PILOT_BOUND_NATS + 4.0 * (stderr if math.isfinite(stderr) else 0.0)
    gap = pilot_log_z - log_z
    if gap > margin:
        return (
            f"estimate is {gap:.3g} nats below the pilot annealing run's log Z ({pilot_log_z:.4f}), more than "
            f"{PILOT_BOUND_NATS:g} nats + 4 standard errors (chance below e^-{PILOT_BOUND_NATS:g}): it misses mass"
        )
    return None


def pilot_log_z(samples: TemperedSamples) -> float | None:
    """The pilot AIS's final ``log Ẑ`` when the run's ladder was placed by a pilot, else ``None``."""
    placed = getattr(samples.budget, "placed", None)
    return None if placed is None else float(placed.pilot.log_z[-1])


@dataclass(frozen=True)
class TemperedDiagnosis:
    """What the checks measured on one tempered run.

    Attributes
    ----------
    imbalance : float
        :func:`level_imbalance`.
    round_trips : float
        Mean round trips per chain in the long run (``NaN`` if not recorded).
    n_levels : int
    groups : str or None
        The chain-group check's failure, if any.
    pilot : str or None
        The pilot bound's failure, if any.
    """

    imbalance: float
    round_trips: float
    n_levels: int
    groups: str | None
    pilot: str | None

    def failures(self, *, strict: bool = False) -> tuple[str, ...]:
        """The failed checks: as the verdict counts them, or (``strict``) as the budget loop does.

        The budget grows until chains make ``MIN_ROUND_TRIPS`` (1) round trips each; the
        verdict fails an estimate only below ``MIN_TEMPERED_ROUND_TRIPS`` (docs/trust.md: a
        short fixed budget leaves right answers with fewer than one round trip per chain).
        """
        minimum = MIN_ROUND_TRIPS if strict else MIN_TEMPERED_ROUND_TRIPS
        messages = [
            _balance_message(self.imbalance),
            _round_trip_message(self.round_trips, self.n_levels, minimum),
            self.groups,
            self.pilot,
        ]
        return tuple(message for message in messages if message is not None)


def diagnose(
    samples: TemperedSamples,
    recompute: Recompute,
    estimate: LogZEstimate,
    *,
    group_recompute: Recompute | None = None,
) -> TemperedDiagnosis:
    """Run every tempered check on ``samples`` (and ``estimate``, read from them).

    ``group_recompute`` (default ``recompute``) is what the chain-group check runs on each
    group: an estimator whose own error bar is unreliable on a few chains can give a more
    cautious one there (MBAR: :func:`~boltzlab.estimators.tempered.mbar.mbar_for_groups`).
    """
    return TemperedDiagnosis(
        imbalance=level_imbalance(samples),
        round_trips=mean_round_trips(samples),
        n_levels=samples.n_levels,
        groups=check_tempered_groups(samples, group_recompute or recompute, estimate),
        pilot=check_pilot_bound(estimate.log_z, estimate.stderr, pilot_log_z(samples)),
    )


def tempered_failures(
    samples: TemperedSamples,
    recompute: Recompute,
    estimate: LogZEstimate,
    *,
    group_recompute: Recompute | None = None,
    strict: bool = False,
) -> list[str]:
    """The failures of :func:`diagnose` (see :meth:`TemperedDiagnosis.failures`)."""
    diagnosis = diagnose(samples, recompute, estimate, group_recompute=group_recompute)
    return list(diagnosis.failures(strict=strict))


def group_standard_error(samples: TemperedSamples, recompute: Recompute, *, n_groups: int = 10) -> float:
    """Standard error of the full-run estimate from the spread of ``n_groups`` chain groups.

    Each group is an independent run of ``n_chains/n_groups`` chains; for an estimator whose
    error scales as ``1/√chains`` the full run's variance is the groups' variance over
    ``n_groups``. Groups hold at least two chains (an estimator's own error bar from chains
    needs two). Returns ``inf`` when fewer than two groups can be formed or a group's estimate
    is not finite.
    """
    n_groups = min(n_groups, samples.n_chains // 2)
    if n_groups < 2:
        return math.inf
    values = torch.tensor(
        [recompute(samples.chain_subset(group)).log_z for group in _groups(samples, n_groups)],
        dtype=torch.float64,
    )
    if not bool(torch.isfinite(values).all()):
        return math.inf
    return float(values.std() / math.sqrt(n_groups))


def tempered_verdict_checks(estimate: LogZEstimate, verdict: Verdict) -> LogZEstimate:
    """The tempered family's part of the verdict (the records' ``checks``; docs/trust.md).

    Level balance after the run, round trips per chain, the estimate recomputed on independent
    groups of chains and the pilot's bound, as the budget loop last ran them on these samples
    (:mod:`boltzlab.estimators.tempered.budget`), or run now with the method's defaults (its
    record's ``from_samples``); MBAR's overlap of neighbouring levels. Notes: the budget grew
    to its cap with its own checks failing; the initial iterations did not meet their
    stopping rule. Returns ``estimate`` unchanged.
    """
    samples = getattr(estimate.info, "samples", None)
    if not isinstance(samples, TemperedSamples):  # an estimate built by hand
        return estimate
    for message in _checks_of_last_round(samples, estimate):
        verdict.check(message)
    verdict.notes.extend(_budget_notes(samples))
    overlap = getattr(estimate.info, "neighbour_overlap", None)
    if isinstance(overlap, torch.Tensor):
        verdict.check(check_neighbour_overlap(overlap))
    # A continued round has no initial iterations of its own: its weights come from the
    # previous round, whose balance the checks above judged.
    if samples.n_initial_iterations > 0 and samples.stopped is False:
        verdict.note(
            "the initial iterations did not meet their stopping rule (max_k |ĉ_k/r_k − 1| < 0.1): "
            "the level weights were still moving when the run began"
        )
    return estimate


def _checks_of_last_round(samples: TemperedSamples, estimate: LogZEstimate) -> list[str]:
    budget = samples.budget
    rounds = getattr(budget, "rounds", ())
    if rounds and rounds[-1].log_z == estimate.log_z:
        return list(rounds[-1].diagnosis.failures())
    record = find_record(estimate.method)
    if record is None or record.from_samples is None:
        return []
    return tempered_failures(samples, record.from_samples, estimate)


def _budget_notes(samples: TemperedSamples) -> list[str]:
    """A note when the budget grew to its cap with its own (stricter) checks still failing."""
    budget = samples.budget
    if budget is None or budget.passed or len(budget.rounds) < 2:
        return []
    chains = budget.rounds[-1].n_chains
    more = f" and {chains} chains" if chains != budget.rounds[0].n_chains else ""
    notes = [
        f"the budget grew over {len(budget.rounds)} rounds to {budget.sweeps_per_chain} sweeps per chain"
        f"{more} and stopped ({budget.stop_reason}) with its checks still failing ({budget.rounds[-1].failures[0]})"
    ]
    advice = crossing_advice(
        [r.long_run_sweeps for r in budget.rounds],
        [r.diagnosis.round_trips for r in budget.rounds],
        budget.sweeps_per_chain,
    )
    return notes + ([advice] if advice else [])


def crossing_advice(
    long_run_sweeps: Sequence[int], round_trips: Sequence[float], sweeps_spent: int
) -> str | None:
    """What a user can do when the rounds ended with too few round trips (docs/trust.md).

    Round trips per chain should grow in proportion to a round's length. When the length grew
    at least :data:`TRAPPED_MIN_GROWTH`-fold, the round trips less than half as fast, and the
    last round made fewer than half of ``MIN_ROUND_TRIPS``, chains are likely held at some
    levels (trapped in modes at the top of the ladder, as on a 784×500 PCD-1 MNIST RBM: 0.25,
    0.32, 0.30, 0.32 round trips per chain in rounds of 1,000–8,000 sweeps) and a longer run buys
    few crossings. Otherwise the last round's rate says how long a round must be for one round
    trip per chain, and so the ``max_sweeps`` that lets the doubling rounds reach it.

    Parameters
    ----------
    long_run_sweeps : sequence of int
        Long-run sweeps per chain of each round.
    round_trips : sequence of float
        Mean round trips per chain in each round's long run (``NaN`` when not recorded).
    sweeps_spent : int
        Sweeps per chain spent so far as ``max_sweeps`` counts them (initial iterations and
        every round).

    Returns
    -------
    str or None
        ``None`` when the last round made enough round trips or none were recorded.
    """
    first, last = float(round_trips[0]), float(round_trips[-1])
    if not math.isfinite(last) or last >= MIN_ROUND_TRIPS:
        return None
    length = int(long_run_sweeps[-1])
    growth = length / long_run_sweeps[0]
    pace = last / first if first > 0 else math.inf
    alternatives = "AIS or RAISE, which do not need chains to cross the ladder"
    if growth >= TRAPPED_MIN_GROWTH and pace < growth / 2 and last < MIN_ROUND_TRIPS / 2:
        return (
            f"round trips per chain did not grow with the run ({first:.2f} in {long_run_sweeps[0]} sweeps, "
            f"{last:.2f} in {length}): chains are likely held at some levels (trapped in modes), and more "
            f"sweeps are unlikely to help; {alternatives}, are the way to an estimate here"
        )
    if last <= 0:
        return f"no chain crossed the ladder in {length} sweeps; {alternatives}, may still give an estimate"
    # Rounds double: the next ones are 2L, 4L, …; find the first at least as long as needed,
    # and the cap that lets the budget run every round up to it.
    needed = MIN_ROUND_TRIPS * length / last
    doublings = max(1, math.ceil(math.log2(needed / length)))
    max_sweeps = sweeps_spent + length * (2 ** (doublings + 1) - 2)
    return (
        f"at the last round's rate ({last:.2f} round trips per chain in {length} sweeps) "
        f"{MIN_ROUND_TRIPS:g} round trip per chain needs a round of about {math.ceil(needed)} sweeps, which "
        f"the doubling rounds reach with max_sweeps={max_sweeps} or more; or use {alternatives}"
    )


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
