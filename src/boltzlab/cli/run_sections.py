"""The report's log Z, timing and sequence sections, from ``evaluation.json``, the history and plots.

The log Z table has one row per estimate that ``boltzlab evaluate --out RUN_DIR`` (or the demo)
saved: log Z with its standard error, the direction of its bias, its cost, the train and test
log-likelihood it implies with the same error bar (``log p(v) = −F(v) − log Z``, so the error
is log Z's), and the verdict of the estimator's own checks (docs/trust.md); every UNRELIABLE
row is followed by its reasons. A run without saved estimates falls back on what training
tracked: the exact log Z of ``--track-exact-every`` and the RTS tracker's estimate, at the
last update that has them.

A Potts RBM's samples section (:func:`sequence_samples_section`) shows what sequence users
look at instead of a grid of states: the generative check that ``evaluate --out`` saved
(Pearson r and slope of the samples' frequencies and connected correlations against the
weighted alignment's, with the scatter ``plots/correlations.png``) and the hidden units' weight
logos ``plots/weight_logos.png`` that ``train`` drew.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from boltzlab.cli.common import format_seconds, verdict_word
from boltzlab.cli.run_files import EVALUATION_FILE
from boltzlab.plotting.report_page import BulletList, Image, Paragraph, Section, Table
from boltzlab.training.state import TrainRecord

__all__ = []

#: The PNGs the sequence section shows (relative to the run directory), so "Other figures" does not repeat them.
SEQUENCE_FIGURES = (Path("plots") / "correlations.png", Path("plots") / "weight_logos.png")

_HEADER = ("method", "log Z", "± s.e.", "bias", "chain-sweeps", "train LL", "test LL", "time", "verdict")


def _number(value: Any, digits: int = 4) -> str:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def _with_error(value: Any, stderr: float) -> str:
    text = _number(value)
    return text if text == "—" or stderr == 0 else f"{text} ± {stderr:.4f}"


def _verdict(row: dict[str, Any]) -> str:
    if row.get("method") == "exact" or (row.get("bias") == "exact"):
        return "exact"
    # evaluation.json files written before the third verdict have "reliable" alone; a row whose
    # "reliable" is false is never shown as reliable, whatever else it says.
    status = row.get("verdict")
    if status not in ("unchecked", "unreliable"):
        status = "reliable" if row.get("reliable") else "unreliable"
    return verdict_word(status)


def _evaluation_blocks(evaluation: dict[str, Any]) -> list[Any]:
    rows = []
    for row in evaluation["rows"]:
        stderr = float(row.get("stderr") or 0.0)
        seconds = row.get("seconds")
        rows.append(
            (
                str(row["method"]),
                _number(row["log_z"]),
                "0" if stderr == 0 else _number(stderr),
                str(row.get("bias", "")),
                f"{int(row.get('cost_sweeps') or 0):,}",
                _with_error(row.get("train_log_likelihood"), stderr),
                _with_error(row.get("test_log_likelihood"), stderr),
                "—" if seconds is None else format_seconds(float(seconds)),
                _verdict(row),
            )
        )
    data = evaluation.get("data")
    caption = "log Z (nats) and the mean log-likelihood per example it implies" + (
        f", on {data}" if data else ""
    )
    blocks: list[Any] = [
        Table(_HEADER, tuple(rows), caption=caption, numeric=(1, 2, 4, 5, 6, 7), verdict_column=8)
    ]
    for row in evaluation["rows"]:
        warnings = tuple(str(item) for item in row.get("warnings") or ())
        if _verdict(row) == "UNRELIABLE":
            reasons = warnings or ("(no reason recorded)",)
            blocks.append(BulletList(reasons, f"{row['method']} is UNRELIABLE because:"))
        elif _verdict(row) == "unchecked":
            blocks.append(BulletList(warnings, f"{row['method']} is unchecked (not reliable):"))
        elif warnings:
            blocks.append(BulletList(warnings, f"{row['method']}: notes"))
    if evaluation.get("likelihood_note"):
        blocks.append(Paragraph(str(evaluation["likelihood_note"]), "note"))
    for line in evaluation.get("disagreements") or ():
        blocks.append(Paragraph(str(line), "warning"))
    if evaluation.get("sandwich"):
        blocks.append(Paragraph(str(evaluation["sandwich"])))
    return blocks


def _tracked_blocks(records: tuple[TrainRecord, ...], final_log_z: float | None) -> list[Any]:
    """Rows for the log Z tracked in training (exact, or a DBM bound tracker's AIS) and the RTS
    tracker's, at the last update that has each; a DBM's columns hold its variational lower
    bound on the log-likelihood (``≥``). ``final_log_z``: the final model's exact log Z where
    tracking last ran earlier, as a first row."""
    rows = []
    if final_log_z is not None:
        rows.append(
            (
                f"exact, final model (update {records[-1].update:,}; computed for this report)",
                _number(final_log_z),
                "0",
                "—",
                "—",
                "exact",
            )
        )
    tracked = next((r for r in reversed(records) if r.log_z is not None), None)
    if tracked is not None:
        stderr = tracked.get("log_z_stderr") or 0.0

        def split(name: str) -> str:
            value = tracked.get(f"{name}_log_likelihood")
            if value is None and tracked.get(f"{name}_bound") is not None:
                return f"≥ {_with_error(tracked.get(f'{name}_bound'), stderr)}"
            return _with_error(value, stderr)

        rows.append(
            (
                f"{'exact' if stderr == 0 else 'AIS'}, last tracked in training (update {tracked.update:,})",
                _number(tracked.log_z),
                "0" if stderr == 0 else _number(stderr),
                split("train"),
                split("validation"),
                "exact" if stderr == 0 else "not checked",
            )
        )
    rts = next((r for r in reversed(records) if r.get("rts_log_z") is not None), None)
    if rts is not None:
        stderr = rts.get("rts_log_z_stderr") or 0.0
        rows.append(
            (
                f"RTS tracker (update {rts.update:,})",
                _number(rts.get("rts_log_z")),
                _number(stderr),
                _with_error(rts.get("train_log_likelihood"), stderr),
                _with_error(rts.get("validation_log_likelihood"), stderr),
                "not checked",
            )
        )
    if not rows:
        return []
    header = ("source", "log Z", "± s.e.", "train LL", "validation LL", "verdict")
    caption = "log Z tracked during training (nats; log-likelihood per example, ≥: a DBM's lower bound)"
    return [Table(header, tuple(rows), caption=caption, numeric=(1, 2, 3, 4), verdict_column=5)]


def log_z_section(
    evaluation: dict[str, Any] | None,
    evaluation_error: str | None,
    records: tuple[TrainRecord, ...] | None,
    run_dir: Path,
    *,
    final_log_z: float | None = None,
) -> Section:
    """The log Z and log-likelihood section (module docstring); ``final_log_z`` as in
    :func:`_tracked_blocks`."""
    blocks: list[Any] = []
    if evaluation_error is not None:
        blocks.append(Paragraph(f"{EVALUATION_FILE} could not be read: {evaluation_error}", "warning"))
    if evaluation is not None:
        blocks += _evaluation_blocks(evaluation)
    advice = (
        f"boltzlab evaluate {run_dir / 'model.safetensors'} --data NAME --out {run_dir} "
        "adds the estimators' table with error bars and verdicts"
    )
    if evaluation is None and records:
        tracked = _tracked_blocks(records, final_log_z)
        if tracked:
            blocks += [*tracked, Paragraph(f"No estimate with a verdict was saved; {advice}.", "note")]
    missing = "Not recorded in this run: no log Z estimate was saved" + (
        f"; {advice}." if (run_dir / "model.safetensors").is_file() else "."
    )
    return Section("log-z", "log Z and log-likelihood", tuple(blocks), missing)


def timings_section(
    records: tuple[TrainRecord, ...] | None, evaluation: dict[str, Any] | None, drawing_seconds: float
) -> Section:
    """Training wall-clock time and speed, each saved estimate's time, and this page's own drawing."""
    rows = []
    timed = [r for r in records or () if math.isfinite(r.time)]
    if timed:
        last = timed[-1]
        speed = f"{last.update / last.time:,.0f} updates/s" if last.time > 0 and last.update > 0 else ""
        rows.append(("training loop", f"{last.update:,} updates", format_seconds(last.time), speed))
    for row in (evaluation or {}).get("rows", ()):
        seconds = row.get("seconds")
        if seconds is not None:
            cost = f"{int(row.get('cost_sweeps') or 0):,} chain-sweeps"
            rows.append((f"log Z: {row['method']}", cost, format_seconds(float(seconds)), ""))
    if not rows:
        return Section(
            "timings", "Timings", (), "Not recorded in this run: no metrics.csv or evaluation.json."
        )
    if drawing_seconds > 0:
        rows.append(("drawing samples / tempered run for this page", "", format_seconds(drawing_seconds), ""))
    table = Table(("what", "work", "wall-clock", "speed"), tuple(rows), numeric=(1, 2, 3))
    note = Paragraph(
        "Training time is the training loop's own clock (metrics.csv's time column: from the first "
        "update to the last record, tracking and checkpoints included, summed over resumed segments). "
        "The time boltzlab train prints for the whole training call is longer: it adds the setup before "
        "the loop (imports, base fit, chains) and the files after it. Each log Z time is the wall-clock "
        "time of that estimate, its verdict's checks included.",
        "note",
    )
    return Section("timings", "Timings", (table, note))


def _fit_cells(fit: Any) -> tuple[str, str]:
    if not isinstance(fit, dict):
        return "—", "—"
    return _number(fit.get("pearson")), _number(fit.get("slope"))


def _generative_blocks(generative: dict[str, Any]) -> list[Any]:
    """The generative check's table, sampler and verdict (``evaluation.json``'s ``generative``)."""
    rows = []
    for name, label in (
        ("frequencies", "single-site frequencies f_i(a)"),
        ("correlations", "connected correlations C_ij(a,b), i < j"),
    ):
        pearson, slope = _fit_cells(generative.get(name))
        reference, _ = _fit_cells(generative.get(f"reference_{name}"))
        values = (generative.get(name) or {}).get("n_values")
        rows.append((label, pearson, slope, reference, "—" if values is None else f"{int(values):,}"))

    def count(key: str) -> str:
        value = generative.get(key)
        return f"{value:,}" if isinstance(value, int) else "?"

    against = f"{count('n_sequences')} training sequences"
    if generative.get("weighted"):
        against += f", weighted (N_eff {_number(generative.get('effective_number'), 1)})"
    caption = f"{count('n_samples')} samples against the {against}"
    blocks: list[Any] = [
        Table(
            ("statistic", "Pearson r", "slope", "r of as many data draws", "values"),
            tuple(rows),
            caption=caption,
            numeric=(1, 2, 3, 4),
        ),
        Paragraph(f"samples: {generative.get('sampling', 'not recorded')}", "note"),
    ]
    if generative.get("reliable", True):
        blocks.append(Paragraph("sampler verdict: reliable", "note"))
    else:
        reasons = tuple(str(item) for item in generative.get("warnings") or ()) or ("(no reason recorded)",)
        blocks.append(BulletList(reasons, "sampler verdict: UNRELIABLE, because:"))
    return blocks


def sequence_samples_section(run_dir: Path, evaluation: dict[str, Any] | None) -> Section:
    """A Potts RBM's samples section (module docstring)."""
    blocks: list[Any] = []
    generative = (evaluation or {}).get("generative")
    if isinstance(generative, dict):
        blocks += _generative_blocks(generative)
    correlations, logos = (run_dir / path for path in SEQUENCE_FIGURES)
    if correlations.is_file():
        caption = "samples' statistics against the alignment's (plots/correlations.png)"
        blocks.append(Image(correlations.read_bytes(), caption, 900))
    if not blocks:
        blocks.append(
            Paragraph(
                f"No generative check saved: boltzlab evaluate {run_dir / 'model.safetensors'} --data FILE.fasta "
                f"--out {run_dir} compares the samples' frequencies and correlations with the alignment's.",
                "note",
            )
        )
    if logos.is_file():
        caption = (
            "hidden-unit weight logos: letters ∝ weights, positive above the axis (plots/weight_logos.png)"
        )
        blocks.append(Image(logos.read_bytes(), caption, 1000))
    return Section("samples", "Samples: the generative check, and the hidden units", tuple(blocks))
