"""Generated and bundled datasets: ``digits`` (scikit-learn), ``bars-and-stripes`` and
``artificial-modes`` (:mod:`boltzlab.data.synthetic`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from boltzlab.data import readers, synthetic
from boltzlab.data.dataset import Dataset
from boltzlab.errors import ValidationError
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

__all__ = ["DIGITS_SPLIT_SEED", "load_digits"]

# Seed of the fixed permutation that splits scikit-learn's 1797 digits into 1497 train and
# 300 test examples (numpy.random.default_rng(DIGITS_SPLIT_SEED).permutation).
DIGITS_SPLIT_SEED = 1797
_DIGITS_N_TEST = 300


def load_digits(*, root: Any, generator: Any) -> Dataset:
    # Imported here because importing scikit-learn costs about a second.
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.data, dtype=np.float32)
    permutation = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(images))
    test_index, train_index = permutation[:_DIGITS_N_TEST], permutation[_DIGITS_N_TEST:]
    binary = readers.binarize(images / 16.0)
    labels = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
    return Dataset(
        name="digits",
        train=binary[train_index],
        test=binary[test_index],
        train_labels=labels[train_index],
        test_labels=labels[test_index],
        image_shape=(8, 8),
        source="sklearn.datasets.load_digits()",
        description=(
            "scikit-learn's 8x8 digits (UCI optdigits test part, Alpaydin & Kaynak), pixel >= 8 of 16 "
            f"set to 1; 1497 train / 300 test by numpy.random.default_rng({DIGITS_SPLIT_SEED}).permutation"
        ),
    )


def load_bars_and_stripes(
    *, root: Any, generator: Any, size: int = 4, n_samples: int | None = None
) -> Dataset:
    patterns = synthetic.bars_and_stripes(size)
    if n_samples is None:
        train, how = patterns, "every distinct pattern once"
    else:
        n_samples = check_positive_int(n_samples, "n_samples")
        index = torch.randint(len(patterns), (n_samples,), generator=resolve_generator(generator))
        train, how = patterns[index], f"{n_samples} patterns drawn uniformly with replacement"
    return Dataset(
        name="bars-and-stripes",
        train=train,
        image_shape=(size, size),
        source=f"generated: boltzlab.data.synthetic.bars_and_stripes({size})",
        description=f"Bars & Stripes {size}x{size} (MacKay 2003): {len(patterns)} distinct patterns, {how}",
    )


def load_artificial_modes(
    *, root: Any, generator: Any, n_samples: int = 1000, p_mut: float = 0.01, n_test: int = 0
) -> Dataset:
    random_generator = resolve_generator(generator)
    train = synthetic.artificial_modes(n_samples, p_mut=p_mut, generator=random_generator)
    if isinstance(n_test, bool) or not isinstance(n_test, int) or n_test < 0:
        raise ValidationError(f"n_test must be a non-negative integer, got {n_test!r}")
    test = synthetic.artificial_modes(n_test, p_mut=p_mut, generator=random_generator) if n_test else None
    return Dataset(
        name="artificial-modes",
        train=train.samples,
        train_labels=train.labels,
        test=None if test is None else test.samples,
        test_labels=None if test is None else test.labels,
        image_shape=(4, 4),
        source=f"generated: boltzlab.data.synthetic.artificial_modes(p_mut={p_mut})",
        description=(
            f"Artificial Modes (after Desjardins et al. 2010): four 4x4 modes, each pixel flipped with "
            f"probability {p_mut}; labels are mode indices"
        ),
    )
