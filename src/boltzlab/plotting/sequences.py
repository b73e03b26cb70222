"""Pictures of sequence models: hidden-unit weight logos and the generative check's scatters.

* :func:`plot_weight_logo` draws one hidden unit's weights ``W_i·j`` (sites × symbols) as a
  logo, the way Tubiana, Cocco & Monasson (2019, eLife 8:e39397, Fig. 3) show an RBM's hidden
  units: at each site the symbols are letters stacked with heights proportional to their
  weights, positive weights above the axis (largest on top) and negative ones below it
  (largest at the bottom). In the zero-sum gauge a site's weights sum to zero, so the two
  stacks of a site are equally tall: the height says how much the unit cares about the site,
  the letters which symbols push it up or down. :func:`weight_logos_figure` stacks the logos of
  the units with the largest weights.
* :func:`plot_statistic_scatter` and :func:`generative_check_figure` draw a
  :class:`~boltzlab.evaluation.generative.GenerativeCheck`: the samples' single-site
  frequencies and connected correlations against the alignment's, with the diagonal, Pearson's
  r and the least-squares slope (docs/data.md, "Aligned sequences").

Letters are the glyphs of matplotlib's bundled DejaVu Sans Bold, each drawn as a filled path
stretched to its box; a site's letters shorter than 1% of the figure's tallest stack are left
out (invisible at any size that fits on a page, and they cost most of the drawing time).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path as GlyphPath
from matplotlib.textpath import TextPath
from torch import Tensor

from boltzlab.evaluation.generative import GenerativeCheck, StatisticFit
from boltzlab.validation import require

__all__ = [
    "generative_check_figure",
    "plot_statistic_scatter",
    "plot_weight_logo",
    "symbol_colours",
    "weight_logos_figure",
]

# Letters below this share of the tallest stack are not drawn.
_SMALLEST_LETTER = 0.01
# Width of a letter in its column (the rest is the gap between columns).
_LETTER_WIDTH = 0.9
# Amino-acid colours by chemistry, as in WebLogo's "chemistry" scheme; nucleotides as in
# most nucleotide logos; the gap and anything else grey.
_CHEMISTRY = {
    **dict.fromkeys("GSTYC", "#109648"),
    **dict.fromkeys("NQ", "#7b2cbf"),
    **dict.fromkeys("KRH", "#1f4fd1"),
    **dict.fromkeys("DE", "#d62828"),
    **dict.fromkeys("AVLIPWFM", "#222222"),
}
_NUCLEOTIDES = {"A": "#109648", "C": "#1f4fd1", "G": "#f4a100", "T": "#d62828", "U": "#d62828"}
_OTHER = "#8d8d8d"


def symbol_colours(symbols: str, alphabet_name: str = "protein") -> list[str]:
    """One colour per symbol: chemistry classes for proteins, four colours for nucleotides."""
    table = _NUCLEOTIDES if alphabet_name in ("rna", "dna") else _CHEMISTRY
    return [table.get(symbol.upper(), _OTHER) for symbol in symbols]


@functools.lru_cache(maxsize=256)
def _glyph(symbol: str) -> tuple[np.ndarray, np.ndarray]:
    """The glyph of ``symbol`` as path vertices scaled into the unit square, and its codes."""
    path = TextPath((0.0, 0.0), symbol, size=1.0, prop=FontProperties(family="DejaVu Sans", weight="bold"))
    vertices = np.asarray(path.vertices, dtype=float)
    low, high = vertices.min(0), vertices.max(0)
    span = np.where(high - low > 0, high - low, 1.0)
    return (vertices - low) / span, np.asarray(path.codes)


def _numpy(value: Any) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _letters(
    weights: np.ndarray, symbols: str, colours: list[str], smallest: float
) -> tuple[list[GlyphPath], list[str]]:
    """The letter paths of a logo and their colours (positive stacks up, negative down)."""
    paths, faces = [], []
    for site, column in enumerate(weights):
        left = site + 1 - _LETTER_WIDTH / 2
        for sign in (1.0, -1.0):
            # The smallest first, so the largest ends on top (up) or at the bottom (down).
            chosen = sorted(
                (index for index in range(len(column)) if sign * column[index] > smallest),
                key=lambda index: abs(column[index]),
            )
            base = 0.0
            for index in chosen:
                height = abs(float(column[index]))
                vertices, codes = _glyph(symbols[index])
                bottom = base if sign > 0 else -(base + height)
                placed = vertices * np.array([_LETTER_WIDTH, height]) + np.array([left, bottom])
                paths.append(GlyphPath(placed, codes))
                faces.append(colours[index])
                base += height
    return paths, faces


def plot_weight_logo(
    ax: Axes,
    weights: Any,
    symbols: str,
    *,
    alphabet_name: str = "protein",
    title: str | None = None,
    smallest: float | None = None,
    site_labels: bool = True,
) -> Axes:
    """One hidden unit's weights as a logo (module docstring).

    Parameters
    ----------
    ax : Axes
    weights : array or Tensor, shape (L, q)
        ``W_i a j`` of one unit ``j``: site by symbol.
    symbols : str
        The ``q`` symbols (``Alphabet.symbols``).
    alphabet_name : str, default "protein"
        Chooses the colours (:func:`symbol_colours`).
    title : str, optional
    smallest : float, optional
        Letters shorter than this are left out; default 1% of this logo's tallest stack.
    site_labels : bool, default True
        Number the sites (from 1) on the x axis.
    """
    values = _numpy(weights).astype(float)
    require(
        values.ndim == 2 and values.shape[1] == len(symbols),
        f"weights must have shape (L, {len(symbols)}) for the symbols {symbols!r}, got {values.shape}",
    )
    positive = np.clip(values, 0, None).sum(1)
    negative = np.clip(-values, 0, None).sum(1)
    tallest = float(max(positive.max(initial=0.0), negative.max(initial=0.0)))
    if smallest is None:
        smallest = _SMALLEST_LETTER * tallest
    paths, faces = _letters(values, symbols, symbol_colours(symbols, alphabet_name), smallest)
    if paths:
        letters = PathCollection(paths, facecolors=faces, edgecolors="none", linewidths=0)
        letters.set_in_layout(False)  # inside the axes' limits; measuring thousands of paths is slow
        ax.add_collection(letters, autolim=False)
    length = values.shape[0]
    limit = tallest * 1.05 if tallest > 0 else 1.0
    ax.set_xlim(0.4, length + 0.6)
    ax.set_ylim(-limit, limit)
    ax.axhline(0.0, color="#444444", linewidth=0.6)
    if site_labels:
        step = max(1, int(np.ceil(length / 30)))
        ticks = list(range(1, length + 1, step))
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(tick) for tick in ticks], fontsize=7)
    else:
        ax.set_xticks([])
    ax.tick_params(axis="y", labelsize=7)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=9, loc="left")
    return ax


def weight_logos_figure(
    potts_weights: Any,
    symbols: str,
    *,
    alphabet_name: str = "protein",
    units: Any = None,
    max_units: int = 20,
    title: str | None = None,
) -> Figure:
    """Logos of hidden units, one row each, largest weights first.

    Parameters
    ----------
    potts_weights : array or Tensor, shape (L, q, J)
        The weights of every hidden unit (``PottsRBM.potts_weights``).
    symbols : str
    alphabet_name : str, default "protein"
    units : sequence of int, optional
        Which units to draw, in this order; default the ``max_units`` with the largest weight
        norm ``‖W_··j‖``, largest first.
    max_units : int, default 20
    title : str, optional
    """
    weights = _numpy(potts_weights).astype(float)
    require(weights.ndim == 3, f"potts_weights must have shape (L, q, J), got {weights.shape}")
    norms = np.sqrt((weights**2).sum((0, 1)))
    if units is None:
        units = [int(unit) for unit in np.argsort(-norms, kind="stable")[:max_units]]
    else:
        units = [int(unit) for unit in units]
        require(
            all(0 <= unit < weights.shape[2] for unit in units),
            f"units must lie in 0..{weights.shape[2] - 1}, got {units}",
        )
    length = weights.shape[0]
    figure = Figure(
        figsize=(max(6.0, 0.28 * length + 1.0), 1.35 * max(len(units), 1) + 0.6), layout="constrained"
    )
    axes = figure.subplots(max(len(units), 1), 1, squeeze=False)[:, 0]
    for ax, unit in zip(axes, units, strict=False):
        plot_weight_logo(
            ax,
            weights[:, :, unit],
            symbols,
            alphabet_name=alphabet_name,
            title=f"hidden unit {unit}  (‖w‖ = {norms[unit]:.2f})",
        )
    if title:
        figure.suptitle(title, fontsize=10)
    return figure


def _fit_words(fit: StatisticFit, reference: StatisticFit | None) -> str:
    text = f"r = {fit.pearson:.3f}, slope = {fit.slope:.3f}"
    if reference is not None:
        text += f"\nas many data draws: r = {reference.pearson:.3f}"
    return text


def plot_statistic_scatter(
    ax: Axes,
    data_values: Any,
    sample_values: Any,
    fit: StatisticFit,
    *,
    reference: StatisticFit | None = None,
    title: str | None = None,
    xlabel: str = "data",
    ylabel: str = "samples",
) -> Axes:
    """Samples' values of a statistic against the data's, with the diagonal, r and the slope."""
    x = _numpy(data_values).reshape(-1)
    y = _numpy(sample_values).reshape(-1)
    ax.plot(x, y, ".", markersize=1.5, alpha=0.35, color="#1f4fd1", rasterized=True)
    low = float(min(x.min(), y.min()))
    high = float(max(x.max(), y.max()))
    ax.plot([low, high], [low, high], color="#d62828", linewidth=0.8, label="y = x")
    if np.isfinite(fit.slope):
        ax.plot(
            [low, high],
            [fit.slope * low + fit.intercept, fit.slope * high + fit.intercept],
            color="#222222",
            linewidth=0.8,
            linestyle="--",
            label="least squares",
        )
    ax.text(0.03, 0.97, _fit_words(fit, reference), transform=ax.transAxes, va="top", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def generative_check_figure(check: GenerativeCheck, *, title: str | None = None) -> Figure:
    """The generative check as two scatters: frequencies ``f_i(a)`` and connected correlations
    ``C_ij(a, b)`` (i < j) of the samples against the (weighted) alignment's."""
    figure = Figure(figsize=(10.0, 4.6), layout="constrained")
    left, right = figure.subplots(1, 2)
    plot_statistic_scatter(
        left,
        check.data.frequencies,
        check.samples.frequencies,
        check.frequencies,
        reference=check.reference_frequencies,
        title="single-site frequencies f_i(a)",
        xlabel="alignment (weighted)",
    )
    plot_statistic_scatter(
        right,
        check.data.correlations,
        check.samples.correlations,
        check.correlations,
        reference=check.reference_correlations,
        title="connected correlations C_ij(a,b), i < j",
        xlabel="alignment (weighted)",
    )
    subtitle = f"{check.samples.n_sequences:,} samples: {check.sampling}"
    figure.suptitle(f"{title}\n{subtitle}" if title else subtitle, fontsize=9)
    return figure
