"""Annealing schedules: ascending ladders ``0 = β_0 ≤ β_1 ≤ … ≤ β_K = 1`` for AIS.

Every schedule is a float64 tensor of shape ``(K + 1,)`` in the ascending order used by
AIS, RTS, TI and MBAR (docs/algorithms.md §0): ``β_0 = 0`` is the tractable base, ``β_K = 1`` the
model. ``K`` (``n_temperatures``) counts the *increments*, i.e. the factors of the AIS
weight (Neal 2001, eq. 3); AIS makes ``K − 1`` transitions.

* ``linear`` — ``β_k = k / K`` (docs/algorithms.md §5.1).
* ``sm08`` — the heuristic that Salakhutdinov & Murray (2008, "On the quantitative analysis
  of deep belief networks", ICML, §4.2) used for MNIST RBMs: uniform pieces on [0, 0.5],
  [0.5, 0.9] and [0.9, 1], denser near β = 1 where the distribution changes fastest
  (docs/algorithms.md §4.1, §5.2). Their reference code builds
  ``[0:1e-3:0.5, 0.5:1e-4:0.9, 0.9:1e-5:1]``; with the repeated knots 0.5 and 0.9 removed
  that is 500 + 4,000 + 10,000 = 14,500 increments. (The paper's text says 1,000 values on
  [0, 0.5], "15,000 in all"; we follow the code, whose grid is what was actually run.)

Adding a schedule is one function ``f(n_temperatures: int | None) -> Tensor`` decorated
with :func:`register_schedule`; :func:`get_schedule` then finds it by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.registry import Registry
from boltzlab.validation import check_positive_int

__all__ = [
    "DEFAULT_N_TEMPERATURES",
    "available_schedules",
    "get_schedule",
    "linear",
    "register_schedule",
    "sm08",
    "validate_schedule",
]

#: The reference code's grid ``[0:1e-3:0.5, 0.5:1e-4:0.9, 0.9:1e-5:1]``: knots and spacings.
SM08_KNOTS: tuple[float, float, float, float] = (0.0, 0.5, 0.9, 1.0)
SM08_STEPS: tuple[float, float, float] = (1e-3, 1e-4, 1e-5)
_SM08_COUNTS: tuple[int, int, int] = (500, 4_000, 10_000)

#: Increments used when a named schedule is asked for without ``n_temperatures``: the
#: SM08 grid's 14,500, the budget behind the published MNIST log Z values.
DEFAULT_N_TEMPERATURES: int = sum(_SM08_COUNTS)

ScheduleFunction = Callable[[int | None], Tensor]
_SCHEDULES: Registry[ScheduleFunction] = Registry("schedule")


def register_schedule(name: str) -> Callable[[ScheduleFunction], ScheduleFunction]:
    """Function decorator: make ``f(n_temperatures) -> betas`` reachable by ``name``."""
    return _SCHEDULES.register(name)


def available_schedules() -> tuple[str, ...]:
    """Schedule names accepted by :func:`get_schedule`."""
    return _SCHEDULES.names()


@register_schedule("linear")
def linear(n_temperatures: int | None = None) -> Tensor:
    """Uniformly spaced ``β_k = k / K`` (docs/algorithms.md §5.1).

    Parameters
    ----------
    n_temperatures : int, optional
        ``K``, the number of increments (default :data:`DEFAULT_N_TEMPERATURES`).

    Returns
    -------
    Tensor, shape (K + 1,), float64
        ``0 = β_0 < … < β_K = 1``.

    >>> linear(4).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    k = (
        DEFAULT_N_TEMPERATURES
        if n_temperatures is None
        else check_positive_int(n_temperatures, "n_temperatures")
    )
    # arange/K rather than linspace: exact k/K for every k, and exactly 1 at the end.
    return torch.arange(k + 1, dtype=torch.float64) / k


