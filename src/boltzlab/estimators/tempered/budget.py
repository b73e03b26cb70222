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
   ``target_stderr`` (0.1 nats by default; :mod:`~boltzlab.estimators.tempered.rounds`).
4. **Growth.** While a check fails and the sweeps per chain spent so far plus the next round
   stay within ``max_sweeps``, another round runs with the long run doubled, continuing
   from where the chains are, with ``log Ẑ`` updated to the last round's RTS estimate of
   every level (a long run is a better initial iteration than a short one). Once the checks
   pass, an error bar above the target adds chains instead, up to ``max_chains``
   (:mod:`~boltzlab.estimators.tempered.chains`). The estimate uses the last round alone.

What was spent and why it stopped is :class:`TemperedBudget`, kept as the samples' ``budget``
(and so as ``info.budget`` of every tempered estimate). A caller who fixes ``n_sweeps`` and not
``max_sweeps`` gets exactly one round, and one who fixes ``n_chains`` and not ``max_chains``
gets that many chains: a budget given is a budget kept.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch

from boltzlab.errors import ValidationError
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.chains import joined_start, max_chains_for
from boltzlab.estimators.tempered.checks import Recompute, tempered_verdict_checks
from boltzlab.estimators.tempered.ladders import PlacedLadder, adaptive_ladder
from boltzlab.estimators.tempered.rounds import next_log_z_hat, run_rounds
from boltzlab.estimators.tempered.samples import TemperedSamples, collect_tempered_samples
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR, check_target_stderr
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.models.base import TemperedModel
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_N_SWEEPS",
    "TEMPERED_FLAGS",
    "UNIT_ERRORS",
    "USER_SAMPLING_OPTIONS",
    "budget_runs",
    "estimate_with_budget",
    "long_run_batches",
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
    "max_chains",
    "target_stderr",
    "lower_bound",
    "blocks",
    "pilot_chains",
    "pilot_temperatures",
)


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
        What the user passed: :data:`USER_SAMPLING_OPTIONS` (``ladder`` may also be
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
    unknown = sorted(set(options) - set(USER_SAMPLING_OPTIONS))
    if unknown:
        accepted = ", ".join([*own_options, *USER_SAMPLING_OPTIONS, "generator"])
        raise ValidationError(f"unknown {method} option(s) {', '.join(unknown)}; {method} takes {accepted}")
    options = {**settings, **options}
    generator = resolve_generator(generator, model.device)
    fixed = not budget_runs(options)
    # Checked under the caller's own name; n_chains given without max_chains is the chains run.
    max_chains = max_chains_for(options, check_positive_int(options.get("n_chains", 100), "n_chains"))
    max_sweeps = options.pop("max_sweeps", None)
    if max_sweeps is not None:
        max_sweeps = check_positive_int(max_sweeps, "max_sweeps")
    target_stderr = check_target_stderr(options.pop("target_stderr", DEFAULT_TARGET_STDERR))
    bound = options.pop("lower_bound", None)
    if bound is not None and not isinstance(bound, LowerBound):
        raise ValidationError(
            f"lower_bound must be a LowerBound (certified_lower_bound's), got {type(bound).__name__}"
        )
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
        # The fresh chains' climb from the base is run, not recorded (tempered_chains).
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
        return wider, fresh.n_chains * burn_in

    estimate = run_rounds(
        samples,
        more=more,
        widen=widen,
        recompute=recompute,
        group_recompute=group_recompute,
        fixed=fixed,
        max_sweeps=max_sweeps,
        max_chains=max_chains,
        target_stderr=target_stderr,
        bound=bound,
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


def budget_runs(options: dict[str, Any]) -> bool:
    """Whether these options let the budget grow: ``n_sweeps`` alone fixes one round."""
    return "n_sweeps" not in options or options.get("max_sweeps") is not None


#: ``@register_tempered(name, from_samples=...)``: the record of a tempered-sampling estimator
#: over the ladder in temperature, with what the family shares (its budget grows unless
#: ``n_sweeps`` alone fixes it, its chains shard, the family's checks, the matched budget).
register_tempered = functools.partial(
    register_estimator,
    family="tempered",
    grows=budget_runs,
    shards=True,
    checks=tempered_verdict_checks,
    matched=tempered_budget,
    flags=TEMPERED_FLAGS,
)
