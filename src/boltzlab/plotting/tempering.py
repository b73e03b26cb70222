"""Where a tempered sampler's chains went: the figure ``boltzlab sample`` writes beside its samples.

:func:`tempered_sampler_figure` draws temperature trajectories and level occupancy for
simulated tempering, adaptive ST and CAST; swap acceptance per neighbour pair for parallel
tempering (whose summary has no per-replica trajectories); acceptance per chain for tempered
transitions. Built without ``pyplot``; save it with :func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from boltzlab.errors import ValidationError
from boltzlab.plotting.diagnostics import plot_level_occupancy, plot_temperature_trajectories
from boltzlab.tempering.cast import CASTSummary
from boltzlab.tempering.level_summary import SimulatedTemperingSummary
from boltzlab.tempering.parallel import ParallelTemperingSummary
from boltzlab.tempering.ptt_state import TrajectoryTemperingSummary
from boltzlab.tempering.transitions import TemperedTransitionsSummary

__all__ = ["tempered_sampler_figure"]


def tempered_sampler_figure(summary: Any, *, title: str | None = None, max_chains: int = 4) -> Figure:
    """Where a tempered sampler's chains spent their time (module docstring).

    Parameters
    ----------
    summary : SimulatedTemperingSummary, CASTSummary, ParallelTemperingSummary, TrajectoryTemperingSummary or TemperedTransitionsSummary
        ``SampleResult.info.summary`` of ``boltzlab.sample(..., sampler="st" | "ast" | "cast" | "pt" | "ptt" | "tt")``.
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
    elif isinstance(summary, TrajectoryTemperingSummary):
        _trajectory_panels(left, right, summary)
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
            "summary must be the summary of a pt, ptt, st, ast, cast or tt run, got a "
            + type(summary).__name__
        )
    if title:
        figure.suptitle(title)
    return figure


def _trajectory_panels(left: Any, right: Any, summary: TrajectoryTemperingSummary) -> None:
    """PTT (levels are training snapshots): swap acceptance per pair and flip rate per level."""
    labels = [("model" if np.isnan(u) else f"{u:.0f}") for u in summary.updates.numpy()]
    pairs = np.arange(len(labels) - 1)
    left.bar(pairs, summary.swap_acceptance.cpu().numpy(), color="C0", alpha=0.8)
    step = max(1, pairs.size // 8)
    ticks = [f"{labels[k]}–{labels[k + 1]}" for k in pairs[::step]]
    left.set_xticks(pairs[::step], ticks, fontsize="small", rotation=35, ha="right")
    left.set_xlabel("neighbour pair (training updates)")
    left.set_ylabel("swap acceptance")
    left.set_ylim(0.0, 1.02)
    left.set_title(f"swap acceptance per pair; {summary.total_round_trips} round trips")
    right.plot(np.arange(len(labels)), summary.flip_rate_per_level.cpu().numpy(), marker="o", markersize=3)
    right.set_xlabel("level (snapshot index, the model last)")
    right.set_ylabel("fraction of units changed per sweep")
    right.set_title("flip rate per level")
    right.grid(alpha=0.3)