@register_schedule("sm08")
def sm08(n_temperatures: int | None = None) -> Tensor:
    """The Salakhutdinov & Murray (2008) piecewise-uniform heuristic for MNIST RBMs.

    Parameters
    ----------
    n_temperatures : int, optional
        ``K``, the number of increments. ``None`` gives exactly the reference grid
        ``[0:1e-3:0.5, 0.5:1e-4:0.9, 0.9:1e-5:1]`` without its repeated knots (K = 14,500).
        Another ``K ≥ 3`` keeps the three uniform pieces with their increments in the same
        500 : 4,000 : 10,000 proportions (largest-remainder rounding, at least one each), so
        ``sm08(14_500)`` equals ``sm08()``.

    Returns
    -------
    Tensor, shape (K + 1,), float64
        Strictly increasing from 0 to 1, with the knots 0.5 and 0.9 included once.

    >>> betas = sm08()
    >>> betas.shape, float(betas[500]), float(betas[4500])
    (torch.Size([14501]), 0.5, 0.9)
    """
    if n_temperatures is None:
        counts = _SM08_COUNTS
    else:
        k = check_positive_int(n_temperatures, "n_temperatures")
        if k < 3:
            raise ValidationError(
                f"the sm08 schedule has three pieces and needs n_temperatures >= 3, got {k}"
            )
        counts = _proportional_counts(k, _SM08_COUNTS)
    pieces = [torch.zeros(1, dtype=torch.float64)]
    for start, stop, count in zip(SM08_KNOTS[:-1], SM08_KNOTS[1:], counts, strict=True):
        # Drop each piece's first point: it is the previous piece's last (the repeated knot).
        pieces.append(torch.linspace(start, stop, count + 1, dtype=torch.float64)[1:])
    return torch.cat(pieces)


def _proportional_counts(total: int, weights: Sequence[int]) -> tuple[int, ...]:
    """Split ``total`` into positive integers proportional to ``weights`` (largest remainder)."""
    weight_sum = sum(weights)
    exact = [total * w / weight_sum for w in weights]
    counts = [max(1, int(x)) for x in exact]
    # Hand out what is left to the largest remainders; take back from the largest pieces
    # when the "at least one" floor overshot (only for tiny totals).
    order = sorted(range(len(weights)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    index = 0
    while sum(counts) < total:
        counts[order[index % len(order)]] += 1
        index += 1
    while sum(counts) > total:
        counts[counts.index(max(counts))] -= 1
    return tuple(counts)


def validate_schedule(betas: Any) -> Tensor:
    """Check an explicit ladder and return it as a float64 CPU tensor of shape ``(K + 1,)``.

    A valid schedule is 1-D, has at least two values, is finite, starts at exactly 0, ends
    at exactly 1 and never decreases (a repeated β is a zero increment: harmless, but it
    wastes a sweep). The input is not modified.

    Raises
    ------
    ValidationError
        Naming what is wrong and where.
    """
    if isinstance(betas, Tensor):
        tensor = betas.detach().to(device="cpu", dtype=torch.float64).clone()
    else:
        try:
            tensor = torch.as_tensor(np.asarray(betas, dtype=np.float64)).clone()
        except (TypeError, ValueError) as error:
            raise ValidationError(f"schedule could not be read as an array of numbers: {error}") from None
    if tensor.dim() != 1:
        raise ValidationError(
            f"schedule must be 1-D (K + 1 inverse temperatures), got shape {tuple(tensor.shape)}"
        )
    if tensor.numel() < 2:
        raise ValidationError(f"schedule needs at least two values (0 and 1), got {tensor.numel()}")
    if not bool(torch.isfinite(tensor).all()):
        index = int((~torch.isfinite(tensor)).nonzero()[0])
        raise ValidationError(f"schedule must be finite; entry {index} is {float(tensor[index])}")
    if float(tensor[0]) != 0.0:
        raise ValidationError(f"schedule must start at beta = 0 (the base), got {float(tensor[0])!r}")
    if float(tensor[-1]) != 1.0:
        raise ValidationError(f"schedule must end at beta = 1 (the model), got {float(tensor[-1])!r}")
    steps = tensor[1:] - tensor[:-1]
    if bool((steps < 0).any()):
        index = int((steps < 0).nonzero()[0]) + 1
        raise ValidationError(
            f"schedule must be non-decreasing; beta[{index}] = {float(tensor[index])} < "
            f"beta[{index - 1}] = {float(tensor[index - 1])}"
        )
    return tensor


def get_schedule(schedule: str | Tensor | Sequence[float], n_temperatures: int | None = None) -> Tensor:
    """A validated ladder from a name (``"linear"``, ``"sm08"``, ...) or explicit values.

    Parameters
    ----------
    schedule : str or Tensor or sequence of float
        A registered name (see :func:`available_schedules`) or the βs themselves.
    n_temperatures : int, optional
        ``K`` for a named schedule (its default when ``None``). With explicit βs it must be
        ``None`` or ``len(betas) − 1``.

    Returns
    -------
    Tensor, shape (K + 1,), float64, on the CPU
    """
    if isinstance(schedule, str):
        return validate_schedule(_SCHEDULES.get(schedule)(n_temperatures))
    betas = validate_schedule(schedule)
    if n_temperatures is not None and n_temperatures != betas.numel() - 1:
        raise ValidationError(
            f"n_temperatures={n_temperatures!r} but the explicit schedule has {betas.numel() - 1} increments; "
            "leave n_temperatures out when giving the betas"
        )
    return betas
