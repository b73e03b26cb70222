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
from pathlib import Path
from typing import Any

import torch

from boltzlab.data.dataset import Dataset
from boltzlab.data.dna import load_dna
from boltzlab.data.from_path import format_from_name, load_path
from boltzlab.data.generated import (
    DIGITS_SPLIT_SEED,
    load_artificial_modes,
    load_bars_and_stripes,
    load_digits,
)
from boltzlab.data.locate import ENVIRONMENT_VARIABLE, STANDARD_LOCATIONS
from boltzlab.data.mnist import load_mnist_family
from boltzlab.data.npz_datasets import NPZ_DATASETS, npz_loader
from boltzlab.data.sequence_dataset import load_sequences
from boltzlab.data.splits import DEFAULT_SPLIT_SEED, carve_splits
from boltzlab.errors import DataError, ValidationError

# DIGITS_SPLIT_SEED, ENVIRONMENT_VARIABLE, STANDARD_LOCATIONS and Dataset are re-exported:
# tests and callers read them here, next to load().
__all__ = ["DIGITS_SPLIT_SEED", "ENVIRONMENT_VARIABLE", "STANDARD_LOCATIONS", "Dataset", "available", "load"]


def available() -> tuple[str, ...]:
    """Names accepted by :func:`load` (files are found as described there)."""
    return tuple(sorted(_LOADERS))


def load(
    name_or_path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    generator: torch.Generator | int | None = None,
    test_fraction: float | None = None,
    validation_fraction: float | None = None,
    split_seed: int = DEFAULT_SPLIT_SEED,
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

        A path is read by its name (docs/data.md, "Files"): ``.npz``; ``.npy`` (a 2-D array,
        or 3-D images); delimited text ``.csv``, ``.tsv``, ``.txt`` (delimiter and header
        detected, a ``label``/``y``/``target`` column becomes labels; optionally ``.gz``);
        HDF5 ``.h5``, ``.hdf5`` (needs h5py: ``pip install 'boltzlab[hdf5]'``; option
        ``data_key`` names the dataset); IDX (``*-ubyte``, ``*.idx*``, optionally ``.gz``; a
        matching ``*labels*`` file beside an images file supplies labels); svmlight (``.svm``,
        ``.libsvm``, ``.svmlight``, and ``.txt`` whose lines hold ``index:value``). Options
        ``format`` (``"npz"``, ``"npy"``, ``"idx"``, ``"svmlight"``, ``"text"``, ``"hdf5"``)
        overrides the guess, ``binarize`` (``"threshold"`` or ``"stochastic"``) and
        ``pixel_max`` (the value meaning fully on; default 255 for integer arrays, 1 for
        floats and text) binarise grey levels (otherwise values must be exactly 0/1), and
        ``n_features`` is passed to the svmlight reader. A name wins over a file of the same
        name in the working directory. Aligned FASTA (``.fasta``, ``.fa``, ``.faa``, ``.afa``,
        ``.a2m``, ``.aln``, optionally ``.gz``; or ``format="fasta"``) is read as a
        :class:`~boltzlab.data.sequence_dataset.SequenceDataset` by
        :func:`~boltzlab.data.sequence_dataset.load_sequences`, with its options ``alphabet``,
        ``identity``, ``weighted``, ``split`` and ``unknown``; its held-out splits are drawn
        there (by homology, 10% test by default), not by the permutation below.
    root : str or path-like, optional
        Where to look first for file-backed names: a folder (also searched in a subfolder
        named after the dataset) or the file itself. Then each folder in the
        ``BOLTZLAB_DATA`` environment variable (several separated by ``os.pathsep``; IDX files
        only in its ``mnist/`` or ``fashion-mnist/`` subfolder, since both use the same file
        names), then :data:`STANDARD_LOCATIONS`. Ignored by generated datasets.
    generator : torch.Generator or int, optional
        Randomness for generated datasets and stochastic binarisation; ignored otherwise.
    test_fraction, validation_fraction : float in [0, 1), optional
        Move this share of the training examples to a test / validation split (for sources
        without one), picked by a permutation drawn from ``split_seed`` (default 0), not from
        ``generator``, so every run and command holds out the same examples; see
        :func:`boltzlab.data.splits.carve_splits`.
    split_seed : int, default 0
        Seed of that permutation.
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
        loader = load_path
        if options.get("format", format_from_name(path)) == "fasta":
            # Aligned sequences: their own reader, weights and homology-aware splits.
            options.pop("format", None)
            loader = load_sequences
    accepted = [
        name
        for name in inspect.signature(loader).parameters
        if name not in ("path", "root", "generator", "test_fraction", "validation_fraction", "split_seed")
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValidationError(
            f"unknown option(s) {', '.join(unknown)} for {key!r}; accepted: {', '.join(accepted) or 'none'}"
        )
    if loader is load_sequences:
        return load_sequences(
            path,
            test_fraction=test_fraction,
            validation_fraction=validation_fraction,
            split_seed=split_seed,
            **options,
        )
    if path is not None:
        dataset = load_path(path, root=root, generator=generator, **options)
    else:
        dataset = loader(root=root, generator=generator, **options)
    if test_fraction or validation_fraction:
        dataset = carve_splits(
            dataset,
            test_fraction=test_fraction,
            validation_fraction=validation_fraction,
            split_seed=split_seed,
        )
    return dataset


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "digits": load_digits,
    "bars-and-stripes": load_bars_and_stripes,
    "artificial-modes": load_artificial_modes,
    "mnist": functools.partial(load_mnist_family, "mnist"),
    "fashion-mnist": functools.partial(load_mnist_family, "fashion-mnist"),
    "dna": load_dna,
    **{name: npz_loader(name) for name in NPZ_DATASETS},
}
