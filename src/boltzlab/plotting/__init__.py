"""Plots of states, chains and training runs: functions that take results and an ``Axes``.

The ``*_figure`` functions build the standard figures the command line writes, and
:func:`save_figure` writes one as a PNG atomically. Nothing here uses ``pyplot``.
"""

from boltzlab.plotting.diagnostics import (
    plot_autocorrelation,
    plot_level_occupancy,
    plot_temperature_trajectories,
)
from boltzlab.plotting.figures import (
    chain_strip_figure,
    figure_png,
    samples_figure,
    save_figure,
    training_figure,
)
from boltzlab.plotting.samples import image_grid, plot_chain_strip, plot_samples
from boltzlab.plotting.tempering import tempered_sampler_figure
from boltzlab.plotting.training import (
    has_log_likelihood,
    plot_log_likelihood,
    plot_reconstruction_error,
    records_of,
)

__all__ = [
    "chain_strip_figure",
    "figure_png",
    "has_log_likelihood",
    "image_grid",
    "plot_autocorrelation",
    "plot_chain_strip",
    "plot_level_occupancy",
    "plot_log_likelihood",
    "plot_reconstruction_error",
    "plot_samples",
    "plot_temperature_trajectories",
    "records_of",
    "samples_figure",
    "save_figure",
    "tempered_sampler_figure",
    "training_figure",
]
