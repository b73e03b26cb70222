"""Sequence pictures: hidden-unit weight logos and the generative check's scatters.

Properties checked: in a logo each letter's height is its weight, positive weights stack
upwards from the axis with the largest on top and negative ones downwards with the largest at
the bottom, letters sit in their site's column, and the tiny ones are left out; the logos
figure draws the units with the largest weights first; the scatters and both figures come out
as PNGs; weights of the wrong shape are refused.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from boltzlab.errors import ValidationError
from boltzlab.evaluation.generative import compare_statistics, sequence_statistics
from boltzlab.plotting import figure_png
from boltzlab.plotting.sequences import (
    generative_check_figure,
    plot_weight_logo,
    symbol_colours,
    weight_logos_figure,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _letter_boxes(ax) -> list[tuple[float, float, float, float]]:
    (collection,) = [child for child in ax.collections if isinstance(child, PathCollection)]
    boxes = []
    for path in collection.get_paths():
        low, high = path.vertices.min(0), path.vertices.max(0)
        boxes.append((float(low[0]), float(high[0]), float(low[1]), float(high[1])))
    return boxes


def test_letters_stack_by_weight_above_and_below_the_axis() -> None:
    # Two sites of three symbols: site 1 has +0.5 (A), −0.2 (B), −0.3 (C); site 2 +0.1 (B), +0.4 (C), −0.5 (A).
    weights = np.array([[0.5, -0.2, -0.3], [-0.5, 0.1, 0.4]])
    ax = Figure().subplots()
    plot_weight_logo(ax, weights, "ABC")
    boxes = sorted(_letter_boxes(ax))
    assert len(boxes) == 6
    site_one = [box for box in boxes if box[1] < 1.5]
    site_two = [box for box in boxes if box[0] > 1.5]
    assert len(site_one) == len(site_two) == 3
    # Site 1: A from 0 to 0.5; B from 0 down to −0.2 (smaller, nearer the axis), then C to −0.5.
    bottoms_tops = sorted((round(low, 6), round(high, 6)) for *_, low, high in site_one)
    assert bottoms_tops == [(-0.5, -0.2), (-0.2, 0.0), (0.0, 0.5)]
    # Site 2: B from 0 to 0.1, C on top from 0.1 to 0.5; A from 0 down to −0.5.
    bottoms_tops = sorted((round(low, 6), round(high, 6)) for *_, low, high in site_two)
    assert bottoms_tops == [(-0.5, 0.0), (0.0, 0.1), (0.1, 0.5)]
    for left, right, *_ in boxes:
        assert 0.5 < (left + right) / 2 < 2.5 and right - left == pytest.approx(0.9)


def test_tiny_letters_are_left_out() -> None:
    weights = np.array([[1.0, -0.995, -0.005]])  # C is 0.5% of the tallest stack
    ax = Figure().subplots()
    plot_weight_logo(ax, torch.tensor(weights), "ABC")
    assert len(_letter_boxes(ax)) == 2


def test_the_logos_figure_draws_the_largest_units_first() -> None:
    generator = torch.Generator().manual_seed(0)
    weights = torch.randn(6, 4, 5, generator=generator) * torch.tensor([0.1, 3.0, 0.5, 2.0, 1.0])
    figure = weight_logos_figure(weights, "ACG-", alphabet_name="dna", max_units=3, title="three units")
    titles = [ax.get_title(loc="left") for ax in figure.axes]
    assert [title.split("  ")[0] for title in titles] == ["hidden unit 1", "hidden unit 3", "hidden unit 4"]
    assert figure_png(figure, dpi=40).startswith(PNG_MAGIC)
    chosen = weight_logos_figure(weights.numpy(), "ACG-", units=[0])
    assert [ax.get_title(loc="left").split("  ")[0] for ax in chosen.axes] == ["hidden unit 0"]


def test_colours_follow_chemistry_and_nucleotides() -> None:
    assert symbol_colours("DEKW-") == ["#d62828", "#d62828", "#1f4fd1", "#222222", "#8d8d8d"]
    assert symbol_colours("ACGU", "rna")[3] == symbol_colours("ACGT", "dna")[3]


def test_generative_check_figure_is_a_png() -> None:
    data = torch.randint(0, 3, (30, 5), generator=torch.Generator().manual_seed(1))
    check = compare_statistics(sequence_statistics(data, 3), sequence_statistics(data.flip(0), 3))
    figure = generative_check_figure(check, title="the data against itself")
    assert len(figure.axes) == 2 and "r = 1.000" in figure.axes[0].texts[0].get_text()
    assert figure_png(figure, dpi=40).startswith(PNG_MAGIC)


def test_weights_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"shape \(L, 3\)"):
        plot_weight_logo(Figure().subplots(), np.zeros((4, 2)), "ABC")
    with pytest.raises(ValidationError, match=r"\(L, q, J\)"):
        weight_logos_figure(np.zeros((4, 3)), "ABC")
    with pytest.raises(ValidationError, match="units must lie"):
        weight_logos_figure(np.zeros((4, 3, 2)), "ABC", units=[2])
