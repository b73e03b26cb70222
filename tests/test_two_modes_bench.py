"""``benchmarks/two_modes.py`` runs and its rows say what they measure (a tiny case)."""

from __future__ import annotations

import pytest

from benchmark_scripts import load_script


def test_tiny_run_reports_every_sampler_against_the_exact_mass(capsys):
    rows = load_script("two_modes").main(
        ["--chains", "8", "--sweeps", "30", "--tilts", "0.08", "--samplers", "pt", "cast"]
    )
    out = capsys.readouterr().out
    assert [(row["sampler"], row["paper"]) for row in rows] == [
        ("pt", False),
        ("cast", False),
        ("cast", True),
    ]
    for row in rows:
        assert 0.0 <= row["mass"] <= 1.0 and row["stderr"] >= 0.0
        assert row["exact"] == pytest.approx(0.688, abs=0.001)
    # The frozen sampler reports what learning its weights cost; the paper's settings learn none up front.
    assert rows[1]["adapt_cost"] > 0 and rows[2]["adapt_cost"] == 0
    assert out.count("\n| 0.08 |") == 3
