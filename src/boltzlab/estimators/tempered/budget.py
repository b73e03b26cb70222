"""How much tempered sampling an estimate gets: a placed ladder, then rounds until the checks pass.

docs/algorithms.md §4.3 ("Where the levels go", "How long to run") and docs/trust.md. Every
tempered estimator (RTS, TS, TI, TI-RB, MBAR) runs through :func:`estimate_with_budget`:

1. **Ladder.** By default (``ladder="adaptive"``) ``K = n_temperatures`` (100) levels at equal
   thermodynamic length, placed from a pilot annealing run that also gives the level weights
   ``log Ẑ`` to start from (:func:`~boltzlab.estimators.tempered.ladders.adaptive_ladder`).
   ``ladder="linear"`` is the paper's linear ladder from ``Ẑ = 1``; an explicit ladder is
   used as given.
2. **Round 0** is RTS's run as the paper describes it: initial iterations until the stopping
   rule holds, then a long run of ``n_sweeps`` with ``Ẑ`` fixed.
3. **Checks** (:func:`~boltzlab.estimators.tempered.checks.tempered_failures`, on the
   method's own estimate): level balance after the run (``ĉ_k`` against ``r_k``), round trips
   per chain, agreement of independent chain groups, the pilot's bound; and two that only
   the budget applies: an estimate below a certified lower bound (``lower_bound``, which
   ``estimate_log_z`` passes from the verdict's witness) and a standard error above
   ``target_stderr`` (0.1 nats by default; "More chains" below).
4. **Growth.** While a check fails and the sweeps per chain spent so far plus the next round
   stay within ``max_sweeps``, another round runs with the long run doubled, continuing
   from where the chains are, with ``log Ẑ`` updated to the last round's RTS estimate of
   every level (a long run is a better initial iteration than a short one). Once the checks
   pass, an error bar above the target adds chains instead, up to ``max_chains``. The
   estimate uses the last round alone.

What was spent and why it stopped is :class:`TemperedBudget`, kept as the samples' ``budget``
(and so as ``info.budget`` of every tempered estimate). A caller who fixes ``n_sweeps`` and not
``max_sweeps`` gets exactly one round, and one who fixes ``n_chains`` and not ``max_chains``
gets that many chains: a budget given is a budget kept.

**Rounds** (:func:`run_rounds`, with its records :class:`BudgetRound` and
:class:`TemperedBudget`) are shared by the temperature route (:func:`estimate_with_budget`) and
the trajectory route (``trajectory-rts``, ``trajectory-mbar``). They double the *length* of the
run while a check fails.

**More chains** when the error bar is too wide (the precision step; docs/trust.md, "Tempered
estimators"): once the checks pass, a standard error above ``target_stderr``
(:data:`~boltzlab.estimators.verdict.checks.DEFAULT_TARGET_STDERR`, AIS's 0.1 nats) adds *chains* instead: where chains rarely
cross the ladder, a longer run of the same chains buys little precision, and independent
chains buy it at ``1/√n`` (on a CD-1 RBM of binary alphadigits, MBAR's error bar went from
0.17 to 0.12 nats for twice the sweeps per chain, but to 0.07–0.11 with 400 chains instead
of 100).

The wider round keeps the earlier chains, which are at equilibrium under the weights, and
adds fresh ones: exact base samples at level 0, run first for about one round trip's worth
of sweeps (:func:`burn_in_sweeps`) that are not recorded, so that the round does not count
their climb up the ladder. Every chain then runs the last round's length with the weights
the last round estimated (RTS's ``log Ẑ``), and the estimate is that round alone, as after
any round.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

import torch

from boltzlab import distributed, progress
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.record import check_option_names, register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.checks import (
    Recompute,
    TemperedDiagnosis,
    diagnose,
    tempered_verdict_checks,
)
from boltzlab.estimators.tempered.ladders import PlacedLadder, adaptive_ladder
from boltzlab.estimators.tempered.levels import pooled_log_c, rts_log_z
from boltzlab.estimators.tempered.samples import SamplerState, TemperedSamples, collect_tempered_samples
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR, check_lower_bound, check_target_stderr
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.models.base import TemperedModel
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_MAX_CHAINS",
    "DEFAULT_MAX_SWEEPS",
    "BudgetRound",
    "TemperedBudget",
    "TemperedOptions",
    "bound_failures",
    "budget_runs",
    "burn_in_sweeps",
    "chains_for_target",
    "estimate_with_budget",
    "joined_start",
    "long_run_batches",
    "max_chains_for",
    "precision_stderr",
    "register_tempered",
    "tempered_budget",
]

#: Long-run sweeps per chain of round 0 (the paper's 1,000).
DEFAULT_N_SWEEPS = 1000
DEFAULT_LEVELS = 100
#: Units of a tempered estimate's error bar: independent chains, or (batch, chain) pairs.
UNIT_ERRORS = ("chains", "batch-means")
#: Batches of the long run for ``error="batch-means"`` when the caller gives none.
DEFAULT_BATCHES = 10


@dataclass(frozen=True)
class TemperedOptions:
    """What a caller may pass to a tempered estimator (RTS, TS, TI, TI-RB, MBAR), checked once.

    ``None`` is "not given", and then the default applies: the sampler's for ``n_chains``
    (100), ``n_sweeps`` (:data:`DEFAULT_N_SWEEPS`), ``operator`` (Gibbs), ``prior``
    (uniform), ``initial_log_z`` (the pilot's), ``n_initial_iterations`` (10),
    ``initial_sweeps`` (50), ``stop_tolerance`` (0.1), ``adapt_with`` ("rb"),
    ``max_log_densities`` (1,000,000) and ``blocks``; the ladder's for ``ladder``
    ("adaptive"), ``n_temperatures`` (:data:`DEFAULT_LEVELS`), ``pilot_chains`` (the
    estimate's chains) and ``pilot_temperatures`` (1,000); the budget's for ``max_sweeps``
    (``n_sweeps`` when only that is given, else grown to :data:`DEFAULT_MAX_SWEEPS`),
    ``max_chains`` (:data:`DEFAULT_MAX_CHAINS`, or ``n_chains`` when only that is given) and
    ``lower_bound`` (none). ``target_stderr`` defaults to
    :data:`~boltzlab.estimators.verdict.checks.DEFAULT_TARGET_STDERR`; ``None`` there means no
    precision target (the budget grows for its checks alone). A budget given is a budget kept: ``n_sweeps`` without
    ``max_sweeps`` is one round, ``n_chains`` without ``max_chains`` is the chains run.
    """

    n_chains: int | None = None
    n_temperatures: int | None = None
    ladder: Any = None
    n_sweeps: int | None = None
    operator: Any = None
    prior: Any = None
    initial_log_z: Any = None
    n_initial_iterations: int | None = None
    initial_sweeps: int | None = None
    stop_tolerance: float | None = None
    adapt_with: str | None = None
    max_log_densities: int | None = None
    max_sweeps: int | None = None
    max_chains: int | None = None
    target_stderr: float | None = DEFAULT_TARGET_STDERR
    lower_bound: LowerBound | None = None
    blocks: int | None = None
    pilot_chains: int | None = None
    pilot_temperatures: int | None = None

    @classmethod
    def from_given(cls, given: Mapping[str, Any], method: str, own: Sequence[str] = ()) -> Self:
        """The options in ``given``; unknown names refused with the accepted ones, the budget's checked.

        The sampler's own options are checked where the sampler reads them
        (:func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`).
        """
        check_option_names(cls, given, method, own)
        options = cls(**given)
        # n_chains is checked under the caller's own name before the pilot and the cap use it.
        checked = {
            name: check_positive_int(getattr(options, name), name)
            for name in ("n_chains", "max_chains", "max_sweeps")
            if getattr(options, name) is not None
        }
        bound = options.lower_bound
        if bound is not None and not isinstance(bound, LowerBound):
            raise ValidationError(
                f"lower_bound must be a LowerBound (certified_lower_bound's), got {type(bound).__name__}"
            )
        return dataclasses.replace(
            options, target_stderr=check_target_stderr(options.target_stderr), **checked
        )

    def given(self) -> dict[str, Any]:
        """The options given (not ``None``), by name: what the sampler and the budget read."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) is not None
        }


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
        The method's name, for messages and for the result's ``method``.
    recompute : callable
        The method's estimator from samples (e.g. ``rts_from_samples``), which the checks use.
    group_recompute : callable, optional
        What the chain-group check recomputes on each group (default ``recompute``).
    generator : torch.Generator or int, optional
    options : dict
        What the user passed: the fields of :class:`TemperedOptions` (``ladder`` may also be
        ``"adaptive"``, the default, or ``"linear"``; ``max_sweeps`` caps the sweeps per chain,
        default :data:`DEFAULT_MAX_SWEEPS`, or ``n_sweeps`` when that was given; ``pilot_chains``
        and ``pilot_temperatures`` size the pilot; ``lower_bound``, a certified
        :class:`~boltzlab.estimators.verdict.lower_bound.LowerBound`, and ``target_stderr`` in nats,
        default 0.1, are what the budget grows towards besides the checks, the second by
        adding chains up to ``max_chains``, default 800, or ``n_chains`` when that was given;
        a fixed budget ignores ``target_stderr``, as AIS's does). Unknown names are refused.
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
    typed = TemperedOptions.from_given(options, method, own_options)
    options = {**settings, **typed.given()}
    generator = resolve_generator(generator, model.device)
    fixed = not budget_runs(options)
    # n_chains given without max_chains is the chains run (a budget given is a budget kept).
    max_chains = max_chains_for(options, options.get("n_chains", 100))
    for name in ("max_sweeps", "target_stderr", "lower_bound"):  # the budget's, not the sampler's
        options.pop(name, None)
    ladder_kind, placed = _resolve_ladder(model, options, generator)
    samples = collect_tempered_samples(model, generator=generator, **options)

    def continued(samples: TemperedSamples, **changes: Any) -> dict[str, Any]:
        return {
            **options,
            "initial_log_z": next_log_z_hat(samples),
            "n_initial_iterations": 0,
            "ladder": samples.betas,
            "n_temperatures": None,
            **changes,
        }

    def more(samples: TemperedSamples, n_sweeps: int) -> TemperedSamples:
        return collect_tempered_samples(
            model,
            generator=generator,
            start=samples.final_state,
            **continued(samples, n_chains=samples.n_chains, n_sweeps=n_sweeps),
        )

    def widen(
        samples: TemperedSamples, n_chains: int, n_sweeps: int, burn_in: int
    ) -> tuple[TemperedSamples, int]:
        # The fresh chains' climb from the base is run, not recorded ("More chains" in the module docstring).
        unrecorded = {
            "record_derivatives": False,
            "record_weighted_derivatives": False,
            "record_log_densities": False,
            "n_batches": 1,
        }
        fresh = collect_tempered_samples(
            model,
            generator=generator,
            **continued(samples, n_chains=n_chains - samples.n_chains, n_sweeps=burn_in, **unrecorded),
        )
        start = joined_start(samples.final_state, fresh.final_state)
        wider = collect_tempered_samples(
            model,
            generator=generator,
            start=start,
            **continued(samples, n_chains=n_chains, n_sweeps=n_sweeps),
        )
        return wider, fresh.cost_sweeps

    estimate = run_rounds(
        samples,
        more=more,
        widen=widen,
        recompute=recompute,
        group_recompute=group_recompute,
        fixed=fixed,
        max_sweeps=typed.max_sweeps,
        max_chains=max_chains,
        target_stderr=typed.target_stderr,
        bound=typed.lower_bound,
        ladder=ladder_kind,
        placed=placed,
        earlier=placed.cost_sweeps if placed is not None else 0,
    )
    # Under the name it was run as (the verdict reads that method's record): a variant that
    # reuses another method's estimator from samples is still itself.
    return estimate if estimate.method == method else dataclasses.replace(estimate, method=method)


def tempered_budget(
    total_sweeps: int, *, n_initial_iterations: int = 10, initial_sweeps: int = 50
) -> dict[str, int]:
    """Options of the tempered-sampling estimators that spend at most ``total_sweeps`` per chain.

    A tenth goes to the pilot annealing run that places the default ladder
    (``pilot_temperatures``; the pilot runs as many chains as the estimate, see
    :mod:`boltzlab.estimators.tempered.budget`). Of the rest, the paper's initial phase
    (``n_initial_iterations`` of ``initial_sweeps``, 10 × 50) is shrunk to at most half, and
    the long run gets what is left. The initial phase may stop early, so the cost actually
    spent (the estimate's ``cost_sweeps``) can be lower; a given ``n_sweeps`` fixes the budget
    to one round.

    Parameters
    ----------
    total_sweeps : int
        Sweeps per chain; what is left after the pilot must be at least
        ``2·n_initial_iterations``.
    n_initial_iterations, initial_sweeps : int, default 10 and 50
        The initial phase at full size.

    Returns
    -------
    dict
        ``pilot_temperatures``, ``n_initial_iterations``, ``initial_sweeps`` and ``n_sweeps``
        (the long run), whose ``pilot_temperatures + n_initial_iterations·initial_sweeps +
        n_sweeps`` equals ``total_sweeps``.

    Examples
    --------
    >>> tempered_budget(1000)
    {'pilot_temperatures': 100, 'n_initial_iterations': 10, 'initial_sweeps': 45, 'n_sweeps': 450}
    """
    total_sweeps = check_positive_int(total_sweeps, "total_sweeps")
    pilot = max(1, total_sweeps // 10)
    sampling = total_sweeps - pilot
    if sampling < 2 * n_initial_iterations:
        raise ValidationError(
            f"a tempered estimator needs more than {2 * n_initial_iterations} sweeps per chain "
            f"(a pilot, {n_initial_iterations} initial iterations and a long run), got {total_sweeps}"
        )
    per_iteration = min(initial_sweeps, sampling // (2 * n_initial_iterations))
    return {
        "pilot_temperatures": pilot,
        "n_initial_iterations": n_initial_iterations,
        "initial_sweeps": per_iteration,
        "n_sweeps": sampling - n_initial_iterations * per_iteration,
    }


#: The ``boltzlab logz`` flags every tempered-sampling estimator takes.
TEMPERED_FLAGS = frozenset(
    {"chains", "temperatures", "sweeps", "operator", "alpha", "target-stderr", "max-chains"}
)


def budget_runs(options: Mapping[str, Any]) -> bool:
    """Whether these options let the budget grow: ``n_sweeps`` alone fixes one round.

    ``None`` is "not given", as in :class:`TemperedOptions`: ``n_sweeps=None`` grows.
    """
    return options.get("n_sweeps") is None or options.get("max_sweeps") is not None


#: ``@register_tempered(name, from_samples=...)``: the record of a tempered-sampling estimator
#: over the ladder in temperature, with what the family shares (its budget grows unless
#: ``n_sweeps`` alone fixes it, its chains shard, the family's checks, the matched budget).
register_tempered = functools.partial(
    register_estimator,
    family="tempered",
    grows=budget_runs,
    shards=True,
    options=TemperedOptions,
    checks=tempered_verdict_checks,
    matched=tempered_budget,
    flags=TEMPERED_FLAGS,
)


#: Chains a tempered budget may grow to by default (8× the 100 it starts with).
DEFAULT_MAX_CHAINS = 800
#: Asked-for chains are this much more than ``1/√n`` says, as AIS's budget does.
GROWTH_MARGIN = 1.25

#: ``widen(samples, n_chains, n_sweeps, burn_in) -> (wider round, chain-sweeps of the burn-in)``.
Widen = Callable[[TemperedSamples, int, int, int], tuple[TemperedSamples, int]]


def precision_stderr(estimate: LogZEstimate) -> float:
    """The part of the error bar that more chains shrink (nats).

    TI's error bar carries its ladder's discretisation error in quadrature
    (``info.statistical_stderr`` is the rest); more chains do not touch that part.
    """
    return float(getattr(estimate.info, "statistical_stderr", estimate.stderr))


def max_chains_for(options: dict, n_chains: int) -> int:
    """The chain cap from the caller's options: ``max_chains``, else fixed at a given ``n_chains``.

    A caller who gives ``n_chains`` and not ``max_chains`` gets that many chains (a budget given
    is a budget kept); otherwise :data:`DEFAULT_MAX_CHAINS`, never below the chains run.
    """
    given = options.pop("max_chains", None)
    if given is not None:
        return max(check_positive_int(given, "max_chains"), n_chains)
    if "n_chains" in options:
        return n_chains
    return max(DEFAULT_MAX_CHAINS, n_chains)


def chains_for_target(n_chains: int, stderr: float, target: float, max_chains: int) -> int:
    """Chains for the next round: ``1/√n`` scaling to ``target`` with a margin, at least doubling.

    Parameters
    ----------
    n_chains : int
        Chains of the round just run.
    stderr, target : float
        Its standard error (the part chains shrink) and the target, nats.
    max_chains : int

    Returns
    -------
    int
        At most ``max_chains``.
    """
    wanted = n_chains * GROWTH_MARGIN * (stderr / target) ** 2 if math.isfinite(stderr) else math.inf
    return int(min(max_chains, max(2 * n_chains, math.ceil(min(wanted, 1e12)))))


def burn_in_sweeps(n_sweeps: int, round_trips: float) -> int:
    """Unrecorded sweeps for fresh chains: one round trip at the last round's pace, at most its length.

    ``round_trips`` is the last round's mean round trips per chain over its ``n_sweeps``.
    """
    if not round_trips > 1.0:
        return n_sweeps
    return max(1, math.ceil(n_sweeps / round_trips))


def joined_start(earlier: SamplerState, fresh: SamplerState) -> SamplerState:
    """The earlier chains' states followed by the fresh chains' (one start for the wider round)."""
    chains = Chains.concatenate((earlier.chains, fresh.chains.to(device=earlier.chains.device)))
    levels = torch.cat([earlier.levels, fresh.levels.to(earlier.levels.device)])
    return SamplerState(chains=chains, levels=levels)


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
        and the chain-sweeps of that burn-in (:mod:`~boltzlab.estimators.tempered.budget`).
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
    # Long because it is one loop of steps 3 and 4 whose branches are the reasons a budget stops;
    # each branch is a few lines.
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
        # asks for more chains ("More chains" above), each round within max_sweeps per chain.
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
        reason = (checks + imprecise)[0]
        if longer:
            progress.emit(
                progress.RoundStarted(len(rounds) + 1, samples.n_chains, 2 * samples.n_sweeps, reason)
            )
            samples = more(samples, 2 * samples.n_sweeps)
        else:
            assert widen is not None  # max_chains is the round's own chains without it
            n_chains = chains_for_target(
                samples.n_chains, precision_stderr(estimate), float(target_stderr), max_chains
            )
            progress.emit(progress.RoundStarted(len(rounds) + 1, n_chains, samples.n_sweeps, reason))
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
    (:func:`~boltzlab.estimators.tempered.budget.precision_stderr`), which adds chains."""
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
