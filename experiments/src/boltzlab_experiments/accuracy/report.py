"""Tables and ``summary.md`` of the accuracy benchmarks: every estimate, statistics, markdown.

Shared by the three commands (``rts-vs-ais``, ``estimators-vs-k``, ``varopt``): CSV rows of
every estimate and of bias, RMSE, calibration and time per method and setting; markdown tables
long (one row per method and setting) and wide (settings × methods); the settings line of the
trained models, or of a supplied model and its reference ``log Z``; the note on what a
reference's own error leaves unresolved; and ``summary.md`` with the verdict on the paper's claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

import boltzlab
from boltzlab.cli.common import format_seconds
from boltzlab_experiments.accuracy.models import BenchmarkModel, TrainingConfig
from boltzlab_experiments.accuracy.table import EstimateTable
from boltzlab_experiments.findings import Finding
from boltzlab_experiments.tables import markdown_table

__all__ = [
    "METHOD_LABELS",
    "estimate_rows",
    "long_markdown",
    "model_line",
    "pm",
    "reference_note",
    "statistics_rows",
    "summary_markdown",
    "training_label",
    "training_line",
    "wide_markdown",
]

METHOD_LABELS = {
    "rts": "RTS",
    "ts": "TS",
    "ti": "TI",
    "ti-rb": "TI-RB",
    "mbar": "MBAR",
    "ais": "AIS",
    "raise": "RAISE",
}


def training_label(written: Sequence[Path]) -> str:
    """The runtime line of training: says when every model came from the cache (0 s spent)."""
    if not written:
        return "training and enumeration (all models loaded from the cache)"
    return "training and enumeration"


def training_line(training: TrainingConfig, models: Sequence[BenchmarkModel], source: str) -> str:
    """The settings bullet of the trained RBMs and their exact log Z."""
    described = ", ".join(f"{b.label} (exact log Z {b.exact_log_z:.3f})" for b in models)
    return (
        f"- RBMs 784×{training.n_hidden} (or the data's width) trained on `{source}` by {described}: "
        f"{training.n_updates:,} SGD updates, learning rate {training.learning_rate:g}, batch "
        f"{training.batch_size}, PCD with {training.n_chains} chains; visible biases started at the data's "
        f"log-odds; base-rate base fitted to the training data; exact log Z by enumerating the hidden layer"
    )


def model_line(
    training: TrainingConfig, benchmark: BenchmarkModel, source: str, model_file: Path | None = None
) -> str:
    """The settings bullet of the model: trained here (:func:`training_line`) or supplied with a reference."""
    if model_file is None:
        return training_line(training, [benchmark], source)
    model = benchmark.model
    return (
        f"- RBM {model.n_visible}×{model.n_hidden} from `{model_file}`, not trained here; every estimate is "
        f"scored against the reference log Z = {benchmark.exact_log_z:.3f} ± {benchmark.reference_stderr:.3f} "
        f"({benchmark.reference_source}), not an exact value; data: `{source}`"
    )


def reference_note(table: EstimateTable) -> str:
    """What a reference's own error leaves unresolved (empty for an exact ``log Z``)."""
    if table.is_exact:
        return ""
    se = table.reference_se
    return (
        f"- The errors are taken from a reference log Z, itself off by about ± {se:.3f} nats (its s.e.) — by the "
        f"same amount for every estimate. A bias is therefore known only to within about ± {2 * se:.3f} nats "
        f"beyond its own error bar, and an RMSE below about {2 * se:.3f} nats cannot be told from the "
        "reference's error. Differences of bias between methods are not affected (all shift alike); an RMSE "
        "moves by about the offset × bias/RMSE, so the verdicts' RMSE comparisons add that in quadrature. "
        "'Within 2 s.e.' combines each estimate's own s.e. with the reference's in quadrature."
    )


def pm(value: float, stderr: float, digits: int = 3) -> str:
    """``value ± stderr`` to ``digits`` decimals (the value alone when the error is not finite)."""
    if not math.isfinite(stderr):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} ± {stderr:.{digits}f}"


def summary_markdown(
    title: str,
    intro: str,
    settings: Sequence[str],
    finding: Finding,
    sections: Sequence[tuple[str, str]],
    timings: dict[str, float],
) -> str:
    """``summary.md``: what was run, the verdict in plain words, the tables, the time it took."""
    lines = [
        f"# {title}",
        "",
        intro,
        "",
        *settings,
        "",
        "## Verdict",
        "",
        f"**{finding.claim}?** {finding.answer} ({finding.verdict}). {finding.text}",
        "",
    ]
    for heading, body in sections:
        lines += [f"## {heading}", "", body, ""]
    total = sum(timings.values())
    lines += ["## Runtime", ""] + [f"- {name}: {format_seconds(s)}" for name, s in timings.items()]
    lines += [
        f"- total: {format_seconds(total)} ({torch.get_num_threads()} torch thread(s), boltzlab "
        f"{boltzlab.__version__})",
        "",
    ]
    return "\n".join(lines)


