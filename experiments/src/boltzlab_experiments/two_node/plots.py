"""The figure of the CAST paper's two-node demonstration (Salakhutdinov 2010, §3).

:func:`two_node_figure` draws the running occupancy of the four states under Gibbs, FPCD and
Wang-Landau, one panel each. Built without ``pyplot``; save it with
:func:`boltzlab.plotting.save_figure`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from boltzlab.validation import require
from boltzlab_experiments.two_node.run import TwoNodeResult, state_labels

__all__ = ["two_node_figure"]

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
