"""``boltzlab reproduce cast``: ``--tiny`` runs on the shared MNIST and writes every file it names,
its table and summary hold the numbers of the run, and ``--full --tiny`` is one error line."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_reproduce_cast_tiny_writes_its_files(shared_data: Path, tmp_path: Path, reproduce):
    out = tmp_path / "cast"
    result = reproduce(
        "cast",
        "--tiny",
        "--data-root",
        shared_data,
        "--out",
        out,
        "--updates",
        "20",
        "--cast-chains",
        "7",
    )
    assert result.exit_code == 0, result.output
    for name in ("bounds.csv", "table.csv", "fast-chain.csv", "summary.md"):
        assert (out / name).is_file(), name
    for name in ("bound-curves.png", "samples.png", "temperature.png"):
        assert (out / name).read_bytes().startswith(PNG_MAGIC), name
    with open(out / "table.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [row["algorithm"] for row in table] == ["sap", "fpcd", "cast"]
    assert all(math.isfinite(float(row["test_bound"])) for row in table)
    assert "CAST vs SAP" in result.output and "CAST vs SAP" in (out / "summary.md").read_text()
    assert "CAST 7 slow + 7 fast" in (out / "summary.md").read_text()
    with open(out / "fast-chain.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 20


def test_reproduce_cast_refuses_full_and_tiny_together(tmp_path: Path, reproduce):
    result = reproduce("cast", "--full", "--tiny", "--out", tmp_path)
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--full or --tiny" in lines[0]
