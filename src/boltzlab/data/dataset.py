"""The :class:`Dataset` every loader returns, and building one from named arrays.

Loaders (:mod:`boltzlab.data.registry` and the per-family modules beside it) read arrays
keyed ``x_train`` / ``x_valid`` / ``x_test`` and ``y_*``; :func:`from_arrays` checks them,
binarises them and wraps them in a :class:`Dataset`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab.data import readers
from boltzlab.errors import DataError
from boltzlab.rng import resolve_generator

__all__ = ["Dataset"]


@dataclass(frozen=True, slots=True)
class Dataset:
    """A binary dataset: train, optional validation and test splits, optional labels.

    Attributes
    ----------
    name : str
    train : Tensor, shape (n_train, n_visible), float32
        0/1 values; images flattened row by row.
    test, valid : Tensor, shape (n_test or n_valid, n_visible), float32, or None
    train_labels, test_labels, valid_labels : Tensor, shape (n_examples,), int64, or None
        Class indices starting at 0, where the source has them.
    image_shape : tuple[int, int] or None
        ``(height, width)`` with ``height * width == n_visible`` when examples are images.
    source : str
        The file(s) read, or how the data was generated.
    description : str
        What the data is and how it was binarised.
    """

    name: str
    train: Tensor
    test: Tensor | None = None
    valid: Tensor | None = None
    train_labels: Tensor | None = None
    test_labels: Tensor | None = None
    valid_labels: Tensor | None = None
    image_shape: tuple[int, int] | None = None
    source: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        n_visible = _check_split(self.name, "train", self.train, None)
        for split, labels in (
            ("train", self.train_labels),
            ("test", self.test_labels),
            ("valid", self.valid_labels),
        ):
            data = getattr(self, split)
            if split != "train" and data is not None:
                _check_split(self.name, split, data, n_visible)
            if labels is None:
                continue
            if data is None:
                raise DataError(f"dataset {self.name!r}: {split}_labels given without {split} data")
            if not isinstance(labels, Tensor) or labels.dtype != torch.int64 or labels.shape != (len(data),):
                raise DataError(
                    f"dataset {self.name!r}: {split}_labels must be an int64 tensor of shape ({len(data)},), "
                    f"got {getattr(labels, 'dtype', type(labels).__name__)} {tuple(getattr(labels, 'shape', ()))}"
                )
        if self.image_shape is not None:
            shape = self.image_shape
            if not (isinstance(shape, tuple) and len(shape) == 2 and shape[0] * shape[1] == n_visible):
                raise DataError(
                    f"dataset {self.name!r}: image_shape must be a (height, width) tuple with "
                    f"height * width = {n_visible}, got {shape!r}"
                )

    @property
    def n_visible(self) -> int:
        """Number of binary variables per example (``train.shape[1]``)."""
        return int(self.train.shape[1])

    def __repr__(self) -> str:
        def shape(tensor: Tensor | None) -> str:
            return "None" if tensor is None else str(tuple(tensor.shape))

        has_labels = self.train_labels is not None
        return (
            f"{type(self).__name__}(name={self.name!r}, train={shape(self.train)}, valid={shape(self.valid)}, "
            f"test={shape(self.test)}, labels={has_labels}, image_shape={self.image_shape}, "
            f"source={self.source!r})"
        )


def from_arrays(
    name: str,
    arrays: dict[str, np.ndarray],
    *,
    sources: dict[str, str],
    source: str,
    description: str = "",
    binarize_method: str | None = None,
    pixel_max: float | None = None,
    generator: Any = None,
    image_shape: tuple[int, int] | None = None,
    names: dict[str, str] | None = None,
) -> Dataset:
    """A Dataset from ``x_train`` / ``x_valid`` / ``x_test`` and ``y_*`` arrays.

    ``names``: what error messages call an array (default its key): a file of one array says
    "the data", since its reader stored it under ``x_train``, a key the user never wrote.
    """
    names = names or {}
    require_keys(arrays, ("x_train",), source)
    random_generator = resolve_generator(generator) if binarize_method == "stochastic" else None
    example_shape = arrays["x_train"].shape[1:]
    splits: dict[str, Tensor | None] = {}
    for split in ("train", "valid", "test"):
        key = f"x_{split}"
        if key not in arrays:
            splits[split] = splits[f"{split}_labels"] = None
            continue
        if arrays[key].shape[1:] != example_shape:
            raise DataError(
                f"{sources[key]}: {key} has examples of shape {arrays[key].shape[1:]}, "
                f"but x_train's are {example_shape}; the splits do not belong together"
            )
        splits[split] = readers.as_binary_matrix(
            arrays[key],
            source=sources[key],
            key=names.get(key, key),
            binarize_method=binarize_method,
            pixel_max=pixel_max,
            generator=random_generator,
        )
        label_key = f"y_{split}"
        splits[f"{split}_labels"] = (
            readers.as_labels(
                arrays[label_key],
                source=sources[label_key],
                key=names.get(label_key, label_key),
                n_examples=len(arrays[key]),
            )
            if label_key in arrays
            else None
        )
    if image_shape is None and len(example_shape) == 2:
        image_shape = (int(example_shape[0]), int(example_shape[1]))
    if not description:
        description = f"read from {source}" + (f", binarised by {binarize_method}" if binarize_method else "")
    return Dataset(name=name, image_shape=image_shape, source=source, description=description, **splits)


def require_keys(arrays: dict[str, np.ndarray], keys: tuple[str, ...], path: Any) -> None:
    missing = [key for key in keys if key not in arrays]
    if missing:
        raise DataError(
            f"{path}: missing array(s) {', '.join(missing)} (found: {', '.join(sorted(arrays)) or 'none'}); "
            "write the file with numpy.savez_compressed(path, x_train=..., y_train=..., x_test=..., y_test=...)"
        )


def require_integral_targets(targets: np.ndarray, path: Path) -> None:
    if not (np.isfinite(targets).all() and np.all(targets == np.round(targets))):
        raise DataError(f"{path}: class labels (first column) must be integers, e.g. 1, 2, 3")


def _check_split(name: str, split: str, data: Any, n_visible: int | None) -> int:
    if not isinstance(data, Tensor) or data.dim() != 2 or data.dtype != torch.float32:
        raise DataError(
            f"dataset {name!r}: {split} must be a float32 tensor of shape (n_examples, n_visible), got "
            f"{getattr(data, 'dtype', type(data).__name__)} {tuple(getattr(data, 'shape', ()))}"
        )
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise DataError(f"dataset {name!r}: {split} is empty (shape {tuple(data.shape)})")
    if n_visible is not None and data.shape[1] != n_visible:
        raise DataError(f"dataset {name!r}: {split} has {data.shape[1]} variables but train has {n_visible}")
    if not bool(((data == 0) | (data == 1)).all()):
        raise DataError(
            f"dataset {name!r}: {split} must hold only 0 and 1; binarise it with boltzlab.data.binarize"
        )
    return int(data.shape[1])
