"""Datasets shipped as one ``.npz`` file with train/valid/test splits (the NADE sets,
Caltech-101 Silhouettes, Binary Alphadigits).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from boltzlab.data import readers
from boltzlab.data.dataset import Dataset, from_arrays
from boltzlab.data.locate import DATA_README, ENVIRONMENT_VARIABLE, locate

__all__ = []

# name -> (file in the shared data folder, description, image shape)
NPZ_DATASETS: dict[str, tuple[str, str, tuple[int, int] | None]] = {
    "nade-dna": (
        "nade_dna.npz",
        "DNA, 180 binary features, NADE split 1400/600/1186 (Larochelle & Murray 2011)",
        None,
    ),
    "adult": (
        "nade_adult.npz",
        "Adult, 123 binary features, NADE split 5000/1414/26147 (Larochelle & Murray 2011)",
        None,
    ),
    "mushrooms": ("nade_mushrooms.npz", "Mushrooms, 112 binary features, NADE split 2000/500/5624", None),
    "nips": ("nade_nips.npz", "NIPS 0-12 word presence, 500 binary features, NADE split 400/100/1240", None),
    "caltech101-silhouettes": (
        "caltech101_silhouettes_28.npz",
        "Caltech-101 Silhouettes 28x28, split 1 (Marlin et al. 2010); 1 = background, 0 = object; labels 0..100",
        (28, 28),
    ),
    "binary-alphadigits": (
        "binary_alphadigits.npz",
        "Binary Alphadigits 20x16 (Roweis): 36 classes 0-9A-Z x 39 images, no test split",
        (20, 16),
    ),
}


def npz_loader(name: str) -> Callable[..., Dataset]:
    file_name, description, image_shape = NPZ_DATASETS[name]

    def load_npz_dataset(*, root: Any, generator: Any) -> Dataset:
        found = locate(
            name,
            root,
            npz_names=(file_name,),
            part_names={},
            subdirectories=(),
            loose_parts_in_environment=False,
            how_to_get=f"set {ENVIRONMENT_VARIABLE} to the shared data folder holding {file_name} (see {DATA_README})",
        )
        assert found.npz is not None
        arrays = readers.read_npz(found.npz)
        return from_arrays(
            name,
            arrays,
            sources=dict.fromkeys(arrays, str(found.npz)),
            image_shape=image_shape,
            source=str(found.npz),
            description=description,
        )

    return load_npz_dataset
