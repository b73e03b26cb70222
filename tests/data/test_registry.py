"""``load``: names, the Dataset contract, the file search order, and the real shared files."""

from __future__ import annotations

import dataclasses
import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import boltzlab.data as data
from boltzlab.data import registry
from boltzlab.errors import DataError, ValidationError

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def write_idx(path: Path, array: np.ndarray) -> Path:
    """A uint8 IDX file (gzip-compressed when the name ends in .gz)."""
    payload = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload += np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if path.name.endswith(".gz") else payload)
    return path


def tiny_mnist(n_train: int = 6, n_test: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(seed)
    return {
        "x_train": generator.integers(0, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "y_train": generator.integers(0, 10, size=n_train).astype(np.uint8),
        "x_test": generator.integers(0, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "y_test": generator.integers(0, 10, size=n_test).astype(np.uint8),
    }


def write_idx_set(folder: Path, arrays: dict[str, np.ndarray], *, suffix: str = ".gz") -> None:
    names = {
        "x_train": "train-images-idx3-ubyte",
        "y_train": "train-labels-idx1-ubyte",
        "x_test": "t10k-images-idx3-ubyte",
        "y_test": "t10k-labels-idx1-ubyte",
    }
    for key, name in names.items():
        write_idx(folder / f"{name}{suffix}", arrays[key])


@pytest.fixture
def no_data_environment(monkeypatch, tmp_path):
    """No BOLTZLAB_DATA and no standard locations, so only what a test sets up is found."""
    monkeypatch.delenv(registry.ENVIRONMENT_VARIABLE, raising=False)
    for name in list(registry.STANDARD_LOCATIONS):
        monkeypatch.setitem(registry.STANDARD_LOCATIONS, name, (tmp_path / "standard" / name,))


# --- names and the Dataset contract -------------------------------------------------------------


def test_available_lists_every_documented_name():
    names = set(data.available())
    assert {"digits", "bars-and-stripes", "artificial-modes", "mnist", "fashion-mnist", "dna"} <= names
    assert {"nade-dna", "adult", "mushrooms", "nips", "caltech101-silhouettes", "binary-alphadigits"} <= names


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(DataError, match=r"unknown dataset 'mnsit'.*bars-and-stripes.*fashion-mnist"):
        data.load("mnsit")


def test_digits_are_binary_8x8_with_a_fixed_documented_split():
    from sklearn.datasets import load_digits

    digits = data.load("digits")
    assert digits.train.shape == (1497, 64) and digits.test.shape == (300, 64)
    assert digits.image_shape == (8, 8) and digits.n_visible == 64
    assert digits.train_labels.dtype == torch.int64 and digits.train_labels.shape == (1497,)
    # The split is the documented permutation; pixels >= 8 of 16 are 1.
    bunch = load_digits()
    permutation = np.random.default_rng(registry.DIGITS_SPLIT_SEED).permutation(1797)
    expected_test = torch.from_numpy((bunch.data[permutation[:300]] >= 8).astype(np.float32))
    assert torch.equal(digits.test, expected_test)
    assert torch.equal(digits.train_labels, torch.from_numpy(bunch.target[permutation[300:]]).long())
    # Pinned so a change in NumPy's permutation stream is noticed, not silently absorbed.
    assert torch.bincount(digits.test_labels).tolist() == [24, 26, 34, 30, 33, 41, 28, 33, 23, 28]


def test_dataset_is_frozen_and_validates_its_fields():
    train = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    dataset = data.Dataset(name="toy", train=train, train_labels=torch.tensor([0, 1]))
    assert dataset.n_visible == 3 and "train=(2, 3)" in repr(dataset)
    with pytest.raises(dataclasses.FrozenInstanceError):
        dataset.name = "other"
    with pytest.raises(DataError, match="train must hold only 0 and 1"):
        data.Dataset(name="toy", train=train * 0.5)
    with pytest.raises(DataError, match="train_labels must be an int64 tensor of shape"):
        data.Dataset(name="toy", train=train, train_labels=torch.tensor([0, 1, 2]))
    with pytest.raises(DataError, match="test has 2 variables but train has 3"):
        data.Dataset(name="toy", train=train, test=train[:, :2])
    with pytest.raises(DataError, match="image_shape"):
        data.Dataset(name="toy", train=train, image_shape=(2, 2))
    with pytest.raises(DataError, match="test_labels given without test data"):
        data.Dataset(name="toy", train=train, test_labels=torch.tensor([0]))


# --- MNIST-style files and the search order -----------------------------------------------------


def test_mnist_found_through_the_environment_variable(monkeypatch, tmp_path, no_data_environment):
    arrays = tiny_mnist()
    np.savez_compressed(tmp_path / "mnist.npz", **arrays)
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, str(tmp_path))
    mnist = data.load("mnist")
    assert mnist.source == str(tmp_path / "mnist.npz")
    assert mnist.train.shape == (6, 784) and mnist.test.shape == (3, 784) and mnist.image_shape == (28, 28)
    assert torch.equal(
        mnist.train, torch.from_numpy((arrays["x_train"].reshape(6, 784) > 127).astype(np.float32))
    )
    assert mnist.train_labels.tolist() == arrays["y_train"].tolist()
    subset = data.load("mnist", n_train=4, n_test=2)
    assert (
        subset.train.shape == (4, 784) and subset.train_labels.shape == (4,) and subset.test.shape == (2, 784)
    )
    first = data.load("mnist", binarize="stochastic", generator=9)
    assert torch.equal(first.train, data.load("mnist", binarize="stochastic", generator=9).train)
    with pytest.raises(ValidationError, match=r"n_train=7 but .*mnist\.npz holds 6"):
        data.load("mnist", n_train=7)


def test_root_comes_before_the_environment_variable(monkeypatch, tmp_path, no_data_environment):
    (tmp_path / "env").mkdir()
    (tmp_path / "explicit").mkdir()
    np.savez_compressed(tmp_path / "env" / "mnist.npz", **tiny_mnist(n_train=5))
    np.savez_compressed(tmp_path / "explicit" / "mnist.npz", **tiny_mnist(n_train=7))
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, str(tmp_path / "env"))
    assert len(data.load("mnist", root=tmp_path / "explicit").train) == 7
    assert len(data.load("mnist", root=tmp_path / "explicit" / "mnist.npz").train) == 7
    assert len(data.load("mnist").train) == 5


def test_fashion_mnist_idx_files_in_the_environment_subfolder(monkeypatch, tmp_path, no_data_environment):
    arrays = tiny_mnist(seed=1)
    monkeypatch.setenv(registry.ENVIRONMENT_VARIABLE, str(tmp_path))
    # IDX files loose at the top of BOLTZLAB_DATA are not used: MNIST's have the same names.
    write_idx_set(tmp_path, arrays)
    with pytest.raises(DataError, match="'fashion-mnist' not found"):
        data.load("fashion-mnist")
    write_idx_set(tmp_path / "fashion-mnist", arrays)
    fashion = data.load("fashion-mnist")
    assert fashion.source.startswith(str(tmp_path / "fashion-mnist" / "train-images-idx3-ubyte.gz"))
    assert torch.equal(
        fashion.test, torch.from_numpy((arrays["x_test"].reshape(3, 784) > 127).astype(np.float32))
    )
    assert fashion.test_labels.tolist() == arrays["y_test"].tolist()
    # Given explicitly as root, a folder of loose (uncompressed) IDX files is fine.
    write_idx_set(tmp_path / "loose", arrays, suffix="")
    assert torch.equal(data.load("fashion-mnist", root=tmp_path / "loose").train, fashion.train)


def test_not_found_says_where_it_looked_and_how_to_get_the_data(tmp_path, no_data_environment):
    with pytest.raises(DataError) as caught:
        data.load("fashion-mnist", root=tmp_path / "missing")
    message = str(caught.value)
    assert str(tmp_path / "missing") in message and str(tmp_path / "standard" / "fashion-mnist") in message
    assert "apt-get install dataset-fashion-mnist" in message and "BOLTZLAB_DATA is not set" in message
    assert "docs/data.md" in message


def test_incomplete_and_malformed_idx_sets_are_reported(tmp_path, no_data_environment):
    arrays = tiny_mnist()
    write_idx_set(tmp_path, arrays)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match="incomplete: missing t10k-labels-idx1-ubyte"):
        data.load("mnist", root=tmp_path)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", arrays["y_test"])
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", arrays["y_train"])  # labels in place of images
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\.gz: x_train has shape \(6,\), expected"):
        data.load("mnist", root=tmp_path)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", arrays["x_train"][:5])
    with pytest.raises(DataError, match=r"train-labels-idx1-ubyte\.gz: y_train has 6 labels .* 5 examples"):
        data.load("mnist", root=tmp_path)


