"""Everyday data files: .npy, delimited text (.csv/.tsv/.txt) and HDF5 read back exactly, and
every malformed file is refused with one line that names the file, the place and the fix.

Also: the header and the delimiter are detected, a ``.txt`` of ``index:value`` tokens is still
svmlight, grey levels are binarised only when asked, and ``test_fraction`` /
``validation_fraction`` carve disjoint splits reproducibly, whatever the training seed.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

import boltzlab.data as data
from boltzlab.data.from_path import guess_format
from boltzlab.data.npy_files import read_npy
from boltzlab.errors import DataError, ValidationError

# 11 examples of 7 variables: distinct sizes so a transposition fails loudly.
N_EXAMPLES, N_VARIABLES = 11, 7


@pytest.fixture
def binary() -> np.ndarray:
    return (np.random.default_rng(4).random((N_EXAMPLES, N_VARIABLES)) < 0.4).astype(np.uint8)


def write_delimited(path: Path, rows: np.ndarray, delimiter: str, header: list[str] | None = None) -> Path:
    lines = [delimiter.join(header)] if header is not None else []
    lines += [delimiter.join(str(value) for value in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def refused(path: Path, **options: object) -> str:
    """The one-line message of the DataError that loading ``path`` raises."""
    with pytest.raises(DataError) as caught:
        data.load(path, **options)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


# --- formats read back exactly -------------------------------------------------------------------


def test_npy_round_trip_2d_and_images(tmp_path, binary):
    np.save(tmp_path / "x.npy", binary)
    dataset = data.load(tmp_path / "x.npy")
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())
    assert dataset.image_shape is None and dataset.test is None
    images = binary[:, :6].reshape(N_EXAMPLES, 3, 2)
    np.save(tmp_path / "images.npy", images)
    dataset = data.load(tmp_path / "images.npy")
    assert dataset.image_shape == (3, 2)
    assert torch.equal(dataset.train, torch.from_numpy(images.reshape(N_EXAMPLES, 6)).float())


@pytest.mark.parametrize(
    ("name", "delimiter"),
    [("x.csv", ","), ("x.tsv", "\t"), ("x.txt", " "), ("semi.csv", ";"), ("spaced.txt", "  ")],
)
@pytest.mark.parametrize("header", [False, True])
def test_delimited_text_round_trip_with_detected_delimiter_and_header(
    tmp_path, binary, name, delimiter, header
):
    names = [f"pixel{j}" for j in range(N_VARIABLES)] if header else None
    path = write_delimited(tmp_path / name, binary, delimiter, names)
    assert guess_format(path) == "text"
    contents = data.read_text(path)
    assert contents.delimiter == (None if delimiter.strip(" ") == "" else delimiter)
    assert contents.header == (tuple(names) if header else None)
    assert contents.line_numbers.tolist() == list(range(1 + header, N_EXAMPLES + 1 + header))
    dataset = data.load(path)
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())
    assert dataset.train_labels is None


def test_text_skips_blank_and_comment_lines_reads_gzip_and_quotes(tmp_path, binary):
    body = "# written by hand\n\n" + "\n".join(",".join(f'"{v}"' for v in row) for row in binary) + "\n\n"
    path = tmp_path / "x.csv.gz"
    path.write_bytes(gzip.compress(body.encode()))
    dataset = data.load(path)
    assert dataset.name == "x.csv"
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())


def test_text_label_column_only_when_the_header_names_it(tmp_path, binary):
    labels = np.arange(N_EXAMPLES) % 3
    table = np.column_stack([binary[:, :3], labels, binary[:, 3:]])
    header = ["a", "b", "c", "Label", "d", "e", "f", "g"]
    dataset = data.load(write_delimited(tmp_path / "labelled.csv", table, ",", header))
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())
    assert dataset.train_labels.tolist() == labels.tolist()
    # Without a header naming it, the same column is a feature (and not binary here).
    message = refused(write_delimited(tmp_path / "plain.csv", table, ","))
    assert "line 3, column 4: value 2 is not 0 or 1" in message
    # Class names become 0, 1, ... in sorted order.
    named = tmp_path / "named.csv"
    named.write_text("x1,x2,target\n1,0,dog\n0,1,cat\n1,1,dog\n")
    assert data.load(named).train_labels.tolist() == [1, 0, 1]
    # Signed classes (svmlight's -1/+1) become 0, 1 in numeric order.
    signed = tmp_path / "signed.csv"
    signed.write_text("x1,x2,y\n1,0,+1\n0,1,-1\n1,1,1\n")
    assert data.load(signed).train_labels.tolist() == [1, 0, 1]


def test_pandas_default_header_and_index_column_are_not_features(tmp_path, binary):
    # DataFrame(x).to_csv(path) writes ",0,1,...,6" and the row index as a first column.
    indexed = np.column_stack([np.arange(N_EXAMPLES), binary])
    header = ["", *map(str, range(N_VARIABLES))]
    dataset = data.load(write_delimited(tmp_path / "pandas.csv", indexed, ",", header))
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())
    # to_csv(index=False) writes "0,1,...,6".
    dataset = data.load(write_delimited(tmp_path / "noindex.csv", binary, ",", header[1:]))
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())


def test_txt_with_index_value_tokens_is_still_svmlight(tmp_path):
    path = tmp_path / "sparse.txt"
    path.write_text("# comment\n2 1:1 3:1\n1 2:1\n")
    assert guess_format(path) == "svmlight"
    dataset = data.load(path)
    assert dataset.train.tolist() == [[1, 0, 1], [0, 1, 0]] and dataset.train_labels.tolist() == [1, 0]
    dense = tmp_path / "dense.txt"
    dense.write_text("1 0 1\n0 1 0\n")
    assert guess_format(dense) == "text"


def test_hdf5_round_trip_default_key_data_key_and_labels(tmp_path, binary):
    h5py = pytest.importorskip("h5py", reason="h5py is not installed: pip install 'boltzlab[hdf5]'")
    labels = np.arange(N_EXAMPLES) % 2
    with h5py.File(tmp_path / "one.h5", "w") as handle:
        handle["pixels"] = binary
        handle["labels"] = labels
    dataset = data.load(tmp_path / "one.h5")
    assert torch.equal(dataset.train, torch.from_numpy(binary).float())
    assert dataset.train_labels.tolist() == labels.tolist()

    with h5py.File(tmp_path / "layout.hdf5", "w") as handle:
        handle["x_train"], handle["y_train"] = binary, labels
        handle["x_test"] = binary[:4]
    dataset = data.load(tmp_path / "layout.hdf5")
    assert torch.equal(dataset.test, torch.from_numpy(binary[:4]).float()) and dataset.valid is None

    images = binary[:, :6].reshape(N_EXAMPLES, 2, 3)
    with h5py.File(tmp_path / "nested.h5", "w") as handle:
        handle["train/images"] = images
        handle["train/labels"] = labels
        handle["other"] = np.zeros((3, 2))
    dataset = data.load(tmp_path / "nested.h5", data_key="train/images")
    assert dataset.image_shape == (2, 3) and dataset.train_labels.tolist() == labels.tolist()
    assert torch.equal(dataset.train, torch.from_numpy(images.reshape(N_EXAMPLES, 6)).float())


def test_grey_levels_binarised_only_when_asked(tmp_path):
    grey = np.array([[0, 127, 128, 255], [255, 10, 200, 3]])
    path = write_delimited(tmp_path / "grey.csv", grey, ",")
    assert "pass --binarize threshold|stochastic and --pixel-max" in refused(path)
    dataset = data.load(path, binarize="threshold", pixel_max=255)
    assert dataset.train.tolist() == [[0, 0, 1, 1], [1, 0, 1, 0]]
    # Text is read as floats, so without pixel_max the values must lie in [0, 1].
    assert "pixel_max= (--pixel-max)" in refused(path, binarize="threshold")
    with pytest.raises(ValidationError, match=r"pixel_max.*only with binarize"):
        data.load(path, pixel_max=255)
    stochastic = [data.load(path, binarize="stochastic", pixel_max=255, generator=3).train for _ in range(2)]
    assert torch.equal(stochastic[0], stochastic[1])
    np.save(tmp_path / "grey.npy", grey.astype(np.uint8))  # integers: pixel_max defaults to 255
    assert data.load(tmp_path / "grey.npy", binarize="threshold").train.tolist() == dataset.train.tolist()


# --- malformed files: one line each --------------------------------------------------------------


@pytest.mark.fault("hostile data files")
@pytest.mark.parametrize(
    ("name", "text", "fragments"),
    [
        ("empty.csv", "", ["the file is empty"]),
        ("blank.csv", "\n# only a comment\n\n", ["no data rows"]),
        ("header.csv", "a,b,c\n", ["only a header line", "no data rows"]),
        ("ragged.csv", "1,0,1\n0,1,1\n1,0\n", ["ragged rows: line 3 has 2 columns but line 1 has 3"]),
        (
            "ragged.tsv",
            "a\tb\n1\t0\n0\t1\t1\n",
            ["ragged rows: line 3 has 3 columns but the header (line 1) has 2"],
        ),
        ("text.csv", "1,0,1\n0,yes,1\n", ["line 2, column 2: 'yes' is not a number"]),
        ("empty-cell.csv", "1,0,1\n0,,1\n", ["line 2, column 2 is empty"]),
        (
            "row-mixed.csv",
            "1,0,1\n0,1,1\n1;0;1\n",
            ["wrong delimiter", "line 3 '1;0;1'", "semicolon", "comma"],
        ),
        (
            "header-mixed.csv",
            "a,b,c\n1 0 1\n0 1 1\n",
            ["wrong delimiter", "the header (line 1) 'a,b,c'", "whitespace"],
        ),
        ("cell-mixed.csv", "a,b\n1,0\n0;1,1\n", ["wrong delimiter", "line 3, column 1 holds '0;1'"]),
        ("nan.csv", "1,0\n0,nan\n", ["line 2, column 2 is nan", "NaN or infinite"]),
        ("inf.tsv", "1\t0\n# c\ninf\t1\n", ["line 3, column 1 is inf"]),
        (
            "grey.txt",
            "0 1\n1 0.5\n",
            ["line 2, column 2: value 0.5 is not 0 or 1", "--binarize", "--pixel-max"],
        ),
        ("latin1.csv", "caf\xe9,b\n1,0\n", ["not UTF-8 text"]),
    ],
)
def test_malformed_text_is_one_clear_line(tmp_path, name, text, fragments):
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    message = refused(path)
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.fault("hostile data files")
def test_malformed_npy_is_one_clear_line(tmp_path, binary):
    np.save(tmp_path / "vector.npy", binary[0])
    assert "shape (7,) (1-D)" in refused(tmp_path / "vector.npy") and "reshape(1, -1)" in refused(
        tmp_path / "vector.npy"
    )
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    assert "never unpickles" in refused(tmp_path / "objects.npy")
    truncated = tmp_path / "truncated.npy"
    np.save(truncated, binary)
    truncated.write_bytes(truncated.read_bytes()[:-9])
    assert "truncated, or the header is corrupt" in refused(truncated)
    with open(tmp_path / "archive.npy", "wb") as handle:
        np.savez(handle, x_train=binary)
    assert "is a .npz archive" in refused(tmp_path / "archive.npy")
    np.save(tmp_path / "nan.npy", np.array([[0.0, np.nan]]))
    assert "NaN" in refused(tmp_path / "nan.npy")


def test_malformed_hdf5_is_one_clear_line(tmp_path, binary):
    h5py = pytest.importorskip("h5py", reason="h5py is not installed: pip install 'boltzlab[hdf5]'")
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as handle:
        handle["a"], handle["b"], handle["v"] = binary, binary[:, :3], binary[0]
    message = refused(path)
    assert "cannot tell which dataset" in message and "a (11, 7), b (11, 3), v (7,)" in message
    assert "--data-key" in message
    message = refused(path, data_key="images")
    assert "no dataset 'images'" in message and "a (11, 7)" in message
    assert "dataset 'v' has shape (7,) (1-D)" in refused(path, data_key="v")
    (tmp_path / "fake.h5").write_text("not hdf5")
    assert "not a readable HDF5 file" in refused(tmp_path / "fake.h5")
    with pytest.raises(ValidationError, match=r"data_key .* HDF5 files only"):
        data.load(write_delimited(tmp_path / "x.csv", binary, ","), data_key="a")


def test_hdf5_without_h5py_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "h5py", None)  # import h5py now raises ImportError
    path = tmp_path / "x.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n")
    assert "pip install 'boltzlab[hdf5]'" in refused(path)


def test_unknown_extension_lists_the_formats(tmp_path):
    path = tmp_path / "x.dat"
    path.write_text("1 0\n")
    message = refused(path)
    assert ".npy, .csv, .tsv, .txt, .h5" in message and "format=" in message
    assert data.load(path, format="text").train.tolist() == [[1, 0]]


# --- splits --------------------------------------------------------------------------------------


def test_split_fractions_are_disjoint_reproducible_and_keep_labels(tmp_path):
    n = 40
    rows = np.column_stack([np.eye(n, dtype=np.uint8)[:, :n], np.arange(n)])  # row i: one-hot i, label i
    path = write_delimited(tmp_path / "rows.csv", rows, ",", [*(f"v{j}" for j in range(n)), "y"])
    split = data.load(path, test_fraction=0.25, validation_fraction=0.1)
    assert (split.train.shape[0], split.test.shape[0], split.valid.shape[0]) == (26, 10, 4)
    index = {name: getattr(split, name).argmax(dim=1).tolist() for name in ("train", "test", "valid")}
    assert sorted(index["train"] + index["test"] + index["valid"]) == list(range(n))
    for name in ("train", "test", "valid"):
        assert index[name] == sorted(index[name])  # each split keeps the file's order
        assert getattr(split, f"{name}_labels").tolist() == index[name]  # labels follow their rows
    # The same split whatever the generator (the training seed); another split_seed, another split.
    again = data.load(path, test_fraction=0.25, validation_fraction=0.1, generator=123)
    assert torch.equal(again.test, split.test) and torch.equal(again.valid, split.valid)
    other = data.load(path, test_fraction=0.25, validation_fraction=0.1, split_seed=1)
    assert not torch.equal(other.test, split.test)
    assert "10 test, 4 validation examples held out" in split.description


def test_split_fractions_refused_when_impossible(tmp_path, binary):
    path = write_delimited(tmp_path / "x.csv", binary, ",")
    with pytest.raises(ValidationError, match=r"test_fraction must be a number in \[0, 1\)"):
        data.load(path, test_fraction=1.0)
    with pytest.raises(ValidationError, match="must be below 1"):
        data.load(path, test_fraction=0.5, validation_fraction=0.5)
    with pytest.raises(DataError, match="11 examples, too few"):
        data.load(path, test_fraction=0.99)
    with pytest.raises(DataError, match=r"already has a test split \(300 examples\); drop test_fraction"):
        data.load("digits", test_fraction=0.1)
    assert data.load("digits", validation_fraction=0.1).valid.shape == (150, 64)


@pytest.mark.fault("hostile data files")
def test_an_npy_header_claiming_more_rows_than_the_file_holds_is_refused_before_allocating(tmp_path):
    """A header claiming 10^11 rows used to reach numpy's allocation ("out of memory; use fewer chains")."""
    small = np.zeros((3, 4), dtype=np.uint8)
    header = np.lib.format.header_data_from_array_1_0(small)
    header["shape"] = (10**11, 4)
    path = tmp_path / "huge.npy"
    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(small.tobytes())
    with pytest.raises(
        DataError,
        match=r"declares an array of shape \(100000000000, 4\) \(uint8\), 400,000,000,000 bytes, but the file holds 12",
    ):
        read_npy(path)
    np.save(tmp_path / "fine.npy", small)
    assert read_npy(tmp_path / "fine.npy").shape == (3, 4)


@pytest.mark.fault("hostile data files")
def test_a_spreadsheet_formula_is_text_not_a_wrong_delimiter(tmp_path):
    """A cell such as ``=cmd|' /C calc'!A0`` holds a space, but it is not numbers under another delimiter."""
    path = tmp_path / "formula.csv"
    path.write_text("a,b\n1,0\n=cmd|' /C calc'!A0,1\n")
    with pytest.raises(DataError, match=r"line 3, column 1: \"=cmd\|' /C calc'!A0\" is not a number"):
        data.load(str(path))