def estimate_rows(table: EstimateTable, setting_name: str) -> tuple[list[str], list[list[Any]]]:
    """Every single estimate as a CSV row."""
    header = ["method", setting_name, "repeat", "log_z", "stderr", "error", "cost_sweeps"]
    rows = [
        [
            method,
            setting,
            r,
            f"{float(table.log_z[m, s, r]):.10g}",
            f"{float(table.stderr[m, s, r]):.6g}",
            f"{float(table.errors[m, s, r]):.6g}",
            f"{float(table.cost_sweeps[m, s, r]):.0f}",
        ]
        for m, method in enumerate(table.methods)
        for s, setting in enumerate(table.settings)
        for r in range(table.n_repeats)
    ]
    return header, rows


def statistics_rows(table: EstimateTable, setting_name: str) -> tuple[list[str], list[list[Any]]]:
    """Bias, RMSE, calibration and time per method and setting, as CSV rows.

    The last two columns say what the errors are taken from: ``log_z_reference`` and its
    ``reference_stderr`` (0 for an exact value); ``coverage_2se`` counts that s.e. too.
    """
    header = [
        "method", setting_name, "n_repeats", "mean_cost_sweeps", "bias", "bias_stderr", "rmse", "rmse_stderr",
        "mean_reported_stderr", "coverage_2se", "seconds_per_estimate", "log_z_reference", "reference_stderr",
    ]  # fmt: skip
    statistics = [
        table.mean_cost(), table.bias(), table.bias_stderr(), table.rmse(), table.rmse_stderr(),
        table.mean_stderr(), table.coverage(), table.seconds,
    ]  # fmt: skip
    reference = [f"{table.exact_log_z:.10g}", f"{table.reference_se:.6g}"]
    rows = [
        [
            method,
            setting,
            table.n_repeats,
            *(f"{float(values[m, s]):.6g}" for values in statistics),
            *reference,
        ]
        for m, method in enumerate(table.methods)
        for s, setting in enumerate(table.settings)
    ]
    return header, rows


def long_markdown(table: EstimateTable, setting_header: str, per_chain: Sequence[float] | None = None) -> str:
    """One row per method and setting: bias, RMSE, reported error, coverage, time.

    Against a reference the coverage column counts the reference's s.e. too (in quadrature).
    """
    bias, bias_se, rmse, rmse_se = table.bias(), table.bias_stderr(), table.rmse(), table.rmse_stderr()
    mean_se, coverage, cost = table.mean_stderr(), table.coverage(), table.mean_cost()
    within = "within 2 reported s.e." if table.is_exact else "within 2 s.e. (own ⊕ reference)"
    header = [
        "method", setting_header, "sweeps/chain spent", "bias ± s.e.", "RMSE ± s.e.", "mean reported s.e.",
        within, "s per estimate",
    ]  # fmt: skip
    rows = []
    for m, method in enumerate(table.methods):
        chains = per_chain[m] if per_chain is not None else math.nan
        for s, setting in enumerate(table.settings):
            spent = float(cost[m, s]) / chains if math.isfinite(chains) else math.nan
            rows.append(
                [
                    METHOD_LABELS.get(method, method),
                    f"{setting:,}",
                    f"{spent:,.0f}" if math.isfinite(spent) else "",
                    pm(float(bias[m, s]), float(bias_se[m, s])),
                    pm(float(rmse[m, s]), float(rmse_se[m, s])),
                    f"{float(mean_se[m, s]):.3f}",
                    f"{float(coverage[m, s]):.0%}",
                    f"{float(table.seconds[m, s]):.2f}",
                ]
            )
    return markdown_table(header, rows)


def wide_markdown(table: EstimateTable, statistic: str, setting_header: str) -> str:
    """Rows = settings, columns = methods; cells ``value ± s.e.`` of ``"rmse"`` or ``"bias"``."""
    values = table.rmse() if statistic == "rmse" else table.bias()
    errors = table.rmse_stderr() if statistic == "rmse" else table.bias_stderr()
    header = [setting_header, *(METHOD_LABELS.get(method, method) for method in table.methods)]
    rows = [
        [str(setting), *(pm(float(values[m, s]), float(errors[m, s])) for m in range(len(table.methods)))]
        for s, setting in enumerate(table.settings)
    ]
    return markdown_table(header, rows)
