"""Mixing plots draw exactly the numbers they are given.

Properties checked: the autocorrelation plot starts every curve at
ρ(0) = 1 and puts each series' τ in its legend; the temperature-trajectory plot draws
``betas[levels[:, chain]]`` for the chosen chains; the occupancy bars are the fraction of
(step, chain) pairs at each level and sum to 1; bad level arrays are refused with a message
naming the argument; every figure renders to PNG.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from scipy.signal import lfilter

from boltzlab.errors import ValidationError
from boltzlab.evaluation import autocorrelation_function, integrated_autocorrelation_time
from boltzlab.plotting import (
    figure_png,
    plot_autocorrelation,
    plot_level_occupancy,
    plot_temperature_trajectories,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _axes() -> tuple[Figure, object]:
    figure = Figure(figsize=(4, 3))
    return figure, figure.add_subplot()


def test_autocorrelation_plot_curves_and_legend() -> None:
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((400, 3))
    correlated = lfilter([1.0], [1.0, -0.8], rng.standard_normal((400, 3)), axis=0)  # AR(1), τ = 9
    figure, ax = _axes()
    plot_autocorrelation(ax, {"white": noise, "correlated": torch.as_tensor(correlated)}, max_lag=25)
    curves = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
    assert len(curves) == 2
    for line in curves:
        assert line.get_ydata()[0] == pytest.approx(1.0)
        np.testing.assert_array_equal(line.get_xdata(), np.arange(26))
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    tau = integrated_autocorrelation_time(noise, warn=False).tau
    assert labels[0] == f"white (τ = {tau:.3g})" and labels[1].startswith("correlated (τ = ")
    assert figure_png(figure).startswith(PNG_MAGIC)
    # A single unnamed series, default lag range: three Sokal windows, at least 10 lags, at
    # most n_steps − 1; the curve is the series' autocorrelation function.
    _, single_ax = _axes()
    plot_autocorrelation(single_ax, noise[:, 0], label="energy")
    (curve,) = [line for line in single_ax.get_lines() if len(line.get_xdata()) > 2]
    window = integrated_autocorrelation_time(noise[:, 0], warn=False).window
    max_lag = min(399, max(10, 3 * window))
    np.testing.assert_array_equal(curve.get_xdata(), np.arange(max_lag + 1))
    np.testing.assert_allclose(curve.get_ydata(), autocorrelation_function(noise[:, 0], max_lag=max_lag))
    assert single_ax.get_legend().get_texts()[0].get_text().startswith("energy")


LEVELS = np.array([[0, 2, 1], [1, 2, 1], [2, 1, 1], [2, 0, 1], [1, 0, 0]])
BETAS = np.array([0.2, 0.6, 1.0])


def test_temperature_trajectories_follow_levels() -> None:
    figure, ax = _axes()
    plot_temperature_trajectories(ax, torch.as_tensor(LEVELS), BETAS, chains=[2, 0])
    lines = ax.get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[0].get_ydata(), BETAS[LEVELS[:, 2]])
    np.testing.assert_allclose(lines[1].get_ydata(), BETAS[LEVELS[:, 0]])
    np.testing.assert_array_equal(lines[0].get_xdata(), np.arange(5))
    assert figure_png(figure).startswith(PNG_MAGIC)
    _, default_ax = _axes()
    plot_temperature_trajectories(default_ax, LEVELS, BETAS, max_chains=2)
    assert len(default_ax.get_lines()) == 2


def test_level_occupancy_bars() -> None:
    figure, ax = _axes()
    plot_level_occupancy(ax, LEVELS, BETAS)
    heights = [patch.get_height() for patch in ax.patches]
    # Level 0 appears 4 times, level 1 seven times, level 2 four times in 15 (step, chain) pairs.
    np.testing.assert_allclose(heights, [4 / 15, 7 / 15, 4 / 15])
    (uniform,) = ax.get_lines()
    assert uniform.get_ydata()[0] == pytest.approx(1 / 3)
    assert figure_png(figure).startswith(PNG_MAGIC)


@pytest.mark.parametrize(
    ("levels", "betas", "message"),
    [
        (np.array([[0, 3]]), BETAS, "levels must be indices"),
        (np.array([[0.0, 1.0]]), BETAS, "integer"),
        (np.zeros((2, 2, 2), dtype=int), BETAS, "levels must have shape"),
        (LEVELS, np.zeros((3, 1)), "betas must have shape"),
    ],
)
def test_level_plots_validate(levels: np.ndarray, betas: np.ndarray, message: str) -> None:
    _, ax = _axes()
    with pytest.raises(ValidationError, match=message):
        plot_level_occupancy(ax, levels, betas)
    with pytest.raises(ValidationError, match=message):
        plot_temperature_trajectories(ax, levels, betas)
