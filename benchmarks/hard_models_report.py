"""Scoring rules, summaries, tables and CSV files of ``benchmarks/hard_models.py``.

Kept apart from the training and estimation loop so that the rules that decide what counts as
a failure (a *confident miss*, *coverage*, *crying wolf*) are small pure functions of a result
row that a test can check on a hand-made table.

A result row is a ``dict`` with at least ``method``, ``error`` (estimate − exact, nats),
``stderr``, ``reliable`` (``True``/``False``, or ``None`` when the estimate carries no
verdict), optionally ``verdict`` (``"reliable"``, ``"unchecked"`` or ``"unreliable"``: an
unchecked result passed every check that ran, but no witness reached data; rows of builds
before that verdict have none) and ``exception`` (empty when the method ran).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

#: |error| below this (nats) is never a miss, whatever the error bar says: a tenth of a nat of
#: log Z is a tenth of a nat per example of log-likelihood, below what anyone would act on.
MISS_FLOOR = 0.1
#: ... and above this many standard errors it is one (a 4σ event is 1 in 16,000 for a Gaussian).
MISS_SIGMAS = 4.0
#: Intervals whose coverage is reported: estimate ± this many standard errors (95 % nominal).
COVERAGE_SIGMAS = 2.0
#: Results this close to the truth (nats) should not be called unreliable ("crying wolf").
CLOSE_ENOUGH = 0.2
#: Tensors in ``info`` up to this many elements are summarised by min / mean / max.
MAX_SUMMARISED_ELEMENTS = 100_000

#: Columns of ``hard_models.csv``, in order.
COLUMNS = (
    "model",
    "dataset",
    "algorithm",
    "n_visible",
    "n_hidden",
    "learning_rate",
    "lr_schedule",
    "n_updates",
    "seed",
    "exact_log_z",
    "test_log_likelihood",
    "method",
    "route",
    "log_z",
    "stderr",
    "error",
    "z",
    "cost_sweeps",
    "wall_s",
    "bound",
    "reliable",
    "verdict",
    "witness",
    "warnings",
    "confident_miss",
    "covered_2se",
    "exception",
)


def _failed(row: Mapping[str, Any]) -> bool:
    return bool(row.get("exception"))


def _scored(row: Mapping[str, Any]) -> bool:
    """A stochastic estimate that ran: exact rows and exceptions are not scored."""
    return not _failed(row) and row.get("method") != "exact"


def trusted(row: Mapping[str, Any]) -> bool:
    """Whether a user would take the estimate at face value: marked reliable, or no verdict at all."""
    return row.get("reliable") is not False


def flagged(row: Mapping[str, Any]) -> bool:
    """Whether a check failed: ``verdict == "unreliable"`` (an unchecked result is not flagged)."""
    verdict = row.get("verdict")
    if verdict:
        return verdict == "unreliable"
    return row.get("reliable") is False


def unchecked(row: Mapping[str, Any]) -> bool:
    """Every check that ran passed, but the missing-mass witness reached no data."""
    return row.get("verdict") == "unchecked"


def confident_miss(row: Mapping[str, Any]) -> bool:
    """Trusted, yet ``|error| > max(0.1, 4·stderr)``: the failure the verdicts must catch."""
    if not _scored(row) or not trusted(row):
        return False
    threshold = max(MISS_FLOOR, MISS_SIGMAS * float(row["stderr"]))
    return abs(float(row["error"])) > threshold


def covered(row: Mapping[str, Any], sigmas: float = COVERAGE_SIGMAS) -> bool:
    """The interval ``estimate ± sigmas·stderr`` contains the exact value."""
    return abs(float(row["error"])) <= sigmas * float(row["stderr"])


def summarize(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Counts and rates over the stochastic rows (exact rows are left out).

    Returns ``n`` (rows that ran), ``failed`` (rows that raised), ``trusted``, ``unchecked``
    (rows whose verdict is "unchecked"), ``confident_misses``, ``coverage`` (fraction of trusted
    rows whose ±2 s.e. interval holds the truth), ``close`` (rows within 0.2 nats),
    ``crying_wolf`` (fraction of those flagged by a failed check; "unchecked" is not crying
    wolf), ``median_abs_error`` and ``max_abs_error``; rates are NaN when undefined.
    """
    rows = [row for row in rows if row.get("method") != "exact"]
    ran = [row for row in rows if not _failed(row)]
    trusted_rows = [row for row in ran if trusted(row)]
    close = [row for row in ran if abs(float(row["error"])) <= CLOSE_ENOUGH]
    errors = [abs(float(row["error"])) for row in ran]
    return {
        "n": len(ran),
        "failed": len(rows) - len(ran),
        "trusted": len(trusted_rows),
        "unchecked": sum(unchecked(row) for row in ran),
        "confident_misses": sum(confident_miss(row) for row in ran),
        "coverage": _fraction(sum(covered(row) for row in trusted_rows), len(trusted_rows)),
        "close": len(close),
        "crying_wolf": _fraction(sum(flagged(row) for row in close), len(close)),
        "median_abs_error": statistics.median(errors) if errors else math.nan,
        "max_abs_error": max(errors) if errors else math.nan,
    }


