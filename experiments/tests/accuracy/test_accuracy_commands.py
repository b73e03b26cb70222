"""``boltzlab reproduce rts-vs-ais | estimators-vs-k | varopt --tiny``.

Properties checked: each writes its tables, PNG and a ``summary.md`` whose verdict is the one
it printed (the finding computed from the numbers, :mod:`boltzlab_experiments.accuracy`), and a
second run reuses the cached models instead of training them again.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from boltzlab_experiments.findings import VERDICT_WORDS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def benchmark_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 16-variable dataset for the tiny accuracy benchmarks (4 hidden units each)."""
    generator = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("bench") / "bench.npz"
    marginals = np.linspace(0.1, 0.6, 16)
    np.savez(
        path,
        x_train=(generator.random((120, 16)) < marginals).astype(np.uint8),
        x_test=(generator.random((20, 16)) < marginals).astype(np.uint8),
    )
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("rts-vs-ais", ["rts-vs-ais.png", "rts-vs-ais.csv", "rts-vs-ais-statistics.csv", "rts-vs-ais.md"]),
        ("estimators-vs-k", ["estimators-vs-k.png", "estimators-vs-k.csv", "estimators-vs-k.md"]),
        ("varopt", ["varopt.png", "varopt.csv", "varopt.md"]),
    ],
)
def test_reproduce_tiny_writes_tables_plot_and_summary(
    command: str, files: list[str], benchmark_data: Path, tmp_path: Path, reproduce
) -> None:
    out = tmp_path / command
    models = tmp_path / "models"
    result = reproduce(command, "--tiny", "--dataset", benchmark_data, "--out", out, "--model-dir", models)
    assert result.exit_code == 0, result.output
    for name in files:
        assert (out / name).stat().st_size > 0, name
    assert (out / files[0]).read_bytes()[:8] == PNG_MAGIC
    summary = (out / "summary.md").read_text()
    verdict = re.search(r"verdict: .*\? (Yes|No|Not decided|Mixed) \((\w+)\)", result.stdout)
    assert verdict is not None, result.stdout
    words, key = verdict.groups()
    assert VERDICT_WORDS[key] == words
    assert f"{words} ({key})" in summary
    assert "## Runtime" in summary
    # A second run reuses the cached models instead of training them again.
    again = reproduce(command, "--tiny", "--dataset", benchmark_data, "--out", out, "--model-dir", models)
    assert again.exit_code == 0 and "training the" not in again.stderr
