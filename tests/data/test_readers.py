"""File readers: valid files round-trip; every corrupt file is refused naming the file and problem."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

import boltzlab.data as data
from boltzlab.data import readers
from boltzlab.errors import DataError


def write_idx(path: Path, array: np.ndarray, *, type_code: int = 0x08, compress: bool = False) -> Path:
    """An IDX file as specified on the MNIST page: magic, big-endian sizes, big-endian values."""
    dtype = {0x08: ">u1", 0x0C: ">i4", 0x0D: ">f4"}[type_code]
    payload = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload += np.ascontiguousarray(array, dtype=dtype).tobytes()
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return path


@pytest.fixture
def images() -> np.ndarray:
    # 5 grey images of 3x2 pixels: distinct sizes so a transposed reshape fails loudly.
    return np.arange(30, dtype=np.uint8).reshape(5, 3, 2) * 8


# --- IDX --------------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_idx_round_trip_plain_and_gzip(tmp_path, images, compress):
    path = write_idx(tmp_path / "train-images-idx3-ubyte", images, compress=compress)
    read = data.read_idx(path)
    assert read.dtype == np.uint8 and read.shape == (5, 3, 2)
    assert np.array_equal(read, images)


def test_idx_big_endian_wider_types_are_decoded(tmp_path):
    values = np.array([[1, -2, 70000], [3, 4, -5]], dtype=np.int32)
    read = data.read_idx(write_idx(tmp_path / "values.idx2", values, type_code=0x0C))
    assert read.dtype == np.int32 and np.array_equal(read, values)
    floats = np.array([0.5, 1.25, -3.0], dtype=np.float32)
    assert np.array_equal(data.read_idx(write_idx(tmp_path / "f.idx1", floats, type_code=0x0D)), floats)


def test_idx_bad_magic_number_is_refused(tmp_path, images):
    path = write_idx(tmp_path / "train-images-idx3-ubyte", images)
    raw = bytearray(path.read_bytes())
    raw[0] = 0x12
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.*bad IDX magic number 0x12000803"):
        data.read_idx(path)


def test_idx_unknown_type_code_is_refused(tmp_path, images):
    path = write_idx(tmp_path / "x-ubyte", images)
    raw = bytearray(path.read_bytes())
    raw[2] = 0x07
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"x-ubyte.*magic"):
        data.read_idx(path)


@pytest.mark.parametrize("compress", [False, True])
def test_idx_truncated_payload_is_refused(tmp_path, images, compress):
    full = write_idx(tmp_path / "full", images).read_bytes()
    path = tmp_path / ("t10k-images-idx3-ubyte" + (".gz" if compress else ""))
    cut = full[:-7]
    path.write_bytes(gzip.compress(cut) if compress else cut)
    with pytest.raises(DataError, match=rf"{path.name}: truncated IDX payload.*30 bytes.*23 follow"):
        data.read_idx(path)


def test_idx_truncated_header_extra_bytes_and_empty_file_are_refused(tmp_path, images):
    full = write_idx(tmp_path / "full", images).read_bytes()
    short = tmp_path / "short-ubyte"
    short.write_bytes(full[:9])
    with pytest.raises(DataError, match="short-ubyte: truncated IDX header"):
        data.read_idx(short)
    long = tmp_path / "long-ubyte"
    long.write_bytes(full + b"\x00\x01")
    with pytest.raises(DataError, match="long-ubyte: 2 unexpected bytes after the IDX payload"):
        data.read_idx(long)
    empty = tmp_path / "empty-ubyte"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty-ubyte: the file is empty"):
        data.read_idx(empty)


def test_idx_broken_gzip_stream_is_refused(tmp_path, images):
    compressed = gzip.compress(write_idx(tmp_path / "full", images).read_bytes())
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(compressed[: len(compressed) // 2])
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte\.gz: broken gzip stream"):
        data.read_idx(path)


def test_idx_path_with_sibling_labels_and_count_mismatch(tmp_path, images):
    write_idx(tmp_path / "train-images-idx3-ubyte", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.array([3, 1, 4, 1, 5], dtype=np.uint8))
    dataset = data.load(tmp_path / "train-images-idx3-ubyte", binarize="threshold")
    assert dataset.train.shape == (5, 6) and dataset.image_shape == (3, 2)
    assert dataset.train_labels.tolist() == [3, 1, 4, 1, 5]
    # Threshold rule: pixel > 127 (pixel / 255 >= 0.5) is 1.
    assert torch.equal(dataset.train, torch.from_numpy((images.reshape(5, 6) > 127).astype(np.float32)))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.array([3, 1, 4, 1], dtype=np.uint8))
    with pytest.raises(
        DataError, match="train-labels-idx1-ubyte: the label array has 4 labels but the inputs have 5"
    ):
        data.load(tmp_path / "train-images-idx3-ubyte", binarize="threshold")


def test_idx_grey_images_need_explicit_binarisation(tmp_path, images):
    path = write_idx(tmp_path / "grey.idx3", images)
    with pytest.raises(
        DataError, match=r"grey\.idx3: the data must be binary.*binarize= \(--binarize\) 'threshold'"
    ):
        data.load(path)
    labels = write_idx(tmp_path / "labels.idx1", np.arange(4, dtype=np.uint8))
    with pytest.raises(DataError, match=r"labels\.idx1: holds a vector"):
        data.load(labels)


# --- npz --------------------------------------------------------------------------------------


def test_npz_binary_file_with_all_splits_loads(tmp_path):
    generator = np.random.default_rng(0)
    x_train = generator.integers(0, 2, size=(7, 3, 4), dtype=np.uint8)
    x_test = generator.integers(0, 2, size=(2, 3, 4), dtype=np.uint8)
    path = tmp_path / "toy.npz"
    np.savez_compressed(path, x_train=x_train, y_train=np.arange(7), x_test=x_test, x_valid=x_test[:1])
    dataset = data.load(path)
    assert dataset.name == "toy.npz" and dataset.source == str(path)
    assert dataset.train.shape == (7, 12) and dataset.train.dtype == torch.float32
    assert dataset.valid.shape == (1, 12) and dataset.test.shape == (2, 12)
    assert dataset.image_shape == (3, 4) and dataset.n_visible == 12
    assert torch.equal(dataset.train, torch.from_numpy(x_train.reshape(7, 12).astype(np.float32)))
    assert dataset.train_labels.dtype == torch.int64 and dataset.test_labels is None


def test_npz_missing_keys_are_refused(tmp_path):
    path = tmp_path / "wrong_keys.npz"
    np.savez_compressed(path, train=np.zeros((3, 4), dtype=np.uint8))
    with pytest.raises(DataError, match=r"wrong_keys\.npz: missing array\(s\) x_train \(found: train\)"):
        data.load(path)


def test_npz_nan_and_non_binary_values_are_refused(tmp_path):
    values = np.zeros((4, 5), dtype=np.float32)
    values[2, 3] = np.nan
    nan_path = tmp_path / "has_nan.npz"
    np.savez_compressed(nan_path, x_train=values)
    with pytest.raises(DataError, match=r"has_nan\.npz: x_train contains NaN.*row 2, column 3"):
        data.load(nan_path)
    values[2, 3] = 0.25
    grey_path = tmp_path / "grey.npz"
    np.savez_compressed(grey_path, x_train=values)
    with pytest.raises(DataError, match=r"grey\.npz: x_train must be binary.*0\.25 at row 2, column 3"):
        data.load(grey_path)
    binarised = data.load(grey_path, binarize="threshold")
    assert binarised.train.sum().item() == 0.0


def test_npz_mismatched_labels_and_split_shapes_are_refused(tmp_path):
    path = tmp_path / "mismatch.npz"
    np.savez_compressed(path, x_train=np.ones((4, 6), dtype=np.uint8), y_train=np.arange(3))
    with pytest.raises(DataError, match=r"mismatch\.npz: y_train has 3 labels but the inputs have 4"):
        data.load(path)
    np.savez_compressed(path, x_train=np.ones((4, 6), dtype=np.uint8), x_test=np.ones((2, 5), dtype=np.uint8))
    with pytest.raises(DataError, match=r"mismatch\.npz: x_test has examples of shape \(5,\)"):
        data.load(path)


def test_npz_unreadable_and_empty_files_are_refused(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04 this is not a zip archive")
    with pytest.raises(DataError, match=r"garbage\.npz: not a readable \.npz archive"):
        data.read_npz(garbage)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match=r"empty\.npz: the file is empty"):
        data.load(empty)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, x_train=np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match=r"pickled\.npz"):
        data.load(pickled)


# --- svmlight ---------------------------------------------------------------------------------


def test_svmlight_binary_file_loads_with_labels_encoded(tmp_path):
    path = tmp_path / "tiny.svm"
    path.write_text("3 1:1 4:1\n1 2:1\n2 5:1 # a comment\n3 1:1 2:1 3:1\n")
    dataset = data.load(path, n_features=6)
    assert dataset.train.shape == (4, 6)
    assert dataset.train[0].tolist() == [1, 0, 0, 1, 0, 0]
    assert dataset.train_labels.tolist() == [2, 0, 1, 2]


def test_svmlight_non_binary_nan_and_malformed_files_are_refused(tmp_path):
    scaled = tmp_path / "scaled.libsvm"
    scaled.write_text("1 1:1 2:0.5\n-1 2:1\n")
    with pytest.raises(DataError, match=r"scaled\.libsvm: the data must be binary.*0\.5 at row 0, column 1"):
        data.load(scaled)
    with_nan = tmp_path / "nan.svmlight"
    with_nan.write_text("1 1:1 2:nan\n")
    with pytest.raises(DataError, match=r"nan\.svmlight: the data contains NaN"):
        data.load(with_nan)
    broken = tmp_path / "broken.txt"
    broken.write_text("1 1:1 2:abc\n")
    with pytest.raises(DataError, match=r"broken\.txt: not a valid svmlight/libsvm file"):
        data.load(broken)
    wide = tmp_path / "wide.svm"
    wide.write_text("1 1:1 9:1\n")
    with pytest.raises(DataError, match=r"wide\.svm: .*n_features"):
        data.read_svmlight(wide, n_features=4)


def test_unknown_extension_needs_format_option(tmp_path):
    path = tmp_path / "dna.scale"
    path.write_text("1 1:1\n2 2:1\n")
    with pytest.raises(DataError, match=r"dna\.scale: cannot tell the format.*format="):
        data.load(path)
    assert data.load(path, format="svmlight").train.shape == (2, 2)


# --- binarize ---------------------------------------------------------------------------------


def test_binarize_threshold_matches_mnist_and_digits_rules():
    pixels = torch.arange(256, dtype=torch.float32)
    assert torch.equal(data.binarize(pixels / 255), (pixels > 127).float())
    levels = torch.arange(17, dtype=torch.float32)
    assert torch.equal(data.binarize(levels / 16), (levels >= 8).float())


def test_binarize_stochastic_is_reproducible_unbiased_and_leaves_input_alone():
    probabilities = torch.tensor([0.0, 0.2, 0.7, 1.0]).repeat(5000, 1)
    before = probabilities.clone()
    first = data.binarize(probabilities, stochastic=True, generator=4)
    assert torch.equal(first, data.binarize(probabilities, stochastic=True, generator=4))
    assert torch.equal(probabilities, before)
    mean = first.mean(0)
    assert mean[0] == 0 and mean[3] == 1
    for column, p in ((1, 0.2), (2, 0.7)):
        assert abs(mean[column].item() - p) < 4 * (p * (1 - p) / 5000) ** 0.5


def test_binarize_refuses_out_of_range_and_nan():
    with pytest.raises(DataError, match=r"\[0, 1\].*255"):
        data.binarize(np.array([0.0, 255.0]))
    with pytest.raises(DataError, match="NaN"):
        data.binarize(torch.tensor([0.5, float("nan")]))


def test_as_binary_matrix_checks_grey_level_range():
    with pytest.raises(DataError, match=r"some\.file: x_test has values from 0 to 300.*pixel_max"):
        readers.as_binary_matrix(
            np.array([[0, 300]]), source="some.file", key="x_test", binarize_method="threshold"
        )
