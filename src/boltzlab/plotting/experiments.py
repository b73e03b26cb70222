"""Figures of the reproduced experiments and of tempered samplers' temperatures.

* :func:`two_node_figure` — the CAST paper's two-node demonstration (Salakhutdinov 2010, §3):
  running occupancy of the four states under Gibbs, FPCD and Wang-Landau, one panel each.
* :func:`slem_figure`, :func:`learning_figure`, :func:`mixing_figure` — the flip-the-state
  study (Brügge, Fischer & Igel 2013): the SLEM fraction against the weight scale (Fig. 3,
  upper), exact log-likelihood curves per algorithm with Gibbs and flip (mean ± one standard
  error over seeds), and the autocorrelation of the energy under each operator.
* :func:`tempered_sampler_figure` — where a tempered sampler's chains went: temperature
  trajectories and level occupancy for simulated tempering, adaptive ST and CAST; swap
  acceptance per neighbour pair for parallel tempering (whose summary has no per-replica
  trajectories); acceptance per chain for tempered transitions.

Figures are built without ``pyplot``; save them with :func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from boltzlab.errors import ValidationError
from boltzlab.evaluation.slem_study import SlemStudyResult
from boltzlab.experiments.flip_the_state import LearningResult, MixingResult
from boltzlab.experiments.two_node import TwoNodeResult, state_labels
from boltzlab.plotting.diagnostics import (
    plot_level_occupancy,
    plot_slem_fraction,
    plot_temperature_trajectories,
)
from boltzlab.tempering.cast import CASTSummary
from boltzlab.tempering.parallel import ParallelTemperingSummary
from boltzlab.tempering.simulated import SimulatedTemperingSummary
from boltzlab.tempering.transitions import TemperedTransitionsSummary
from boltzlab.validation import require

__all__ = [
    "learning_figure",
    "mixing_figure",
    "slem_figure",
    "tempered_sampler_figure",
    "two_node_figure",
]

_SAMPLER_TITLES = {"gibbs": "Gibbs", "fpcd": "FPCD", "wang-landau": "Wang-Landau"}


def two_node_figure(result: TwoNodeResult) -> Figure:
    """Running occupancy of the four states against the step, one panel per sampler.

    The dashed line is 1/4, what a sampler that visits the states equally would reach.
    """
    require(isinstance(result, TwoNodeResult), f"result must be a TwoNodeResult, got {type(result).__name__}")
    labels = state_labels()
    figure = Figure(figsize=(4.0 * len(result.runs), 3.6), layout="constrained")
    axes = figure.subplots(1, len(result.runs), sharey=True, squeeze=False)[0]
    steps = np.arange(1, result.n_steps + 1)
    for ax, run in zip(axes, result.runs, strict=True):
        occupancy = run.running_occupancy.numpy()
        for state, label in enumerate(labels):
            ax.plot(steps, occupancy[:, state], linewidth=1.4, label=label)
        ax.axhline(0.25, color="0.5", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        final = run.occupancy()
        ax.set_title(
            f"{_SAMPLER_TITLES.get(run.sampler, run.sampler)}: most visited {labels[int(final.argmax())]} "
            f"{float(final.max()):.0%}",
            fontsize="medium",
        )
    axes[0].set_ylabel("fraction of steps so far")
    axes[-1].legend(title="state (x₁, x₂)", fontsize="small")
    figure.suptitle(
        f"Two-node MRF, φ = ±{result.coupling:g}, start (−1,−1), data (1,1); η = {result.learning_rate:g}"
    )
    return figure


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
        ax.set_title(f"model {model}, mean |W| {float(result.weight_scale[model]):.2f}", fontsize="medium")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("autocorrelation of the energy")
    sizes = "×".join(str(size) for size in result.layer_sizes)
    figure.suptitle(f"RBMs {sizes}: {result.n_chains} chains × {result.n_steps} sweeps per operator")
    return figure


def tempered_sampler_figure(summary: Any, *, title: str | None = None, max_chains: int = 4) -> Figure:
    """Where a tempered sampler's chains spent their time (module docstring).

    Parameters
    ----------
    summary : SimulatedTemperingSummary, CASTSummary, ParallelTemperingSummary or TemperedTransitionsSummary
        ``SampleResult.info.summary`` of ``boltzlab.sample(..., sampler="st" | "ast" | "cast" | "pt" | "tt")``.
    title : str, optional
    max_chains : int, default 4
        Trajectories drawn.
    """
    figure = Figure(figsize=(10.0, 3.8), layout="constrained")
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1.0]})
    if isinstance(summary, CASTSummary):
        summary = summary.fast
    if isinstance(summary, SimulatedTemperingSummary):
        plot_temperature_trajectories(left, summary.trajectories, summary.betas, max_chains=max_chains)
        plot_level_occupancy(right, summary.trajectories, summary.betas)
    elif isinstance(summary, ParallelTemperingSummary):
        betas = summary.betas.numpy()
        pairs = np.arange(betas.size - 1)
        left.bar(pairs, summary.swap_acceptance.numpy(), color="C0", alpha=0.8)
        step = max(1, pairs.size // 8)
        left.set_xticks(
            pairs[::step],
            [f"{betas[k]:.2f}–{betas[k + 1]:.2f}" for k in pairs[::step]],
            fontsize="small",
            rotation=35,
            ha="right",
        )
        left.set_xlabel("neighbour pair (β_k – β_k+1)")
        left.set_ylabel("swap acceptance")
        left.set_ylim(0.0, 1.02)
        left.set_title(f"swap acceptance per pair; {summary.total_round_trips} round trips")
        right.plot(betas, summary.flip_rate_per_level.numpy(), marker="o", markersize=3)
        right.set_xlabel("inverse temperature β")
        right.set_ylabel("fraction of units changed per sweep")
        right.set_title("flip rate per level")
        right.grid(alpha=0.3)
    elif isinstance(summary, TemperedTransitionsSummary):
        acceptance = summary.acceptance_per_chain.numpy()
        left.bar(np.arange(acceptance.size), acceptance, color="C0", alpha=0.8)
        left.set_xlabel("chain")
        left.set_ylabel("fraction of moves accepted")
        left.set_title(f"tempered-transition acceptance, overall {summary.acceptance_rate:.1%}")
        betas = summary.betas.numpy()
        # Heating sweeps at β_{K−2} … β_0, cooling sweeps at β_0 … β_{K−2}, then the plain sweeps at 1.
        n_plain = summary.sweeps_per_step - 2 * (betas.size - 1)
        path = np.concatenate([betas[-2::-1], betas[:-1], np.ones(n_plain)])
        right.plot(np.arange(1, path.size + 1), path, marker="o", markersize=3)
        right.set_xlabel("sweep within one move")
        right.set_ylabel("inverse temperature β")
        right.set_title(f"one move: {summary.sweeps_per_step} sweeps")
        right.grid(alpha=0.3)
    else:
        raise ValidationError(
            "summary must be the summary of a pt, st, ast, cast or tt run, got a " + type(summary).__name__
        )
    if title:
        figure.suptitle(title)
    return figure
