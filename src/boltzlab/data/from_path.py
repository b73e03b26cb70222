"""Reading a dataset from a file path, its format guessed from the file name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from boltzlab.data import readers
from boltzlab.data.dataset import Dataset, from_arrays
from boltzlab.errors import DataError, ValidationError

__all__ = ["FORMATS", "guess_format", "load_path"]

FORMATS = ("npz", "idx", "svmlight")


def guess_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".npz"):
        return "npz"
    if name.endswith("-ubyte") or ".idx" in name:
        return "idx"
    if name.endswith((".svm", ".libsvm", ".svmlight", ".txt")):
        return "svmlight"
    raise DataError(
        f"{path}: cannot tell the format from the file name; expected .npz, an IDX name (*-ubyte, *.idx*, "
        f"optionally .gz) or a svmlight name (.svm, .libsvm, .svmlight, .txt); pass format= one of {', '.join(FORMATS)}"
    )


def load_path(
    path: Path,
    *,
    root: Any,
    generator: Any,
    format: str | None = None,
    binarize: str | None = None,
    pixel_max: float | None = None,
    n_features: int | None = None,
) -> Dataset:
    if path.is_dir():
        raise DataError(f"{path}: is a folder; pass a file, or a dataset name with root={str(path)!r}")
    file_format = format if format is not None else guess_format(path)
    if file_format not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if n_features is not None and file_format != "svmlight":
        raise ValidationError(f"n_features applies to svmlight files only, not {file_format} ({path})")
    name = path.name.removesuffix(".gz")
    conversion = {"binarize_method": binarize, "pixel_max": pixel_max, "generator": generator}
    if file_format == "npz":
        arrays = readers.read_npz(path)
        return from_arrays(
            name, arrays, sources=dict.fromkeys(arrays, str(path)), source=str(path), **conversion
        )
    if file_format == "idx":
        images = readers.read_idx(path)
        if images.ndim == 1:
            raise DataError(f"{path}: holds a vector of {len(images)} values (labels?); pass the images file")
        arrays, sources = {"x_train": images}, {"x_train": str(path)}
        labels_path = path.with_name(path.name.replace("images", "labels").replace("idx3", "idx1"))
        if labels_path != path and labels_path.is_file():
            arrays["y_train"], sources["y_train"] = readers.read_idx(labels_path), str(labels_path)
        return from_arrays(name, arrays, sources=sources, source="; ".join(sources.values()), **conversion)
    contents = readers.read_svmlight(path, n_features=n_features)
    arrays = {"x_train": contents.inputs}
    targets = contents.targets
    if np.all(targets == np.round(targets)):
        # Classes in sorted order become 0, 1, ... (LIBSVM's 1, 2, 3 and -1, +1 alike).
        arrays["y_train"] = np.unique(targets, return_inverse=True)[1].reshape(-1)
    return from_arrays(name, arrays, sources=dict.fromkeys(arrays, str(path)), source=str(path), **conversion)
