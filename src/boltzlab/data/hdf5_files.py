"""HDF5 files (``.h5``, ``.hdf5``) through h5py, an optional dependency (``boltzlab[hdf5]``).

Which dataset inside the file holds the examples (docs/data.md, "HDF5"):

* ``data_key`` names it (a path such as ``"train/images"`` for nested groups); its labels are
  the dataset ``y_<rest>`` for a key ``x_<rest>``, otherwise the first of ``labels``,
  ``label``, ``y``, ``targets``, ``target`` or ``y_train`` beside it, where present;
* otherwise a file with ``x_train`` is read like the ``.npz`` layout (``x_train``,
  ``x_valid``, ``x_test`` and ``y_*`` at the top level);
* otherwise ``data``, or else the only dataset with at least 2 dimensions;
* anything else is an error that lists the datasets with their shapes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from boltzlab.data.npy_files import require_examples_axis
from boltzlab.data.readers import require_nonempty_file
from boltzlab.errors import DataError

__all__ = ["INSTALL_HINT", "read_hdf5"]

INSTALL_HINT = "pip install 'boltzlab[hdf5]'"
_LAYOUT_KEYS = ("x_train", "y_train", "x_valid", "y_valid", "x_test", "y_test")
_LABEL_NAMES = ("labels", "label", "y", "targets", "target", "y_train")


def read_hdf5(path: str | os.PathLike[str], *, data_key: str | None = None) -> dict[str, np.ndarray]:
    """The examples (and labels) in an HDF5 file, keyed like the ``.npz`` layout.

    Parameters
    ----------
    path : str or path-like
    data_key : str, optional
        The dataset holding the examples; default as in the module docstring.

    Returns
    -------
    dict[str, numpy.ndarray]
        ``x_train`` of shape (n_examples, ...) and, where found, ``y_train`` (and with the
        ``.npz`` layout ``x_valid``, ``x_test``, ``y_valid``, ``y_test``).

    Raises
    ------
    DataError
        h5py not installed (the message says how to get it), not an HDF5 file, no such key,
        no way to tell which dataset holds the examples, or a dataset of fewer than 2
        dimensions.
    """
    path = Path(path)
    try:
        import h5py
    except ImportError:
        raise DataError(
            f"{path}: reading HDF5 files needs h5py, which is not installed; {INSTALL_HINT} (or pip install h5py)"
        ) from None
    require_nonempty_file(path, "an HDF5 file")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise DataError(
            f"{path}: not a readable HDF5 file ({error}); it may be truncated or of another format"
        ) from None
    with handle:
        found: dict[str, Any] = {}
        handle.visititems(
            lambda name, item: found.update({name: item}) if isinstance(item, h5py.Dataset) else None
        )
        if not found:
            raise DataError(f"{path}: the HDF5 file holds no datasets (only groups or attributes)")
        keys = _choose_keys(path, found, data_key)
        arrays = {}
        for role, key in keys.items():
            try:
                arrays[role] = np.asarray(found[key][()])
            except (OSError, TypeError, ValueError) as error:
                raise DataError(f"{path}: dataset {key!r} cannot be read ({error})") from None
    require_examples_axis(arrays["x_train"], source=str(path), what=f"dataset {keys['x_train']!r}")
    return arrays


def _choose_keys(path: Path, found: dict[str, Any], data_key: str | None) -> dict[str, str]:
    """Role (x_train, y_train, ...) → dataset name in the file."""
    listing = ", ".join(f"{name} {tuple(item.shape)}" for name, item in found.items())
    if data_key is not None:
        key = data_key.strip("/")
        if key not in found:
            raise DataError(
                f"{path}: no dataset {data_key!r} in this HDF5 file; it holds {listing}; "
                "pass data_key= (--data-key) one of them"
            )
        keys = {"x_train": key}
        label = _label_key(key, found)
        if label is not None:
            keys["y_train"] = label
        return keys
    if "x_train" in found:
        return {role: role for role in _LAYOUT_KEYS if role in found}
    if "data" in found:
        return {"x_train": "data", **({"y_train": label} if (label := _label_key("data", found)) else {})}
    candidates = [name for name, item in found.items() if len(item.shape) >= 2]
    if len(candidates) == 1:
        key = candidates[0]
        label = _label_key(key, found)
        return {"x_train": key, **({"y_train": label} if label is not None else {})}
    reason = (
        "several datasets have 2 or more dimensions" if candidates else "no dataset has 2 or more dimensions"
    )
    raise DataError(
        f"{path}: cannot tell which dataset holds the examples ({reason}): {listing}; "
        "pass data_key= (--data-key) naming one, or store it as x_train or data"
    )


def _label_key(key: str, found: dict[str, Any]) -> str | None:
    """The labels belonging to dataset ``key``: y_<rest> for x_<rest>, else a label name beside it."""
    folder, _, name = key.rpartition("/")
    prefix = f"{folder}/" if folder else ""
    if name.startswith("x_"):
        candidate = f"{prefix}y_{name[2:]}"
        return candidate if candidate in found else None
    return next((prefix + label for label in _LABEL_NAMES if prefix + label in found), None)
