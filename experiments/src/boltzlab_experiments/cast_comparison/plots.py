"""Figures of the CAST comparison (Salakhutdinov 2010, Fig. 5 and Fig. 4; docs/algorithms.md §3.4).

* :func:`plot_bound_curves` — the training-set variational lower bound against updates, one
  line per algorithm, with AIS's ``log Z`` standard error as a band (the paper's Fig. 5);
* :func:`plot_fast_chain_temperature` — the inverse temperature of one CAST fast chain during
  learning (the paper's Fig. 4 shows such a systematic sweep through the ladder);
* :func:`bound_curve_figure`, :func:`samples_comparison_figure` and
  :func:`temperature_figure` — the standard figures ``boltzlab reproduce cast`` writes.

Takes :class:`~boltzlab_experiments.cast_comparison.run.CASTComparisonResult`; no ``pyplot``.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from boltzlab.plotting.samples import plot_chain_strip
from boltzlab_experiments.cast_comparison.config import PAPER_TEST_BOUNDS
from boltzlab_experiments.cast_comparison.run import CASTComparisonResult

__all__ = [
    "bound_curve_figure",
    "plot_bound_curves",
    "plot_fast_chain_temperature",
    "samples_comparison_figure",
    "temperature_figure",
]

_LABELS = {"sap": "SAP", "fpcd": "FPCD", "cast": "CAST"}


def plot_bound_curves(ax: Axes, result: CASTComparisonResult, *, show_paper: bool = False) -> None:
    """Training bound (nats per example) against updates, ±1 AIS standard error of ``log Z``.

    ``show_paper`` adds the paper's final test bounds as dotted lines (meaningful only at the
    paper's size, :meth:`~boltzlab_experiments.cast_comparison.config.CASTComparisonConfig.full`).
    """
    for run in result.runs:
        updates = run.updates.numpy()
        bounds = run.train_bounds.numpy()
        spread = run.log_z_stderr.numpy()
        (line,) = ax.plot(
            updates, bounds, marker="o", markersize=3, label=_LABELS.get(run.algorithm, run.algorithm)
        )
        ax.fill_between(updates, bounds - spread, bounds + spread, color=line.get_color(), alpha=0.2)
        if show_paper and run.algorithm in PAPER_TEST_BOUNDS:
            ax.axhline(PAPER_TEST_BOUNDS[run.algorithm], color=line.get_color(), linestyle=":", linewidth=1)
    ax.set_xlabel("parameter updates")
    ax.set_ylabel("lower bound on log p(v), nats (train)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)


def plot_fast_chain_temperature(ax: Axes, result: CASTComparisonResult) -> None:
    """β of CAST's first fast chain after every update (nothing drawn without a CAST run)."""
    betas = result.fast_chain_betas.numpy()
    if betas.size == 0:
        ax.text(0.5, 0.5, "no CAST run", ha="center", va="center", transform=ax.transAxes)
        return
    ax.plot(range(1, betas.size + 1), betas, linewidth=0.8, drawstyle="steps-post")
    ax.set_xlabel("parameter updates")
    ax.set_ylabel("inverse temperature β")
    ax.set_title("one CAST fast chain during learning")
    ax.grid(alpha=0.3)


def bound_curve_figure(result: CASTComparisonResult, *, title: str | None = None) -> Figure:
    """:func:`plot_bound_curves` on its own figure."""
    figure = Figure(figsize=(7.0, 4.5), layout="constrained")
    ax = figure.subplots()
    plot_bound_curves(ax, result, show_paper=result.config.layer_sizes == (784, 500, 1000))
    if title is not None:
        ax.set_title(title)
    return figure


def temperature_figure(result: CASTComparisonResult) -> Figure:
    """:func:`plot_fast_chain_temperature` on its own figure."""
    figure = Figure(figsize=(8.0, 3.2), layout="constrained")
    plot_fast_chain_temperature(figure.subplots(), result)
    return figure


def samples_comparison_figure(
    result: CASTComparisonResult, *, image_shape: tuple[int, int] | None = None
) -> Figure:
    """Gibbs (left) and adaptive-ST (right) chains of the same model: rows are chains, time runs
    left to right."""
    figure = Figure(figsize=(12.0, 5.0), layout="constrained")
    left, right = figure.subplots(1, 2)
    n_chains = int(result.gibbs_samples.shape[1]) if result.gibbs_samples.dim() == 3 else 1
    every = result.config.sample_keep_every
    label = _LABELS.get(result.sampled_algorithm, result.sampled_algorithm)
    plot_chain_strip(
        left,
        result.gibbs_samples,
        image_shape=image_shape,
        n_chains=n_chains,
        title=f"Gibbs sweeps ({label} model), every {every} sweeps",
    )
    plot_chain_strip(
        right,
        result.tempered_samples,
        image_shape=image_shape,
        n_chains=n_chains,
        title=f"adaptive ST, β = 1 chains, acceptance {result.tempered_acceptance:.0%}",
    )
    return figure
