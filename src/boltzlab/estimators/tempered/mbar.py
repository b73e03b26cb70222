"""MBAR estimates of ``log Z`` from tempered samples, through ``pymbar``.

Shirts & Chodera (2008), "Statistically optimal analysis of samples from multiple equilibrium
states", J. Chem. Phys. 129, 124105, eq. 11 (the self-consistent equations); equivalently
UWHAM / reverse logistic regression (Tan et al. 2012); compared with RTS in Carlson, Stinson,
Pakman & Paninski (2016), ICML, eq. 18 and Fig. 4; docs/algorithms.md §4.5. Pooling the samples
``x_n`` of all levels, with ``N_k`` of them drawn at level ``k``,

    Z_k = Σ_n f_k(x_n) / Σ_l N_l f_l(x_n)/Z_l,

solved by ``pymbar.MBAR`` (not re-implemented here) on the reduced potentials
``u_kn = −log f_k(x_n)`` (hidden-summed, normalised base; docs/algorithms.md §4.5 "with the hidden
units summed out"). ``log Z(β_k) = f_0 − f_k`` in pymbar's dimensionless free energies, and
``log Z(0) = 0``. Each sample's row is shifted by its maximum first: the equations are
invariant to a per-sample constant, and the shift keeps the numbers small.

**Samples.** The long run of :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`
(the RTS sampler with its adapted ``Ẑ``); sample ``n`` belongs to the level drawn for it from
``q(β | x_n)``, so ``(x_n, k_n)`` is a draw from the joint and ``x_n | k_n ~ p_{k_n}``. MBAR
holds all ``N × K`` log-densities in memory, so the run is thinned to every ``t``-th sweep
with the smallest ``t`` keeping at most ``max_log_densities`` (10⁶) values.

**Error bars.** pymbar's analytical uncertainty assumes independent samples; consecutive
sweeps of a chain are not. The default ``error="jackknife"`` deletes one of ``n_groups``
groups of whole chains at a time (groups are independent) and warm-starts each re-solve from
the full solution; ``error="analytic"`` reports pymbar's value. Both are in ``info``.

**Overlap.** pymbar's overlap matrix ``O = diag(N)·WᵀW`` (``W`` the MBAR weights of every
sample at every level; ``O[i, j]`` the probability that a sample of level ``i`` is seen at
level ``j``) says whether the levels are tied together by shared samples. ``info`` keeps, for
every pair of neighbouring levels, ``min(O[k, k+1], O[k+1, k])`` of the pair's own matrix
(:func:`neighbour_overlap`); the verdict wants every one at least
:data:`~boltzlab.estimators.verdict.checks.MIN_NEIGHBOUR_OVERLAP` (docs/trust.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.budget import estimate_with_budget, register_tempered
from boltzlab.estimators.tempered.levels import validated_choice
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.models.base import TemperedModel
from boltzlab.validation import check_positive_int

__all__ = ["MBARInfo", "mbar", "mbar_for_groups", "mbar_from_samples", "mbar_log_z", "neighbour_overlap"]

ERRORS = ("jackknife", "analytic")


@dataclass(frozen=True)
class MBARInfo:
    """Diagnostics of an MBAR estimate.

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
    log_z_levels : Tensor, shape (K,), float64
        ``log Z(β_k)`` of every level (``log_z_levels[-1]`` is the estimate).
    stderr_levels : Tensor, shape (K,), float64
        The reported standard errors (jackknife or analytic, per ``error``).
    analytic_stderr_levels : Tensor, shape (K,), float64
        pymbar's analytical uncertainty (valid for independent samples only).
    jackknife_stderr_levels : Tensor, shape (K,), float64, or None
        Delete-one-group jackknife over groups of chains (``None`` for ``error="analytic"``).
    samples_per_level : Tensor, shape (K,), int64
        ``N_k`` of the thinned samples.
    thinning : int
        Every how many long-run sweeps a sample was kept.
    error : {"jackknife", "analytic"}
    samples : TemperedSamples
    neighbour_overlap : Tensor, shape (K − 1,), float64
        Overlap of each pair of neighbouring levels (:func:`neighbour_overlap`; 0.5 at most).
    budget : TemperedBudget or None
        Ladder, rounds and why the run stopped (:mod:`boltzlab.estimators.tempered.budget`).
    """

    betas: Tensor
    log_z_levels: Tensor
    stderr_levels: Tensor
    analytic_stderr_levels: Tensor
    jackknife_stderr_levels: Tensor | None
    samples_per_level: Tensor
    thinning: int
    error: str
    samples: TemperedSamples
    neighbour_overlap: Tensor | None = None
    budget: Any = None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Swallow what pymbar prints (an import banner about JAX, solver chatter)."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


@contextlib.contextmanager
def _blas_threads_like_torch() -> Iterator[None]:
    """Run NumPy's BLAS (pymbar's Hessians) on as many threads as torch is allowed.

    OpenBLAS otherwise starts one thread per core whatever torch was told; on a shared
    machine that oversubscription made MBAR 3x slower. ``threadpoolctl`` comes with
    scikit-learn, a dependency.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn always brings it
        yield
        return
    with threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        yield


