"""The command line with ±1 spin visible units: ``train --visible-units spin`` on ±1 data.

Properties checked, on a tiny ±1 ``.npy`` written here: the data file is read (±1 is binary data
coded as spins), ``train`` builds a SpinRBM (and a SpinDBM with ``--model dbm``) whose file
loads back as one, ``logz`` agrees with enumeration with a checked verdict, ``sample`` writes ±1
values, and ``--visible-units spin`` with aligned sequences or ``--pretrain`` ends in one
readable line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli

# Whole commands (about 7 s together): the second tier.
pytestmark = pytest.mark.slow


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


@pytest.fixture(scope="module")
def spins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    x = np.where(rng.random((200, 8)) < 0.3, -1, 1)
    x[:, 4:] = x[:, :4] * np.where(rng.random((200, 4)) < 0.1, -1, 1)  # pairs of coupled spins
    path = tmp_path_factory.mktemp("spins") / "spins.npy"
    np.save(path, x.astype(np.int8))
    return path


@pytest.fixture(scope="module")
def trained(spins: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    result = invoke(
        "train",
        "--data",
        spins,
        "--hidden",
        4,
        "--visible-units",
        "spin",
        "--algorithm",
        "pcd",
        "--updates",
        200,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "±1 visible units" in result.output
    return out / "model.safetensors"


def test_train_builds_a_spin_rbm_and_logz_reads_it(trained: Path):
    model = bl.io.load_model(trained)
    assert isinstance(model, bl.models.SpinRBM)
    assert model.base_fitted and model.witness is not None
    result = invoke("logz", trained, "--method", "ais", "--chains", 50, "--temperatures", 200, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    exact = bl.exact_log_z(model)
    assert abs(record["log_z"] - exact) < 4 * record["stderr"], (record, exact)
    assert record["verdict"] == "reliable"  # the witness rows (kept as 0/1) start the bound's chains


def test_sample_writes_spins(trained: Path, tmp_path: Path):
    out = tmp_path / "samples.npy"
    result = invoke("sample", trained, "--chains", 3, "--sweeps", 10, "--keep-every", 5, "--out", out)
    assert result.exit_code == 0, result.output
    samples = np.load(out)
    assert samples.shape == (2, 3, 8) and set(np.unique(samples)) <= {-1, 1}


def test_a_spin_dbm_trains_and_refusals_are_one_line(spins: Path, tmp_path: Path):
    result = invoke(
        "train",
        "--data",
        spins,
        "--model",
        "dbm",
        "--layers",
        "8,3,2",
        "--visible-units",
        "spin",
        "--updates",
        20,
        "--out",
        tmp_path / "dbm",
    )
    assert result.exit_code == 0, result.output
    assert isinstance(bl.io.load_model(tmp_path / "dbm" / "model.safetensors"), bl.models.SpinDBM)
    refused = invoke(
        "train",
        "--data",
        spins,
        "--model",
        "dbm",
        "--layers",
        "8,3,2",
        "--visible-units",
        "spin",
        "--pretrain",
        "--out",
        tmp_path / "refused",
    )
    assert refused.exit_code == 1 and "--pretrain" in refused.stderr and "Traceback" not in refused.output
