"""Mean-field inference in a DBM and the variational lower bound on ``log p(v)``.

Salakhutdinov & Hinton (2009), §3 (docs/algorithms.md §1.2): a factorial posterior
``Q(h | v) = Π_{l≥1} Π_j q(h^l_j)`` with means ``μ^l = Q(h^l = 1)`` gives

    log p(v) ≥ E_Q[−E(v, h)] + H(Q) − log Z,

and since ``E`` is multilinear and ``Q`` factorial, ``E_Q[E(v, h)] = E(v, μ¹, …, μ^L)``.
Its stationary points satisfy the fixed point

    μ^l = σ(b^l + μ^{l−1}W^l + W^{l+1}μ^{l+1}),     μ⁰ = v,  no μ^{L+1} term.

**Schedule.** One *update* sets the odd layers from the even ones, then the even hidden
layers from the new odd ones (the DBM's own block order). Units of one parity are not
coupled in the bound, so each half-update maximises the bound exactly over its block given
the other: the bound never decreases from one update to the next, for every example.

**Initialisation** (docs/open-questions.md item 17): by default one bottom-up pass
``μ^l = σ(b^l + μ^{l−1}W^l)``, l = 1..L, with plain (not doubled) weights; ``init="zeros"``
starts from ``μ = 0`` instead — for L = 2 its first update reproduces the bottom-up pass.
The CAST paper (Salakhutdinov 2010) uses 5 updates, the default here.

**Entropy.** ``H = −Σ [μ log μ + (1 − μ) log(1 − μ)]`` with μ clipped to ``[ε, 1 − ε]``
(in float64) before the logarithms, because a float32 mean saturates to exactly 0 or 1.
The clipped means are used in the energy term too, so the value is the exact bound of a
(slightly different) factorial ``Q`` and stays a valid lower bound.

The iteration itself (:class:`MeanFieldResult`, :func:`mean_field_fixed_point`, both
re-exported here) is the DBM's own, in :mod:`boltzlab.models.dbm`, which starts its chains
from the mean-field posterior; this module checks its inputs are a DBM.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.dbm import DBM, MeanFieldResult, mean_field_fixed_point
from boltzlab.validation import as_model_data, check_nonnegative_int, check_positive_int, require

__all__ = [
    "MeanFieldResult",
    "binary_entropy",
    "mean_field_fixed_point",
    "mean_field_posterior",
    "variational_lower_bound",
    "variational_lower_bound_per_example",
]

_INITS = ("bottom_up", "zeros")


def binary_entropy(means: Tensor, *, epsilon: float = 1e-12) -> Tensor:
    """``−[μ log μ + (1 − μ) log(1 − μ)]`` elementwise, μ clipped to ``[ε, 1 − ε]``; float64.

    Finite for saturated means (exactly 0 or 1), where the unclipped formula gives NaN.
    """
    clipped = means.to(torch.float64).clamp(epsilon, 1.0 - epsilon)
    return -(clipped * torch.log(clipped) + (1.0 - clipped) * torch.log1p(-clipped))


def _check_common(dbm: Any, data: Any, n_updates: Any, init: Any) -> tuple[Tensor, int]:
    if not isinstance(dbm, DBM):
        raise ValidationError(f"dbm must be a boltzlab.DBM, got {type(dbm).__name__}")
    check_nonnegative_int(n_updates, "n_updates")
    require(init in _INITS, f"init must be one of {', '.join(map(repr, _INITS))}, got {init!r}")
    v = as_model_data(dbm, data, "data")
    return v, n_updates


def mean_field_posterior(
    dbm: DBM, data: Tensor, *, n_updates: int = 5, init: str = "bottom_up"
) -> MeanFieldResult:
    """Mean-field posterior means for each row of ``data`` (see module docstring).

    Parameters
    ----------
    dbm : DBM
    data : Tensor, shape (n_examples, n_visible), values 0/1
    n_updates : int, default 5
        Fixed-point updates after the initialisation (each: odd layers, then even hidden).
    init : {"bottom_up", "zeros"}, default "bottom_up"

    Returns
    -------
    MeanFieldResult

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.models import mean_field_posterior
    >>> dbm = bl.DBM(layer_sizes=[7, 3, 2], generator=0)
    >>> result = mean_field_posterior(dbm, torch.ones(13, 7))
    >>> [tuple(mean.shape) for mean in result.means]
    [(13, 7), (13, 3), (13, 2)]
    """
    v, n_updates = _check_common(dbm, data, n_updates, init)
    return mean_field_fixed_point(dbm, v, n_updates, init)


def variational_lower_bound_per_example(
    dbm: DBM,
    data: Tensor,
    log_z: Any,
    *,
    n_updates: int = 5,
    init: str = "bottom_up",
    epsilon: float = 1e-12,
    batch_size: int = 4096,
) -> Tensor:
    """``E_Q[−E(v, h)] + H(Q) − log Z`` for each row of ``data``; float64, shape ``(n,)``, nats.

    A lower bound on ``log p(v)`` for any ``Q``; ``Q`` is the mean-field posterior after
    ``n_updates`` updates from ``init`` (module docstring), its means clipped to
    ``[ε, 1 − ε]``. The bound is as good as ``log_z``: with an AIS estimate, which tends to
    underestimate ``log Z``, it can exceed the true bound.

    Parameters
    ----------
    dbm : DBM
    data : Tensor, shape (n_examples, n_visible), values 0/1
    log_z : float or LogZEstimate
        ``log Z`` of ``dbm`` at β = 1 (exact, or an estimate's ``log_z``).
    n_updates : int, default 5
    init : {"bottom_up", "zeros"}, default "bottom_up"
    epsilon : float in (0, 0.5), default 1e-12
    batch_size : int, default 4096
        Examples per batch (memory only; the result does not depend on it).
    """
    v, n_updates = _check_common(dbm, data, n_updates, init)
    if hasattr(log_z, "log_z"):
        log_z = log_z.log_z  # a LogZEstimate
    try:
        log_z = float(log_z)
    except (TypeError, ValueError):
        raise ValidationError(f"log_z must be a number or a LogZEstimate, got {log_z!r}") from None
    require(torch.isfinite(torch.tensor(log_z)).item(), f"log_z must be finite, got {log_z}")
    require(0.0 < float(epsilon) < 0.5, f"epsilon must be in (0, 0.5), got {epsilon}")
    batch_size = check_positive_int(batch_size, "batch_size")
    parts = []
    for batch in torch.split(v, batch_size):
        means = mean_field_fixed_point(dbm, batch, n_updates, init).means
        clipped = (means[0], *(mean.to(torch.float64).clamp(epsilon, 1.0 - epsilon) for mean in means[1:]))
        entropy = sum(binary_entropy(mean, epsilon=epsilon).sum(1) for mean in clipped[1:])
        parts.append(-dbm.energy(clipped) + entropy - log_z)
    return torch.cat(parts)


def variational_lower_bound(
    dbm: DBM,
    data: Tensor,
    log_z: Any,
    *,
    n_updates: int = 5,
    init: str = "bottom_up",
    epsilon: float = 1e-12,
    batch_size: int = 4096,
) -> float:
    """Mean variational lower bound on ``log p(v)`` over the rows of ``data``, nats per example.

    See :func:`variational_lower_bound_per_example` for the parameters.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> dbm = bl.DBM(layer_sizes=[7, 3, 2], generator=0)
    >>> data = torch.ones(13, 7)
    >>> bound = bl.variational_lower_bound(dbm, data, bl.exact_log_z(dbm))
    >>> bound <= float(-dbm.free_energy(data).mean()) - bl.exact_log_z(dbm)
    True
    """
    per_example = variational_lower_bound_per_example(
        dbm, data, log_z, n_updates=n_updates, init=init, epsilon=epsilon, batch_size=batch_size
    )
    return float(per_example.mean())
