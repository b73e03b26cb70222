"""The standard figures the command line writes, and saving a figure as a PNG atomically.

Figures are built as :class:`matplotlib.figure.Figure` objects without ``pyplot``: no global
figure registry to leak into, no display backend (PNG bytes come from the Agg renderer), and
nothing changes for a caller who uses ``pyplot`` themselves. Files are written through
:func:`boltzlab.io.write_atomic`, so an interrupted run never leaves half a PNG.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

from matplotlib.figure import Figure
from torch import Tensor

from boltzlab.io import write_atomic
from boltzlab.plotting.samples import image_grid, plot_chain_strip, plot_samples
from boltzlab.plotting.training import has_log_likelihood, plot_log_likelihood, plot_reconstruction_error
from boltzlab.training.state import TrainRecord, TrainResult

__all__ = ["chain_strip_figure", "figure_png", "samples_figure", "save_figure", "training_figure"]

# Inches per pixel of an image grid, and the limits that keep a grid readable but bounded.
_INCHES_PER_PIXEL = 0.06
_MIN_INCHES, _MAX_INCHES = 2.5, 14.0


def figure_png(figure: Figure, *, dpi: int = 120) -> bytes:
    """The PNG encoding of ``figure``."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.1)
    return buffer.getvalue()


def save_figure(figure: Figure, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``figure`` as a PNG to ``path`` atomically (parents created); returns the path."""
    return write_atomic(path, figure_png(figure, dpi=dpi))


def _grid_inches(grid_shape: tuple[int, int]) -> tuple[float, float]:
    """Width and height in inches for an image grid of ``(rows, columns)`` pixels."""
    height, width = grid_shape
    scale = min(1.0, _MAX_INCHES / max(height * _INCHES_PER_PIXEL, width * _INCHES_PER_PIXEL))
    scale = max(scale, _MIN_INCHES / max(height * _INCHES_PER_PIXEL, width * _INCHES_PER_PIXEL))
    return (width * _INCHES_PER_PIXEL * scale, height * _INCHES_PER_PIXEL * scale)


def training_figure(
    history: TrainResult | Iterable[TrainRecord],
    *,
    validation_label: str = "validation",
    title: str | None = None,
) -> Figure:
    """Log-likelihood (when tracked) beside the reconstruction error, both against updates."""
    records = history.history if isinstance(history, TrainResult) else tuple(history)
    with_likelihood = has_log_likelihood(records)
    figure = Figure(figsize=(10.0 if with_likelihood else 5.5, 4.0), layout="constrained")
    axes = figure.subplots(1, 2 if with_likelihood else 1, squeeze=False)[0]
    if with_likelihood:
        plot_log_likelihood(axes[0], records, validation_label=validation_label)
    plot_reconstruction_error(axes[-1], records)
    if title:
        figure.suptitle(title)
    return figure


def samples_figure(
    samples: Tensor,
    *,
    data: Tensor | None = None,
    image_shape: tuple[int, int] | None = None,
    title: str = "model samples",
    data_title: str = "training examples",
) -> Figure:
    """A grid of model samples, beside a grid of data examples when ``data`` is given.

    Parameters
    ----------
    samples : Tensor, shape (n_samples, n_visible)
    data : Tensor, shape (n_examples, n_visible), optional
    image_shape : (height, width), optional
        How to draw one state; default a square when ``n_visible`` is one, else a row.
    """
    panels = [(samples, title)] + ([(data, data_title)] if data is not None else [])
    grid = image_grid(samples, image_shape=image_shape)
    width, height = _grid_inches(grid.shape)
    figure = Figure(figsize=(len(panels) * width + 0.4, height + 0.6), layout="constrained")
    for ax, (states, panel_title) in zip(
        figure.subplots(1, len(panels), squeeze=False)[0], panels, strict=True
    ):
        plot_samples(ax, states, image_shape=image_shape, title=panel_title)
    return figure


def chain_strip_figure(
    samples: Tensor,
    *,
    image_shape: tuple[int, int] | None = None,
    n_chains: int | None = None,
    title: str | None = None,
) -> Figure:
    """Consecutive samples of chains: one row per chain, time left to right.

    Parameters
    ----------
    samples : Tensor, shape (n_kept, n_chains, n_visible)
        As in :attr:`boltzlab.sampling.SampleResult.samples`.
    n_chains : int, optional
        Rows to draw (the first chains); default all of them.
    """
    n_kept, total_chains, n_visible = samples.shape
    rows = total_chains if n_chains is None else min(n_chains, total_chains)
    # The grid's pixel size, to give the figure the strip's aspect ratio.
    grid = image_grid(samples[:1, :1].reshape(1, n_visible), image_shape=image_shape)
    cell_height, cell_width = grid.shape[0] - 1, grid.shape[1] - 1
    width, height = _grid_inches((rows * cell_height + 1, n_kept * cell_width + 1))
    figure = Figure(figsize=(width + 0.4, height + (0.6 if title else 0.3)), layout="constrained")
    plot_chain_strip(figure.subplots(), samples, image_shape=image_shape, n_chains=rows, title=title)
    return figure
