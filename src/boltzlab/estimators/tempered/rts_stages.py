"""RTS's stages and error bars: App. A's likelihood over stages, and variances from independent units.

Carlson, Stinson, Pakman & Paninski (2016), "Partition functions from Rao-Blackwellized
tempered sampling", ICML, App. A (combining stages with different ``Ẑ``) and App. B (bias and
variance); docs/algorithms.md §4.3; the estimator itself is :mod:`boltzlab.estimators.tempered.rts`.

**Stages (App. A) [derived, docs/open-questions.md item 6].** Stage ``j`` has fixed ``Ẑ^{(j)}``,
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

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.estimators.tempered.levels import rts_log_z

__all__ = [
    "StageLikelihood",
    "combine_stages",
    "log_ratio_variance",
    "relative_variance",
    "sandwich_covariance",
    "stage_log_likelihood",
]


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
