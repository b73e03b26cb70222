"""Tables and files of the reproductions: CSV written atomically, markdown tables, ``value ± s.e.``."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from boltzlab.io import write_atomic

__all__ = ["markdown_table", "plus_minus", "write_csv", "write_text"]


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """Write a CSV file atomically; floats in full precision."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return write_atomic(path, buffer.getvalue().encode("utf-8"))


def write_text(path: Path, text: str) -> Path:
    """Write a UTF-8 text file (markdown) atomically."""
    return write_atomic(path, text.encode("utf-8"))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def plus_minus(value: float, stderr: float) -> str:
    """``value ± stderr`` to two decimals; ``-`` for a value that is not finite."""
    if not math.isfinite(value):
        return "-"
    return f"{value:.2f} ± {stderr:.2f}" if math.isfinite(stderr) else f"{value:.2f}"
