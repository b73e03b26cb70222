"""RAISE: reverse annealed importance sampling of ``log p(v)``, and the upper-biased ``log Z``.

Burda, Grosse & Salakhutdinov (2015), "Accurate and conservative estimates of MRF
log-likelihood using reverse annealing", AISTATS — as derived in docs/algorithms.md §4.2. (Trust
that derivation and its exact test: the paper's own per-sample weight line is suspected of a
typo, docs/open-questions.md item 25.) An AIS schedule ``0 = β_0 ≤ … ≤ β_K = 1`` defines the
annealed generative model

    p_ann(v_0, …, v_K) = p_0(v_0)·Π_{k=1..K} T_k(v_k | v_{k−1}),

whose last marginal ``p_ann(v_K)`` tends to ``p(v)`` as K grows. Sampling its path backwards
from a data point, ``v_K = v`` and ``v_{k−1} ~ T̃_k(· | v_k)`` with ``T̃_k`` the reversal of
``T_k`` with respect to ``p_{β_k}``, gives the importance weight

    log w = Σ_{k=1..K} [log f_{β_k}(v_k) − log f_{β_k}(v_{k−1})] + log p_0(v_0)
          = log f_1(v) − Σ_{k=1..K} [log f_{β_k}(v_{k−1}) − log f_{β_{k−1}}(v_{k−1})],

with ``E[w] = p_ann(v)`` exactly and no partition function anywhere. The second form is
AIS's increment taken along the reverse path, so RAISE shares AIS's accurate increment
kernel. By Jensen ``E[log p̂(v)] ≤ log p_ann(v)``: a stochastic lower bound on the
log-likelihood of the annealed model, and a conservative estimate of ``log p(v)`` once
``p_ann ≈ p``.

**Which kernel runs backwards.** AIS's forward kernel at ``β_k`` (:mod:`.ais`) redraws the
summed-out hidden layer from ``p_{β_k}(h | v)`` (Gibbs does so itself; state-dependent
operators such as flip get an explicit redraw) and then sweeps hidden, then visible. On the
visible marginal this is ``T_k(v' | v) = Σ_h p_{β_k}(h | v)·T_V(v' | v, h)``, because the
hidden update leaves ``p(h | v)`` invariant, and ``p_{β_k}(v)·T_k(v' | v) =
Σ_h p_{β_k}(v, h)·T_V(v' | v, h)`` is symmetric in ``(v, v')`` whenever the visible update is
reversible with respect to ``p(v | h)`` — as the unit updates of Gibbs, flip-the-state and
their mixture are. So ``T̃_k = T_k``: the reverse chain runs exactly AIS's kernel, redraw
included. The tests check ``mean(w)/p_ann(v) = 1`` against ``p_0·T_1⋯T_K`` built from exact
matrices, for Gibbs and flip.

**log Z.** Since ``log f(v) − log p(v) = log Z`` for every v, Carlson et al. (2016, ICML, the
RTS paper, §5) average ``log f(v_n) − log p̂(v_n)`` over held-out data: an estimate of log Z
biased *upward* (``bound="upper"``), the mirror of AIS's downward bias, so the two sandwich
the truth (docs/algorithms.md §7; the upper side holds in expectation over data drawn from the model).

**The schedule check.** From held-out data the bias has either sign and the error bar over
examples does not contain it. Both of its parts (``p_ann ≠ p``, Jensen over ``M`` chains)
shrink as ``1/K`` once the schedule is long, so RAISE also anneals the same examples on every
``SCHEDULE_CHECK_STRIDE``-th temperature; the paired shift between the two runs estimates the
full run's bias, which :func:`raise_checks` adds to the error bar or, where it is too large to
extrapolate, turns into an unreliable verdict (docs/trust.md, "RAISE's schedule check").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed, progress
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.adaptive_schedules import ScheduleInfo
from boltzlab.estimators.annealing.ais import ANNEALING_FLAGS, AnnealingStart, start_annealing
from boltzlab.estimators.annealing.chain_budget import annealing_matched
from boltzlab.estimators.annealing.increments import (
    add_log_f_increment_,
    check_finite_log_weights,
    operator_name,
    redraw_summed_group,
)
from boltzlab.estimators.annealing.options import RAISEOptions
from boltzlab.estimators.annealing.schedule_check import (
    MAX_SCHEDULE_SHIFT,
    SCHEDULE_CHECK_MIN_TEMPERATURES,
    SCHEDULE_CHECK_STREAM,
    SCHEDULE_CHECK_STRIDE,
    SHIFT_SIGNIFICANCE,
    coarsened,
    judge_shift,
)
from boltzlab.estimators.record import register_estimator
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.checks import Verdict
from boltzlab.models.base import TemperedModel, log_f_marginal
from boltzlab.numerics import log_ess, log_mean_exp
from boltzlab.operators.base import Operator
from boltzlab.rng import fork
from boltzlab.validation import as_model_data

__all__ = [
    "MAX_SCHEDULE_SHIFT",
    "SCHEDULE_CHECK_MIN_TEMPERATURES",
    "SCHEDULE_CHECK_STREAM",
    "SCHEDULE_CHECK_STRIDE",
    "SHIFT_SIGNIFICANCE",
    "RAISEResult",
    "ScheduleCheck",
    "coarsened",
    "raise_checks",
    "raise_log_likelihood",
    "raise_log_z",
    "schedule_shift",
]


@dataclass(frozen=True, slots=True)
class ScheduleCheck:
    """RAISE rerun on the same examples with every ``stride``-th temperature of the schedule.

    RAISE's error bar is the spread over examples; its bias, from ``p_ann ≠ p`` and from
    Jensen's inequality over ``M`` chains, is not in it, and from held-out data it has either
    sign. Both parts shrink with the schedule's length (as ``1/K`` once the schedule is long:
    the variance of ``log w`` does). The per-example difference between the coarse and the full
    run is paired — the spread between examples, which dominates the error bar, cancels — so
    it measures the bias directly: under ``1/K`` scaling the full run's bias is
    ``shift · K_c / (K − K_c)`` (a third of the shift when ``stride`` divides ``K``), and a
    shift that is small against the error bar says the schedule has converged.

    Attributes
    ----------
    stride : int
        Every ``stride``-th β of the full schedule was kept (both ends always).
    n_temperatures : int
        ``K_c`` of the coarse schedule, ``⌈K / stride⌉``.
    log_likelihoods : Tensor, shape (n_examples,), float64
        ``log p̂(v_n)`` of the coarse run.
    stderrs : Tensor, shape (n_examples,), float64
        Their delta-method standard errors, as :attr:`RAISEResult.stderrs`.
    cost_sweeps : int
        ``n_examples·M·K_coarse``.
    """

    stride: int
    n_temperatures: int
    log_likelihoods: Tensor
    stderrs: Tensor
    cost_sweeps: int

    def shifts(self, full: Tensor) -> Tensor:
        """Per-example ``log Ẑ`` of the coarse run minus the full run's, in nats; shape (n_examples,).

        ``full``: the full run's ``log p̂(v_n)``. Positive where the coarse run's ``log Ẑ``
        is higher (its ``log p̂`` lower).
        """
        return full - self.log_likelihoods


@dataclass(frozen=True, slots=True)
class RAISEResult:
    """Per-example RAISE estimates of ``log p(v)``.

    Attributes
    ----------
    log_likelihoods : Tensor, shape (n_examples,), float64, CPU
        ``log p̂(v_n) = log mean_m w_{n,m}`` in nats; ``E[exp(.)] = p_ann(v_n)``, so each is a
        stochastic lower bound on ``log p_ann(v_n)``.
    stderrs : Tensor, shape (n_examples,), float64
        Delta-method standard errors ``std(w / mean w) / sqrt(M)`` (``inf`` when ``M = 1``).
    log_weights : Tensor, shape (n_examples, n_chains), float64
        ``log w_{n,m}``.
    log_f : Tensor, shape (n_examples,), float64
        Unnormalised ``log f_1(v_n)`` (hidden units summed out; ``log p(v) = log_f − log Z``).
    schedule_info : ScheduleInfo
        The schedule (ascending; run from ``β_K = 1`` down to ``β_0 = 0``).
    operator : str
    n_chains : int
        Reverse chains per example, ``M``.
    cost_sweeps : int
        ``n_examples·M·K`` plus any sweeps the schedule spent measuring the model, plus the
        schedule check's.
    schedule_check : ScheduleCheck, optional
        The same examples annealed on a coarser schedule (``None`` when turned off or when the
        schedule is too short to coarsen).
    """

    log_likelihoods: Tensor
    stderrs: Tensor
    log_weights: Tensor
    log_f: Tensor
    schedule_info: ScheduleInfo
    operator: str
    n_chains: int
    cost_sweeps: int
    schedule_check: ScheduleCheck | None = None

    @property
    def mean_log_likelihood(self) -> float:
        """Average of ``log p̂(v_n)`` over the examples, in nats."""
        return float(self.log_likelihoods.mean())

    @property
    def log_z_per_example(self) -> Tensor:
        """``log f(v_n) − log p̂(v_n)``: each an upward-biased estimate of ``log Z``; shape (n_examples,)."""
        return self.log_f - self.log_likelihoods

    @property
    def ess(self) -> Tensor:
        """Kish's ESS of each example's weights, shape (n_examples,), in [1, M]."""
        return log_ess(self.log_weights.t()).exp()


def raise_log_likelihood(
    model: TemperedModel,
    data: Any,
    *,
    n_chains: int = RAISEOptions.n_chains,
    n_temperatures: int | None = RAISEOptions.n_temperatures,
    schedule: str | Tensor | Sequence[float] = RAISEOptions.schedule,
    operator: str | Operator = RAISEOptions.operator,
    generator: torch.Generator | int | None = None,
    decelerate: float | None = RAISEOptions.decelerate,
    schedule_options: Mapping[str, Any] | None = RAISEOptions.schedule_options,
    chains_per_batch: int = RAISEOptions.chains_per_batch,
    blocks: int | None = RAISEOptions.blocks,
    schedule_check: bool = RAISEOptions.schedule_check,
) -> RAISEResult:
    """Estimate ``log p(v)`` of each example by reverse annealing from it (Burda et al. 2015).

    Parameters
    ----------
    model : TemperedModel
        A model whose only kept layer is the visible one (an RBM: hidden units summed out).
        Its base should be fitted to data, as for AIS (``model.set_base_rate``).
    data : Tensor or array, shape (n_examples, n_visible), values 0/1
        The examples (held-out data); not modified.
    n_chains : int, default 10
        Reverse chains per example, ``M``.
    n_temperatures : int, optional
        ``K``; the schedule's default when ``None`` (14,500 for ``"sm08"``).
    schedule : str or Tensor or sequence of float, default "sm08"
        As for AIS: ``"sm08"``, ``"linear"``, ``"varopt"``, ``"gms13"`` or explicit βs.
    operator : str or Operator, default "gibbs"
        The transition; must be one whose unit updates are reversible with respect to their
        conditionals (Gibbs, flip, mixture), so that it is its own reversal on ``v``.
    generator : torch.Generator or int, optional
    decelerate : float, optional
        Cap on every β increment (see ``adaptive_schedules.decelerated``).
    schedule_options : mapping, optional
        Options of an adaptive schedule.
    chains_per_batch : int, default 16384
        Examples are annealed in batches of about this many chains (memory; results do not
        depend on it beyond the order in which random numbers are drawn).
    blocks : int, optional
        Cut the examples into this many blocks, each annealed with its own random stream
        derived from ``generator``; in a ``torch.distributed`` process group each process
        takes whole blocks and the weights are gathered, so the result does not depend on the
        number of processes (docs/architecture.md, "Scaling out"). Default: blocks only in a
        process group (``min(n_examples, max(8, world_size))``).
    schedule_check : bool, default True
        Also anneal the examples on every ``SCHEDULE_CHECK_STRIDE``-th temperature
        (:class:`ScheduleCheck`; a quarter more sweeps), for the verdict. Schedules shorter
        than ``SCHEDULE_CHECK_MIN_TEMPERATURES`` are not checked.

    Returns
    -------
    RAISEResult

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> data = torch.randint(0, 2, (5, 7), generator=torch.Generator().manual_seed(0))
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0).set_base_rate(data)
    >>> result = raise_log_likelihood(model, data, n_temperatures=100, schedule="linear", generator=0)
    >>> result.log_likelihoods.shape
    torch.Size([5])
    """
    options = RAISEOptions(
        n_chains=n_chains,
        n_temperatures=n_temperatures,
        schedule=schedule,
        operator=operator,
        decelerate=decelerate,
        schedule_options=schedule_options,
        chains_per_batch=chains_per_batch,
        blocks=blocks,
        schedule_check=schedule_check,
    )
    return run_raise(model, data, options, generator)


def run_raise(
    model: TemperedModel, data: Any, options: RAISEOptions, generator: torch.Generator | int | None
) -> RAISEResult:
    """:func:`raise_log_likelihood` with its options checked (as :func:`raise_log_z` runs it)."""
    layer_sizes = tuple(model.layer_sizes)
    kept = [index for index in range(len(layer_sizes)) if index not in model.update_groups[0]]
    if kept != [0]:
        raise ValidationError(
            "RAISE needs a model whose only layer left after summing out update_groups[0] is the "
            f"visible one (an RBM); this model keeps layers {kept}"
        )
    data = as_model_data(model, data, "data")  # 0/1, or real for a Gaussian visible layer
    n_chains = options.n_chains
    start = start_annealing(model, options, generator)
    schedule_info = start.schedule_info

    sharded = options.blocks is not None or distributed.topology().active
    streams = (
        distributed.example_streams(data, start.generator, options.blocks)
        if sharded
        else [(data, start.generator)]
    )
    log_f = log_f_marginal(model.marginal_terms(data), 1.0).cpu()

    def log_weights_on(betas: Tensor, streams: list[tuple[Tensor, torch.Generator]]) -> Tensor:
        increments = _anneal_examples(model, start, betas, streams, options)
        if sharded:
            increments = distributed.gather_rows(increments, what="gathering the RAISE weights")
        log_weights = log_f[:, None] - increments.view(-1, n_chains)
        check_finite_log_weights(log_weights.flatten())
        return log_weights

    checked = options.schedule_check and schedule_info.n_temperatures >= SCHEDULE_CHECK_MIN_TEMPERATURES
    # The check's streams are forked before the full run draws, so that neither run's draws,
    # nor the caller's generator afterwards, depend on whether the check runs.
    check_streams = (
        [(examples, fork(stream, SCHEDULE_CHECK_STREAM)) for examples, stream in streams] if checked else []
    )
    log_weights = log_weights_on(schedule_info.betas, streams)
    log_likelihoods, stderrs = _per_example(log_weights)
    check = None
    if checked:
        coarse = coarsened(schedule_info.betas, SCHEDULE_CHECK_STRIDE)
        coarse_likelihoods, coarse_stderrs = _per_example(log_weights_on(coarse, check_streams))
        check = ScheduleCheck(
            stride=SCHEDULE_CHECK_STRIDE,
            n_temperatures=coarse.numel() - 1,
            log_likelihoods=coarse_likelihoods,
            stderrs=coarse_stderrs,
            cost_sweeps=data.shape[0] * n_chains * (coarse.numel() - 1),
        )
    return RAISEResult(
        log_likelihoods=log_likelihoods,
        stderrs=stderrs,
        log_weights=log_weights,
        log_f=log_f,
        schedule_info=schedule_info,
        operator=operator_name(start.transition),
        n_chains=n_chains,
        cost_sweeps=data.shape[0] * n_chains * schedule_info.n_temperatures
        + schedule_info.cost_sweeps
        + (check.cost_sweeps if check is not None else 0),
        schedule_check=check,
    )


def _per_example(log_weights: Tensor) -> tuple[Tensor, Tensor]:
    """``log mean_m w`` of each row of ``log_weights`` (shape ``(n_examples, M)``) and its
    delta-method standard error ``std(w / mean w) / √M`` (``inf`` for ``M = 1``); shapes
    ``(n_examples,)``."""
    n_chains = log_weights.shape[1]
    log_likelihoods = log_mean_exp(log_weights, dim=1)
    relative = torch.exp(log_weights - log_likelihoods[:, None])
    stderrs = (
        relative.std(1) / math.sqrt(n_chains) if n_chains > 1 else torch.full_like(log_likelihoods, math.inf)
    )
    return log_likelihoods, stderrs


def _anneal_examples(
    model: TemperedModel,
    start: AnnealingStart,
    betas: Tensor,
    streams: Sequence[tuple[Tensor, torch.Generator]],
    options: RAISEOptions,
) -> Tensor:
    """:func:`_reverse_anneal` over every block of examples with its own stream, in batches."""
    examples_per_batch = max(1, options.chains_per_batch // options.n_chains)
    return torch.cat(
        [
            _reverse_anneal(
                model,
                start.transition,
                betas,
                batch,
                n_chains=options.n_chains,
                refresh=start.refresh,
                generator=stream,
            )
            for examples, stream in streams
            for batch in torch.split(examples, examples_per_batch)
        ]
    )


def _reverse_anneal(
    model: TemperedModel,
    transition: Operator,
    betas: Tensor,
    data: Tensor,
    *,
    n_chains: int,
    refresh: bool,
    generator: torch.Generator,
) -> Tensor:
    """Run the reverse chains of a batch of examples; ``Σ_k`` of the AIS increments along them.

    Returns ``Σ_{k=1..K} [log f_{β_k}(v_{k−1}) − log f_{β_{k−1}}(v_{k−1})]``, float64 on the CPU,
    shape ``(n_examples·n_chains,)`` (example-major), so that ``log w = log f_1(v) − it``. No
    host synchronisation inside the loop.
    """
    beta_values = betas.tolist()
    betas_on_device = betas.to(device=model.device, dtype=model.dtype)
    visible = data.repeat_interleave(n_chains, dim=0)
    layers = [visible] + [
        torch.zeros(visible.shape[0], size, dtype=model.dtype, device=model.device)
        for size in model.layer_sizes[1:]
    ]
    chains = Chains(layers=tuple(layers), beta=betas_on_device[-1].expand(visible.shape[0]).clone())
    terms = model.marginal_terms(chains.layers)
    increments = torch.zeros(visible.shape[0], dtype=torch.float64, device=model.device)
    for k in range(len(beta_values) - 1, 0, -1):
        chains = chains.with_beta(betas_on_device[k])
        if refresh:
            chains = redraw_summed_group(model, chains, terms, beta_values[k], generator)
        chains, _ = transition.step(model, chains, generator=generator, terms=terms)
        progress.advance(chains.n_chains)
        terms = model.marginal_terms(chains.layers)
        add_log_f_increment_(increments, terms, beta_values[k - 1], beta_values[k])
    return increments.cpu()


def schedule_shift(result: RAISEResult) -> tuple[float, float] | None:
    """Mean of the schedule check's per-example shifts (nats) and its standard error; ``None`` without a check.

    With one example the standard error is the two runs' delta-method errors combined (``inf``
    with one chain). The delta method is narrow under heavy-tailed weights, so a single example
    is judged more harshly than many, whose spread measures the error directly.
    """
    check = result.schedule_check
    if check is None:
        return None
    shifts = check.shifts(result.log_likelihoods)
    n = shifts.numel()
    if n > 1:
        return float(shifts.mean()), float(shifts.std() / math.sqrt(n))
    return float(shifts[0]), math.hypot(float(result.stderrs[0]), float(check.stderrs[0]))


def raise_checks(estimate: LogZEstimate, verdict: Verdict) -> LogZEstimate:
    """RAISE's part of the verdict: the schedule check (the record's ``checks``; docs/trust.md).

    The paired shift ``S`` between the coarse and the full run estimates the full run's bias
    as ``b = S·K_c / (K − K_c)`` (bias ∝ 1/K; ``S/3`` for the default stride of 4). Where ``S`` is significant (beyond
    ``SHIFT_SIGNIFICANCE`` of its standard errors) the error bar becomes ``√(s.e.² + b²)``, and
    where a significant ``|S|`` also exceeds ``MAX_SCHEDULE_SHIFT`` nats the estimate is
    unreliable: the ``1/K`` extrapolation is not to be trusted that far from convergence.
    What it cannot see is a bias that does not shrink with K at all (a mode the reverse chains
    never leave, at any schedule length); the certified lower bound of the verdict is there
    for the low side of that.
    """
    result = estimate.info
    shift = schedule_shift(result) if isinstance(result, RAISEResult) else None
    if shift is None:
        return estimate
    check = result.schedule_check
    assert check is not None  # schedule_shift returned a value
    return judge_shift(
        estimate,
        verdict,
        shift=shift[0],
        shift_stderr=shift[1],
        n_steps=result.schedule_info.n_temperatures,
        coarse=check.n_temperatures,
        stride=check.stride,
        what="RAISE",
        advice="use more temperatures (n_temperatures) or a method started from the model (ais)",
    )


@register_estimator(
    "raise",
    family="annealing",
    data_option="data",
    shards=True,
    options=RAISEOptions,
    checks=raise_checks,
    matched=annealing_matched,
    flags=ANNEALING_FLAGS | {"examples"},
)
def raise_log_z(
    model: TemperedModel, *, data: Any = None, generator: torch.Generator | int | None = None, **options: Any
) -> LogZEstimate:
    """Upward-biased ``log Z`` from RAISE on held-out data (the RTS paper's construction).

    ``log Ẑ = mean_n [log f(v_n) − log p̂(v_n)]`` with ``p̂`` from
    :func:`raise_log_likelihood`. Each term estimates ``log Z`` (``log f − log p = log Z`` for
    every v) with an upward bias from Jensen's inequality and from ``p_ann ≠ p``; against
    AIS's downward bias the two sandwich ``log Z``.

    Parameters
    ----------
    model : TemperedModel
    data : Tensor or array, shape (n_examples, n_visible), values 0/1
        Required: held-out examples (ideally typical of the model). Cost is
        ``n_examples·n_chains·(K + ⌈K/4⌉)`` sweeps with the schedule check, ``n_examples·n_chains·K``
        without.
    generator : torch.Generator or int, optional
    **options
        ``n_chains``, ``n_temperatures``, ``schedule``, ``operator``, ``decelerate``,
        ``schedule_options``, ``chains_per_batch``, ``blocks``, ``schedule_check``: as for
        :func:`raise_log_likelihood`, with its defaults (the fields of
        :class:`~boltzlab.estimators.annealing.options.RAISEOptions`).

    Returns
    -------
    LogZEstimate
        ``bound="upper"``; ``stderr = std_n(log f(v_n) − log p̂(v_n)) / sqrt(N)`` over the N
        examples, which contains both the chains' noise and the spread between examples
        (with one example, that example's delta-method error); ``info`` a :class:`RAISEResult`.
        :func:`boltzlab.estimate_log_z`'s verdict widens it by the schedule check's bias
        estimate where that is significant (:func:`raise_checks`).
    """
    typed = RAISEOptions.from_given(options, "RAISE", own=("data",))
    if data is None:
        raise ValidationError(
            "RAISE estimates log Z from held-out examples: pass data= (shape (n_examples, n_visible), 0/1)"
        )
    result = run_raise(model, data, typed, generator)
    per_example = result.log_z_per_example
    n_examples = per_example.numel()
    stderr = float(per_example.std() / math.sqrt(n_examples)) if n_examples > 1 else float(result.stderrs[0])
    return LogZEstimate(
        log_z=float(per_example.mean()),
        stderr=stderr,
        method="raise",
        cost_sweeps=result.cost_sweeps,
        bound="upper",
        info=result,
    )
