"""Annealed importance sampling (AIS) of ``log Z`` on the model's tempered family.

Neal (2001, "Annealed importance sampling", Statistics and Computing 11, eqs. 3–4), as
applied to RBMs by Salakhutdinov & Murray (2008, ICML, §4) and restated in docs/algorithms.md
§4.1. Chains start from exact samples of the normalised base ``p1`` (``log Z_0 = 0``) and
follow an ascending schedule ``0 = β_0 ≤ … ≤ β_K = 1`` (:mod:`boltzlab.estimators.annealing.schedules`).
Each chain carries the log-weight

    log w = Σ_{k=1..K} [log f_{β_k}(x_{k−1}) − log f_{β_{k−1}}(x_{k−1})],

where ``x_k`` is ``x_{k−1}`` moved by one sweep of an operator that leaves ``p_{β_k}``
invariant, and ``Ẑ = mean(w)`` is unbiased for ``Z`` (so ``E[log Ẑ] ≤ log Z`` by Jensen:
the estimate is a stochastic lower bound). ``log f`` is the hidden-summed form of §1.3, whose
increment needs no second matrix product:

    log f_{β_k}(v) − log f_{β_{k−1}}(v) = Δβ_k·(linear − base) + Σ_j [softplus(β_k a_j) − softplus(β_{k−1} a_j)],

with ``a = c + vW`` reused by the following sweep, so one temperature costs two GEMMs.

**Summed-out weights need a summed-out kernel.** The weight above integrates the first
update group (the hidden units) out, which is valid only if the transition reads no stale
hidden state: the weighted chains are distributed as ``p_{β_k}(v)·p_{β_{k−1}}(h | v)``, not
``p_{β_k}(v, h)``. Block Gibbs redraws ``h`` from its conditional first, so it qualifies. An
operator whose update depends on the current value of a unit (flip-the-state, the
α-mixture) does not: on a 2×5 RBM with K = 2, ``E[Ẑ]/Z`` is 1.14 for flip and 1.06 for the
mixture. For such operators the summed group is redrawn from ``p_{β_k}(h | v)`` (from the
same ``a``, no extra GEMM) before each sweep, which makes ``E[Ẑ] = Z`` exact again.

**Starting a run** (:func:`start_annealing`): from the checked options
(:class:`~boltzlab.estimators.annealing.options.AISOptions`, which :func:`ais` builds first
thing), the generator and the schedule are resolved, and a uniform base is warned about, the
same way for AIS, anchored AIS (:func:`run_ais`) and RAISE
(:mod:`boltzlab.estimators.annealing.raise_`), which runs this kernel backwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed, progress
from boltzlab.chains import Chains
from boltzlab.estimators.annealing.adaptive_schedules import ScheduleInfo, build_schedule
from boltzlab.estimators.annealing.chain_budget import (
    ChainBudget,
    ais_matched,
    annealing_checks,
    budget_runs,
    plan_chains,
    run_budget,
)
from boltzlab.estimators.annealing.increments import (
    add_log_f_increment_,
    check_finite_log_weights,
    operator_name,
    reads_current_state,
    redraw_summed_group,
    warn_if_uniform_base,
)
from boltzlab.estimators.annealing.options import AISOptions, AnnealingOptions
from boltzlab.estimators.annealing.schedule_check import (
    SCHEDULE_CHECK_STREAM,
    SCHEDULE_CHECK_STRIDE,
    CoarseRun,
    coarsened,
    is_checked,
)
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.lower_bound import LowerBound
from boltzlab.models.base import TemperedModel
from boltzlab.numerics import ess, log_mean_exp, log_mean_exp_stderr
from boltzlab.operators.base import Operator
from boltzlab.rng import fork, resolve_generator

__all__ = ["AISInfo", "AnnealingStart", "ais"]

# Work-space budget (float64 elements) for the blocks of weight snapshots behind the ESS trace.
_SNAPSHOT_ELEMENTS = 1 << 20

#: The ``boltzlab logz`` flags of every annealing method (RAISE adds ``--examples``).
ANNEALING_FLAGS = frozenset({"chains", "temperatures", "schedule", "decelerate", "operator", "alpha"})


@dataclass(frozen=True, slots=True)
class AISInfo:
    """Diagnostics of one AIS run.

    Attributes
    ----------
    log_weights : Tensor, shape (n_chains,), float64, on the CPU
        Final log importance weights ``log w_i``; ``log Ẑ = log mean exp(log_weights)``
        (``log Z_0 = 0`` for the normalised base).
    ess : float
        Kish's effective sample size ``(Σ w)² / Σ w²`` of the final weights, in [1, n_chains].
    schedule : Tensor, shape (K + 1,), float64
        The ladder ``β_0 = 0, …, β_K = 1`` that was used.
    log_ess_trace : Tensor, shape (K,), float64, or None
        ``log ESS`` of the running weights after each increment ``k = 1..K``: the weighted
        chains represent ``p_{β_k}`` (docs/algorithms.md §4.1, "on-the-fly ESS"). ``None`` when
        ``record_ess=False``.
    operator : str
        Name of the transition operator.
    n_chains : int
        Chains run, over every round of the chain budget.
    schedule_info : ScheduleInfo or None
        How the schedule was made: for ``"varopt"``/``"gms13"`` the measured g, the pilot's
        on-the-fly ESS and its cost; the deceleration δ if one was applied.
    final_chains : Chains or None
        The chains after the last sweep, on the model's device. Their layers outside the summed-out
        group (the visible units of an RBM) with ``log_weights`` are a properly weighted sample of
        the target: ``mean(w·φ(x)) → Z·E_p[φ]`` (what :mod:`boltzlab.estimators.annealing.anchored` uses).
    budget : ChainBudget or None
        The chain budget's rounds, the error bar after each and why it stopped.
    schedule_check : CoarseRun or None
        As many independent chains annealed on every fourth temperature
        (:mod:`boltzlab.estimators.annealing.schedule_check`); ``None`` when turned off or when
        the schedule is too short to coarsen.
    """

    log_weights: Tensor
    ess: float
    schedule: Tensor
    log_ess_trace: Tensor | None
    operator: str
    n_chains: int
    schedule_info: ScheduleInfo | None = None
    final_chains: Chains | None = None
    budget: ChainBudget | None = None
    schedule_check: CoarseRun | None = None


@dataclass(frozen=True, slots=True)
class AnnealingStart:
    """What an annealing estimator resolves before its first sweep (:func:`start_annealing`).

    Attributes
    ----------
    transition : Operator
    generator : torch.Generator
        On the model's device.
    schedule_info : ScheduleInfo
        The schedule, ``β_0 = 0, …, β_K = 1``, and how it was made.
    refresh : bool
        Whether the summed-out group is redrawn before each sweep (the operator reads the
        current state of a unit; module docstring).
    """

    transition: Operator
    generator: torch.Generator
    schedule_info: ScheduleInfo
    refresh: bool


def start_annealing(
    model: TemperedModel, options: AnnealingOptions, generator: torch.Generator | int | None
) -> AnnealingStart:
    """Resolve the generator and the schedule of an AIS or RAISE run; warn on a uniform base.

    Parameters
    ----------
    model : TemperedModel
    options : AnnealingOptions
        Checked when they were made; their operator is already an instance.
    generator : torch.Generator or int, optional
        An adaptive schedule (``"varopt"``, ``"gms13"``) measures the model here, drawing
        from it before the run does.

    Returns
    -------
    AnnealingStart
    """
    generator = resolve_generator(generator, model.device)
    schedule_info = build_schedule(
        model,
        options.schedule,
        options.n_temperatures,
        operator=options.operator,
        generator=generator,
        decelerate=options.decelerate,
        options=options.schedule_options,
    )
    warn_if_uniform_base(model)
    transition = options.operator  # an Operator: resolved when the options were made
    return AnnealingStart(
        transition=transition,
        generator=generator,
        schedule_info=schedule_info,
        refresh=reads_current_state(transition),
    )


@register_estimator(
    "ais",
    family="annealing",
    grows=budget_runs,
    shards=True,
    checks=annealing_checks,
    matched=ais_matched,
    options=AISOptions,
    flags=ANNEALING_FLAGS | {"target-stderr", "max-chains"},
)
def ais(
    model: TemperedModel,
    *,
    n_chains: int | None = AISOptions.n_chains,
    n_temperatures: int | None = AISOptions.n_temperatures,
    schedule: str | Tensor | Sequence[float] = AISOptions.schedule,
    operator: str | Operator = AISOptions.operator,
    generator: torch.Generator | int | None = None,
    record_ess: bool = AISOptions.record_ess,
    decelerate: float | None = AISOptions.decelerate,
    schedule_options: Mapping[str, Any] | None = AISOptions.schedule_options,
    blocks: int | None = AISOptions.blocks,
    max_chains: int | None = AISOptions.max_chains,
    target_stderr: float | None = AISOptions.target_stderr,
    lower_bound: LowerBound | None = AISOptions.lower_bound,
    schedule_check: bool = AISOptions.schedule_check,
    **unknown: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` by annealed importance sampling from the model's base.

    Parameters
    ----------
    model : TemperedModel
        Any model on the tempered-family protocol (an RBM, ...). Its base should be fitted
        to data (``model.set_base_rate(train_data)``): on MNIST-sized RBMs AIS from a
        uniform base misses log Z by nats, from the base-rate base by hundredths.
    n_chains : int, optional
        Independent annealing runs ``M``, all advanced together as one batch: exactly this
        many when given (and no ``max_chains``). Default: a chain budget
        (:mod:`boltzlab.estimators.annealing.chain_budget`): 100 chains first, then further rounds of
        independent chains on the same schedule while the pooled weights fail a check (ESS,
        chain-group agreement, standard error above ``target_stderr``), up to ``max_chains``;
        ``info.budget`` says what happened.
    n_temperatures : int, optional
        ``K``, the number of increments (schedule length minus one); each chain makes
        ``K − 1`` sweeps. Default: the schedule's own (14,500 for ``"sm08"``, the
        Salakhutdinov & Murray 2008 grid, and for ``"linear"``).
    schedule : {"sm08", "linear", "varopt", "gms13"} or Tensor or sequence of float, default "sm08"
        A registered schedule name or explicit ascending βs from 0 to 1, shape ``(K + 1,)``.
        ``"varopt"`` (Kiwaki 2015) and ``"gms13"`` (Grosse et al. 2013) first measure the
        model with a short run (:mod:`boltzlab.estimators.annealing.adaptive_schedules`); its sweeps
        are counted in ``cost_sweeps``.
    operator : str or Operator, default "gibbs"
        Transition operator, by name (``operators.get``) or an instance, e.g.
        ``operators.get("mixture", alpha=0.5)``.
    generator : torch.Generator or int, optional
        Randomness (a seed is accepted); on the model's device.
    record_ess : bool, default True
        Keep the running log-ESS after every temperature in ``info.log_ess_trace``.
    decelerate : float, optional
        Cap every increment of the schedule at this δ, stretching the later ones
        (Kiwaki's deceleration, e.g. ``schedule="varopt", decelerate=0.006``); needs ``K·δ ≥ 1``.
    schedule_options : mapping, optional
        Options of an adaptive schedule, e.g. ``{"pilot_chains": 200, "pilot_temperatures": 500}``
        for ``"varopt"`` (see ``adaptive_schedules.varopt`` and ``gms13``).
    blocks : int, optional
        Cut the chains into this many blocks, each with its own random stream derived from
        ``generator``, and, in a ``torch.distributed`` process group (``torchrun``), give each
        process whole blocks and gather the weights (docs/architecture.md, "Scaling out"). The
        log-weights then depend on the seed and ``blocks`` only, not on the number of processes.
        Default: blocks only in a process group (``max(8, world_size)`` of them).
    max_chains : int, optional
        Cap of the chain budget (default 1,600 when ``n_chains`` is unset); given with
        ``n_chains``, the budget starts from ``n_chains`` chains.
    target_stderr : float, optional
        Standard error (nats) the chain budget grows to reach; default 0.1.
    lower_bound : LowerBound, optional
        A certified lower bound on ``log Z``; the chain budget also grows while the estimate
        sits below it (``estimate_log_z`` passes its verdict's witness when the budget runs).
    schedule_check : bool, default True
        Also anneal as many independent chains on every fourth temperature (a quarter more
        sweeps; schedules under 40 temperatures are not checked): the shift between the two
        runs estimates the bias the error bar leaves out, which the verdict adds to the error
        bar or, beyond a nat, flags (:mod:`boltzlab.estimators.annealing.schedule_check`).

    Returns
    -------
    LogZEstimate
        ``log_z = log mean exp(log w)`` in nats; ``stderr`` by the delta method
        (``std(w / mean w) / sqrt(M)``); ``bound="lower"``; ``cost_sweeps = M·(K − 1)``
        plus the adaptive schedule's measuring sweeps and the schedule check's; ``info`` an
        :class:`AISInfo`.

    Raises
    ------
    ValidationError
        For a bad ``n_chains``, ``max_chains`` (or one below ``n_chains``), ``target_stderr``,
        schedule, operator or unknown option.
    DivergenceError
        When the log-weights are NaN or ``+inf``, or none of them is finite.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.estimate_log_z(model, method="ais", n_chains=50, n_temperatures=200,
    ...                            schedule="linear", generator=0)
    >>> abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr + 1e-6
    True
    """
    options = AISOptions.from_given(
        {
            "n_chains": n_chains,
            "n_temperatures": n_temperatures,
            "schedule": schedule,
            "operator": operator,
            "record_ess": record_ess,
            "decelerate": decelerate,
            "schedule_options": schedule_options,
            "blocks": blocks,
            "max_chains": max_chains,
            "target_stderr": target_stderr,
            "lower_bound": lower_bound,
            "schedule_check": schedule_check,
            **unknown,
        },
        "AIS",
    )
    return run_ais(model, options, generator)


