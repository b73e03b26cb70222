"""Turning a measured speed ``g(β)`` into an annealing schedule, and capping its steps.

:func:`schedule_from_g` takes equal steps of ``Λ(β) = ∫_0^β √g`` (VAROPT's closed-form
solution, docs/algorithms.md §5.4), :func:`smooth_g` smooths and floors a noisy ``ĝ`` first,
and :func:`decelerated` caps every increment at δ (Kiwaki's Algorithm 3 as reconstructed,
docs/open-questions.md item 4). The builders that measure ``g`` are in
:mod:`boltzlab.estimators.annealing.adaptive_schedules`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.schedules import (
    validate_schedule,
)
from boltzlab.validation import check_positive_int

__all__ = ["check_delta", "check_smoothing", "decelerated", "schedule_from_g", "smooth_g"]


def schedule_from_g(grid: Any, g: Any, n_temperatures: int) -> Tensor:
    """The schedule with equal increments of ``Λ(β) = ∫_0^β √g`` (docs/algorithms.md §5.4, step 3).

    Parameters
    ----------
    grid : array-like, shape (n,)
        Strictly increasing βs from 0 to 1.
    g : array-like, shape (n,)
        Positive ``g(β)`` on ``grid``; ``√g`` is integrated by the trapezoid rule and ``Λ``
        inverted by linear interpolation, exact in the limit of a fine grid.
    n_temperatures : int
        ``K``.

    Returns
    -------
    Tensor, shape (K + 1,), float64
        ``β_k = Λ^{-1}((k/K)·Λ(1))``; increasing from exactly 0 to exactly 1.
    """
    n_temperatures = check_positive_int(n_temperatures, "n_temperatures")
    grid = np.asarray(torch.as_tensor(grid, dtype=torch.float64).cpu(), dtype=np.float64)
    g = np.asarray(torch.as_tensor(g, dtype=torch.float64).cpu(), dtype=np.float64)
    if grid.ndim != 1 or grid.shape != g.shape or grid.size < 2:
        raise ValidationError(f"grid and g must be 1-D of equal length >= 2, got {grid.shape} and {g.shape}")
    if grid[0] != 0.0 or grid[-1] != 1.0 or not bool(np.all(np.diff(grid) > 0)):
        raise ValidationError("grid must increase strictly from 0 to 1")
    if not bool(np.all(np.isfinite(g) & (g > 0))):
        raise ValidationError("g must be finite and positive on the grid; floor it first (smooth_g)")
    speed = np.sqrt(g)
    arc = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * np.diff(grid))])
    targets = np.arange(n_temperatures + 1, dtype=np.float64) / n_temperatures * arc[-1]
    betas = np.interp(targets, arc, grid)
    betas[0], betas[-1] = 0.0, 1.0
    return torch.from_numpy(np.maximum.accumulate(betas))


def smooth_g(grid: Any, g_hat: Any, *, width: float = 0.015, floor: float = 1e-3) -> Tensor:
    """Gaussian-kernel smoothing of ``√ĝ`` on a uniform grid, then a relative floor.

    The estimate is noisiest where the pilot's weights degenerate (near β = 0), and a zero
    would give an infinite step (docs/algorithms.md §5.4, pitfall 1). The kernel average is
    normalised by the kernel mass inside [0, 1] (no shrinkage at the ends) and skips
    non-finite entries.

    Parameters
    ----------
    grid : array-like, shape (n,)
        Uniformly spaced βs from 0 to 1.
    g_hat : array-like, shape (n,)
        Raw estimates of g (negative values are read as 0).
    width : float, default 0.015
        Standard deviation of the kernel in units of β (docs/open-questions.md item 3 suggests
        1–2 % of the range); 0 switches smoothing off.
    floor : float, default 1e-3
        ``√g`` is raised to at least ``floor × max √g``, so no step is more than
        ``1/floor`` times the smallest.

    Returns
    -------
    Tensor, shape (n,), float64
        The smoothed, floored g (all ones, i.e. the linear schedule, if ĝ is zero everywhere).
    """
    grid = torch.as_tensor(grid, dtype=torch.float64).cpu()
    g_hat = torch.as_tensor(g_hat, dtype=torch.float64).cpu()
    if grid.dim() != 1 or grid.shape != g_hat.shape or grid.numel() < 2:
        raise ValidationError("grid and g_hat must be 1-D of equal length >= 2")
    spacing = grid[1:] - grid[:-1]
    if not bool(torch.allclose(spacing, spacing.mean(), rtol=1e-9, atol=0.0)):
        raise ValidationError("smooth_g needs a uniformly spaced grid (the pilot's linear schedule)")
    check_smoothing(width, floor)
    known = torch.isfinite(g_hat)
    root = torch.where(known, g_hat.clamp_min(0.0), torch.zeros_like(g_hat)).sqrt()
    sigma = width / float(spacing.mean())
    if sigma > 0.0:
        radius = max(1, math.ceil(4.0 * sigma))
        offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
        kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)[None, None, :]
        mass = F.conv1d(known.to(torch.float64)[None, None, :], kernel, padding=radius)[0, 0]
        root = F.conv1d(root[None, None, :], kernel, padding=radius)[0, 0] / mass
        root = torch.nan_to_num(root, nan=0.0)
    peak = float(root.max())
    if not peak > 0.0:
        return torch.ones_like(root)
    return root.clamp_min(floor * peak) ** 2


def check_smoothing(width: Any, floor: Any) -> None:
    if not (isinstance(width, (int, float)) and math.isfinite(width) and width >= 0.0):
        raise ValidationError(f"smoothing width must be a finite number >= 0, got {width!r}")
    if not (isinstance(floor, (int, float)) and 0.0 < floor <= 1.0):
        raise ValidationError(f"floor must be in (0, 1], got {floor!r}")


def decelerated(betas: Any, delta: float) -> Tensor:
    """Cap every increment at ``delta``, stretching the later ones to keep the end at 1.

    Kiwaki's deceleration (docs/algorithms.md §5.4, docs/open-questions.md item 4): a single forward
    pass; an increment above δ is clipped to δ and its excess is spread over all later
    increments in proportion to their size (which may push some of them over δ; they are
    clipped in turn). The number of increments K is unchanged. Should excess reach the end
    with no later increment left to take it (possible only when the last increments are
    large), it goes back to the increments below δ in proportion to their room ``δ − Δβ``,
    which ``K·δ ≥ 1`` guarantees is enough.

    Parameters
    ----------
    betas : array-like, shape (K + 1,)
        A valid ascending schedule (see ``schedules.validate_schedule``); not modified.
    delta : float in (0, 1]
        The largest allowed increment; needs ``K·δ ≥ 1``.

    Returns
    -------
    Tensor, shape (K + 1,), float64
        Non-decreasing from 0 to exactly 1 with every increment ≤ δ (up to the rounding of a
        cumulative sum, ``K·ε``);
        equal to ``betas`` when no increment exceeds δ, and unchanged before the first one
        that does unless the end-of-schedule fallback ran.
    """
    betas = validate_schedule(betas)
    delta = check_delta(delta, betas.numel() - 1)
    original = np.diff(betas.numpy())
    # A step above δ by rounding only (e.g. linear(7) against δ = 1/7) is not clipped.
    limit = delta * (1.0 + 1e-12)
    if not bool((original > limit).any()):
        return betas
    first = int(np.argmax(original > limit))
    later = np.concatenate([np.cumsum(original[::-1])[::-1][1:], [0.0]])  # Σ_{j>k} original_j
    steps = original.copy()
    scale, leftover = 1.0, 0.0  # every increment after the current one is original × scale
    for k in range(first, steps.size):
        value = original[k] * scale
        if value > limit:
            excess, value = value - delta, delta
            rest = later[k] * scale
            if rest > 0.0:
                scale *= (rest + excess) / rest
            else:
                leftover += excess
        steps[k] = value
    room = np.clip(delta - steps, 0.0, None)
    if leftover > 0.0 and room.sum() > 0.0:
        steps += leftover * room / room.sum()
        first = 0  # the fallback also lengthens steps before the first clipped one
    result = betas.numpy().copy()
    result[first + 1 :] = result[first] + np.cumsum(steps[first:])
    result = np.maximum.accumulate(np.minimum(result, 1.0))
    result[-1] = 1.0
    return torch.from_numpy(result)


def check_delta(delta: Any, n_temperatures: int) -> float:
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ValidationError(f"decelerate must be a number in (0, 1], got {delta!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValidationError(f"decelerate must be in (0, 1], got {value}")
    if n_temperatures * value < 1.0 - 1e-12:
        raise ValidationError(
            f"decelerate={value} caps every increment, so the schedule needs n_temperatures >= "
            f"{math.ceil(1.0 / value - 1e-9)} to reach beta = 1; got {n_temperatures}"
        )
    return value
