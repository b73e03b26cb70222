"""Smoke test of benchmarks/hard_potts.py: its tiny preset on the WW domain alignment, end to end."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmark_scripts import load_script, read_csv

pytestmark = pytest.mark.slow


def test_tiny_preset_scores_every_potts_estimator(shared_data: Path, tmp_path: Path) -> None:
    bench = load_script("hard_potts")
    arguments = ["--preset", "tiny", "--data-root", str(shared_data), "--cache", str(tmp_path / "cache")]
    arguments += [
        "--out",
        str(tmp_path / "out"),
        "--algorithms",
        "pcd-const",
        "--methods",
        "exact",
        "ais",
        "rts",
    ]
    rows = bench.main(arguments)
    _, written = read_csv(tmp_path / "out" / "hard_potts.csv")
    assert len(written) == len(rows) == 3  # one constant-rate PCD model, three methods
    assert all(row["exception"] == "" for row in written), [row["exception"] for row in written]
    for row in written:
        assert math.isclose(
            float(row["log_z"]) - float(row["exact_log_z"]), float(row["error"]), abs_tol=1e-9
        )
        assert row["confident_miss"] in ("False", "")
        if row["method"] != "exact":
            assert row["verdict"] in ("reliable", "unreliable", "unchecked")
            assert row["witness"] == "witness rows"  # the model keeps rows of its training alignment
    assert "Confident misses: 0 of" in (tmp_path / "out" / "hard_potts.md").read_text()
