"""Carving test and validation sets out of a dataset's training examples.

For files that hold one set of examples (a ``.csv``, a ``.npy``, ...): ``test_fraction`` and
``validation_fraction`` of the training examples move to the test and validation splits,
chosen by one random permutation drawn from ``split_seed``. The permutation does not depend
on the training seed, so ``boltzlab train`` and ``boltzlab evaluate`` with the same file and
fractions hold out the same examples whatever their ``--seed`` (docs/data.md, "Splits").
Every split keeps the file's order, and labels follow their examples.
"""

from __future__ import annotations

import dataclasses

import torch

from boltzlab.data.dataset import Dataset
from boltzlab.errors import DataError, ValidationError

__all__ = ["carve_splits"]

DEFAULT_SPLIT_SEED = 0


def carve_splits(
    dataset: Dataset,
    *,
    test_fraction: float | None = None,
    validation_fraction: float | None = None,
    split_seed: int = DEFAULT_SPLIT_SEED,
) -> Dataset:
    """A copy of ``dataset`` with test and validation examples moved out of ``train``.

    Parameters
    ----------
    dataset : Dataset
        Must not already have the split a fraction asks for.
    test_fraction, validation_fraction : float in [0, 1), optional
        Share of the training examples moved to ``test`` / ``valid``, rounded to the nearest
        count (at least 1 when the fraction is positive); their sum must be below 1.
    split_seed : int, default 0
        Seed of the permutation that picks them.

    Returns
    -------
    Dataset
        ``train`` of shape (n_train - n_test - n_valid, n_visible); ``test`` (n_test,
        n_visible) and ``valid`` (n_valid, n_visible) where asked; labels split alike.

    Examples
    --------
    >>> import boltzlab as bl
    >>> data = bl.data.load("bars-and-stripes", size=3)
    >>> split = carve_splits(data, test_fraction=0.25)
    >>> split.train.shape[0], split.test.shape[0]
    (10, 4)
    """
    fractions = {"test": test_fraction or 0.0, "valid": validation_fraction or 0.0}
    for split, fraction in fractions.items():
        flag = "test_fraction" if split == "test" else "validation_fraction"
        if not (isinstance(fraction, (int, float)) and 0.0 <= fraction < 1.0):
            raise ValidationError(f"{flag} must be a number in [0, 1), got {fraction!r}")
        if fraction > 0 and getattr(dataset, split) is not None:
            raise DataError(
                f"dataset {dataset.name!r} already has a {'validation' if split == 'valid' else 'test'} split "
                f"({getattr(dataset, split).shape[0]} examples); drop {flag} (--{flag.replace('_', '-')})"
            )
    if sum(fractions.values()) >= 1.0:
        raise ValidationError(
            f"test_fraction + validation_fraction must be below 1 to leave training examples, got "
            f"{fractions['test']} + {fractions['valid']}"
        )
    n_examples = dataset.train.shape[0]
    counts = {
        split: max(1, round(fraction * n_examples)) if fraction > 0 else 0
        for split, fraction in fractions.items()
    }
    if counts["test"] + counts["valid"] >= n_examples:
        raise DataError(
            f"dataset {dataset.name!r} has {n_examples} examples, too few to hold out "
            f"{counts['test']} test and {counts['valid']} validation examples and keep any for training"
        )
    if not any(counts.values()):
        return dataset
    generator = torch.Generator().manual_seed(int(split_seed))
    order = torch.randperm(n_examples, generator=generator)
    boundaries = {"test": (0, counts["test"]), "valid": (counts["test"], counts["test"] + counts["valid"])}
    changes: dict[str, object] = {}
    for split, (start, stop) in boundaries.items():
        if stop > start:
            chosen = order[start:stop].sort().values
            changes[split] = dataset.train[chosen]
            if dataset.train_labels is not None:
                changes[f"{split}_labels"] = dataset.train_labels[chosen]
    kept = order[counts["test"] + counts["valid"] :].sort().values
    changes["train"] = dataset.train[kept]
    if dataset.train_labels is not None:
        changes["train_labels"] = dataset.train_labels[kept]
    held_out = ", ".join(
        f"{counts[split]} {'validation' if split == 'valid' else 'test'}" for split in counts if counts[split]
    )
    description = f"{dataset.description}; {held_out} examples held out at random (split seed {split_seed})"
    return dataclasses.replace(dataset, description=description.lstrip("; "), **changes)
