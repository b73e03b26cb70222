"""``boltzlab train --centering --l1 --l1-squared`` and ``--algorithm pl`` (docs/training.md).

Properties checked: the flags reach the trainer (the model file's training record and the
checkpoint hold them; the checkpoint holds the centring offsets) and are written to
``config.toml``, so ``--config`` repeats the run; ``--algorithm pl`` trains without chains and
refuses ``--chains`` in one line; negative penalties are refused by the flag parser.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.io import load_checkpoint
from boltzlab.training import find_latest_checkpoint


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    generator = np.random.default_rng(2)
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    np.savez(path, x_train=(generator.random((30, 7)) < 0.4).astype(np.uint8))
    return path


@pytest.mark.slow
def test_centring_and_penalties_reach_the_run(tmp_path: Path, data_file: Path) -> None:
    out = tmp_path / "run"
    result = invoke(
        "train", "--data", data_file, "--hidden", 3, "--algorithm", "pcd", "--chains", 5, "--centering",
        "--l1", "0.001", "--l1-squared", "0.01", "--weight-decay", "0.0005", "--batch-size", 10,
        "--updates", 6, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = bl.RBM.load(out / "model.safetensors").metadata["training"]
    assert (record["centering"], record["l1"], record["l1_squared"], record["weight_decay"]) == (
        True,
        0.001,
        0.01,
        0.0005,
    )
    checkpoint = load_checkpoint(find_latest_checkpoint(out / "checkpoints"))
    assert checkpoint.tensors["centering.0"].shape == (7,) and checkpoint.tensors["centering.1"].shape == (3,)
    config = (out / "config.toml").read_text()
    assert "centering = true" in config and "l1 = 0.001" in config and "l1_squared = 0.01" in config


@pytest.mark.slow
def test_pl_trains_without_chains(tmp_path: Path, data_file: Path) -> None:
    out = tmp_path / "pl"
    result = invoke("train", "--data", data_file, "--hidden", 3, "--algorithm", "pl", "--batch-size", 10,
                    "--updates", 6, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "by maximum pseudo-likelihood" in result.output
    assert bl.RBM.load(out / "model.safetensors").metadata["training"]["algorithm"] == "pl"
    refused = invoke("train", "--data", data_file, "--hidden", 3, "--algorithm", "pl", "--chains", 5,
                     "--out", tmp_path / "refused")  # fmt: skip
    assert (
        refused.exit_code == 1
        and "--chains applies to" in refused.stderr
        and "PL samples nothing" in refused.stderr
    )


def test_negative_penalties_are_refused_by_the_parser(tmp_path: Path, data_file: Path) -> None:
    for flag in ("--l1", "--l1-squared"):
        result = invoke("train", "--data", data_file, "--hidden", 3, flag, "-1", "--out", tmp_path / "never")
        assert result.exit_code == 2 and flag in result.output
