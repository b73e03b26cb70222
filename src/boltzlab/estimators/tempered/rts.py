"""Rao-Blackwellized tempered sampling (RTS) and tempered sampling (TS) estimates of ``log Z``.

Carlson, Stinson, Pakman & Paninski (2016), "Partition functions from Rao-Blackwellized
tempered sampling", ICML: eq. 9 (the estimator), §2.4 (initial iterations), App. A (combining
stages with different ``Ẑ``), App. B (bias and variance); docs/algorithms.md §4.3. The samples come
from :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`, sized by
:mod:`boltzlab.estimators.tempered.budget` (a ladder placed from a pilot run, then rounds of
doubling length until the run's checks pass, up to ``max_sweeps``). With the
Rao-Blackwellized level probabilities ``ĉ_k = (1/N)·Σ_i q(β_k | x_i)``, an unbiased estimate of
the level marginal ``q(β_k) ∝ r_k Z_k / Ẑ_k``,

    log Z_k ≈ log Ẑ_k + log r_1 − log r_k + log ĉ_k − log ĉ_1          (RTS, eq. 9)

(``log Z_1 = 0``: the normalised base). **TS** is the same with ``ĉ`` from counts of the drawn
levels with a 0.1 pseudo-count per level (the paper's comparison).

**Stages.** ``combine="last"`` (the default) uses the long run alone: the paper found it as good
as the combination, and the early initial iterations start far from equilibrium (their states
come from another ``Ẑ``), which biases their ``ĉ``; ``combine="all"`` maximises App. A's
likelihood over every stage (:func:`combine_stages`; "Combining stages" below).

**Error bars.** The chains are independent, so per-chain sums give the variance
(``error="chains"``, default); ``error="batch-means"`` uses every (batch, chain) pair as a unit
instead (for few chains; batches must be longer than the autocorrelation time). For the long run
alone it is App. B's delta method, ``Var log Ẑ_k ≈ σ_1²/ĉ_1² + σ_k²/ĉ_k² − 2σ_1k/(ĉ_1 ĉ_k)``,
computed from the units' shares in log space so that it cannot underflow to 0
(:func:`log_ratio_variance`); for ``combine="all"`` the sandwich
``H⁻¹ V H⁻¹``. Should either still come out 0 or not finite, the spread of ten independent chain
groups is used (:func:`~boltzlab.estimators.tempered.checks.group_standard_error`). TS adds, for
each of the two levels eq. 9 reads that no chain visited, the spread between its 0.1
pseudo-count and the three counts a 95% bound would allow (``(log 30 / 2)²``): the data say
nothing more precise. App. B's bias ``½(σ_1²/ĉ_1² − σ_k²/ĉ_k²)`` is reported in ``info`` (it
has no fixed sign).

**Tracking during training** (paper §4.4): :func:`rts_tracking_update`, the damped update
``log Ẑ_k ← log Ẑ_k + α·(log r_1 − log r_k + log ĉ_k − log ĉ_1)`` for every k (docs/open-questions.md
item 10).

**Combining stages (App. A) [derived, docs/open-questions.md item 6].** Stage ``j`` has fixed ``Ẑ^{(j)}``,
``N_j`` samples and ``ĉ^{(j)}``; ``ζ = log Z`` maximises the concave Rao-Blackwellized
multinomial log-likelihood

    L(ζ) = Σ_j N_j·[Σ_k ĉ_k^{(j)} ζ_k − logsumexp_l(log r_l + ζ_l − log Ẑ_l^{(j)})],   ζ_1 = 0,

whose maximiser with one stage is eq. 9 exactly (:func:`combine_stages`, Newton's method), and
whose sandwich ``H⁻¹ V H⁻¹`` over independent units is the error bar of the combination
(:func:`sandwich_covariance`).

**One stage in log space** (:func:`log_ratio_variance`). With one stage eq. 9 is
``log ĉ_k − log ĉ_1`` plus constants, each ``ĉ_k = Σ_u A_{u,k} / Σ_u n_u`` a ratio of sums over
independent units (chains, or (batch, chain) pairs). Unit ``u``'s influence on ``log ĉ_k`` is
``A_{u,k}/A_k − n_u/N``: a *share*, computed from the log-sums without leaving log space. App.
B's delta method in linear space divides by ``ĉ_k``; where ``q(β_k | x)`` underflows for every
sample (a level far from where the chains are) it gave a standard error of exactly 0 — e.g. RTS
479.77 ± 0 on a sharp Fashion-MNIST RBM (docs/trust.md) — while the shares stay well defined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.budget import (
    UNIT_ERRORS,
    estimate_with_budget,
    long_run_batches,
    register_tempered,
)
from boltzlab.estimators.tempered.checks import group_standard_error
from boltzlab.estimators.tempered.levels import PSEUDO_COUNT, rts_log_z, stopping_statistic, validated_choice
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.models.base import TemperedModel

__all__ = [
    "RTSInfo",
    "StageLikelihood",
    "combine_stages",
    "rts",
    "rts_from_samples",
    "rts_log_z",
    "rts_tracking_update",
    "sandwich_covariance",
    "stage_log_likelihood",
    "stopping_statistic",
    "ts",
]

COMBINES = ("last", "all")
STATISTICS = ("rb", "counts")
#: Variance (nats²) TS adds per empty level read by eq. 9: ±2 s.e. span the pseudo-count (0.1)
#: to the 3 counts a 95% upper bound allows after seeing none.
EMPTY_LEVEL_VARIANCE = (math.log(3.0 / PSEUDO_COUNT) / 2.0) ** 2


@dataclass(frozen=True)
class RTSInfo:
    """Diagnostics of an RTS or TS estimate.

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder (ascending, ``β_0 = 0``, target last).
    log_prior : Tensor, shape (K,), float64
    log_z_hat : Tensor, shape (K,), float64
        The fixed ``log Ẑ`` of the long run (the sampler's weights).
    c_hat : Tensor, shape (K,), float64
        Long-run ``ĉ_k`` (Rao-Blackwellized, or counts with the pseudo-count for TS).
    log_z_levels : Tensor, shape (K,), float64
        Estimated ``log Z(β_k)`` of every level (``log_z_levels[-1]`` is the estimate).
    stderr_levels : Tensor, shape (K,), float64
        Their standard errors (0 at level 0, the anchor).
    bias_levels : Tensor, shape (K,), float64
        App. B's estimated bias of ``log_z_levels`` from the long run (no fixed sign).
    occupancy : Tensor, shape (K,), float64
        Fraction of long-run level draws per level (uniform prior + good ``Ẑ``: about 1/K).
    n_initial_iterations : int
        Initial iterations run before the long run.
    stopped : bool
        Whether the stopping rule ``max_k |ĉ_k/r_k − 1| < tolerance`` triggered.
    stop_statistics : Tensor, shape (n_initial_iterations,), float64
        ``max_k |ĉ_k/r_k − 1|`` of each initial iteration.
    statistic : {"rb", "counts"}
    combine : {"last", "all"}
    error : {"chains", "batch-means"}
    converged : bool
        Whether Newton's method met its tolerance (always True for ``combine="last"``).
    samples : TemperedSamples
        Everything collected (pass it to ``ti_from_samples`` or ``mbar_from_samples``).
    stderr_source : {"delta", "sandwich", "groups"}
        Where ``stderr_levels[-1]`` came from (module docstring, "Error bars").
    budget : TemperedBudget or None
        Ladder, rounds and why the run stopped (:mod:`boltzlab.estimators.tempered.budget`).
    """

    betas: Tensor
    log_prior: Tensor
    log_z_hat: Tensor
    c_hat: Tensor
    log_z_levels: Tensor
    stderr_levels: Tensor
    bias_levels: Tensor
    occupancy: Tensor
    n_initial_iterations: int
    stopped: bool
    stop_statistics: Tensor
    statistic: str
    combine: str
    error: str
    converged: bool
    samples: TemperedSamples
    stderr_source: str = "delta"
    budget: Any = None


def rts_tracking_update(
    log_z_hat: Tensor, log_c: Tensor, log_prior: Tensor, *, step_size: float = 0.2
) -> Tensor:
    """The damped RTS update used to track ``log Z`` during training (paper §4.4).

    ``log Ẑ_k ← log Ẑ_k + α·(log r_1 − log r_k + log ĉ_k − log ĉ_1)`` for every level (the
    paper writes it for ``k = K``; the sampler needs all of them, docs/open-questions.md item 10).
    ``α = 1`` is eq. 9; the paper uses 0.2 (0.05–0.5 behave alike). Pure: returns a new
    tensor, shape ``(K,)``, float64, with ``log Ẑ_1`` unchanged.

    Parameters
    ----------
    log_z_hat : Tensor, shape (K,)
    log_c : Tensor, shape (K,)
        ``log ĉ`` from the sweeps since the last update.
    log_prior : Tensor, shape (K,)
        ``log r``; e.g. ``r_k ∝ exp(2β_k)`` as in the paper.
    step_size : float, default 0.2
    """
    if not 0.0 < float(step_size) <= 1.0:
        raise ValidationError(f"step_size must be in (0, 1], got {step_size}")
    log_z_hat = torch.as_tensor(log_z_hat, dtype=torch.float64)
    log_c = torch.as_tensor(log_c, dtype=torch.float64)
    log_prior = torch.as_tensor(log_prior, dtype=torch.float64)
    if not log_z_hat.shape == log_c.shape == log_prior.shape or log_z_hat.dim() != 1:
        raise ValidationError(
            f"log_z_hat, log_c and log_prior must be 1-D of one length, got {tuple(log_z_hat.shape)}, "
            f"{tuple(log_c.shape)}, {tuple(log_prior.shape)}"
        )
    increment = log_prior[0] - log_prior + log_c - log_c[0]
    return log_z_hat + float(step_size) * increment


def rts_from_samples(
    samples: TemperedSamples,
    *,
    statistic: str = "rb",
    combine: str = "last",
    error: str = "chains",
) -> LogZEstimate:
    """The RTS (``statistic="rb"``) or TS (``"counts"``) estimate from collected samples.

    Parameters
    ----------
    samples : TemperedSamples
    statistic : {"rb", "counts"}, default "rb"
        Rao-Blackwellized ``ĉ`` (RTS) or counts with a 0.1 pseudo-count per level (TS).
    combine : {"last", "all"}, default "last"
        Eq. 9 on the long run, or App. A over every stage (module docstring).
    error : {"chains", "batch-means"}, default "chains"
        Independent units for the error bar: chains, or (batch, chain) pairs (needs the long
        run collected in at least two batches).

    Returns
    -------
    LogZEstimate
        ``log_z`` = ``log Z(1)``, ``stderr`` from the delta method or the sandwich (or chain
        groups where those are degenerate; module docstring), ``bound=None``, ``info`` an
        :class:`RTSInfo`.
    """
    return _rts_estimate(samples, statistic=statistic, combine=combine, error=error, fallback=True)


def _rts_estimate(
    samples: TemperedSamples, *, statistic: str, combine: str, error: str, fallback: bool
) -> LogZEstimate:
    """:func:`rts_from_samples`; ``fallback=False`` skips the chain-group error bar (used by it)."""
    # Long because eq. 9, the stage combination and the error-bar fallbacks read the same per-unit
    # sums; split, they would pass them all around.
    statistic = validated_choice(statistic, STATISTICS, "statistic")
    combine = validated_choice(combine, COMBINES, "combine")
    error = validated_choice(error, UNIT_ERRORS, "error")
    n_stages = samples.stage_log_z_hat.shape[0]
    stages = list(range(n_stages)) if combine == "all" else [n_stages - 1]
    blocks = [b for b in range(samples.block_stage.numel()) if int(samples.block_stage[b]) in stages]
    long_blocks = [b for b in blocks if int(samples.block_stage[b]) == n_stages - 1]
    if error == "batch-means" and samples.n_batches < 2:
        raise ValidationError("error='batch-means' needs the long run collected in n_batches >= 2")
    if error == "chains" and samples.n_chains < 2:
        raise ValidationError("error='chains' needs n_chains >= 2; use error='batch-means'")

    stage_log_z_hat = samples.stage_log_z_hat[stages]
    if statistic == "rb":
        # Pooled in log space: a level a poor Ẑ left nearly unvisited does not underflow.
        log_stage = torch.stack(
            [
                torch.logsumexp(samples.log_probability_sums[samples.block_stage == stage].flatten(0, 1), 0)
                for stage in stages
            ]
        )
    else:
        counts = samples.level_counts.to(torch.float64)
        log_stage = torch.log(
            torch.stack([counts[samples.block_stage == stage].sum((0, 1)) for stage in stages]) + PSEUDO_COUNT
        )
    log_stage_c = log_stage - torch.logsumexp(log_stage, 1, keepdim=True)

    # The long run's units, in log space: the delta method and App. B's bias.
    unit_log_sums, unit_samples = _log_units(samples, long_blocks, statistic, error)
    log_totals = log_stage[-1] if statistic == "counts" else None
    relative = relative_variance(unit_log_sums, unit_samples, log_totals=log_totals)
    bias_levels = 0.5 * (relative[0] - relative)

    converged = True
    if combine == "last":
        log_z = rts_log_z(stage_log_z_hat[-1], samples.log_prior, log_stage_c[-1])
        variance, source = log_ratio_variance(unit_log_sums, unit_samples, log_totals=log_totals), "delta"
    else:
        stage_samples = torch.tensor(
            [
                float(samples.block_sweeps[samples.block_stage == stage].sum()) * samples.n_chains
                for stage in stages
            ],
            dtype=torch.float64,
        )
        # Started from eq. 9 on the last stage, computed in log space (ĉ may underflow).
        start = rts_log_z(stage_log_z_hat[-1], samples.log_prior, log_stage_c[-1])
        log_z, converged = combine_stages(
            stage_log_z_hat, log_stage_c.exp(), stage_samples, samples.log_prior, initial=start
        )
        stage_q = torch.softmax(samples.log_prior[None, :] + log_z[None, :] - stage_log_z_hat, 1)
        unit_sums, unit_counts = _units(samples, _block_sums(samples, statistic), blocks, stages, error)
        variance = sandwich_covariance(unit_sums, unit_counts, stage_q, stage_samples).diagonal()
        source = "sandwich"
    if statistic == "counts":
        # Eq. 9 reads ĉ_0 and ĉ_k; an empty one is known only to be below ~3 counts.
        empty = (log_stage[-1] <= torch.log(torch.tensor(PSEUDO_COUNT, dtype=torch.float64))).to(
            torch.float64
        )
        variance = variance + EMPTY_LEVEL_VARIANCE * (empty + empty[0])
    stderr_levels = variance.clamp_min(0.0).sqrt()
    stderr_levels[0] = 0.0
    last = float(stderr_levels[-1])
    if fallback and not (math.isfinite(last) and last > 0.0):
        stderr_levels[-1] = group_standard_error(
            samples,
            lambda subset: _rts_estimate(
                subset, statistic=statistic, combine=combine, error=error, fallback=False
            ),
        )
        source = "groups"

    info = RTSInfo(
        betas=samples.betas,
        log_prior=samples.log_prior,
        log_z_hat=samples.log_z_hat,
        c_hat=log_stage_c[-1].exp(),
        log_z_levels=log_z,
        stderr_levels=stderr_levels,
        bias_levels=bias_levels,
        occupancy=samples.occupancy,
        n_initial_iterations=samples.n_initial_iterations,
        stopped=samples.stopped,
        stop_statistics=samples.stop_statistics,
        statistic=statistic,
        combine=combine,
        error=error,
        converged=converged,
        samples=samples,
        stderr_source=source,
        budget=samples.budget,
    )
    return LogZEstimate(
        log_z=float(log_z[-1]),
        stderr=float(stderr_levels[-1]),
        method="rts" if statistic == "rb" else "ts",
        cost_sweeps=samples.cost_sweeps,
        bound=None,
        info=info,
    )


def _log_units(
    samples: TemperedSamples, blocks: list[int], statistic: str, error: str
) -> tuple[Tensor, Tensor]:
    """Long-run units' ``log A_{u,k}`` ``(U, K)`` and samples ``n_u`` ``(U,)``: chains or pairs."""
    if statistic == "rb":
        log_blocks = samples.log_probability_sums[blocks]
    else:
        log_blocks = torch.log(samples.level_counts[blocks].to(torch.float64))
    sweeps = samples.block_sweeps[blocks].to(torch.float64)
    if error == "chains":
        return torch.logsumexp(log_blocks, 0), torch.full(
            (samples.n_chains,), float(sweeps.sum()), dtype=torch.float64
        )
    return log_blocks.flatten(0, 1), sweeps.repeat_interleave(samples.n_chains)


def _block_sums(samples: TemperedSamples, statistic: str) -> Tensor:
    if statistic == "rb":
        return samples.log_probability_sums.exp()
    return samples.level_counts.to(torch.float64)


def _units(
    samples: TemperedSamples, per_block: Tensor, blocks: list[int], stages: list[int], error: str
) -> tuple[Tensor, Tensor]:
    """Per-unit, per-stage sums ``(U, S, K)`` and sample counts ``(U, S)`` (chains or batches)."""
    n_chains, n_levels = samples.n_chains, samples.n_levels
    stage_index = {stage: index for index, stage in enumerate(stages)}
    if error == "chains":
        sums = torch.zeros((n_chains, len(stages), n_levels), dtype=torch.float64)
        counts = torch.zeros((n_chains, len(stages)), dtype=torch.float64)
        for block in blocks:
            index = stage_index[int(samples.block_stage[block])]
            sums[:, index] += per_block[block]
            counts[:, index] += float(samples.block_sweeps[block])
        return sums, counts
    sums = torch.zeros((len(blocks), n_chains, len(stages), n_levels), dtype=torch.float64)
    counts = torch.zeros((len(blocks), n_chains, len(stages)), dtype=torch.float64)
    for position, block in enumerate(blocks):
        index = stage_index[int(samples.block_stage[block])]
        sums[position, :, index] = per_block[block]
        counts[position, :, index] = float(samples.block_sweeps[block])
    return sums.flatten(0, 1), counts.flatten(0, 1)


def _estimate(
    model: TemperedModel,
    method: str,
    *,
    statistic: str,
    generator: torch.Generator | int | None,
    combine: str,
    error: str,
    n_batches: int | None,
    options: dict[str, Any],
) -> LogZEstimate:
    error = validated_choice(error, UNIT_ERRORS, "error")
    combine = validated_choice(combine, COMBINES, "combine")
    n_batches = long_run_batches(error, n_batches)
    return estimate_with_budget(
        model,
        method,
        recompute=lambda samples: rts_from_samples(
            samples, statistic=statistic, combine=combine, error=error
        ),
        generator=generator,
        options=options,
        own_options=("combine", "error", "n_batches"),
        n_batches=n_batches,
    )


@register_tempered(
    "rts",
    from_samples=lambda samples: rts_from_samples(samples, statistic="rb"),
    trajectory_route="trajectory-rts",
)
def rts(
    model: TemperedModel,
    *,
    generator: torch.Generator | int | None = None,
    combine: str = "last",
    error: str = "chains",
    n_batches: int | None = None,
    **options: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` by Rao-Blackwellized tempered sampling (Carlson et al. 2016).

    Parameters
    ----------
    model : TemperedModel
        Any model on the tempered-family protocol; fit an RBM's base to data first.
    generator : torch.Generator or int, optional
    combine : {"last", "all"}, default "last"
        Eq. 9 on the long run, or App. A's likelihood over all stages.
    error : {"chains", "batch-means"}, default "chains"
        Units of the error bar: independent chains or (batch, chain) pairs.
    n_batches : int, optional
        Batches of the long run (default 1, or 10 for ``error="batch-means"``).
    **options
        Sampling options of :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`:
        ``n_chains`` (100), ``n_temperatures`` (100), ``ladder`` (``"adaptive"``: placed at
        equal thermodynamic length from a pilot annealing run, which also gives the starting
        ``log Ẑ``; ``"linear"`` from ``Ẑ = 1``; or ascending values), ``n_sweeps`` (1000
        long-run sweeps in round 0), ``max_sweeps`` (sweeps per chain the budget may grow to
        while the run's checks fail: 16,000, or ``n_sweeps`` when that is given),
        ``lower_bound`` (a certified bound the estimate must not sit below; ``estimate_log_z``
        passes its witness), ``target_stderr`` (nats; 0.1 by default),
        ``pilot_chains`` (100), ``pilot_temperatures`` (1000), ``operator`` ("gibbs"),
        ``prior`` (uniform; ``"exp2beta"``), ``initial_log_z`` (the pilot's), ``n_initial_iterations``
        (10), ``initial_sweeps`` (50), ``stop_tolerance`` (0.1), ``adapt_with`` ("rb"). See
        :mod:`boltzlab.estimators.tempered.budget`.

    Returns
    -------
    LogZEstimate
        ``bound=None`` (RTS's bias has no fixed sign); ``cost_sweeps`` counts the pilot, the
        initial iterations and every round; ``info`` an :class:`RTSInfo` whose ``budget`` says
        what was spent and why it stopped.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.estimate_log_z(
    ...     model, method="rts", n_chains=20, n_temperatures=20, n_sweeps=300, generator=0
    ... )
    >>> abs(result.log_z - bl.exact_log_z(model)) < 5 * result.stderr
    True
    """
    return _estimate(
        model,
        "rts",
        statistic="rb",
        generator=generator,
        combine=combine,
        error=error,
        n_batches=n_batches,
        options=options,
    )


@register_tempered("ts", from_samples=lambda samples: rts_from_samples(samples, statistic="counts"))
def ts(
    model: TemperedModel,
    *,
    generator: torch.Generator | int | None = None,
    combine: str = "last",
    error: str = "chains",
    n_batches: int | None = None,
    **options: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` by tempered sampling from level counts (the paper's TS).

    As :func:`rts`, with ``ĉ_k = (count_k + 0.1)/Σ_l (count_l + 0.1)`` from the levels drawn
    in the long run. The sampler's initial iterations still adapt ``Ẑ`` with the
    Rao-Blackwellized ``ĉ`` (``adapt_with="rb"``): ``adapt_with="counts"`` makes it TS all the
    way, but from ``Ẑ = 1`` counts cannot see the levels nobody visits (each update moves them
    by the pseudo-count's few nats), and on a 784×20 MNIST RBM the estimate was then 138 nats
    low after 10 iterations. Counts are noisier than ``q(β | x)`` and unstable when levels are
    empty; RTS uses the same samples better.
    """
    return _estimate(
        model,
        "ts",
        statistic="counts",
        generator=generator,
        combine=combine,
        error=error,
        n_batches=n_batches,
        options=options,
    )


@dataclass(frozen=True)
class StageLikelihood:
    """App. A's ``L(ζ)`` with its gradient and Hessian in all ``K`` coordinates (float64)."""

    value: float
    gradient: Tensor
    hessian: Tensor


def stage_log_likelihood(
    log_z: Tensor, *, stage_log_z_hat: Tensor, stage_c: Tensor, stage_samples: Tensor, log_prior: Tensor
) -> StageLikelihood:
    """App. A's Rao-Blackwellized log-likelihood of ``ζ = log Z`` (module docstring).

    Parameters
    ----------
    log_z : Tensor, shape (K,), float64
    stage_log_z_hat : Tensor, shape (S, K), float64
        ``log Ẑ^{(j)}`` of each stage.
    stage_c : Tensor, shape (S, K), float64
        ``ĉ^{(j)}``, each row summing to 1.
    stage_samples : Tensor, shape (S,), float64
        ``N_j``.
    log_prior : Tensor, shape (K,), float64
    """
    logits = log_prior[None, :] + log_z[None, :] - stage_log_z_hat
    normaliser = torch.logsumexp(logits, 1)
    q = torch.exp(logits - normaliser[:, None])
    value = float((stage_samples * ((stage_c * log_z[None, :]).sum(1) - normaliser)).sum())
    gradient = (stage_samples[:, None] * (stage_c - q)).sum(0)
    outer = torch.einsum("s,sk,sl->kl", stage_samples, q, q)
    hessian = outer - torch.diag((stage_samples[:, None] * q).sum(0))
    return StageLikelihood(value=value, gradient=gradient, hessian=hessian)


def combine_stages(
    stage_log_z_hat: Tensor,
    stage_c: Tensor,
    stage_samples: Tensor,
    log_prior: Tensor,
    *,
    initial: Tensor | None = None,
    tolerance: float = 1e-12,
    max_iterations: int = 100,
) -> tuple[Tensor, bool]:
    """Maximise App. A's ``L(ζ)`` over ``ζ_{2:K}`` (``ζ_1 = 0``) by Newton's method.

    ``L`` is concave (its Hessian is minus a sum of multinomial covariances), so damped Newton
    steps with backtracking converge from the default start, eq. 9 on the last stage.

    Returns
    -------
    log_z : Tensor, shape (K,), float64
        The maximiser, ``log Z(β_k)`` with ``log Z(0) = 0``.
    converged : bool
        Whether ``max |∂L/∂ζ| / Σ N_j < tolerance`` was reached within ``max_iterations``.
    """
    stage_c = stage_c / stage_c.sum(1, keepdim=True)
    if initial is None:
        initial = rts_log_z(stage_log_z_hat[-1], log_prior, torch.log(stage_c[-1]))
    log_z = (initial - initial[0]).clone()
    total = float(stage_samples.sum())

    def evaluate(point: Tensor) -> StageLikelihood:
        return stage_log_likelihood(
            point,
            stage_log_z_hat=stage_log_z_hat,
            stage_c=stage_c,
            stage_samples=stage_samples,
            log_prior=log_prior,
        )

    current = evaluate(log_z)
    for _ in range(max_iterations):
        gradient = current.gradient[1:]
        if float(gradient.abs().max()) < tolerance * total:
            return log_z, True
        # −H restricted to ζ_{2:K} is positive definite when every q_j,k > 0; the pseudo-inverse
        # covers levels whose probability underflowed.
        step = torch.linalg.pinv(-current.hessian[1:, 1:], hermitian=True) @ gradient
        scale = 1.0
        while scale > 1e-12:
            candidate = log_z.clone()
            candidate[1:] += scale * step
            trial = evaluate(candidate)
            if trial.value >= current.value - 1e-12 * max(1.0, abs(current.value)):
                break
            scale /= 2.0
        log_z, current = candidate, trial
    return log_z, float(current.gradient[1:].abs().max()) < tolerance * total


def sandwich_covariance(
    unit_sums: Tensor, unit_samples: Tensor, stage_q: Tensor, stage_samples: Tensor
) -> Tensor:
    """Covariance of the App. A estimate ``ζ̂`` (``ζ_1`` fixed) from independent units.

    Parameters
    ----------
    unit_sums : Tensor, shape (U, S, K), float64
        Per unit and stage, ``Σ_t q(β_k | x_t)`` (or counts).
    unit_samples : Tensor, shape (U, S), float64
        Samples per unit and stage.
    stage_q : Tensor, shape (S, K), float64
        ``q_j(ζ̂)``, the fitted level marginal of each stage.
    stage_samples : Tensor, shape (S,), float64

    Returns
    -------
    Tensor, shape (K, K), float64
        ``H⁻¹ V H⁻¹`` (row and column 0 are zero), ``V = U/(U−1)·Σ_u s_u s_uᵀ`` with the
        per-unit scores ``s_u = Σ_j (A_{u,j} − n_{u,j} q_j)``.
    """
    n_units = unit_sums.shape[0]
    scores = (unit_sums - unit_samples[:, :, None] * stage_q[None, :, :]).sum(1)[:, 1:]
    meat = scores.T @ scores * (n_units / (n_units - 1))
    hessian = torch.einsum("s,sk,sl->kl", stage_samples, stage_q, stage_q) - torch.diag(
        (stage_samples[:, None] * stage_q).sum(0)
    )
    inverse = torch.linalg.pinv(hessian[1:, 1:], hermitian=True)
    covariance = torch.zeros_like(hessian)
    covariance[1:, 1:] = inverse @ meat @ inverse
    return covariance


def log_ratio_variance(
    unit_log_sums: Tensor, unit_samples: Tensor, *, log_totals: Tensor | None = None
) -> Tensor:
    """Variance of ``log ĉ_k − log ĉ_0`` for every level, from independent units; shape ``(K,)``.

    Parameters
    ----------
    unit_log_sums : Tensor, shape (U, K), float64
        ``log A_{u,k}``: per unit, the log of its sum of ``q(β_k | x)`` (or of its counts;
        ``−inf`` for none).
    unit_samples : Tensor, shape (U,), float64
        ``n_u``, samples per unit.
    log_totals : Tensor, shape (K,), float64, optional
        ``log A_k`` the shares are taken of (default the units' own total; TS passes its total
        with the pseudo-count, so that an empty level has shares 0 rather than 0/0).

    Returns
    -------
    Tensor, shape (K,), float64
        ``U/(U−1)·Σ_u (ψ_{u,k} − ψ_{u,0})²`` with ``ψ_{u,k} = A_{u,k}/A_k − n_u/N`` (module
        docstring); 0 at level 0. A level no unit has anything at (``A_k = 0``) gives ``NaN``.
    """
    influence = _influences(unit_log_sums, unit_samples, log_totals)
    difference = influence - influence[:, :1]
    return (difference**2).sum(0) * _small_sample(influence)


def relative_variance(
    unit_log_sums: Tensor, unit_samples: Tensor, *, log_totals: Tensor | None = None
) -> Tensor:
    """``Var(ĉ_k)/ĉ_k²`` for every level from independent units, in log space; shape ``(K,)``.

    ``U/(U−1)·Σ_u ψ_{u,k}²`` with the influences of :func:`log_ratio_variance` (same arguments).
    """
    influence = _influences(unit_log_sums, unit_samples, log_totals)
    return (influence**2).sum(0) * _small_sample(influence)


def _influences(unit_log_sums: Tensor, unit_samples: Tensor, log_totals: Tensor | None) -> Tensor:
    """``ψ_{u,k} = A_{u,k}/A_k − n_u/N``, shape ``(U, K)``, from log-sums (no underflow of ``ĉ``)."""
    if log_totals is None:
        log_totals = torch.logsumexp(unit_log_sums, 0)
    shares = torch.exp(unit_log_sums - log_totals[None, :])
    return shares - (unit_samples / unit_samples.sum())[:, None]


def _small_sample(influence: Tensor) -> float:
    """``U/(U − 1)``: the unbiased variance of a mean of ``U`` independent units."""
    n_units = influence.shape[0]
    return n_units / (n_units - 1)
