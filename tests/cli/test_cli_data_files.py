"""Everyday data files through the command line: ``--data`` takes .npy, .csv, .tsv and HDF5 with
``--data-key``, ``--binarize``, ``--pixel-max``, ``--test-fraction`` and ``--validation-fraction``
on every command that reads data, and every malformed file is exit status 1 and one line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from boltzlab.cli.main import cli

N_EXAMPLES, N_VISIBLE, N_HIDDEN = 30, 9, 3  # 3×3 images; distinct sizes so a transposition fails loudly
TINY_TRAIN = ("--hidden", N_HIDDEN, "--updates", 3, "--batch-size", 10, "--snapshots", 0)


def invoke(*args: str | Path | int | float) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def binary() -> np.ndarray:
    return (np.random.default_rng(7).random((N_EXAMPLES, N_VISIBLE)) < 0.3).astype(np.uint8)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, binary: np.ndarray) -> Path:
    folder = tmp_path_factory.mktemp("files")
    np.save(folder / "x.npy", binary)
    header = ",".join(f"p{j}" for j in range(N_VISIBLE))
    (folder / "x.csv").write_text(header + "\n" + "\n".join(",".join(map(str, row)) for row in binary) + "\n")
    (folder / "x.tsv").write_text("\n".join("\t".join(map(str, row)) for row in binary) + "\n")
    grey = np.where(binary == 1, 200, 40) + np.arange(N_VISIBLE)  # grey levels; >= 127.5 is on
    (folder / "grey.csv").write_text("\n".join(",".join(map(str, row)) for row in grey) + "\n")
    return folder


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("x.npy", ()),
        ("x.csv", ()),
        ("x.tsv", ()),
        ("grey.csv", ("--binarize", "threshold", "--pixel-max", 255)),
    ],
)
def test_train_reads_npy_csv_tsv_and_grey_levels(
    files: Path, tmp_path: Path, name: str, extra: tuple
) -> None:
    result = invoke("train", "--data", files / name, *TINY_TRAIN, *extra, "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert f"training RBM {N_VISIBLE}×{N_HIDDEN} on {name} ({N_EXAMPLES} examples)" in result.output


def test_train_reads_hdf5_with_data_key(binary: np.ndarray, tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py", reason="h5py is not installed: pip install 'boltzlab[hdf5]'")
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as handle:
        handle["train/images"] = binary.reshape(N_EXAMPLES, 3, 3)
        handle["train/labels"] = np.arange(N_EXAMPLES) % 2
        handle["other"] = np.zeros((4, 2))
    result = invoke(
        "train", "--data", path, "--data-key", "train/images", *TINY_TRAIN, "--out", tmp_path / "run"
    )
    assert result.exit_code == 0, result.output
    assert f"on x.h5 ({N_EXAMPLES} examples)" in result.output
    assert_one_line_error(
        invoke("train", "--data", path, *TINY_TRAIN, "--out", tmp_path / "r2"),
        "cannot tell which dataset holds the examples",
        "train/images (30, 3, 3)",
        "--data-key",
    )
    assert_one_line_error(
        invoke("train", "--data", path, "--data-key", "images", *TINY_TRAIN, "--out", tmp_path / "r3"),
        "no dataset 'images'",
    )


def test_fractions_hold_out_the_same_examples_in_train_logz_and_evaluate(files: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    split = ("--test-fraction", 0.2, "--validation-fraction", 0.1)
    result = invoke("train", "--data", files / "x.csv", *TINY_TRAIN, *split, "--seed", 5, "--out", out)
    assert result.exit_code == 0, result.output
    assert "(21 examples)" in result.output  # 30 − 6 test − 3 validation
    recorded = tomllib.loads((out / "config.toml").read_text())
    assert recorded["test_fraction"] == 0.2 and recorded["validation_fraction"] == 0.1
    model = out / "model.safetensors"
    result = invoke("evaluate", model, "--data", files / "x.csv", *split, "--methods", "exact", "--json")
    assert result.exit_code == 0, result.output
    result = invoke("logz", model, "--method", "raise", "--data", files / "x.csv", *split, "--examples", 2,
                    "--chains", 3, "--temperatures", 20)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 of 6 test examples" in result.output
    assert_one_line_error(
        invoke("logz", model, "--method", "exact", "--binarize", "threshold"), "--binarize", "pass --data"
    )


@pytest.mark.parametrize(
    ("name", "content", "extra", "fragments"),
    [
        ("empty.csv", "", (), ["empty.csv: the file is empty"]),
        ("ragged.csv", "1,0,1\n0,1\n", (), ["ragged rows: line 2 has 2 columns but line 1 has 3"]),
        ("mixed.csv", "a,b,c\n1 0 1\n", (), ["wrong delimiter", "whitespace"]),
        ("cells.csv", "1,0,1\n0,1,1\n1;0;1\n", (), ["wrong delimiter", "line 3 '1;0;1'", "semicolon"]),
        ("words.tsv", "1\t0\n0\tno\n", (), ["line 2, column 2: 'no' is not a number"]),
        ("nan.csv", "1,0\nnan,1\n", (), ["line 2, column 1 is nan"]),
        (
            "grey.csv",
            "0,255\n128,3\n",
            (),
            ["line 1, column 2: value 255", "--binarize threshold|stochastic"],
        ),
        ("grey2.csv", "0,255\n128,3\n", ("--binarize", "threshold"), ["outside [0, 1]", "--pixel-max"]),
        ("grey3.csv", "0,255\n128,3\n", ("--pixel-max", 255), ["--pixel-max applies with --binarize"]),
    ],
)
def test_malformed_text_files_are_one_line(
    tmp_path: Path, name: str, content: str, extra: tuple, fragments: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = invoke("train", "--data", path, *TINY_TRAIN, *extra, "--out", tmp_path / "run")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_malformed_npy_and_hdf5_are_one_line(binary: np.ndarray, tmp_path: Path) -> None:
    np.save(tmp_path / "vector.npy", binary[0])
    result = invoke("train", "--data", tmp_path / "vector.npy", *TINY_TRAIN, "--out", tmp_path / "r")
    assert_one_line_error(result, "vector.npy: the array has shape (9,) (1-D)", "reshape(1, -1)")
    np.save(tmp_path / "objects.npy", np.array([[{}, None]], dtype=object), allow_pickle=True)
    result = invoke("train", "--data", tmp_path / "objects.npy", *TINY_TRAIN, "--out", tmp_path / "r")
    assert_one_line_error(result, "objects.npy: holds Python objects", "never unpickles")
    result = invoke(
        "train", "--data", tmp_path / "vector.npy", "--data-key", "x", *TINY_TRAIN, "--out", tmp_path
    )
    assert_one_line_error(result, "--data-key applies to HDF5 files only")  # the flag, not data_key=
    (tmp_path / "fake.h5").write_text("not hdf5")
    result = invoke("train", "--data", tmp_path / "fake.h5", *TINY_TRAIN, "--out", tmp_path / "r")
    assert_one_line_error(result, "fake.h5: not a readable HDF5 file")


def test_bad_flag_values_are_usage_errors(files: Path, tmp_path: Path) -> None:
    for flag, value in (("--binarize", "median"), ("--test-fraction", 1.0), ("--pixel-max", 0)):
        result = invoke("train", "--data", files / "x.csv", *TINY_TRAIN, flag, value, "--out", tmp_path / "r")
        assert result.exit_code == 2 and flag in result.output, result.output
