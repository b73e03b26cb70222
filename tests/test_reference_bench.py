"""benchmarks/reference_784x500.py's bookkeeping: which runs make a reference, and its report.

The script itself trains 784×500 RBMs and runs for an hour; its pure parts are checked here: the
reference runs of each route, the pooled reference (flagged runs shown but left out, pairs
that disagree voiding it) and the report's tables.
"""

from __future__ import annotations

import math
from types import ModuleType

import pytest

from benchmark_scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("reference_784x500")


def row(
    stage: str, method: str, log_z: float, stderr: float, *, reliable: bool = True, **extra: object
) -> dict:
    warnings = [] if reliable else ["level balance after the run: 1.88 > 0.3"]
    return {
        "stage": stage,
        "method": method,
        "log_z": log_z,
        "stderr": stderr,
        "reliable": reliable,
        "warnings": warnings,
        "cost_sweeps": 100,
        "seconds": 1.0,
        "seed": 0,
        **extra,
    }


def test_reference_runs_alternate_ais_schedules_then_one_run_per_route(bench: ModuleType) -> None:
    specs = bench.reference_runs(3, 1000, ["trajectory-ais", "mbar"], 500)
    assert [(s["method"], s["schedule"], s["seed"]) for s in specs] == [
        ("ais", "sm08", 101),
        ("ais", "varopt", 102),
        ("ais", "sm08", 103),
        ("trajectory-ais", "", 201),
        ("mbar", "", 202),
    ]
    assert specs[3]["n_temperatures"] == 1000 and specs[4]["n_sweeps"] == 500


def test_the_reference_pools_reliable_runs_and_needs_them_to_agree(bench: ModuleType) -> None:
    rows = [
        row("reference", "ais", 568.2072, 0.0333, schedule="sm08", n_temperatures=10),
        row("reference", "ais", 568.1586, 0.0193, schedule="varopt", n_temperatures=10),
        row("reference", "trajectory-ais", 568.1706, 0.0204, schedule="", n_temperatures=10),
        row("reference", "mbar", 568.39, 0.24, reliable=False, schedule="", n_sweeps=10),
    ]
    reference = bench.combine_reference(rows)
    assert reference["runs"] == 3 and reference["agree"] and reference["routes"] == ["ais", "trajectory-ais"]
    assert reference["log_z"] == pytest.approx(568.1707, abs=1e-4)
    assert reference["stderr"] == pytest.approx(0.0129, abs=1e-4)
    # A reliable run far from the others voids the reference; one reliable run is none.
    assert not bench.combine_reference([*rows, row("reference", "ais", 570.0, 0.02)])["agree"]
    assert bench.combine_reference(rows[:1] + rows[3:]) is None


def test_the_report_scores_the_defaults_against_the_reference(bench: ModuleType) -> None:
    rows = [
        row("reference", "ais", 568.2072, 0.0333, schedule="sm08", n_temperatures=10),
        row("reference", "ais", 568.1586, 0.0193, schedule="varopt", n_temperatures=10),
        row("defaults", "rts", 568.3006, 0.0850),
        row("defaults", "mbar", 500.0, 0.1, reliable=False),
    ]
    text = bench.report(rows, None, "cd25")
    assert "CD-25" in text and "Every method with its defaults" in text
    rts_line = next(line for line in text.splitlines() if line.startswith("| rts |"))
    error = 568.3006 - bench.combine_reference(rows)["log_z"]
    assert f"{error:+.4f}" in rts_line and "reliable" in rts_line
    assert "UNRELIABLE: level balance" in next(
        line for line in text.splitlines() if line.startswith("| mbar |")
    )
    assert not math.isnan(error)