def test_mnist_npz_missing_key_names_the_file(tmp_path, no_data_environment):
    arrays = tiny_mnist()
    del arrays["y_test"]
    np.savez_compressed(tmp_path / "mnist.npz", **arrays)
    with pytest.raises(DataError, match=r"mnist\.npz: missing array\(s\) y_test"):
        data.load("mnist", root=tmp_path)


def test_dna_from_libsvm_text_files(tmp_path, no_data_environment):
    (tmp_path / "dna.scale").write_text("3 1:1 180:1\n1 2:1\n2 3:1\n")
    (tmp_path / "dna.scale.t").write_text("1 1:1\n3 5:1\n")
    dna = data.load("dna", root=tmp_path)
    assert dna.train.shape == (3, 180) and dna.test.shape == (2, 180)
    assert dna.train_labels.tolist() == [2, 0, 1] and dna.test_labels.tolist() == [0, 2]
    (tmp_path / "dna.scale.t").write_text("1 1:1\n3 5:0.5\n")
    with pytest.raises(DataError, match=r"dna\.scale\.t: x_test must be binary"):
        data.load("dna", root=tmp_path)


# --- the real shared files ----------------------------------------------------------------------


@pytest.mark.slow
def test_real_mnist_npz(shared_data):
    mnist = data.load("mnist", root=shared_data)
    assert mnist.train.shape == (60000, 784) and mnist.test.shape == (10000, 784)
    assert bool(((mnist.train == 0) | (mnist.train == 1)).all())
    # Label counts from the shared data README.
    assert torch.bincount(mnist.train_labels)[:4].tolist() == [5923, 6742, 5958, 6131]
    assert torch.bincount(mnist.test_labels)[:4].tolist() == [980, 1135, 1032, 1010]


