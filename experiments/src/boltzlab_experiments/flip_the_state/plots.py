"""Figures of the flip-the-state study (Brügge, Fischer & Igel 2013).

* :func:`plot_slem_fraction` and :func:`slem_figure` — the fraction of random RBMs on which
  flip-the-state has a smaller SLEM than Gibbs against the weight scale ``c``, one curve per
  size (Fig. 3, upper);
* :func:`learning_figure` — exact log-likelihood curves per algorithm with Gibbs and flip
  (mean ± one standard error over seeds);
* :func:`mixing_figure` — the autocorrelation of the energy under each operator.

Built without ``pyplot``; save with :func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from boltzlab.validation import require
from boltzlab_experiments.flip_the_state.learning import LearningResult
from boltzlab_experiments.flip_the_state.mixing import MixingResult
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult

__all__ = ["learning_figure", "mixing_figure", "plot_slem_fraction", "slem_figure"]


def plot_slem_fraction(ax: Axes, result: SlemStudyResult, *, title: str | None = None) -> Axes:
    """Fraction of models with ``SLEM(operator) < SLEM(reference)`` against the weight scale.

    One curve per RBM size, with binomial standard-error bars.

    Parameters
    ----------
    ax : Axes
    result : SlemStudyResult
        From :func:`~boltzlab_experiments.flip_the_state.slem.slem_study`.
    title : str, optional
        Default: ``"SLEM(flip) < SLEM(gibbs), N models per point"``.
    """
    require(
        isinstance(result, SlemStudyResult), f"result must be a SlemStudyResult, got {type(result).__name__}"
    )
    fraction = result.fraction.numpy()
    stderr = result.fraction_stderr.numpy()
    for size_index, (n_visible, n_hidden) in enumerate(result.sizes):
        ax.errorbar(
            np.asarray(result.scales, dtype=np.float64),
            fraction[size_index],
            yerr=stderr[size_index],
            marker="o",
            markersize=3.5,
            capsize=2.5,
            linewidth=1.2,
            label=f"{n_visible}×{n_hidden}",
        )
    ax.set_xlabel("weight scale c  (W ~ U[−c, c], biases 0)")
    ax.set_ylabel(f"fraction with SLEM({result.operator}) < SLEM({result.reference})")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(title="RBM size")
    ax.set_title(
        title
        if title is not None
        else f"SLEM({result.operator}) < SLEM({result.reference}), {result.n_models} models per point"
    )
    return ax


def slem_figure(result: SlemStudyResult) -> Figure:
    """The SLEM fraction against the weight scale, one curve per RBM size."""
    figure = Figure(figsize=(6.0, 4.2), layout="constrained")
    plot_slem_fraction(figure.subplots(), result)
    return figure


def learning_figure(result: LearningResult, dataset: str) -> Figure:
    """Exact log-likelihood against updates on ``dataset``: columns are algorithms, rows learning
    rates; one line per operator, the mean over seeds with a band of ± one standard error."""
    runs = result.select(dataset=dataset)
    require(len(runs) > 0, f"no learning runs on dataset {dataset!r}")
    rates = list(dict.fromkeys(run.learning_rate for run in runs))
    algorithms = list(dict.fromkeys(run.algorithm for run in runs))
    operators = list(dict.fromkeys(run.operator for run in runs))
    figure = Figure(figsize=(4.2 * len(algorithms), 3.4 * len(rates)), layout="constrained")
    grid = figure.subplots(len(rates), len(algorithms), squeeze=False, sharey="row")
    for row, rate in enumerate(rates):
        for column, algorithm in enumerate(algorithms):
            ax = grid[row][column]
            for operator in operators:
                chosen = result.select(
                    dataset=dataset, learning_rate=rate, algorithm=algorithm, operator=operator
                )
                curves = np.stack([run.log_likelihood.numpy() for run in chosen])
                mean = curves.mean(0)
                stderr = (
                    curves.std(0, ddof=1) / math.sqrt(len(chosen)) if len(chosen) > 1 else np.zeros_like(mean)
                )
                updates = chosen[0].updates.numpy()
                ax.plot(updates, mean, linewidth=1.4, label=f"{operator} ({len(chosen)} seeds)")
                ax.fill_between(updates, mean - stderr, mean + stderr, alpha=0.25)
            ax.set_title(f"{algorithm}, learning rate {rate:g}", fontsize="medium")
            ax.set_xlabel("update")
            ax.grid(alpha=0.3)
            if column == 0:
                ax.set_ylabel("exact log-likelihood (nats)")
            ax.legend(fontsize="small")
    figure.suptitle(f"{dataset}: mean ± one standard error over seeds")
    return figure


def mixing_figure(result: MixingResult, *, max_models: int = 4) -> Figure:
    """Autocorrelation of the energy under each operator, one panel per model (at most ``max_models``)."""
    n_models = min(max_models, result.tau.shape[0])
    figure = Figure(figsize=(4.2 * n_models, 3.4), layout="constrained")
    axes = figure.subplots(1, n_models, squeeze=False, sharey=True)[0]
    for model, ax in enumerate(axes):
        for index, operator in enumerate(result.operators):
            acf = result.autocorrelation[model, index].numpy()
            shown = acf[np.isfinite(acf)]
            taus = ", ".join(
                f"τ_{method} {float(result.tau[model, index, m]):.3g}"
                for m, method in enumerate(result.methods)
            )
            ax.plot(np.arange(shown.size), shown, linewidth=1.3, label=f"{operator} ({taus})")
        ax.axhline(0.0, color="0.5", linewidth=0.8)
        ax.set_xlabel("lag (sweeps)")
        name = result.model_name(model) if result.model_names else f"model {model}"
        ax.set_title(f"{name}, mean |W| {float(result.weight_scale[model]):.2f}", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("autocorrelation of the energy")
    sizes = "×".join(str(size) for size in result.layer_sizes)
    figure.suptitle(f"RBMs {sizes}: {result.n_chains} chains × {result.n_steps} sweeps per operator")
    return figure
