"""Plots: the image-grid arithmetic, and figures that come out as PNG files.

Properties checked: ``image_grid`` puts each state in its cell with ``padding`` grey pixels
around every cell (so its shape is ``rows·(h + p) + p`` by ``columns·(w + p) + p``) and picks
a square image or a row; the training figure draws from a history where the log-likelihood
was tracked only sometimes, or never; every figure is written as a PNG atomically (no
temporary file left beside it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from boltzlab.plotting import (
    chain_strip_figure,
    figure_png,
    has_log_likelihood,
    image_grid,
    samples_figure,
    save_figure,
    training_figure,
)
from boltzlab.training import TrainRecord

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _states(n: int, n_visible: int, seed: int = 0) -> torch.Tensor:
    return (torch.rand(n, n_visible, generator=torch.Generator().manual_seed(seed)) < 0.5).float()


def test_image_grid_shape_and_padding() -> None:
    # 5 states of 2×3 images in 2 columns: 3 rows; every cell framed by 1 pixel of grey.
    states = _states(5, 6)
    grid = image_grid(states, image_shape=(2, 3), n_columns=2, padding=1)
    assert grid.shape == (3 * (2 + 1) + 1, 2 * (3 + 1) + 1)
    for index in range(5):
        row, column = divmod(index, 2)
        top, left = 1 + row * 3, 1 + column * 4
        np.testing.assert_array_equal(grid[top : top + 2, left : left + 3], states[index].view(2, 3).numpy())
    assert np.all(grid[0, :] == 0.5) and np.all(grid[:, 0] == 0.5)
    assert np.all(grid[-3:-1, 5:8] == 0.5)  # the sixth cell is empty: grey
    assert image_grid(states, image_shape=(2, 3), n_columns=2, padding=0).shape == (6, 6)


def test_image_grid_default_shapes() -> None:
    # A square number of units draws squares in about sqrt(n) columns; otherwise one row each.
    assert image_grid(_states(7, 9)).shape == (3 * 4 + 1, 3 * 4 + 1)
    assert image_grid(_states(4, 7), n_columns=1).shape == (4 * 2 + 1, 7 + 2)


def _history(tracked_every: int | None) -> list[TrainRecord]:
    records = []
    for update in range(0, 101, 10):
        tracked = tracked_every is not None and update % tracked_every == 0
        records.append(
            TrainRecord(
                update=update,
                epoch=update // 20,
                learning_rate=0.1,
                time=update / 100,
                reconstruction_error=10.0 / (1 + update),
                log_z=5.0 if tracked else None,
                train_log_likelihood=-20.0 + update / 50 if tracked else None,
                validation_log_likelihood=-21.0 + update / 60 if tracked else None,
            )
        )
    return records


@pytest.mark.parametrize("tracked_every", [20, None])
def test_training_figure_writes_png(tmp_path: Path, tracked_every: int | None) -> None:
    history = _history(tracked_every)
    assert has_log_likelihood(history) == (tracked_every is not None)
    figure = training_figure(history, title="fake run")
    assert len(figure.axes) == (2 if tracked_every else 1)
    path = save_figure(figure, tmp_path / "plots" / "training.png")
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in path.parent.iterdir()) == ["training.png"]  # no temporary left


def test_samples_and_chain_strip_figures_are_pngs() -> None:
    samples = _states(12, 16)
    assert figure_png(samples_figure(samples, data=_states(12, 16, seed=1))).startswith(PNG_MAGIC)
    assert figure_png(samples_figure(samples, image_shape=(2, 8))).startswith(PNG_MAGIC)
    strip = _states(5 * 3, 16).view(5, 3, 16)  # 5 kept samples of 3 chains
    figure = chain_strip_figure(strip, n_chains=2, title="strip")
    assert figure_png(figure).startswith(PNG_MAGIC)
