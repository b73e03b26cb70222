"""How much tempered sampling an estimate gets: a placed ladder, then rounds until the checks pass.

docs/algorithms.md §4.3 ("Where the levels go", "How long to run") and docs/trust.md. Every
tempered estimator (RTS, TS, TI, TI-RB, MBAR) runs through :func:`estimate_with_budget`:

1. **Ladder.** By default (``ladder="adaptive"``) ``K = n_temperatures`` (100) levels at equal
   thermodynamic length, placed from a pilot annealing run that also gives the level weights
   ``log Ẑ`` to start from (:func:`~boltzlab.estimators.tempered_ladders.adaptive_ladder`).
   ``ladder="linear"`` is the paper's linear ladder from ``Ẑ = 1``; an explicit ladder is
   used as given.
2. **Round 0** is RTS's run as the paper describes it: initial iterations until the stopping
   rule holds, then a long run of ``n_sweeps`` with ``Ẑ`` fixed.
3. **Checks** (:func:`~boltzlab.estimators.tempered_checks.tempered_failures`, on the
   method's own estimate): level balance after the run (``ĉ_k`` against ``r_k``), round trips
   per chain, agreement of independent chain groups, the pilot's bound; and two that only
   the budget applies (:func:`precision_failures`): an estimate below a certified lower bound
   (``lower_bound``, which ``estimate_log_z`` passes from the verdict's witness) and, when the
   caller sets ``target_stderr``, a standard error above it.
4. **Growth.** While a check fails and the sweeps per chain spent so far plus the next round
   stay within ``max_sweeps``, another round runs with the long run doubled, continuing
   from where the chains are, with ``log Ẑ`` updated to the last round's RTS estimate of
   every level (a long run is a better initial iteration than a short one). The estimate
   uses the last round alone.

What was spent and why it stopped is :class:`TemperedBudget`, kept as the samples' ``budget``
(and so as ``info.budget`` of every tempered estimate). A caller who fixes ``n_sweeps`` and not
``max_sweeps`` gets exactly one round: a budget given is a budget kept.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from boltzlab import distributed
from boltzlab.errors import ValidationError
from boltzlab.estimators.lower_bound import LowerBound
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered_checks import Recompute, TemperedDiagnosis, diagnose
from boltzlab.estimators.tempered_ladders import PlacedLadder, adaptive_ladder
from boltzlab.estimators.tempered_levels import pooled_log_c, rts_log_z
from boltzlab.estimators.tempered_samples import TemperedSamples, collect_tempered_samples
from boltzlab.estimators.trust import check_lower_bound
from boltzlab.models.base import TemperedModel
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_MAX_SWEEPS",
    "DEFAULT_N_SWEEPS",
    "DEFAULT_TARGET_STDERR",
    "UNIT_ERRORS",
    "USER_SAMPLING_OPTIONS",
    "BudgetRound",
    "TemperedBudget",
    "budget_runs",
    "check_target_stderr",
    "estimate_with_budget",
    "long_run_batches",
    "next_log_z_hat",
    "precision_failures",
    "run_rounds",
]

#: Long-run sweeps per chain of round 0 (the paper's 1,000).
DEFAULT_N_SWEEPS = 1000
#: Sweeps per chain (initial iterations and every round) the budget may grow to by default:
#: rounds of 1,000, 2,000, 4,000 and 8,000 long-run sweeps after up to 500 initial ones.
DEFAULT_MAX_SWEEPS = 16_000
DEFAULT_LEVELS = 100
#: No standard error the budget grows towards by default (``target_stderr`` sets one). Unlike
#: AIS's chain budget, longer runs of the same chains buy little precision where chains rarely
#: cross the ladder: on a CD-1 RBM of binary alphadigits a 0.1-nat target grew RTS, TS, TI,
#: TI-RB and MBAR to the 16,000-sweep cap (2–4× the chain-sweeps) and their error bars only
#: went from 0.13–0.20 to 0.12–0.16 nats (docs/trust.md, "Tempered estimators").
DEFAULT_TARGET_STDERR: float | None = None
#: Units of a tempered estimate's error bar: independent chains, or (batch, chain) pairs.
UNIT_ERRORS = ("chains", "batch-means")
#: Batches of the long run for ``error="batch-means"`` when the caller gives none.
DEFAULT_BATCHES = 10

# Options a user may pass through a tempered estimator: collect_tempered_samples's and the
# budget's own (max_sweeps, target_stderr, lower_bound, the pilot's); the record_* switches
# are the estimator's business.
USER_SAMPLING_OPTIONS = (
    "n_chains",
    "n_temperatures",
    "ladder",
    "n_sweeps",
    "operator",
    "prior",
    "initial_log_z",
    "n_initial_iterations",
    "initial_sweeps",
    "stop_tolerance",
    "adapt_with",
    "max_log_densities",
    "max_sweeps",
    "target_stderr",
    "lower_bound",
    "blocks",
    "pilot_chains",
    "pilot_temperatures",
)


@dataclass(frozen=True)
class BudgetRound:
    """One round of a tempered run and what its checks said.

    Attributes
    ----------
    initial_sweeps : int
        Sweeps per chain spent in initial iterations (round 0 only).
    long_run_sweeps : int
        Long-run sweeps per chain.
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
        ``"checks passed"``, ``"max_sweeps reached"`` (with the cap), or ``"fixed budget"``.
    target_stderr : float or None
        The standard error the budget grew towards (``None``: no target).
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


