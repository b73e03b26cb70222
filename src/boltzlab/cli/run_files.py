"""Reading a run directory back: its metrics CSV as history records, and its ``evaluation.json``.

``boltzlab train`` writes ``metrics.csv`` through :class:`boltzlab.training.callbacks.CSVLogger`
(a header, one row per record, empty cells for "not measured"); :func:`read_metrics` turns it
back into :class:`~boltzlab.training.state.TrainRecord` s, so the plotting functions that
draw a live run draw a finished one too. ``evaluation.json`` is the object ``boltzlab
evaluate --json`` prints (rows of log Z estimates with their verdicts), written into a run
directory by ``evaluate --out RUN_DIR`` and by ``boltzlab demo``; :func:`write_evaluation`
writes it, :func:`read_evaluation` reads and checks it. Both readers raise
:class:`~boltzlab.errors.DataError` with the file and the problem, which the report shows in
place of the section rather than failing the whole page.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from boltzlab import distributed
from boltzlab.cli.json_output import json_ready
from boltzlab.errors import DataError
from boltzlab.io import write_atomic
from boltzlab.training.callbacks import CSVLogger
from boltzlab.training.state import TrainRecord

__all__ = ["read_metrics"]

METRICS_FILE = "metrics.csv"
EVALUATION_FILE = "evaluation.json"
# The columns CSVLogger writes: the first two are counts, the rest real numbers.
_INTEGER_FIELDS = CSVLogger.COLUMNS[:2]
_FLOAT_FIELDS = CSVLogger.COLUMNS[2:]
# What a row of evaluation.json must hold for the report's table.
_ROW_KEYS = ("method", "log_z", "stderr", "reliable")


def _number(text: str, column: str, line: int, path: Path) -> float | None:
    if text.strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise DataError(f"{path}, line {line}: column {column!r} holds {text!r}, not a number") from None


def read_metrics(path: str | Path) -> tuple[TrainRecord, ...]:
    """The records of a metrics CSV written by ``CSVLogger``.

    Returns
    -------
    tuple of TrainRecord
        One per row; empty cells become ``None`` (fields) or are left out (``extra``).

    Raises
    ------
    DataError
        The file lacks the ``update`` column or holds a cell that is not a number.
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or "update" not in rows[0]:
        raise DataError(f"{path} is not a boltzlab metrics file: its header has no 'update' column")
    header = rows[0]
    records = []
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise DataError(f"{path}, line {line}: {len(row)} cells under a header of {len(header)}")
        values = {column: _number(cell, column, line, path) for column, cell in zip(header, row, strict=True)}
        fields: dict[str, Any] = {}
        for name in _INTEGER_FIELDS:
            value = values.pop(name, None)
            fields[name] = 0 if value is None else int(value)
        for name in _FLOAT_FIELDS:
            value = values.pop(name, None)
            if name in ("learning_rate", "time", "reconstruction_error"):
                fields[name] = math.nan if value is None else value
            else:
                fields[name] = value
        extra = {name: value for name, value in values.items() if value is not None}
        records.append(TrainRecord(**fields, extra=extra))
    return tuple(records)


def evaluation_payload(
    rows: Sequence[Any],
    *,
    model: str,
    data: str,
    disagreements: Sequence[str] = (),
    sandwich: str | None = None,
    cost_cap: int | None = None,
    cuts: Sequence[str] = (),
    likelihood_note: str | None = None,
    generative: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``evaluate --json`` object for ``rows`` (:class:`boltzlab.cli.evaluate.EvaluationRow` s).

    ``cost_cap``: the chain-sweeps each method was held to (``None``: no cap); ``cuts``: what
    the cap cut, one sentence per method (:mod:`boltzlab.cli.cost_cap`). For aligned sequences,
    ``likelihood_note`` says what the log-likelihoods average over (sequence weights) and
    ``generative`` is the generative check (:func:`boltzlab.cli.generative_output.check_record`);
    both ``null`` otherwise.
    """
    return {
        "model": model,
        "data": data,
        "rows": [{**asdict(row), "world_size": distributed.topology().world_size} for row in rows],
        "disagreements": list(disagreements),
        "sandwich": sandwich,
        "cost_cap": cost_cap,
        "cuts": list(cuts),
        "likelihood_note": likelihood_note,
        "generative": generative,
    }


def write_evaluation(directory: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (see :func:`evaluation_payload`) as ``directory/evaluation.json`` atomically."""
    text = json.dumps(json_ready(payload), allow_nan=False, indent=1, sort_keys=False)
    return write_atomic(Path(directory) / EVALUATION_FILE, (text + "\n").encode("utf-8"))


def read_evaluation(path: str | Path) -> dict[str, Any]:
    """An ``evaluation.json``, checked to hold a list of rows with method, log Z, s.e. and verdict.

    Raises
    ------
    DataError
        The file is not JSON or lacks what the report needs.
    """
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(
            f"{path} is not a JSON file ({error}); rewrite it with boltzlab evaluate --out"
        ) from None
    rows = payload.get("rows") if isinstance(payload, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise DataError(f"{path} has no list of 'rows'; rewrite it with boltzlab evaluate --out")
    for index, row in enumerate(rows):
        missing = [key for key in _ROW_KEYS if key not in row]
        if missing:
            raise DataError(f"{path}: row {index} lacks {', '.join(missing)}")
    return payload
