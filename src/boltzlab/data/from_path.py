"""Reading a dataset from a file path, its format guessed from the file name (docs/data.md, "Files")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from boltzlab.data import readers
from boltzlab.data.dataset import Dataset, from_arrays
from boltzlab.data.hdf5_files import read_hdf5
from boltzlab.data.npy_files import read_npy
from boltzlab.data.sequences import FASTA_SUFFIXES
from boltzlab.data.text_files import looks_like_svmlight, read_text, require_binary_text
from boltzlab.errors import DataError, ValidationError

__all__ = ["FILE_NAMES", "format_from_name", "guess_format"]

_FORMATS = ("npz", "npy", "idx", "svmlight", "text", "hdf5", "fasta")
#: The file names whose format :func:`guess_format` recognises, as error messages list them.
FILE_NAMES = (
    ".npz, .npy, .csv, .tsv, .txt, .h5, .hdf5, an IDX name (*-ubyte, *.idx*), a svmlight name "
    "(.svm, .libsvm, .svmlight) or aligned FASTA (.fasta, .fa, .faa, .afa, .a2m, .aln), optionally .gz"
)
# What a file holding one array of examples (and maybe labels) calls them in error messages:
# the user named the file, not the x_train key it is stored under internally.
_SINGLE_FILE_NAMES = {"x_train": "the data", "y_train": "the label array"}


def format_from_name(path: Path) -> str | None:
    """The format of ``path`` from its name (:func:`guess_format`), or ``None`` when the name does not tell."""
    try:
        return guess_format(path)
    except DataError:
        return None


def guess_format(path: Path) -> str:
    """The format of ``path`` from its name; a ``.txt`` file is svmlight if its lines hold ``index:value``.

    ``"fasta"`` (aligned sequences) is read by :func:`boltzlab.data.sequence_dataset.load_sequences`,
    not by :func:`load_path`.
    """
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(FASTA_SUFFIXES):
        return "fasta"
    if name.endswith(".npz"):
        return "npz"
    if name.endswith(".npy"):
        return "npy"
    if name.endswith("-ubyte") or ".idx" in name:
        return "idx"
    if name.endswith((".h5", ".hdf5", ".he5")):
        return "hdf5"
    if name.endswith((".svm", ".libsvm", ".svmlight")):
        return "svmlight"
    if name.endswith((".csv", ".tsv")):
        return "text"
    if name.endswith(".txt"):
        return "svmlight" if looks_like_svmlight(path) else "text"
    raise DataError(
        f"{path}: cannot tell the format from the file name; expected {FILE_NAMES}; "
        f"pass format= one of {', '.join(_FORMATS)}"
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
    data_key: str | None = None,
) -> Dataset:
    if path.is_dir():
        raise DataError(
            f"{path}: is a folder; pass a file, or a dataset name with root= (--data-root) {str(path)!r}"
        )
    file_format = format if format is not None else guess_format(path)
    if file_format not in _FORMATS:
        raise ValidationError(f"format must be one of {', '.join(_FORMATS)}, got {format!r}")
    if file_format == "fasta":
        raise ValidationError(
            f"{path}: aligned FASTA is read by boltzlab.data.load (a SequenceDataset), which takes no "
            "binarize, pixel_max, n_features or data_key"
        )
    if n_features is not None and file_format != "svmlight":
        raise ValidationError(f"n_features applies to svmlight files only, not {file_format} ({path})")
    if data_key is not None and file_format != "hdf5":
        raise ValidationError(f"data_key (--data-key) applies to HDF5 files only, not {file_format} ({path})")
    if pixel_max is not None and binarize is None:
        raise ValidationError(
            "pixel_max (--pixel-max) applies only with binarize= 'threshold' or 'stochastic' (--binarize)"
        )
    name = path.name.removesuffix(".gz")
    conversion = {"binarize_method": binarize, "pixel_max": pixel_max, "generator": generator}
    if file_format in ("npz", "hdf5"):
        arrays = readers.read_npz(path) if file_format == "npz" else read_hdf5(path, data_key=data_key)
        return from_arrays(
            name, arrays, sources=dict.fromkeys(arrays, str(path)), source=str(path), **conversion
        )
    if file_format == "npy":
        return from_arrays(
            name,
            {"x_train": read_npy(path)},
            sources={"x_train": str(path)},
            source=str(path),
            names=_SINGLE_FILE_NAMES,
            **conversion,
        )
    if file_format == "text":
        contents = read_text(path)
        if binarize is None:
            require_binary_text(path, contents)
        arrays = {"x_train": contents.inputs}
        if contents.labels is not None:
            arrays["y_train"] = contents.labels
        return from_arrays(
            name,
            arrays,
            sources=dict.fromkeys(arrays, str(path)),
            source=str(path),
            names=_SINGLE_FILE_NAMES,
            **conversion,
        )
    if file_format == "idx":
        images = readers.read_idx(path)
        if images.ndim == 1:
            raise DataError(f"{path}: holds a vector of {len(images)} values (labels?); pass the images file")
        arrays, sources = {"x_train": images}, {"x_train": str(path)}
        labels_path = path.with_name(path.name.replace("images", "labels").replace("idx3", "idx1"))
        if labels_path != path and labels_path.is_file():
            arrays["y_train"], sources["y_train"] = readers.read_idx(labels_path), str(labels_path)
        return from_arrays(
            name,
            arrays,
            sources=sources,
            source="; ".join(sources.values()),
            names=_SINGLE_FILE_NAMES,
            **conversion,
        )
    contents = readers.read_svmlight(path, n_features=n_features)
    arrays = {"x_train": contents.inputs}
    targets = contents.targets
    if np.all(targets == np.round(targets)):
        # Classes in sorted order become 0, 1, ... (LIBSVM's 1, 2, 3 and -1, +1 alike).
        arrays["y_train"] = np.unique(targets, return_inverse=True)[1].reshape(-1)
    return from_arrays(
        name,
        arrays,
        sources=dict.fromkeys(arrays, str(path)),
        source=str(path),
        names=_SINGLE_FILE_NAMES,
        **conversion,
    )
