"""``benchmarks/centering.py`` runs and its tables say what they measure (a tiny binary case)."""

from __future__ import annotations

import pytest

from benchmark_scripts import load_script


@pytest.mark.slow
def test_tiny_run_writes_one_table_per_setting(tmp_path):
    out = tmp_path / "centering.md"
    lines = load_script("centering").main(
        ["--only", "binary", "--updates", "5", "--seeds", "0", "1", "--hidden", "6",
         "--binary-learning-rates", "0.05", "--inits", "zero", "data", "--out", str(out)]
    )  # fmt: skip
    text = out.read_text()
    assert text == "\n".join(lines) + "\n"
    assert text.count("### binary RBM 64×6, digits; learning rate 0.05") == 2
    assert "visible biases from 0" in text and "visible biases at the data's log-odds" in text
    rows = [line for line in lines if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert len(rows) == 4
    for row in rows:
        plain_train, centred_train, plain_test, centred_test = (float(cell) for cell in row.split("|")[2:6])
        assert all(value < 0 for value in (plain_train, centred_train, plain_test, centred_test))
    assert lines[-1].startswith("Total ")
