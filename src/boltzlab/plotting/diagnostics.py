"""Mixing plots: autocorrelation functions and tempered samplers' temperatures.

* :func:`plot_autocorrelation` — the pooled autocorrelation function of a statistic (e.g.
  the energy) for one or several samplers, with their integrated autocorrelation times.
* :func:`plot_temperature_trajectories` and :func:`plot_level_occupancy` — where the chains
  of a tempered sampler (parallel or simulated tempering, CAST) spend their time on the
  ladder. They take plain arrays of level indices, shape ``(n_steps, n_chains)``, and the
  ladder's β values, so they work with any scheme's record of its levels. A flat occupancy
  and trajectories that traverse the whole ladder are what Wang–Landau adaptation aims for
  (Salakhutdinov 2010, Fig. 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from torch import Tensor

from boltzlab.evaluation.autocorrelation import autocorrelation_function, integrated_autocorrelation_time
from boltzlab.validation import require

__all__ = [
    "plot_autocorrelation",
    "plot_level_occupancy",
    "plot_temperature_trajectories",
]


def _numpy(value: Any) -> np.ndarray:
    """A NumPy view or copy of a tensor, array or sequence."""
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def plot_autocorrelation(
    ax: Axes,
    series: Any,
    *,
    max_lag: int | None = None,
    method: str = "sokal",
    label: str | None = None,
    title: str | None = "autocorrelation",
) -> Axes:
    """Pooled autocorrelation function of one or several series, with their τ in the legend.

    Parameters
    ----------
    ax : Axes
    series : array or Tensor of shape (n_steps,) or (n_steps, n_chains), or a mapping name → such
        E.g. ``{"gibbs": energies_gibbs, "flip": energies_flip}``.
    max_lag : int, optional
        Largest lag drawn; default three times the largest Sokal window, at most ``n_steps − 1``.
    method : {"sokal", "ar"}, default "sokal"
        How the τ in the legend is estimated.
    label : str, optional
        Legend name of a single (unnamed) series.
    title : str or None, default "autocorrelation"
    """
    named = dict(series) if isinstance(series, Mapping) else {label or "series": series}
    require(len(named) > 0, "series must hold at least one series")
    estimates = {
        name: integrated_autocorrelation_time(values, method=method, warn=False)
        for name, values in named.items()
    }
    if max_lag is None:
        longest = max(estimate.n_steps for estimate in estimates.values())
        widest = max(estimate.window for estimate in estimates.values())
        max_lag = min(longest - 1, max(10, 3 * widest))
    require(
        isinstance(max_lag, (int, np.integer)) and max_lag >= 1,
        f"max_lag must be a positive integer, got {max_lag!r}",
    )
    for name, values in named.items():
        estimate = estimates[name]
        lags = min(int(max_lag), estimate.n_steps - 1)
        rho = autocorrelation_function(values, max_lag=lags)
        ax.plot(np.arange(lags + 1), rho, linewidth=1.2, label=f"{name} (τ = {estimate.tau:.3g})")
    ax.axhline(0.0, color="0.5", linewidth=0.8)
    ax.set_xlabel("lag (steps)")
    ax.set_ylabel("autocorrelation ρ(lag)")
    ax.grid(alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return ax


def _levels_and_betas(levels: Any, betas: Any) -> tuple[np.ndarray, np.ndarray]:
    level_array = _numpy(levels)
    beta_array = _numpy(betas).astype(np.float64)
    require(
        beta_array.ndim == 1 and beta_array.size >= 1,
        f"betas must have shape (n_levels,), got {beta_array.shape}",
    )
    require(
        level_array.ndim in (1, 2) and level_array.shape[0] >= 1,
        f"levels must have shape (n_steps, n_chains) or (n_steps,), got {level_array.shape}",
    )
    require(
        np.issubdtype(level_array.dtype, np.integer),
        f"levels must hold integer level indices, got dtype {level_array.dtype}",
    )
    require(
        bool(((level_array >= 0) & (level_array < beta_array.size)).all()),
        f"levels must be indices in [0, {beta_array.size - 1}] into betas",
    )
    if level_array.ndim == 1:
        level_array = level_array[:, None]
    return level_array, beta_array


def plot_temperature_trajectories(
    ax: Axes,
    levels: Any,
    betas: Any,
    *,
    chains: Any = None,
    max_chains: int = 4,
    title: str | None = "temperature trajectories",
) -> Axes:
    """The inverse temperature of a few chains against the step.

    Parameters
    ----------
    ax : Axes
    levels : array or Tensor of int, shape (n_steps, n_chains) or (n_steps,)
        Ladder index of every chain after every step.
    betas : array or Tensor, shape (n_levels,)
        The ladder's inverse temperatures (any order; ``betas[level]`` is plotted).
    chains : sequence of int, optional
        Which chains to draw; default the first ``max_chains``.
    max_chains : int, default 4
    title : str or None
    """
    level_array, beta_array = _levels_and_betas(levels, betas)
    n_steps, n_chains = level_array.shape
    chosen = list(range(min(max_chains, n_chains))) if chains is None else [int(chain) for chain in chains]
    require(
        all(0 <= chain < n_chains for chain in chosen) and chosen,
        f"chains must be indices in [0, {n_chains - 1}], got {chosen}",
    )
    steps = np.arange(n_steps)
    for chain in chosen:
        ax.plot(
            steps,
            beta_array[level_array[:, chain]],
            drawstyle="steps-post",
            linewidth=1.0,
            label=f"chain {chain}",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("inverse temperature β")
    ax.set_ylim(min(beta_array.min(), 0.0) - 0.03, max(beta_array.max(), 1.0) + 0.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def _level_occupancy(levels: Any, n_levels: int) -> np.ndarray:
    """Fraction of (step, chain) pairs at each level; shape ``(n_levels,)``, sums to 1."""
    level_array = _numpy(levels).astype(np.int64).reshape(-1)
    return np.bincount(level_array, minlength=n_levels)[:n_levels] / level_array.size


def plot_level_occupancy(
    ax: Axes,
    levels: Any,
    betas: Any,
    *,
    title: str | None = "level occupancy",
) -> Axes:
    """Fraction of time the chains spend at each level, with the uniform target ``1/K`` dashed.

    Parameters
    ----------
    ax : Axes
    levels : array or Tensor of int, shape (n_steps, n_chains) or (n_steps,)
    betas : array or Tensor, shape (n_levels,)
        Bars are labelled with these β values.
    title : str or None
    """
    level_array, beta_array = _levels_and_betas(levels, betas)
    n_levels = beta_array.size
    occupancy = _level_occupancy(level_array, n_levels)
    positions = np.arange(n_levels)
    ax.bar(positions, occupancy, color="C0", alpha=0.8)
    ax.axhline(1.0 / n_levels, color="C3", linestyle="--", linewidth=1.0, label="uniform 1/K")
    step = max(1, n_levels // 10)
    ax.set_xticks(positions[::step], [f"{beta:.2f}" for beta in beta_array[::step]])
    ax.set_xlabel("inverse temperature β of the level")
    ax.set_ylabel("fraction of steps")
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax
