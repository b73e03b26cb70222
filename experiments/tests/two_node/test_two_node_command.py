"""``boltzlab reproduce two-node`` writes its PNG and CSV and prints the occupancies of the run."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from boltzlab_experiments.two_node.command import two_node_rows
from boltzlab_experiments.two_node.run import run_two_node

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_cli_writes_png_and_csv_with_the_library_numbers(tmp_path: Path, reproduce) -> None:
    out = tmp_path / "two-node"
    result = reproduce("two-node", "--out", out, "--steps", "120", "--seed", "4")
    assert result.exit_code == 0, result.output
    assert (out / "two-node.png").read_bytes().startswith(PNG_MAGIC)
    with (out / "two-node.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 * 120 == len(two_node_rows(run_two_node(n_steps=120, generator=4)))
    expected = run_two_node(n_steps=120, generator=4)
    for sampler in ("gibbs", "fpcd", "wang-landau"):
        last = [row for row in rows if row["sampler"] == sampler][-1]
        occupancy = [float(last[f"occupancy{label}"]) for label in ("(1,1)", "(-1,1)", "(1,-1)", "(-1,-1)")]
        assert occupancy == pytest.approx(expected.run(sampler).occupancy().tolist(), abs=1e-6)
        line = next(line for line in result.output.splitlines() if line.strip().startswith(sampler))
        assert line.split()[1:] == [f"{value:.3f}" for value in expected.run(sampler).occupancy().tolist()]
    assert f"wrote {out / 'two-node.png'}" in result.output
