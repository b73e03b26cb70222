"""``benchmarks/potts_sweep.py``: its report without ``rbms``, and a tiny run where its environment exists.

``rbms`` is a dependency of the benchmark's own environment only (``make bench-env-rbms``
builds ``benchmarks/envs/rbms/.venv``); the suite's environment does not have it, so the run
against it skips unless that environment was built.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from benchmark_scripts import BENCHMARKS, load_script

ROOT = BENCHMARKS.parent
RBMS_PYTHON = BENCHMARKS / "envs" / "rbms" / ".venv" / "bin" / "python"


def _timing(script, **changes):
    values = dict(
        n_sites=31,
        n_states=21,
        n_hidden=100,
        n_chains=1000,
        threads=1,
        boltzlab=0.01,
        rbms=0.04,
        before=0.02,
        rounds=7,
        gemm_backend="torch",
    )
    return script.Timing(**{**values, **changes})


def test_report_states_ratios_speed_ups_and_the_alignment():
    script = load_script("potts_sweep")
    timings = [_timing(script), _timing(script, n_chains=10000, threads=2, before=None)]
    assert timings[0].ratio == pytest.approx(0.25) and timings[0].speed_up == pytest.approx(2.0)
    check = {
        "cells": 20.0,
        "chains": 20000.0,
        "sweeps": 30.0,
        "boltzlab_vs_rbms": 1.2,
        "boltzlab_vs_exact": 0.9,
        "rbms_vs_exact": 1.5,
    }
    text = script.report(
        timings, check, command="python benchmarks/potts_sweep.py", load_before=(1.0,), load_after=(2.0,)
    )
    assert "| 31×21, 100 | 1,000 | 1 | 10.00 | 40.00 | **0.25** | 100,000 | 25,000 | 20.00 | 2.00 |" in text
    assert "| 31×21, 100 | 10,000 | 2 | 10.00 | 40.00 | **0.25** | 1,000,000 | 250,000 | — | — |" in text
    assert "agree: all below 4.31" in text
    assert "DISAGREE" in script.verdict({**check, "rbms_vs_exact": 9.0})
    assert script._normal_quantile(0.975) == pytest.approx(1.95996, abs=1e-4)


@pytest.mark.skipif(importlib.util.find_spec("rbms") is not None, reason="rbms is installed here")
def test_without_rbms_it_says_how_to_build_its_environment():
    with pytest.raises(SystemExit, match="make bench-env-rbms"):
        load_script("potts_sweep").main(["--chains", "10"])


@pytest.mark.slow
@pytest.mark.skipif(not RBMS_PYTHON.exists(), reason="no benchmark environment: make bench-env-rbms")
def test_tiny_run_in_the_benchmark_environment(tmp_path: Path):
    out = tmp_path / "potts_sweep.md"
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            str(RBMS_PYTHON),
            str(BENCHMARKS / "potts_sweep.py"),
            *("--sizes", "5x4x3", "--chains", "30", "--threads", "1", "--rounds", "1"),
            *("--check-chains", "3000", "--check-sweeps", "5", "--out", str(out)),
        ],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    assert "| 5×4, 3 | 30 | 1 |" in text
    assert "rbms 0.5.0" in text and "(agree: all below" in text
