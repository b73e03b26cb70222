"""``boltzlab reproduce flip-the-state``: ``--tiny`` writes every file, ``--parts`` limits the work,
and bad options are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from boltzlab.errors import ValidationError
from boltzlab_experiments.flip_the_state.command import parse_parts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_tiny_study_writes_every_file(tmp_path: Path, reproduce) -> None:
    out = tmp_path / "study"
    result = reproduce("flip-the-state", "--tiny", "--out", out)
    assert result.exit_code == 0, result.output
    for name in (
        "slem.png",
        "learning-bars-and-stripes-3.png",
        "learning-artificial-modes-0.1.png",
        "mixing.png",
    ):
        assert (out / name).read_bytes().startswith(PNG_MAGIC), name
    for name in (
        "slem.csv",
        "learning-curves.csv",
        "learning-maxima.csv",
        "wilcoxon.csv",
        "mixing.csv",
        "modes.csv",
    ):
        assert len((out / name).read_text().splitlines()) > 1, name
    summary = (out / "summary.md").read_text()
    for heading in ("## Verdicts", "## SLEM", "## Learning curves", "## Autocorrelation", "## Mode hopping"):
        assert heading in summary
    assert f"wrote {out / 'summary.md'}" in result.output


def test_cli_parts_limit_the_work_and_bad_options_are_one_line(tmp_path: Path, reproduce) -> None:
    out = tmp_path / "slem-only"
    result = reproduce("flip-the-state", "--tiny", "--parts", "slem", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in out.iterdir()) == ["slem.csv", "slem.png", "summary.md"]
    assert parse_parts("mixing, SLEM") == ("slem", "mixing")
    with pytest.raises(ValidationError, match="--parts"):
        parse_parts("slem,plots")
    for args in (["--parts", "plots"], ["--tiny", "--full"]):
        bad = reproduce("flip-the-state", *args, "--out", tmp_path / "x")
        assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1