def _resolve_ladder(
    model: TemperedModel, options: dict[str, Any], generator: torch.Generator
) -> tuple[str, PlacedLadder | None]:
    """Turn ``ladder="adaptive"``/``"linear"``/``None`` in ``options`` into what the sampler takes."""
    ladder = options.get("ladder")
    # The pilot runs as many chains as the estimate, so that a budget per chain covers it.
    if "pilot_chains" in options:
        pilot_chains = options.pop("pilot_chains")
    else:
        # Checked under the caller's own name before it becomes the pilot's.
        pilot_chains = check_positive_int(options.get("n_chains", 100), "n_chains")
    pilot_temperatures = options.pop("pilot_temperatures", 1000)
    if isinstance(ladder, str):
        if ladder.lower() not in ("adaptive", "linear"):
            raise ValidationError(f"ladder must be 'adaptive', 'linear' or ascending values, got {ladder!r}")
        ladder = ladder.lower()
    # Only strings name a ladder kind; anything else (list, tensor, NumPy array) is the ladder.
    if isinstance(ladder, str) and ladder == "linear":
        options["ladder"] = None
        return "linear", None
    if ladder is not None and not isinstance(ladder, str):
        return "given", None
    n_levels = options.pop("n_temperatures", None)
    n_levels = DEFAULT_LEVELS if n_levels is None else check_positive_int(n_levels, "n_temperatures")
    placed = adaptive_ladder(
        model,
        n_levels,
        operator=options.get("operator", "gibbs"),
        generator=generator,
        pilot_chains=pilot_chains,
        pilot_temperatures=pilot_temperatures,
        blocks=options.get("blocks"),
    )
    options["ladder"] = placed.ladder
    if options.get("initial_log_z") is None:
        options["initial_log_z"] = placed.initial_log_z
    return "adaptive", placed


def long_run_batches(error: str, n_batches: int | None) -> int:
    """Batches to collect the long run in: ``n_batches`` checked, or its default for ``error``.

    Parameters
    ----------
    error : {"chains", "batch-means"}
        Already checked against :data:`UNIT_ERRORS`.
    n_batches : int, optional
        By default 1, or :data:`DEFAULT_BATCHES` for ``"batch-means"`` (whose units are
        (batch, chain) pairs).

    Returns
    -------
    int
    """
    if n_batches is None:
        n_batches = DEFAULT_BATCHES if error == "batch-means" else 1
    return check_positive_int(n_batches, "n_batches")


def estimate_with_budget(
    model: TemperedModel,
    method: str,
    *,
    recompute: Recompute,
    group_recompute: Recompute | None = None,
    generator: torch.Generator | int | None,
    options: dict[str, Any],
    own_options: tuple[str, ...],
    **settings: Any,
) -> LogZEstimate:
    """A tempered method's estimate: placed ladder, round 0, rounds until the checks pass.

    Parameters
    ----------
    model : TemperedModel
    method : str
        The method's name, for messages.
    recompute : callable
        The method's estimator from samples (e.g. ``rts_from_samples``), which the checks use.
    group_recompute : callable, optional
        What the chain-group check recomputes on each group (default ``recompute``).
    generator : torch.Generator or int, optional
    options : dict
        What the user passed: :data:`USER_SAMPLING_OPTIONS` (``ladder`` may also be
        ``"adaptive"``, the default, or ``"linear"``; ``max_sweeps`` caps the sweeps per chain,
        default :data:`DEFAULT_MAX_SWEEPS`, or ``n_sweeps`` when that was given; ``pilot_chains``
        and ``pilot_temperatures`` size the pilot; ``lower_bound``, a certified
        :class:`~boltzlab.estimators.lower_bound.LowerBound`, and ``target_stderr`` in nats,
        default none, are what the budget grows towards besides the checks; a fixed budget
        ignores ``target_stderr``, as AIS's does). Unknown names are refused.
    own_options : tuple of str
        The method's own option names, listed in the refusal message.
    **settings
        What the method decides (``record_*``, ``n_batches``); an option the user gave wins.

    Returns
    -------
    LogZEstimate
        ``recompute`` of the last round's samples, which carry ``budget`` (also
        ``info.budget``) and count the pilot and the earlier rounds in ``cost_sweeps``.
    """
    unknown = sorted(set(options) - set(USER_SAMPLING_OPTIONS))
    if unknown:
        accepted = ", ".join([*own_options, *USER_SAMPLING_OPTIONS, "generator"])
        raise ValidationError(f"unknown {method} option(s) {', '.join(unknown)}; {method} takes {accepted}")
    options = {**settings, **options}
    generator = resolve_generator(generator, model.device)
    fixed = not budget_runs(options)
    max_sweeps = options.pop("max_sweeps", None)
    if max_sweeps is not None:
        max_sweeps = check_positive_int(max_sweeps, "max_sweeps")
    target_stderr = check_target_stderr(options.pop("target_stderr", DEFAULT_TARGET_STDERR))
    bound = options.pop("lower_bound", None)
    if bound is not None and not isinstance(bound, LowerBound):
        raise ValidationError(
            f"lower_bound must be a LowerBound (certified_lower_bound's), got {type(bound).__name__}"
        )
    if fixed:
        target_stderr = None  # a budget given is a budget kept: nothing to grow towards
    ladder_kind, placed = _resolve_ladder(model, options, generator)
    samples = collect_tempered_samples(model, generator=generator, **options)

    def more(samples: TemperedSamples, n_sweeps: int) -> TemperedSamples:
        continued = {**options, "initial_log_z": next_log_z_hat(samples), "n_initial_iterations": 0}
        continued.update(ladder=samples.betas, n_temperatures=None, n_sweeps=n_sweeps)
        return collect_tempered_samples(model, generator=generator, start=samples.final_state, **continued)

    return run_rounds(
        samples,
        more=more,
        recompute=recompute,
        group_recompute=group_recompute,
        fixed=fixed,
        max_sweeps=max_sweeps,
        target_stderr=target_stderr,
        bound=bound,
        ladder=ladder_kind,
        placed=placed,
        earlier=placed.cost_sweeps if placed is not None else 0,
    )


