"""Bars & Stripes and Artificial Modes: exact pattern sets, flip rates in standard errors."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import boltzlab.data as data
from boltzlab.data.synthetic import ModeSamples, flip_pixels
from boltzlab.errors import ValidationError


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_bars_and_stripes_has_every_distinct_pattern_once(size):
    patterns = data.bars_and_stripes(size)
    assert patterns.shape == (2 * 2**size - 2, size * size)
    assert patterns.dtype == torch.float32
    assert len(torch.unique(patterns, dim=0)) == len(patterns)
    images = patterns.reshape(-1, size, size)
    rows_equal = (images == images[:, :1, :]).flatten(1).all(1)  # stripes: every row the same
    columns_equal = (images == images[:, :, :1]).flatten(1).all(1)  # bars: every column the same
    assert bool((rows_equal | columns_equal).all())


def test_bars_and_stripes_3x3_equals_brute_force_enumeration():
    # All 2^9 binary 3x3 images, kept when constant along every row or every column.
    expected = set()
    for bits in itertools.product((0.0, 1.0), repeat=9):
        image = torch.tensor(bits).reshape(3, 3)
        if bool((image == image[:1]).all()) or bool((image == image[:, :1]).all()):
            expected.add(bits)
    found = {tuple(row.tolist()) for row in data.bars_and_stripes(3)}
    assert found == expected


def test_bars_and_stripes_dataset_defaults_and_sampling():
    dataset = data.load("bars-and-stripes")
    assert dataset.train.shape == (30, 16) and dataset.image_shape == (4, 4)
    assert dataset.test is None and dataset.train_labels is None
    drawn = data.load("bars-and-stripes", size=3, n_samples=41, generator=5)
    again = data.load("bars-and-stripes", size=3, n_samples=41, generator=5)
    assert drawn.train.shape == (41, 9)
    assert torch.equal(drawn.train, again.train)
    allowed = {tuple(row.tolist()) for row in data.bars_and_stripes(3)}
    assert all(tuple(row.tolist()) in allowed for row in drawn.train)


def test_bars_and_stripes_refuses_bad_sizes():
    for size in (0, -2, 2.5, 17):
        with pytest.raises(ValidationError, match="size"):
            data.bars_and_stripes(size)


def test_artificial_mode_patterns_are_balanced_and_pairwise_eight_apart():
    modes = data.artificial_mode_patterns()
    assert modes.shape == (4, 16)
    assert modes.sum(1).tolist() == [8.0, 8.0, 8.0, 8.0]
    distances = (modes[:, None, :] != modes[None, :, :]).sum(-1)
    assert distances.tolist() == [[0 if i == j else 8 for j in range(4)] for i in range(4)]


def test_artificial_modes_reproducible_from_seed_and_seed_matters():
    first = data.artificial_modes(37, p_mut=0.2, generator=11)
    second = data.artificial_modes(37, p_mut=0.2, generator=torch.Generator().manual_seed(11))
    other = data.artificial_modes(37, p_mut=0.2, generator=12)
    assert isinstance(first, ModeSamples)
    assert torch.equal(first.samples, second.samples) and torch.equal(first.labels, second.labels)
    assert not torch.equal(first.samples, other.samples)
    via_load = data.load("artificial-modes", n_samples=37, p_mut=0.2, generator=11)
    assert torch.equal(via_load.train, first.samples) and torch.equal(via_load.train_labels, first.labels)


@pytest.mark.parametrize("p_mut", [0.01, 0.1, 0.3])
def test_artificial_modes_flip_rate_within_four_standard_errors(p_mut):
    drawn = data.artificial_modes(3001, p_mut=p_mut, generator=3)
    flipped = drawn.samples != data.artificial_mode_patterns()[drawn.labels]
    n_pixels = flipped.numel()
    standard_error = math.sqrt(p_mut * (1 - p_mut) / n_pixels)
    assert abs(flipped.float().mean().item() - p_mut) < 4 * standard_error


def test_artificial_modes_labels_are_uniform_and_match_the_nearest_mode():
    n_samples = 1000
    dataset = data.load("artificial-modes", n_samples=n_samples, generator=7)  # default p_mut = 0.01
    assert dataset.train.shape == (n_samples, 16) and dataset.image_shape == (4, 4)
    assert dataset.train_labels.dtype == torch.int64
    distances = (dataset.train[:, None, :] != data.artificial_mode_patterns()[None]).sum(-1)
    assert torch.equal(distances.argmin(1), dataset.train_labels)
    counts = torch.bincount(dataset.train_labels, minlength=4).float()
    standard_deviation = math.sqrt(n_samples * 0.25 * 0.75)
    assert bool(((counts - n_samples / 4).abs() < 4 * standard_deviation).all())


def test_artificial_modes_without_noise_are_the_modes_and_test_split_is_optional():
    dataset = data.load("artificial-modes", n_samples=13, p_mut=0.0, n_test=7, generator=1)
    modes = data.artificial_mode_patterns()
    assert torch.equal(dataset.train, modes[dataset.train_labels])
    assert dataset.test.shape == (7, 16) and torch.equal(dataset.test, modes[dataset.test_labels])


def test_flip_pixels_extremes_and_input_untouched():
    patterns = data.bars_and_stripes(2)
    before = patterns.clone()
    assert torch.equal(flip_pixels(patterns, p_flip=0.0, generator=0), patterns)
    assert torch.equal(flip_pixels(patterns, p_flip=1.0, generator=0), 1 - patterns)
    flip_pixels(patterns, p_flip=0.5, generator=0)
    assert torch.equal(patterns, before)


def test_artificial_modes_refuses_bad_arguments():
    with pytest.raises(ValidationError, match="p_mut"):
        data.artificial_modes(10, p_mut=1.5, generator=0)
    with pytest.raises(ValidationError, match="n_samples"):
        data.artificial_modes(0, generator=0)
    with pytest.raises(ValidationError, match="unknown option"):
        data.load("artificial-modes", p_flip=0.1)