def test_real_dna_and_npz_sets(shared_data):
    dna = data.load("dna", root=shared_data)
    assert dna.train.shape == (2000, 180) and dna.test.shape == (1186, 180)
    assert torch.bincount(dna.train_labels).tolist() == [464, 485, 1051]
    shapes = {
        "nade-dna": (1400, 600, 1186, 180),
        "mushrooms": (2000, 500, 5624, 112),
        "nips": (400, 100, 1240, 500),
        "adult": (5000, 1414, 26147, 123),
    }
    for name, (n_train, n_valid, n_test, n_visible) in shapes.items():
        dataset = data.load(name, root=shared_data)
        assert (len(dataset.train), len(dataset.valid), len(dataset.test)) == (n_train, n_valid, n_test)
        assert dataset.n_visible == n_visible
    silhouettes = data.load("caltech101-silhouettes", root=shared_data)
    assert silhouettes.image_shape == (28, 28) and int(silhouettes.train_labels.max()) == 100
    alphadigits = data.load("binary-alphadigits", root=shared_data)
    assert alphadigits.train.shape == (1404, 320) and alphadigits.test is None


def test_real_fashion_mnist_from_debian(monkeypatch):
    if not (DEBIAN_FASHION_MNIST / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(
            f"Debian's dataset-fashion-mnist is not installed ({DEBIAN_FASHION_MNIST} is absent); "
            "`apt-get install dataset-fashion-mnist` provides it"
        )
    monkeypatch.delenv(registry.ENVIRONMENT_VARIABLE, raising=False)
    fashion = data.load("fashion-mnist", n_test=1000)
    assert fashion.source.startswith(str(DEBIAN_FASHION_MNIST))
    assert fashion.train.shape == (60000, 784) and fashion.test.shape == (1000, 784)
    assert torch.bincount(fashion.train_labels).tolist() == [6000] * 10