def run_ais(
    model: TemperedModel, options: AISOptions, generator: torch.Generator | int | None
) -> LogZEstimate:
    """:func:`ais` with its options checked: the chain budget's rounds of the annealing kernel.

    Anchored AIS runs its AIS part here too, with its own
    (:class:`~boltzlab.estimators.annealing.options.AnchoredAISOptions`, an ``AISOptions``).
    Returns what :func:`ais` returns.
    """
    plan = plan_chains(options)
    start = start_annealing(model, options, generator)
    schedule_info = start.schedule_info
    betas = schedule_info.betas
    checked = is_checked(options.schedule_check, betas.numel() - 1)
    # Forked before the full run draws: its draws are the same with or without the check.
    check_start = dataclasses.replace(start, generator=fork(start.generator, SCHEDULE_CHECK_STREAM))

    def run_on(
        on: AnnealingStart, ladder: Tensor, chains: int, record_ess: bool
    ) -> tuple[Tensor, Tensor | None, Chains]:
        if options.blocks is None and not distributed.topology().active:
            return _anneal(
                model,
                on.transition,
                ladder,
                n_chains=chains,
                generator=on.generator,
                record_ess=record_ess,
                refresh_summed=on.refresh,
            )
        return _anneal_sharded(
            model, on, ladder, n_chains=chains, blocks=options.blocks, record_ess=record_ess
        )

    def run_round(chains: int) -> tuple[Tensor, Tensor | None, Chains]:
        return run_on(start, betas, chains, options.record_ess)

    log_weights, sums, final_chains, budget = run_budget(run_round, plan, options.lower_bound)
    log_ess_trace = None if sums is None else 2.0 * sums[:, 0] - sums[:, 1]
    schedule_check = None
    if checked:
        # As many chains as the full run pooled, so that the two error bars are alike.
        coarse = coarsened(betas, SCHEDULE_CHECK_STRIDE)
        coarse_weights = run_on(check_start, coarse, log_weights.numel(), False)[0]
        check_finite_log_weights(coarse_weights)
        schedule_check = CoarseRun.of(
            coarse_weights,
            offset=0.0,
            stride=SCHEDULE_CHECK_STRIDE,
            n_steps=coarse.numel() - 1,
            n_full_steps=betas.numel() - 1,
        )

    info = AISInfo(
        log_weights=log_weights,
        ess=ess(log_weights),
        schedule=betas,
        log_ess_trace=log_ess_trace,
        operator=operator_name(start.transition),
        n_chains=log_weights.numel(),
        schedule_info=schedule_info,
        final_chains=final_chains,
        budget=budget,
        schedule_check=schedule_check,
    )
    return LogZEstimate(
        log_z=float(log_mean_exp(log_weights)),  # + log Z_0, which is 0 for the normalised base
        stderr=log_mean_exp_stderr(log_weights),
        method="ais",
        cost_sweeps=log_weights.numel() * (betas.numel() - 2)
        + schedule_info.cost_sweeps
        + (schedule_check.cost_sweeps if schedule_check is not None else 0),
        bound="lower",
        info=info,
    )


