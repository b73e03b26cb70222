"""The files of the CAST comparison: ``bounds.csv``, ``table.csv``, ``fast-chain.csv``, figures, ``summary.md``.

Salakhutdinov (2010, Table 1 and Fig. 5; docs/algorithms.md §3.4): the final table with stability
statistics and verdicts beside the paper's numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

import boltzlab
from boltzlab import data as datasets
from boltzlab.cli.common import format_seconds
from boltzlab.plotting import save_figure
from boltzlab_experiments.cast_comparison.config import PAPER_TEST_BOUNDS
from boltzlab_experiments.cast_comparison.plots import (
    bound_curve_figure,
    samples_comparison_figure,
    temperature_figure,
)
from boltzlab_experiments.cast_comparison.run import CASTComparisonResult
from boltzlab_experiments.cast_comparison.verdicts import verdicts
from boltzlab_experiments.tables import markdown_table, plus_minus, write_csv, write_text

__all__ = ["TABLE_HEADER", "cast_summary_markdown", "table_rows", "write_files"]


def table_rows(result: CASTComparisonResult) -> list[list[Any]]:
    """One ``table.csv`` row per algorithm: final bounds, log Z, curve statistics, per-example AIS."""
    return [
        [
            run.algorithm,
            run.test_bound,
            run.train_bound,
            run.final_log_z,
            run.final_log_z_stderr,
            run.max_drop,
            run.late_mean_abs_change,
            run.test_log_probability,
            run.test_log_probability_stderr,
            run.test_bound_subset,
            run.seconds,
        ]
        for run in result.runs
    ]


TABLE_HEADER = [
    "algorithm",
    "test_bound",
    "train_bound",
    "log_z",
    "log_z_stderr",
    "max_drop",
    "late_mean_abs_change",
    "ais_test_log_p",
    "ais_test_log_p_stderr",
    "bound_on_ais_cases",
    "train_seconds",
]


def cast_summary_markdown(result: CASTComparisonResult, *, dataset: str, label: str) -> str:
    """``summary.md``: settings, the final table, verdicts, and the paper's numbers beside ours."""
    config = result.config
    rows = [
        [
            run.algorithm.upper(),
            plus_minus(run.test_bound, run.final_log_z_stderr),
            f"{run.train_bound:.2f}",
            plus_minus(run.final_log_z, run.final_log_z_stderr),
            plus_minus(run.test_log_probability, run.test_log_probability_stderr),
            "-" if not math.isfinite(run.test_bound_subset) else f"{run.test_bound_subset:.2f}",
            f"{run.max_drop:.2f}",
            f"{run.late_mean_abs_change:.2f}",
            f"{PAPER_TEST_BOUNDS.get(run.algorithm, math.nan):.2f}",
        ]
        for run in result.runs
    ]
    header = [
        "algorithm",
        "test bound",
        "train bound",
        "log Z (AIS)",
        "AIS log p(v), test subset",
        "bound, same subset",
        "largest drop",
        "late mean abs change",
        "paper (784-500-1000)",
    ]
    sizes = "-".join(str(size) for size in config.layer_sizes)
    lines = [
        f"# CAST comparison ({label})",
        "",
        f"DBM {sizes} on {dataset} ({config.n_train or 'all'} training / {config.n_test or 'all'} test "
        f"examples), {config.n_updates} updates of every algorithm, minibatch {config.batch_size}, "
        f"learning rate {config.learning_rate}·2000/(2000 + t), operator {config.operator}, seed {config.seed}; "
        f"SAP and FPCD {config.n_chains} chains, CAST {config.cast_chains} slow + {config.cast_chains} fast "
        f"chains, {config.cast_levels} temperatures from 1 to {config.cast_low}, lag {config.cast_lag}; "
        f"greedy pretraining {config.pretrain_updates} updates per RBM (shared start). "
        f"Bounds in nats per example; training bound every {config.eval_every} updates on "
        f"{config.eval_examples} training cases with AIS log Z ({config.ais_chains} runs, "
        f"{config.ais_temperatures} temperatures); final log Z with {config.final_ais_chains} runs, "
        f"{config.final_ais_temperatures} temperatures; ± is the AIS standard error of log Z. "
        f"Per-example AIS on {config.likelihood_examples} test cases "
        f"({config.likelihood_chains} runs, {config.likelihood_temperatures} temperatures).",
        "",
        markdown_table(header, rows),
        "",
        "## Verdicts",
        "",
        *[f"* {line}" for line in verdicts(result)],
        "",
        f"Samples after learning ({result.sampled_algorithm.upper()} model): plain Gibbs vs adaptive ST "
        f"(level-move acceptance {result.tempered_acceptance:.1%}); see samples.png. "
        f"The paper's numbers are for the 784-500-1000 DBM after 200,000 updates and are not comparable "
        f"with a scaled run. AIS log Z tends to be low, so every bound here tends to be high by the same amount.",
        "",
        f"Time: pretraining {format_seconds(result.pretrain_seconds)}, total {format_seconds(result.seconds)}; "
        f"boltzlab {boltzlab.__version__}, {torch.get_num_threads()} torch thread(s).",
        "",
    ]
    return "\n".join(lines)


def write_files(out: Path, result: CASTComparisonResult, dataset: datasets.Dataset, label: str) -> list[Path]:
    curve_rows = [
        [run.algorithm, int(update), float(bound), float(log_z), float(stderr)]
        for run in result.runs
        for update, bound, log_z, stderr in zip(
            run.updates, run.train_bounds, run.log_z, run.log_z_stderr, strict=True
        )
    ]
    sizes = "-".join(str(size) for size in result.config.layer_sizes)
    written = [
        write_csv(
            out / "bounds.csv", ["algorithm", "update", "train_bound", "log_z", "log_z_stderr"], curve_rows
        ),
        write_csv(out / "table.csv", TABLE_HEADER, table_rows(result)),
        write_csv(
            out / "fast-chain.csv",
            ["update", "beta"],
            [[index + 1, float(beta)] for index, beta in enumerate(result.fast_chain_betas)],
        ),
        save_figure(
            bound_curve_figure(result, title=f"DBM {sizes} on {dataset.name}: training lower bound"),
            out / "bound-curves.png",
        ),
        save_figure(samples_comparison_figure(result, image_shape=dataset.image_shape), out / "samples.png"),
        save_figure(temperature_figure(result), out / "temperature.png"),
    ]
    summary = cast_summary_markdown(result, dataset=dataset.name, label=label)
    written.append(write_text(out / "summary.md", summary))
    return written