def breakdown(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, dict[str, float]]:
    """:func:`summarize` per value of ``row[key]`` (e.g. per method or per training algorithm)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key)), []).append(row)
    return {name: summarize(group) for name, group in groups.items()}


def _fraction(count: int, total: int) -> float:
    return count / total if total else math.nan


# --- diagnostics ------------------------------------------------------------------------------


def flatten_info(info: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """Scalar entries of an estimate's ``info`` (dataclass or dict), nested keys joined by ``.``.

    Tensors of one element become scalars; larger ones (up to ``MAX_SUMMARISED_ELEMENTS``) are
    summarised as ``key.min``, ``key.mean`` and ``key.max``, which is what threshold
    calibration needs (e.g. the least-visited level of a ladder). Nesting stops at depth 2 so a
    stored sample set cannot blow up the table.
    """
    if dataclasses.is_dataclass(info) and not isinstance(info, type):
        items = [(f.name, getattr(info, f.name)) for f in dataclasses.fields(info)]
    elif isinstance(info, Mapping):
        items = list(info.items())
    else:
        return {}
    flat: dict[str, Any] = {}
    for name, value in items:
        key = f"{prefix}{name}"
        if isinstance(value, bool | int | float):
            flat[key] = value
        elif isinstance(value, str):
            flat[key] = value if len(value) <= 80 else value[:77] + "..."
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            flat[key] = value.item()
        elif isinstance(value, torch.Tensor) and 1 < value.numel() <= MAX_SUMMARISED_ELEMENTS:
            values = value.detach().double().flatten()
            flat[f"{key}.min"] = float(values.min())
            flat[f"{key}.mean"] = float(values.mean())
            flat[f"{key}.max"] = float(values.max())
        elif depth < 2:
            flat.update(flatten_info(value, f"{key}.", depth + 1))
    return flat


# --- files and tables ---------------------------------------------------------------------------


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
    """Write ``rows`` as CSV; columns default to the union of keys in first-seen order."""
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    with temporary.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    # Rewritten after every model: the rename keeps a reader (or a crash) from seeing half a file.
    temporary.replace(path)


def _number(value: float, digits: int = 3) -> str:
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def cell(row: Mapping[str, Any]) -> str:
    """``error (z)`` for the model table; ``!`` marks a confident miss, ``†`` an unreliable verdict,
    ``?`` an unchecked one."""
    if _failed(row):
        return "ERROR"
    if row["method"] == "exact":
        return f"{float(row['error']):+.1e}"
    text = f"{float(row['error']):+.3f} ({float(row['z']):+.1f})"
    if flagged(row):
        text += " †"
    elif unchecked(row):
        text += " ?"
    return text + (" **!**" if confident_miss(row) else "")


def models_table(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> str:
    """One line per model: exact log Z, test log-likelihood, then each method's error (z)."""
    models: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rows:
        models.setdefault(str(row["model"]), {})[str(row["method"])] = row
    header = ["model", "exact log Z", "test LL", *methods]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, by_method in models.items():
        first = next(iter(by_method.values()))
        cells = [name, _number(float(first["exact_log_z"])), _number(float(first["test_log_likelihood"]), 2)]
        cells += [cell(by_method[m]) if m in by_method else "" for m in methods]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_table(groups: Mapping[str, Mapping[str, float]], label: str) -> str:
    """One line per group of :func:`breakdown` (or ``{"all": summarize(rows)}``)."""
    header = [
        label,
        "n",
        "failed",
        "confident misses",
        "unchecked",
        "coverage ±2se",
        "crying wolf",
        "median |err|",
        "max |err|",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, s in groups.items():
        cells = [name, str(s["n"]), str(s["failed"]), str(s["confident_misses"]), str(s["unchecked"])]
        cells += [_number(s["coverage"], 2), _number(s["crying_wolf"], 2)]
        cells += [_number(s["median_abs_error"]), _number(s["max_abs_error"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(rows: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> str:
    """The whole markdown report: model table, legend, overall, per-method and per-algorithm summaries."""
    overall = summarize(rows)
    stochastic = [row for row in rows if row.get("method") != "exact"]
    return "\n\n".join(
        [
            "## Error of each estimate vs exact log Z (nats), with z = error / stderr",
            models_table(rows, methods),
            f"`†` marked unreliable by the estimator; `?` unchecked (every check passed, no witness "
            f"reached data; not trusted); `**!**` confident miss: trusted and "
            f"|error| > max({MISS_FLOOR}, {MISS_SIGMAS:g}·stderr). Coverage is over trusted results "
            f"(reliable, or no verdict); crying wolf is the fraction of results within {CLOSE_ENOUGH} nats "
            "that are marked unreliable (unchecked is not crying wolf).",
            f"**Confident misses: {overall['confident_misses']} of {overall['n']}** "
            f"(failed to run: {overall['failed']}; unchecked: {overall['unchecked']}); "
            "coverage of ±2 s.e. over trusted results: "
            f"{_number(overall['coverage'], 2)}; crying wolf: {_number(overall['crying_wolf'], 2)}",
            "## Per method",
            summary_table(breakdown(stochastic, "method"), "method"),
            "## Per training algorithm",
            summary_table(breakdown(stochastic, "algorithm"), "algorithm"),
        ]
    )
