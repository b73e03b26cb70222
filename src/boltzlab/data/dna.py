"""Statlog DNA as scaled by LIBSVM: ``dna_libsvm.npz`` or ``dna.scale`` and ``dna.scale.t``."""

from __future__ import annotations

from typing import Any

import numpy as np

from boltzlab.data import readers
from boltzlab.data.dataset import Dataset, from_arrays, require_integral_targets, require_keys
from boltzlab.data.locate import DATA_README, ENVIRONMENT_VARIABLE, locate

__all__ = []


def load_dna(*, root: Any, generator: Any, n_features: int = 180) -> Dataset:
    found = locate(
        "dna",
        root,
        npz_names=("dna_libsvm.npz",),
        part_names={"train": ("dna.scale",), "test": ("dna.scale.t",)},
        subdirectories=("dna",),
        loose_parts_in_environment=True,
        how_to_get=f"set {ENVIRONMENT_VARIABLE} to the shared data folder holding dna_libsvm.npz (see {DATA_README})",
    )
    description = "Statlog DNA as scaled by LIBSVM (dna.scale / dna.scale.t): 180 binary features, 3 classes"
    if found.npz is not None:
        arrays = readers.read_npz(found.npz)
        require_keys(arrays, ("x_train", "y_train", "x_test", "y_test"), found.npz)
        return from_arrays(
            "dna",
            arrays,
            sources=dict.fromkeys(arrays, str(found.npz)),
            source=str(found.npz),
            description=description,
        )
    assert found.parts is not None
    files = {split: readers.read_svmlight(path, n_features=n_features) for split, path in found.parts.items()}
    for split, contents in files.items():
        require_integral_targets(contents.targets, found.parts[split])
    # One encoding for both files, so classes 1, 2, 3 become 0, 1, 2 in train and test alike.
    classes = np.unique(np.concatenate([contents.targets for contents in files.values()]))
    arrays: dict[str, np.ndarray] = {}
    for split, contents in files.items():
        arrays[f"x_{split}"] = contents.inputs
        arrays[f"y_{split}"] = np.searchsorted(classes, contents.targets)
    sources = {f"{kind}_{split}": str(path) for split, path in found.parts.items() for kind in "xy"}
    return from_arrays(
        "dna",
        arrays,
        sources=sources,
        source="; ".join(map(str, found.parts.values())),
        description=description,
    )
