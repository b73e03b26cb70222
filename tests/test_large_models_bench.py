"""Smoke test of benchmarks/large_models.py (tiny preset: a 16×200 RBM on pooled scikit-learn
digits, scored by every default method) and checks of its pooling of real images to few pixels."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import pytest
import torch

from benchmark_scripts import load_script, read_csv

# The large-model benchmark's tiny preset, end to end: the slow tier (make test-all).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("large_models")


def test_tiny_preset_runs_and_writes_the_tables(bench: ModuleType, tmp_path: Path) -> None:
    arguments = ["--preset", "tiny", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    rows = bench.main(arguments)

    methods = bench.resolve_methods(["default"])
    assert list(methods) == list(bench.STANDARD_METHODS)
    columns, written = read_csv(tmp_path / "out" / "large_models.csv")
    assert columns == list(bench.COLUMNS)
    assert len(written) == len(rows) == len(methods)  # tiny: one PCD model, every method
    assert {row["method"] for row in written} == set(methods)
    assert {(row["n_visible"], row["n_hidden"], row["algorithm"]) for row in written} == {
        ("16", "200", "pcd-const")
    }
    assert all(row["exception"] == "" for row in written), [row["exception"] for row in written]
    for row in written:
        assert math.isclose(
            float(row["log_z"]) - float(row["exact_log_z"]), float(row["error"]), abs_tol=1e-9
        )
        assert math.isfinite(float(row["stderr"])) and int(row["cost_sweeps"]) >= 0
        # check_data is the training rows, so the witness starts from data, never from nothing.
        assert row["method"] == "exact" or row["verdict"] != "unchecked"
    # A barely trained 16×200 model is easy: every estimate lands within a nat.
    assert max(abs(float(row["error"])) for row in written) < 1.0

    diag_columns, diagnostics = read_csv(tmp_path / "out" / "large_models_diagnostics.csv")
    assert diag_columns[:2] == ["model", "method"] and len(diagnostics) == len(written)
    report = (tmp_path / "out" / "large_models.md").read_text()
    assert report.startswith("Made by `python benchmarks/large_models.py --preset tiny")
    assert "commit " in report and "Confident misses" in report and "## Per hidden-layer width" in report

    # The model is cached with its sidecar and trajectory, and a second run reuses it.
    sidecars = sorted((tmp_path / "cache").glob("*/model.json"))
    assert len(sidecars) == 1
    sidecar = json.loads(sidecars[0].read_text())
    assert {"exact_log_z", "train_seconds", "config"} <= set(sidecar)
    assert (sidecars[0].parent / "trajectory.safetensors").is_file()
    again = bench.main([*arguments, "--methods", "exact"])
    assert [row["exact_log_z"] for row in again] == [rows[0]["exact_log_z"]]
    assert again[0]["error"] == 0.0


def test_pooling_keeps_every_row_and_thresholds_at_half_a_block(bench: ModuleType) -> None:
    image = torch.zeros(4, 6)
    image[0:2, 0:2] = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # half on: 1
    image[0:2, 2:4] = torch.tensor([[1.0, 0.0], [0.0, 0.0]])  # a quarter: 0
    image[2:4, 4:6] = 1.0  # all on: 1
    rows = torch.stack([image.flatten(), torch.zeros(24)])  # an all-zero row is kept too
    pooled = bench.pool_binary(rows, (4, 6), crop=None, block=2)
    assert pooled.tolist() == [[1.0, 0.0, 0.0, 0.0, 0.0, 1.0], [0.0] * 6]
    cropped = bench.pool_binary(rows, (4, 6), crop=(0, 4, 2, 6), block=2)  # columns 2..5
    assert cropped.tolist() == [[0.0, 0.0, 0.0, 1.0], [0.0] * 4]
    with pytest.raises(ValueError, match="do not tile"):
        bench.pool_binary(rows, (4, 6), crop=None, block=4)


def test_every_dataset_pools_to_at_most_twenty_pixels(bench: ModuleType) -> None:
    assert {name: spec.n_visible() for name, spec in bench.DATASETS.items()} == {
        "mnist-5x4": 20,
        "alphadigits-5x4": 20,
        "digits-4x4": 16,
    }
    train, held_out = bench.load_pooled("digits-4x4", seed=0)  # bundled with scikit-learn
    assert train.shape == (1497, 16) and held_out.shape == (300, 16)
    assert set(train.unique().tolist()) <= {0.0, 1.0}