def _anneal(
    model: TemperedModel,
    transition: Operator,
    betas: Tensor,
    *,
    n_chains: int,
    generator: torch.Generator,
    record_ess: bool,
    refresh_summed: bool,
) -> tuple[Tensor, Tensor | None, Chains]:
    """The AIS loop; returns the final log-weights and, per temperature, ``logsumexp`` of the
    running ``log w`` and of ``2·log w`` (shape ``(K, 2)``: ``log ESS = 2·s₁ − s₂``, and sums
    of several runs combine by ``logsumexp``), both on the CPU, and the final chains.

    Nothing here reads a value back to the host, so on a GPU the temperatures are queued
    without waiting; the βs are host floats computed once.
    """
    n_increments = betas.numel() - 1
    beta_values = betas.tolist()
    # The per-chain β tensors are sliced from one device copy of the ladder: building them
    # from host floats would be a blocking host-to-device copy per temperature on a GPU.
    betas_on_device = betas.to(device=model.device, dtype=model.dtype)
    chains = model.init_chains(n_chains, generator=generator)
    log_weights = torch.zeros(n_chains, dtype=torch.float64, device=model.device)
    trace = snapshots = None
    if record_ess:
        # The running log-ESS is computed for blocks of temperatures at once from snapshots
        # of the weights: two small reductions per temperature are a visible share of the
        # loop on small models, one copy is not.
        block = max(1, min(256, _SNAPSHOT_ELEMENTS // n_chains))
        snapshots = torch.empty(block, n_chains, dtype=torch.float64, device=model.device)
        trace = torch.empty(n_increments, 2, dtype=torch.float64, device=model.device)

    for k in range(1, n_increments + 1):
        terms = model.marginal_terms(chains.layers)
        add_log_f_increment_(log_weights, terms, beta_values[k - 1], beta_values[k])
        if trace is not None and snapshots is not None:
            row = (k - 1) % snapshots.shape[0]
            snapshots[row].copy_(log_weights)
            if row == snapshots.shape[0] - 1 or k == n_increments:
                filled = snapshots[: row + 1]
                trace[k - row - 1 : k, 0] = torch.logsumexp(filled, 1)
                trace[k - row - 1 : k, 1] = torch.logsumexp(2.0 * filled, 1)
        if k < n_increments:
            chains = chains.with_beta(betas_on_device[k])
            if refresh_summed:
                chains = redraw_summed_group(model, chains, terms, beta_values[k], generator)
            chains, _ = transition.step(model, chains, generator=generator, terms=terms)
            progress.advance(chains.n_chains)

    return log_weights.cpu(), None if trace is None else trace.cpu(), chains


def _anneal_sharded(
    model: TemperedModel,
    start: AnnealingStart,
    betas: Tensor,
    *,
    n_chains: int,
    blocks: int | None,
    record_ess: bool,
) -> tuple[Tensor, Tensor | None, Chains]:
    """:func:`_anneal` on this process's blocks of chains, the results gathered from every process.

    The block streams are seeded from one draw of the run's generator (after any adaptive
    schedule, which every process measures alike from the same seed); the processes check
    that they agree on it. Weights and final chains are concatenated in block order; the ESS
    sums are combined by ``logsumexp`` in rank order.
    """
    seed = distributed.shared_seed(start.generator)
    part = distributed.shard(n_chains, seed=seed, n_blocks=blocks, device=model.device)
    assert part.generator is not None  # shard() gives every rank at least one block
    log_weights, sums, chains = _anneal(
        model,
        start.transition,
        betas,
        n_chains=part.rows,
        generator=part.generator,  # type: ignore[arg-type]  # draws go through boltzlab.rng
        record_ess=record_ess,
        refresh_summed=start.refresh,
    )
    log_weights = distributed.gather_rows(log_weights, what="gathering the AIS weights")
    if sums is not None:
        sums = torch.logsumexp(torch.stack(distributed.all_gather(sums, what="gathering the ESS trace")), 0)
    return log_weights, sums, distributed.gather_chains(chains)