def run_rounds(
    samples: TemperedSamples,
    *,
    more: Callable[[TemperedSamples, int], TemperedSamples],
    recompute: Recompute,
    group_recompute: Recompute | None,
    fixed: bool,
    max_sweeps: int | None,
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
    recompute, group_recompute : callable
        The method's estimator from samples, and what the chain-group check runs.
    fixed : bool
        The caller fixed the budget (one round).
    max_sweeps : int or None
        Cap on sweeps per chain (None: :data:`DEFAULT_MAX_SWEEPS`, or round 0's when fixed).
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
    rounds: list[BudgetRound] = []
    while True:
        estimate = recompute(samples)
        diagnosis = diagnose(
            _with_pilot(samples, ladder, placed), recompute, estimate, group_recompute=group_recompute
        )
        failures = diagnosis.failures(strict=True) + precision_failures(estimate, target_stderr, bound)
        rounds.append(
            BudgetRound(
                initial_sweeps=int(samples.block_sweeps[: samples.n_initial_iterations].sum()),
                long_run_sweeps=samples.n_sweeps,
                log_z=estimate.log_z,
                stderr=estimate.stderr,
                diagnosis=diagnosis,
                failures=failures,
            )
        )
        next_sweeps = 2 * samples.n_sweeps
        grow = bool(failures) and spent + next_sweeps <= max_sweeps
        if distributed.topology().active:
            # The threshold comparisons (error bar, bound) must come out alike on every process;
            # one that differs would leave the others waiting for a round it never starts.
            grow = distributed.agree(grow, "tempered budget's next round")
        if not grow:
            break
        earlier += samples.n_chains * _sweeps_per_chain(samples)
        samples = more(samples, next_sweeps)
        spent += next_sweeps
    passed = not rounds[-1].failures
    reason = (
        "checks passed" if passed else ("fixed budget" if fixed else f"max_sweeps reached ({max_sweeps})")
    )
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
    )
    samples = dataclasses.replace(samples, budget=budget, earlier_cost_sweeps=earlier)
    info = dataclasses.replace(estimate.info, samples=samples, budget=budget)
    return dataclasses.replace(estimate, cost_sweeps=samples.cost_sweeps, info=info)


def check_target_stderr(value: Any) -> float | None:
    """``target_stderr`` as a float of nats (finite, positive) or ``None``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) < math.inf:
        raise ValidationError(
            f"target_stderr must be a positive, finite number of nats or None, got {value!r}"
        )
    return float(value)


def budget_runs(options: dict[str, Any]) -> bool:
    """Whether these options let the budget grow: ``n_sweeps`` alone fixes one round."""
    return "n_sweeps" not in options or options.get("max_sweeps") is not None


def precision_failures(
    estimate: LogZEstimate, target_stderr: float | None, bound: LowerBound | None
) -> tuple[str, ...]:
    """What the budget asks beyond the verdict's checks: the error bar and the certified bound.

    Neither makes an estimate unreliable by itself (the verdict applies the bound itself): a
    run below a certified lower bound by more than its error allows has missed mass that
    more sweeps may find, and a caller's ``target_stderr`` asks for a narrower error bar.
    """
    failures = []
    if target_stderr is not None and not estimate.stderr <= target_stderr:
        failures.append(f"standard error {estimate.stderr:.3g} above the target {target_stderr:g} nats")
    if bound is not None:
        message = check_lower_bound(estimate.log_z, estimate.stderr, bound)
        if message:
            failures.append(message)
    return tuple(failures)


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
    return dataclasses.replace(samples, budget=provisional)
