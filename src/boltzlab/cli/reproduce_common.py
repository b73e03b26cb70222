"""Pieces the ``boltzlab reproduce`` commands share: presets, threads, progress, tables and files.

The experiments themselves live in :mod:`boltzlab.experiments`; these helpers only choose
their preset, print their progress and write their results (DESIGN.md, "Layout").
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab.cli.common import THREADS_KEY
from boltzlab.errors import ValidationError
from boltzlab.io import write_atomic

__all__ = [
    "choose_preset",
    "data_root_option",
    "default_to_one_thread",
    "markdown_table",
    "plus_minus",
    "progress_bar",
    "write_csv",
]


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """Write a CSV file atomically; floats in full precision."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return write_atomic(path, buffer.getvalue().encode("utf-8"))


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


def choose_preset(config_class: Any, full: bool, tiny: bool) -> Any:
    """``config_class.full()``, ``.tiny()`` or ``.scaled()`` from the --full / --tiny flags."""
    if full and tiny:
        raise ValidationError("give --full or --tiny, not both")
    return config_class.full() if full else config_class.tiny() if tiny else config_class.scaled()


def default_to_one_thread(*, full: bool = False) -> None:
    """One torch thread unless --threads was given or the run is --full.

    The scaled and tiny presets use small models, where a second thread mostly adds
    synchronisation and, on a shared machine, makes timings erratic.
    """
    if click.get_current_context().meta.get(THREADS_KEY) is None and not full:
        torch.set_num_threads(1)


def data_root_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The ``--data-root DIR`` option; its help says where ``what`` is looked for."""
    return click.option(
        "--data-root",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help=f"Where to look for {what} (else BOLTZLAB_DATA).",
    )


@contextlib.contextmanager
def progress_bar(description: str, *, unit: str = "run") -> Iterator[Callable[[int, int, str], None]]:
    """A ``progress(done, total, label)`` callback drawing a tqdm bar, opened at its first call."""
    from tqdm.auto import tqdm

    bar: Any = None

    def update(done: int, total: int, label: str) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=description, unit=unit)
        bar.n = done
        bar.set_postfix_str(label, refresh=False)
        bar.refresh()

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()
