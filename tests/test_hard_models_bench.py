"""Smoke test of benchmarks/hard_models.py (tiny preset on the built-in digits) and checks of its
scoring rules (confident miss, coverage, crying wolf) on a hand-made table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import torch

from benchmark_scripts import load_script, read_csv

# The hard-model benchmark's tiny preset, end to end: the slow tier (make test-all).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("hard_models")


def test_tiny_preset_runs_and_writes_the_tables(bench: ModuleType, tmp_path: Path) -> None:
    arguments = ["--preset", "tiny", "--datasets", "digits", "--cache", str(tmp_path / "cache")]
    arguments += ["--out", str(tmp_path / "out"), "--raise-examples", "2"]
    rows = bench.main(arguments)

    methods = bench.resolve_methods(["default"])
    assert {"exact", "ais", "raise", "rts"} <= set(methods)
    columns, written = read_csv(tmp_path / "out" / "hard_models.csv")
    assert columns == list(bench.COLUMNS)
    assert len(written) == len(rows) == 2 * len(methods)  # tiny: CD-1 and constant-rate PCD
    assert {row["algorithm"] for row in written} == {"cd1", "pcd-const"}
    assert all(row["exception"] == "" for row in written), [row["exception"] for row in written]
    for row in written:
        assert math.isclose(
            float(row["log_z"]) - float(row["exact_log_z"]), float(row["error"]), abs_tol=1e-9
        )
        assert math.isfinite(float(row["stderr"])) and int(row["cost_sweeps"]) >= 0
    # Tiny 64×6 models are easy: every default-shaped estimate lands within a nat.
    assert max(abs(float(row["error"])) for row in written) < 1.0

    diag_columns, diagnostics = read_csv(tmp_path / "out" / "hard_models_diagnostics.csv")
    assert diag_columns[:2] == ["model", "method"] and len(diagnostics) == len(written)
    assert "info.ess" in diag_columns  # AIS's effective sample size, flattened from est.info
    assert all(
        row["error"] == written_row["error"] for row, written_row in zip(diagnostics, written, strict=True)
    )
    assert "Confident misses" in (tmp_path / "out" / "hard_models.md").read_text()

    # Each model is cached with its sidecar and trajectory, and a second run reuses it.
    sidecars = sorted((tmp_path / "cache").glob("*/model.json"))
    assert len(sidecars) == 2
    sidecar = json.loads(sidecars[0].read_text())
    assert {"exact_log_z", "train_seconds", "config"} <= set(sidecar)
    assert (sidecars[0].parent / "trajectory.safetensors").is_file()
    assert "trajectory-ais" in methods and {row["method"] for row in written} == set(methods)
    again = bench.main([*arguments, "--methods", "exact"])
    assert [row["exact_log_z"] for row in again] == [row["exact_log_z"] for row in rows[:: len(methods)]]


def test_missing_dataset_and_unknown_method_are_skipped(bench: ModuleType, tmp_path: Path) -> None:
    where = ["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]
    missing = str(tmp_path / "no-such.npz")
    rows = bench.main(["--preset", "tiny", "--datasets", missing, "--methods", "no-such-method", *where])
    assert rows == []


def _row(method: str, error: float, stderr: float, reliable: bool | None, exception: str = "") -> dict:
    return {"method": method, "error": error, "stderr": stderr, "reliable": reliable, "exception": exception}


HAND_MADE = [
    _row("exact", 0.0, 0.0, True),  # never scored
    _row("ais", 0.05, 0.01, True),  # 5 s.e. off but under the 0.1-nat floor: no miss, not covered
    _row("ais", -0.5, 0.1, True),  # beyond max(0.1, 4 s.e.): a confident miss
    _row("rts", 0.3, 0.1, None),  # 3 s.e.: not a miss, not covered
    _row("rts", 2.0, 0.05, None),  # no verdict counts as trusted: a confident miss
    _row("ts", 1.5, 0.01, False),  # flagged: a miss, but not a confident one
    _row("ts", 0.1, 0.01, False),  # within 0.2 nats yet flagged: crying wolf
    _row("mbar", 0.01, 0.02, True),  # covered
    _row("mbar", math.nan, math.nan, None, exception="RuntimeError: boom"),
]


def test_summary_of_a_hand_made_table(bench: ModuleType) -> None:
    assert [bench.confident_miss(row) for row in HAND_MADE] == [False, False, True, False, True] + [False] * 4
    summary = bench.summarize(HAND_MADE)
    assert summary["n"] == 7 and summary["failed"] == 1 and summary["trusted"] == 5
    assert summary["confident_misses"] == 2
    assert summary["coverage"] == pytest.approx(1 / 5)  # only the mbar row's interval holds 0
    assert summary["close"] == 3 and summary["crying_wolf"] == pytest.approx(1 / 3)
    assert summary["median_abs_error"] == pytest.approx(0.3) and summary["max_abs_error"] == 2.0

    per_method = bench.breakdown(HAND_MADE, "method")
    assert per_method["ais"]["confident_misses"] == 1 and per_method["ais"]["coverage"] == 0.0
    assert per_method["ts"]["confident_misses"] == 0 and per_method["ts"]["crying_wolf"] == 1.0
    assert per_method["mbar"]["failed"] == 1 and per_method["mbar"]["coverage"] == 1.0
    assert math.isnan(per_method["exact"]["coverage"])


def test_an_unchecked_result_is_neither_trusted_nor_crying_wolf(bench: ModuleType) -> None:
    """The third verdict (docs/trust.md): every check passed, no witness reached data."""
    far = {**_row("ais", -12.0, 0.06, False), "verdict": "unchecked"}
    close = {**_row("ais", 0.01, 0.05, False), "verdict": "unchecked"}
    flagged = {**_row("ais", 0.01, 0.05, False), "verdict": "unreliable"}
    assert not bench.confident_miss(far)  # 200 s.e. off, but not called reliable
    summary = bench.summarize([far, close, flagged])
    assert summary["unchecked"] == 2 and summary["trusted"] == 0 and summary["confident_misses"] == 0
    assert summary["close"] == 2 and summary["crying_wolf"] == pytest.approx(1 / 2)  # the flagged one alone


def test_miss_edges(bench: ModuleType) -> None:
    assert not bench.confident_miss(_row("ais", 5.0, math.inf, True))  # an infinite error bar is honest
    assert not bench.confident_miss(_row("ais", 0.1, 0.0, True))  # the floor is inclusive
    assert bench.confident_miss(_row("ais", -0.41, 0.1, True))
    assert bench.covered(_row("ais", -0.2, 0.1, True)) and not bench.covered(_row("ais", 0.21, 0.1, True))


def test_flatten_info_keeps_scalars_and_summarises_tensors(bench: ModuleType) -> None:
    @dataclass
    class Inner:
        round_trips: torch.Tensor
        stopped: bool

    @dataclass
    class Info:
        ess: float
        n_chains: int
        occupancy: torch.Tensor
        inner: Inner
        extra: dict

    info = Info(3.5, 100, torch.tensor([1.0, 2.0, 6.0]), Inner(torch.tensor([4.0]), True), {"k": 7})
    flat = bench.flatten_info(info)
    assert flat["ess"] == 3.5 and flat["n_chains"] == 100 and flat["extra.k"] == 7
    assert (flat["occupancy.min"], flat["occupancy.mean"], flat["occupancy.max"]) == (1.0, 3.0, 6.0)
    assert flat["inner.round_trips"] == 4.0 and flat["inner.stopped"] is True
    assert bench.flatten_info(None) == {}
