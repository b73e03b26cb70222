"""Figures of the estimator-accuracy benchmarks (:mod:`boltzlab_experiments.accuracy`).

* :func:`rts_vs_ais_figure` — Carlson et al. (2016), Fig. 3: RMSE and bias of RTS, AIS and
  RAISE against Gibbs sweeps per chain.
* :func:`estimators_vs_k_figure` — the same paper's Fig. 4: RMSE and bias of RTS, TS, TI,
  TI-RB and MBAR against the number of temperatures K.
* :func:`varopt_figure` — Kiwaki (2015), Table 1 as plots: the schedules, the error of
  log Ẑ and the ESS of every schedule against K, one row per trained RBM.

Built without ``pyplot``; save with :func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from boltzlab.validation import require
from boltzlab_experiments.accuracy.estimators_vs_k import EstimatorsVsKResult
from boltzlab_experiments.accuracy.rts_vs_ais import RTSvsAISResult
from boltzlab_experiments.accuracy.table import EstimateTable
from boltzlab_experiments.accuracy.varopt import VaroptResult, schedule_label

__all__ = ["estimators_vs_k_figure", "plot_bias", "plot_rmse", "rts_vs_ais_figure", "varopt_figure"]

_LABELS = {
    "rts": "RTS",
    "ts": "TS",
    "ti": "TI",
    "ti-rb": "TI-RB",
    "mbar": "MBAR",
    "ais": "AIS",
    "raise": "RAISE",
}
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _x_values(table: EstimateTable, method: int, per_chain_cost: np.ndarray | None) -> np.ndarray:
    if per_chain_cost is None:
        return np.asarray(table.settings, dtype=float)
    return per_chain_cost[method]


def plot_rmse(
    axes: Axes, table: EstimateTable, *, per_chain_cost: np.ndarray | None = None, xlabel: str = ""
) -> Axes:
    """RMSE against the exact (or reference) log Z (± 2 s.e.) of every method, log-log.

    ``per_chain_cost`` (shape (n_methods, n_settings)) places each point at the sweeps it
    actually spent instead of at its nominal setting.
    """
    rmse, stderr = table.rmse().numpy(), table.rmse_stderr().numpy()
    for m, method in enumerate(table.methods):
        x = _x_values(table, m, per_chain_cost)
        error = np.nan_to_num(2 * stderr[m], nan=0.0)
        axes.errorbar(
            x, rmse[m], yerr=np.minimum(error, rmse[m] * 0.999), marker=_MARKERS[m % len(_MARKERS)],
            capsize=3, label=_LABELS.get(method, method),
        )  # fmt: skip
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(f"RMSE of log Ẑ vs {table.reference_word} (nats)")
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize="small")
    return axes


def plot_bias(
    axes: Axes, table: EstimateTable, *, per_chain_cost: np.ndarray | None = None, xlabel: str = ""
) -> Axes:
    """Mean error ``log Ẑ − log Z`` (± 2 s.e.) of every method; x on a log scale.

    Against a reference, a grey band of ± 2 of its s.e. around zero shows how far the zero line
    itself is uncertain.
    """
    bias, stderr = table.bias().numpy(), table.bias_stderr().numpy()
    for m, method in enumerate(table.methods):
        x = _x_values(table, m, per_chain_cost)
        axes.errorbar(
            x, bias[m], yerr=np.nan_to_num(2 * stderr[m], nan=0.0), marker=_MARKERS[m % len(_MARKERS)],
            capsize=3, label=_LABELS.get(method, method),
        )  # fmt: skip
    axes.axhline(0.0, color="k", linewidth=0.8)
    if not table.is_exact:
        band = 2.0 * table.reference_se
        axes.axhspan(-band, band, color="0.85", zorder=0, label="reference ± 2 s.e.")
    axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    log_z = "log Z" if table.is_exact else "log Z_ref"
    axes.set_ylabel(f"bias: mean(log Ẑ) − {log_z} (nats)")
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize="small")
    return axes


def rts_vs_ais_figure(result: RTSvsAISResult) -> Figure:
    """Left: RMSE; right: bias; both against the Gibbs sweeps per chain actually spent."""
    require(
        isinstance(result, RTSvsAISResult), f"result must be an RTSvsAISResult, got {type(result).__name__}"
    )
    table, config = result.table, result.config
    chains = np.array(
        [config.n_chains, config.n_chains, config.raise_examples * config.raise_chains], dtype=float
    )
    per_chain = table.mean_cost().numpy() / chains[:, None]
    figure = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    label = "Gibbs sweeps per chain"
    plot_rmse(left, table, per_chain_cost=per_chain, xlabel=label)
    plot_bias(right, table, per_chain_cost=per_chain, xlabel=label)
    figure.suptitle(
        f"RTS (K = {config.rts_levels}, {config.rts_ladder} ladder) vs AIS and RAISE ({config.schedule} schedule) "
        f"on the {result.model_label} RBM, {table.reference_label()}; {config.n_chains} chains, "
        f"{table.n_repeats} repeats ({config.label}); bars ± 2 s.e.",
        fontsize="medium",
    )
    return figure


def estimators_vs_k_figure(result: EstimatorsVsKResult) -> Figure:
    """Left: RMSE; right: bias; both against the number of temperatures K."""
    require(
        isinstance(result, EstimatorsVsKResult),
        f"result must be an EstimatorsVsKResult, got {type(result).__name__}",
    )
    table, config = result.table, result.config
    figure = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = figure.subplots(1, 2)
    plot_rmse(left, table, xlabel="number of temperatures K")
    plot_bias(right, table, xlabel="number of temperatures K")
    figure.suptitle(
        f"Estimators from the same tempered samples ({config.ladder} ladder) on the {result.model_label} RBM "
        f"({table.reference_label()}): {config.n_chains} chains × {config.n_sweeps} long-run sweeps, "
        f"{table.n_repeats} repeats ({config.label}); bars ± 2 s.e.",
        fontsize="medium",
    )
    return figure


def varopt_figure(result: VaroptResult) -> Figure:
    """One row per RBM: the schedules at the smallest K, the error of log Ẑ, and the ESS against K."""
    require(isinstance(result, VaroptResult), f"result must be a VaroptResult, got {type(result).__name__}")
    n_models = len(result.model_names)
    figure = Figure(figsize=(14.0, 3.6 * n_models), layout="constrained")
    axes = figure.subplots(n_models, 3, squeeze=False)
    temperatures = np.asarray(result.config.temperatures, dtype=float)
    error, ess, ess_stderr = (
        result.mean_error().numpy(),
        result.mean_ess().numpy(),
        result.ess_stderr().numpy(),
    )
    for m, label in enumerate(result.model_labels):
        shapes, errors, sizes = axes[m]
        for s, name in enumerate(result.schedules):
            style = {"marker": _MARKERS[s % len(_MARKERS)], "label": schedule_label(name)}
            betas = result.betas[m][s].numpy()
            shapes.plot(np.linspace(0.0, 1.0, betas.size), betas, label=schedule_label(name))
            errors.plot(temperatures, error[m, s], **style)
            sizes.errorbar(
                temperatures, ess[m, s], yerr=np.nan_to_num(2 * ess_stderr[m, s], nan=0.0), capsize=3, **style
            )
        shapes.set_title(f"{label}: schedules at K = {result.config.temperatures[0]:,}", fontsize="medium")
        shapes.set_xlabel("k / K")
        shapes.set_ylabel("β_k")
        errors.axhline(0.0, color="k", linewidth=0.8)
        errors.set_title(f"{label}: log Ẑ − exact ({float(result.exact_log_z[m]):.3f})", fontsize="medium")
        errors.set_ylabel("mean error (nats)")
        sizes.set_title(f"{label}: Kish ESS of {result.config.n_chains} chains (± 2 s.e.)", fontsize="medium")
        sizes.set_ylabel("ESS")
        for ax in (errors, sizes):
            ax.set_xscale("log")
            ax.set_xlabel("number of temperatures K")
        for ax in (shapes, errors, sizes):
            ax.grid(alpha=0.3)
        sizes.legend(fontsize="x-small")
    figure.suptitle(
        f"AIS schedules (Kiwaki 2015, Table 1), {result.config.label}: M = {result.config.n_chains} chains, "
        f"{result.ess.shape[3]} run(s) per point",
        fontsize="medium",
    )
    return figure
