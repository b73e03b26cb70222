"""Level-space arithmetic of the tempered-sampling estimators (RTS, TS, TI, TI-RB, MBAR).

Carlson, Stinson, Pakman & Paninski (2016), "Partition functions from Rao-Blackwellized
tempered sampling", ICML, §2 (eqs. 4–9); docs/algorithms.md §4.3. Pure functions of a ladder
``0 = β_0 < … < β_{K−1} = 1``, a prior ``r`` over its levels and the sampler's guesses
``log Ẑ``: the level conditional ``q(β_k | x) = softmax_k(log f_k(x) + log r_k − log Ẑ_k)``
(hidden-summed ``f_k``, docs/algorithms.md §4.3 pitfall 1), the path derivatives at every level,
eq. 9 and the paper's stopping statistic. The sampler that uses them is
:mod:`boltzlab.estimators.tempered.sampler`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.level_sums import level_sums, uses_kernel
from boltzlab.models.base import MarginalTerms, log_f_marginal_all
from boltzlab.tempering.base import select_terms

__all__ = [
    "check_initial_log_z",
    "level_log_probabilities",
    "log_f_all",
    "log_f_and_derivatives_all",
    "path_derivative_all",
    "pooled_log_c",
    "resolve_log_prior",
    "rts_log_z",
    "single_precision_log_f_all",
    "stopping_statistic",
]

#: Statistics the initial iterations may adapt ``Ẑ`` with: Rao-Blackwellized ``q`` or counts.
ADAPT_STATISTICS = ("rb", "counts")
#: Pseudo-count per level for count-based ``ĉ`` (the paper's TS).
PSEUDO_COUNT = 0.1
# Work-space budget (elements of the (chains, K, units) tensors) per chunk of chains.
_CHUNK_ELEMENTS = 1 << 22


def resolve_log_prior(prior: Any, betas: Tensor) -> Tensor:
    """``log r_k`` (normalised, float64, shape ``(K,)``) from a prior specification.

    Parameters
    ----------
    prior : None, "uniform", "exp2beta", callable or sequence of float
        ``None``/``"uniform"``: ``r_k = 1/K`` (estimation, the paper's default);
        ``"exp2beta"``: ``r_k ∝ exp(2β_k)`` (more samples near β = 1, the paper's tracking
        prior); a callable ``betas -> weights``; or ``K`` positive weights.
    betas : Tensor, shape (K,), float64
    """
    n_levels = betas.numel()
    if prior is None or (isinstance(prior, str) and prior.lower() == "uniform"):
        return torch.full((n_levels,), -math.log(n_levels), dtype=torch.float64)
    if isinstance(prior, str):
        if prior.lower() == "exp2beta":
            log_weights = 2.0 * betas.to(torch.float64).cpu()
            return log_weights - torch.logsumexp(log_weights, 0)
        raise ValidationError(
            f"prior must be 'uniform', 'exp2beta', a callable or {n_levels} weights, got {prior!r}"
        )
    weights = prior(betas.clone()) if callable(prior) else prior
    try:
        weights = torch.as_tensor(weights, dtype=torch.float64).detach().cpu().flatten()
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValidationError(f"prior could not be read as {n_levels} weights: {error}") from None
    if (
        weights.shape != (n_levels,)
        or not bool(torch.isfinite(weights).all())
        or not bool((weights > 0).all())
    ):
        raise ValidationError(
            f"prior must give {n_levels} positive finite weights (one per level), got shape "
            f"{tuple(weights.shape)}"
        )
    log_weights = weights.log()
    return log_weights - torch.logsumexp(log_weights, 0)


def _row_chunks(terms: MarginalTerms, n_levels: int) -> list[slice]:
    per_row = max(1, n_levels * terms.preactivation.shape[1])
    size = max(1, _CHUNK_ELEMENTS // per_row)
    n = terms.base.shape[0]
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


def log_f_all(terms: MarginalTerms, betas: Tensor) -> Tensor:
    """``log f_k(x)`` at every level, shape ``(n, K)``, float64, in chunks of chains.

    :func:`~boltzlab.models.base.log_f_marginal_all` with the ``(n, K, J)`` work space bounded;
    for a float32 model on a CPU, from ``K·J`` of :data:`boltzlab.level_sums.MIN_ELEMENTS` on,
    the sum of softplus comes from the compiled kernel of :mod:`boltzlab.level_sums` (errors
    of a few 1e-6 nats, about 20 times faster: the cost that dominates a tempered step).
    """
    if uses_kernel(betas.numel(), terms.preactivation.shape[1], terms.preactivation):
        sums, _ = level_sums(terms.preactivation, betas)
        betas64 = betas.to(device=terms.base.device, dtype=torch.float64)
        return (
            (1.0 - betas64)[None, :] * terms.base[:, None] + betas64[None, :] * terms.linear[:, None] + sums
        )
    chunks = _row_chunks(terms, betas.numel())
    if len(chunks) == 1:
        return log_f_marginal_all(terms, betas)
    return torch.cat([log_f_marginal_all(select_terms(terms, rows), betas) for rows in chunks])


def log_f_and_derivatives_all(terms: MarginalTerms, betas: Tensor) -> tuple[Tensor, Tensor]:
    """:func:`log_f_all` and :func:`path_derivative_all` together; both ``(n, K)``, float64.

    One pass of the level-sums kernel gives both where it is used (the exponentials are
    shared); elsewhere the two functions.
    """
    if uses_kernel(betas.numel(), terms.preactivation.shape[1], terms.preactivation):
        sums, weighted = level_sums(terms.preactivation, betas, derivative=True)
        assert weighted is not None  # derivative=True returns them
        betas64 = betas.to(device=terms.base.device, dtype=torch.float64)
        log_f = (
            (1.0 - betas64)[None, :] * terms.base[:, None] + betas64[None, :] * terms.linear[:, None] + sums
        )
        return log_f, (terms.linear - terms.base)[:, None] + weighted
    return log_f_all(terms, betas), path_derivative_all(terms, betas)


def single_precision_log_f_all(terms: MarginalTerms, betas: Tensor) -> Tensor:
    """``log f_{β_k}(x)`` at every level with the ``n·K·J`` softplus in float32; ``(n, K)``, float64.

    The same function as :func:`log_f_all`, ``(1 − β)·base + β·linear + Σ_j softplus(β·a_j)``,
    with the softplus evaluated in place (``logaddexp(βa, 0)``) and summed over units in
    float32, then widened: about 2.5 times faster on a CPU than the float64 path, with errors
    of order 1e-4 nats for 500 units — far below the Monte Carlo error of ``ĉ``. Chunked over
    chains to bound the work space. The training tracker's ``density_dtype="float32"``.
    """
    betas32 = betas.to(device=terms.base.device, dtype=torch.float32)
    zero = torch.zeros((), dtype=torch.float32, device=terms.base.device)
    parts = []
    for rows in _row_chunks(terms, betas.numel()):
        scaled = terms.preactivation[rows, None, :].to(torch.float32) * betas32[None, :, None]
        torch.logaddexp(scaled, zero, out=scaled)
        parts.append(scaled.sum(2).to(torch.float64))
    summed = torch.cat(parts) if len(parts) > 1 else parts[0]
    betas64 = betas.to(device=terms.base.device, dtype=torch.float64)
    return (1.0 - betas64)[None, :] * terms.base[:, None] + betas64[None, :] * terms.linear[:, None] + summed


def level_log_probabilities(
    terms: MarginalTerms, betas: Tensor, *, log_prior: Tensor, log_z_hat: Tensor
) -> Tensor:
    """``log q(β_k | x)`` of every state and level; shape ``(n, K)``, float64, rows normalised.

    ``q(β_k | x) = softmax_k(log f_k(x) + log r_k − log Ẑ_k)`` with the hidden-summed ``f_k``.
    """
    log_q = log_f_all(terms, betas) + (log_prior - log_z_hat).to(terms.base.device)[None, :]
    return log_q - torch.logsumexp(log_q, 1, keepdim=True)


def path_derivative_all(terms: MarginalTerms, betas: Tensor) -> Tensor:
    """``s_{β_k}(x) = ∂_β log f_β(x)`` at every level; shape ``(n, K)``, float64.

    ``s_β = linear − base + Σ_j a_j σ(β a_j)`` (docs/algorithms.md §1.3, summed-out form, which depends
    on β); :func:`~boltzlab.models.base.path_derivative` for all levels at once.
    """
    betas = betas.to(device=terms.base.device, dtype=torch.float64)
    constant = (terms.linear - terms.base)[:, None]
    if uses_kernel(betas.numel(), terms.preactivation.shape[1], terms.preactivation):
        _, weighted = level_sums(terms.preactivation, betas, derivative=True)
        assert weighted is not None  # derivative=True returns them
        return constant + weighted
    parts = []
    for rows in _row_chunks(terms, betas.numel()):
        pre = terms.preactivation[rows].to(torch.float64)
        scaled = torch.sigmoid(pre[:, None, :] * betas[None, :, None])
        parts.append(torch.einsum("nkj,nj->nk", scaled, pre))
    return constant + torch.cat(parts)


def pooled_log_c(log_sums: Tensor, counts: Tensor, statistic: str) -> Tensor:
    """``log ĉ`` of one block, all chains pooled, normalised, on the CPU; shape ``(K,)``.

    Parameters
    ----------
    log_sums : Tensor, shape (n_chains, K), float64
        ``log Σ_t q(β_k | x_t)`` per chain.
    counts : Tensor, shape (n_chains, K), int64
        Drawn levels per chain.
    statistic : {"rb", "counts"}
        Rao-Blackwellized (RTS) or counts with :data:`PSEUDO_COUNT` per level (TS).
    """
    if statistic == "rb":
        pooled = torch.logsumexp(log_sums, 0).cpu()
    else:
        pooled = torch.log(counts.sum(0).to(torch.float64).cpu() + PSEUDO_COUNT)
    return pooled - torch.logsumexp(pooled, 0)


def rts_log_z(log_z_hat: Tensor, log_prior: Tensor, log_c: Tensor) -> Tensor:
    """Eq. 9 for every level: ``log Ẑ_k + log r_1 − log r_k + log ĉ_k − log ĉ_1 − log Ẑ_1``.

    Parameters
    ----------
    log_z_hat, log_prior, log_c : Tensor, shape (K,), float64
        The sampler's ``log Ẑ``, ``log r`` and ``log ĉ`` (need not be normalised).

    Returns
    -------
    Tensor, shape (K,), float64
        ``log Z_k − log Z_1``; with the normalised base, ``log Z(β_k)``.
    """
    return log_z_hat - log_z_hat[0] + log_prior[0] - log_prior + log_c - log_c[0]


def stopping_statistic(log_c: Tensor, log_prior: Tensor) -> float:
    """``max_k |ĉ_k/r_k − 1|`` (both normalised here): the generalised stopping rule's statistic.

    For the uniform prior ``statistic < 0.1`` is the paper's ``max_k |ĉ_k − r_k| < 0.1/K``
    (docs/open-questions.md item 11).
    """
    log_c = log_c - torch.logsumexp(log_c, 0)
    log_prior = log_prior - torch.logsumexp(log_prior, 0)
    return float((torch.exp(log_c - log_prior) - 1.0).abs().max())


def check_initial_log_z(initial_log_z: Sequence[float] | Tensor | None, n_levels: int) -> Tensor:
    """``initial_log_z`` (zeros when ``None``) checked to hold ``n_levels`` finite values.

    Float64 on the CPU, shifted so that level 0 is 0.
    """
    if initial_log_z is None:
        return torch.zeros(n_levels, dtype=torch.float64)
    try:
        values = torch.as_tensor(initial_log_z, dtype=torch.float64).detach().cpu().flatten().clone()
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValidationError(f"initial_log_z could not be read as numbers: {error}") from None
    if values.shape != (n_levels,) or not bool(torch.isfinite(values).all()):
        raise ValidationError(
            f"initial_log_z must hold {n_levels} finite values (one per level), got shape {tuple(values.shape)}"
        )
    return values - values[0]


def validated_choice(value: Any, choices: tuple[str, ...], name: str) -> str:
    """``value`` lower-cased if it is one of ``choices``; :class:`ValidationError` otherwise."""
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value.lower()
