"""The SLEM-fraction plot draws exactly the study's numbers: one curve per size whose points are
the fractions, with binomial error bars; anything but a SlemStudyResult is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from boltzlab.errors import ValidationError
from boltzlab.plotting import figure_png
from boltzlab_experiments.flip_the_state.plots import plot_slem_fraction
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _axes() -> tuple[Figure, object]:
    figure = Figure(figsize=(4, 3))
    return figure, figure.add_subplot()


def _study() -> SlemStudyResult:
    # 2 sizes × 3 scales × 4 models with chosen SLEMs: flip smaller in 0, 2 and 3 of 4 models
    # (2×2) and in 1, 1 and 4 of 4 (3×3).
    smaller = torch.tensor([[0, 2, 3], [1, 1, 4]])
    models = torch.arange(4)
    slem_reference = torch.full((2, 3, 4), 0.5, dtype=torch.float64)
    slem_operator = torch.where(models[None, None, :] < smaller[:, :, None], 0.25, 0.75).to(torch.float64)
    return SlemStudyResult(
        sizes=((2, 2), (3, 3)),
        scales=(1.0, 3.0, 10.0),
        n_models=4,
        operator="flip",
        reference="gibbs",
        slem_operator=slem_operator,
        slem_reference=slem_reference,
    )


def test_slem_fraction_plot_draws_the_fractions() -> None:
    figure, ax = _axes()
    result = _study()
    plot_slem_fraction(ax, result)
    containers = ax.containers  # one ErrorbarContainer per size: (data line, caps, bars)
    assert len(containers) == 2 and all(container.has_yerr for container in containers)
    lines = [container.lines[0] for container in containers]
    np.testing.assert_allclose(lines[0].get_xdata(), [1.0, 3.0, 10.0])
    np.testing.assert_allclose(lines[0].get_ydata(), [0.0, 0.5, 0.75])
    np.testing.assert_allclose(lines[1].get_ydata(), [0.25, 0.25, 1.0])
    np.testing.assert_allclose(result.fraction_stderr[0].numpy(), np.sqrt([0.0, 0.25, 0.1875]) / 2)
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["2×2", "3×3"]
    assert "flip" in ax.get_ylabel() and "gibbs" in ax.get_ylabel()
    assert figure_png(figure).startswith(PNG_MAGIC)
    with pytest.raises(ValidationError, match="SlemStudyResult"):
        plot_slem_fraction(ax, {"fraction": [0.1]})
