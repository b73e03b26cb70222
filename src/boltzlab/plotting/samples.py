"""Pictures of binary states: a grid of samples, and consecutive samples of a few chains."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.axes import Axes
from torch import Tensor

from boltzlab.validation import require

__all__ = ["image_grid", "plot_chain_strip", "plot_samples"]


def _square_shape(n_visible: int) -> tuple[int, int]:
    side = math.isqrt(n_visible)
    if side * side == n_visible:
        return (side, side)
    return (1, n_visible)


def image_grid(
    states: Tensor,
    *,
    image_shape: tuple[int, int] | None = None,
    n_columns: int | None = None,
    padding: int = 1,
) -> np.ndarray:
    """Tile visible states into one 2-D array (padding = 0.5 grey).

    Parameters
    ----------
    states : Tensor, shape (n, n_visible)
    image_shape : (height, width), optional
        Defaults to a square when ``n_visible`` is a square number, else one row per state.
    n_columns : int, optional
        Defaults to about ``sqrt(n)``.
    """
    states = torch.as_tensor(states).detach().to("cpu", torch.float32)
    require(states.dim() == 2, f"states must have shape (n, n_visible), got {tuple(states.shape)}")
    n, n_visible = states.shape
    height, width = image_shape or _square_shape(n_visible)
    require(height * width == n_visible, f"image_shape {image_shape} does not hold {n_visible} units")
    n_columns = n_columns or max(1, math.ceil(math.sqrt(n)))
    n_rows = math.ceil(n / n_columns)
    grid = np.full(
        (n_rows * (height + padding) + padding, n_columns * (width + padding) + padding),
        0.5,
        dtype=np.float32,
    )
    images = states.view(n, height, width).numpy()
    for index in range(n):
        row, column = divmod(index, n_columns)
        top, left = padding + row * (height + padding), padding + column * (width + padding)
        grid[top : top + height, left : left + width] = images[index]
    return grid


def plot_samples(
    ax: Axes,
    states: Tensor,
    *,
    image_shape: tuple[int, int] | None = None,
    n_columns: int | None = None,
    title: str | None = None,
) -> Axes:
    """Draw a grid of visible states on ``ax`` (white = 1)."""
    ax.imshow(
        image_grid(states, image_shape=image_shape, n_columns=n_columns),
        cmap="gray",
        vmin=0,
        vmax=1,
        interpolation="nearest",
    )
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return ax


def plot_chain_strip(
    ax: Axes,
    samples: Tensor,
    *,
    image_shape: tuple[int, int] | None = None,
    n_chains: int = 8,
    title: str | None = None,
) -> Axes:
    """Consecutive kept samples of a few chains: one row per chain, time left to right.

    Parameters
    ----------
    samples : Tensor, shape (n_kept, n_chains, n_visible)
        As in :attr:`boltzlab.sampling.SampleResult.samples`.
    """
    samples = torch.as_tensor(samples)
    require(
        samples.dim() == 3,
        f"samples must have shape (n_kept, n_chains, n_visible), got {tuple(samples.shape)}",
    )
    n_kept = samples.shape[0]
    chosen = samples[:, : min(n_chains, samples.shape[1])].transpose(0, 1).reshape(-1, samples.shape[2])
    return plot_samples(ax, chosen, image_shape=image_shape, n_columns=n_kept, title=title)