def _reduced_potentials(log_densities: Tensor, levels: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pymbar's ``u_kn`` (samples sorted by level, rows shifted by their maximum), ``N_k``, order."""
    densities = log_densities.detach().to(torch.float64).cpu().numpy()
    level_index = levels.detach().cpu().numpy().astype(np.int64)
    order = np.argsort(level_index, kind="stable")
    shifted = densities[order] - densities[order].max(1, keepdims=True)
    return np.ascontiguousarray(-shifted.T), np.bincount(level_index, minlength=densities.shape[1]), order


def _solve(
    reduced: np.ndarray,
    counts: np.ndarray,
    initial_free_energies: np.ndarray | None,
    *,
    uncertainty: bool,
    overlap: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``f_k − f_0``, pymbar's analytical uncertainty of it (NaN unless ``uncertainty``) and,
    when ``overlap``, the neighbour entries of the overlap matrix (module docstring)."""
    with _quiet():
        import pymbar

        solver = pymbar.MBAR(reduced, counts, initial_f_k=initial_free_energies)
        result = solver.compute_free_energy_differences(compute_uncertainty=uncertainty)
    free_energies = result["Delta_f"][0]
    stderr = result["dDelta_f"][0] if uncertainty else np.full_like(free_energies, np.nan)
    neighbours = neighbour_overlap(reduced, counts, free_energies) if overlap else None
    return free_energies, stderr, neighbours


def neighbour_overlap(reduced: np.ndarray, counts: np.ndarray, free_energies: np.ndarray) -> np.ndarray:
    """Overlap of every pair of neighbouring levels: pymbar's overlap matrix of the pair alone.

    For levels ``k, k+1`` and their samples, the MBAR weights of the two-state problem at the
    solved free energies, ``W_{n,j} = exp(f_j − u_{jn}) / Σ_{l∈{k,k+1}} N_l exp(f_l − u_{ln})``,
    give pymbar's ``O = diag(N)·WᵀW`` of the pair; returned is ``min(O[k,k+1], O[k+1,k])``:
    0.5 for identical levels, 0 for levels no sample connects. (The full ``K × K`` matrix's
    entries shrink as ``1/K`` even between identical levels, so its guideline of 0.03, meant
    for a handful of states, would flag a fine 100-level ladder.)

    Parameters
    ----------
    reduced : ndarray, shape (K, N)
        ``u_{kn}`` with the samples sorted by level (as :func:`_reduced_potentials` makes them).
    counts : ndarray, shape (K,)
        ``N_k``.
    free_energies : ndarray, shape (K,)
        ``f_k − f_0``.

    Returns
    -------
    ndarray, shape (K − 1,)
    """
    offsets = np.concatenate([[0], np.cumsum(counts)])
    overlaps = np.zeros(max(len(counts) - 1, 0))
    for k in range(len(counts) - 1):
        if counts[k] == 0 or counts[k + 1] == 0:
            continue
        log_w = free_energies[k : k + 2, None] - reduced[k : k + 2, offsets[k] : offsets[k + 2]]
        log_n = np.log(counts[k : k + 2].astype(np.float64))[:, None]
        denominator = np.logaddexp(log_n[0] + log_w[0], log_n[1] + log_w[1])
        weights = np.exp(log_w - denominator[None, :])
        shared = float(np.sum(weights[0] * weights[1]))
        overlaps[k] = min(counts[k] * shared, counts[k + 1] * shared)
    return overlaps


def mbar_log_z(
    log_densities: Tensor,
    levels: Tensor,
    *,
    initial_log_z: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """``log Z_k − log Z_0`` by ``pymbar.MBAR`` from pooled samples, with pymbar's uncertainty.

    Parameters
    ----------
    log_densities : Tensor, shape (N, K), float64
        ``log f_k(x_n)`` of every sample at every level.
    levels : Tensor, shape (N,), int64
        The level each sample was drawn at.
    initial_log_z : Tensor, shape (K,), optional
        A starting guess (e.g. the sampler's ``log Ẑ``); pymbar's ``initial_f_k = −initial_log_z``.

    Returns
    -------
    log_z : Tensor, shape (K,), float64
    stderr : Tensor, shape (K,), float64
        pymbar's analytical uncertainty (independent samples assumed).
    """
    reduced, counts, _ = _reduced_potentials(log_densities, levels)
    initial = None if initial_log_z is None else -initial_log_z.detach().cpu().numpy().astype(np.float64)
    with _blas_threads_like_torch():
        free_energies, uncertainty, _ = _solve(reduced, counts, initial, uncertainty=True)
    return torch.as_tensor(-free_energies, dtype=torch.float64), torch.as_tensor(
        uncertainty, dtype=torch.float64
    )


def _one_step_replicate(reduced: np.ndarray, counts: np.ndarray, free_energies: np.ndarray) -> np.ndarray:
    """``f − f_0`` of a subsample by one Newton step of pymbar's objective from ``free_energies``.

    The subsample's solution differs from the full one by about a standard error, where the
    convex MBAR objective is quadratic to high accuracy, so one step (pymbar's own gradient and
    Hessian) gives the re-solved ``f`` to second order at a tenth of a full solve's cost.
    Levels the subsample leaves without samples do not enter the sampled levels' equations:
    the step is taken on the sampled ones, and each empty level's ``f_k`` is then MBAR's
    formula for an unsampled state, ``f_k = −log Σ_n exp(−u_kn) / Σ_j N_j exp(f_j − u_jn)``.
    (Re-solving such a subsample with pymbar instead took its adaptive solver minutes per
    call where chains rarely crossed the levels: 993 s for one estimate, docs/trust.md.)
    """
    sampled = counts > 0
    with _quiet():
        from pymbar.mbar_solvers import mbar_gradient, mbar_hessian

        weights = counts[sampled].astype(np.float64)
        rows = reduced[sampled]
        start = free_energies[sampled]
        gradient = mbar_gradient(rows, weights, start)
        hessian = mbar_hessian(rows, weights, start)
    step = np.linalg.lstsq(hessian[1:, 1:], gradient[1:], rcond=None)[0]
    replicate = free_energies.copy()
    solved = start.copy()
    solved[1:] -= step
    replicate[sampled] = solved
    if not bool(sampled.all()):
        log_denominator = logsumexp(np.log(weights)[:, None] + solved[:, None] - rows, axis=0)
        replicate[~sampled] = -logsumexp(-reduced[~sampled] - log_denominator[None, :], axis=1)
    return replicate - replicate[0]


def mbar_from_samples(
    samples: TemperedSamples, *, error: str = "jackknife", n_groups: int = 10
) -> LogZEstimate:
    """MBAR on the thinned long-run samples (module docstring).

    ``samples`` must have been collected with ``record_log_densities=True``.

    Parameters
    ----------
    samples : TemperedSamples
    error : {"jackknife", "analytic"}, default "jackknife"
    n_groups : int, default 10
        Jackknife groups of whole chains (at most ``n_chains``).
    """
    error = validated_choice(error, ERRORS, "error")
    n_groups = check_positive_int(n_groups, "n_groups")
    if samples.log_densities is None or samples.density_levels is None or samples.density_chains is None:
        raise ValidationError(
            "these samples hold no log-densities; collect them with record_log_densities=True"
        )
    if error == "jackknife" and min(n_groups, samples.n_chains) < 2:
        raise ValidationError("error='jackknife' needs n_chains >= 2; use error='analytic'")
    n_groups = min(n_groups, samples.n_chains)
    reduced, counts, order = _reduced_potentials(samples.log_densities, samples.density_levels)
    initial = -samples.log_z_hat.numpy().astype(np.float64)
    with _blas_threads_like_torch():
        free_energies, uncertainty, neighbours = _solve(
            reduced, counts, initial, uncertainty=True, overlap=True
        )
        log_z = torch.as_tensor(-free_energies, dtype=torch.float64)
        analytic = torch.as_tensor(uncertainty, dtype=torch.float64)
        jackknife = None
        if error == "jackknife":
            # Groups of whole chains are independent; the samples of one chain are not.
            group = (samples.density_chains.numpy() * n_groups // samples.n_chains)[order]
            levels = samples.density_levels.numpy()[order]
            replicates = []
            for left_out in range(n_groups):
                keep = group != left_out
                kept_counts = np.bincount(levels[keep], minlength=samples.n_levels)
                replicates.append(-_one_step_replicate(reduced[:, keep], kept_counts, free_energies))
            stacked = torch.as_tensor(np.stack(replicates), dtype=torch.float64)
            jackknife = ((stacked - stacked.mean(0)) ** 2).sum(0).mul((n_groups - 1) / n_groups).sqrt()
    stderr_levels = analytic if jackknife is None else jackknife
    info = MBARInfo(
        betas=samples.betas,
        log_z_levels=log_z,
        stderr_levels=stderr_levels,
        analytic_stderr_levels=analytic,
        jackknife_stderr_levels=jackknife,
        samples_per_level=torch.as_tensor(counts, dtype=torch.int64),
        thinning=samples.density_thinning,
        error=error,
        samples=samples,
        neighbour_overlap=None if neighbours is None else torch.as_tensor(neighbours, dtype=torch.float64),
        budget=samples.budget,
    )
    return LogZEstimate(
        log_z=float(log_z[-1]),
        stderr=float(stderr_levels[-1]),
        method="mbar",
        cost_sweeps=samples.cost_sweeps,
        bound=None,
        info=info,
    )


def mbar_for_groups(samples: TemperedSamples) -> LogZEstimate:
    """MBAR as the chain-group check recomputes it: the larger of the two error bars.

    A group holds a quarter of the chains, so its delete-one-group jackknife runs over
    groups of one or two chains and is itself noisy; pymbar's analytical value ignores the
    correlation of consecutive sweeps but not the scarcity of samples per level. Taking the
    larger keeps a group with an unlucky small error bar from failing the agreement test (on
    the continuous test family with a few thousand kept samples, four groups' jackknife errors
    of 0.16–0.27 made an honest 1.2-nat spread look like a disagreement at p = 1e-4).
    """
    estimate = mbar_from_samples(samples, error="jackknife")
    info = estimate.info
    cautious = torch.maximum(info.stderr_levels, info.analytic_stderr_levels.nan_to_num(0.0))
    return dataclasses.replace(estimate, stderr=float(cautious[-1]))


@register_tempered("mbar", from_samples=mbar_for_groups, trajectory_route="trajectory-mbar")
def mbar(
    model: TemperedModel,
    *,
    generator: torch.Generator | int | None = None,
    error: str = "jackknife",
    n_groups: int = 10,
    **options: Any,
) -> LogZEstimate:
    """Estimate ``log Z`` by MBAR (pymbar) on the RTS sampler's samples.

    Parameters
    ----------
    model : TemperedModel
    generator : torch.Generator or int, optional
    error : {"jackknife", "analytic"}, default "jackknife"
        Jackknife over groups of chains (honest for correlated sweeps), or pymbar's analytical
        uncertainty (assumes independent samples).
    n_groups : int, default 10
    **options
        Sampling options as for ``method="rts"`` (``n_chains`` 100, ``n_temperatures`` 100,
        ``ladder`` "adaptive", ``n_sweeps`` 1000, ``max_sweeps``, ...), plus
        ``max_log_densities`` (1,000,000), the cap on the ``N × K`` values kept for MBAR.

    Returns
    -------
    LogZEstimate
        ``bound=None``; ``info`` an :class:`MBARInfo`.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.estimate_log_z(
    ...     model, method="mbar", n_chains=20, n_temperatures=20, n_sweeps=300, generator=0
    ... )
    >>> abs(result.log_z - bl.exact_log_z(model)) < 5 * result.stderr
    True
    """
    error = validated_choice(error, ERRORS, "error")
    n_groups = check_positive_int(n_groups, "n_groups")
    return estimate_with_budget(
        model,
        "mbar",
        recompute=lambda samples: mbar_from_samples(samples, error=error, n_groups=n_groups),
        group_recompute=mbar_for_groups,
        generator=generator,
        options=options,
        own_options=("error", "n_groups"),
        record_log_densities=True,
    )
