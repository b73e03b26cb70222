"""The files of the real-valued front end: ``summary.md`` and ``results.csv``.

Salakhutdinov & Hinton (2009, §4.2): both stages' ``log Z`` and log-likelihoods (or bounds)
against their independent-unit baselines.
"""

from __future__ import annotations

import math
from typing import Any

import torch

import boltzlab
from boltzlab.cli.common import format_seconds
from boltzlab_experiments.front_end.run import FrontEndResult, LogZReport
from boltzlab_experiments.tables import markdown_table, plus_minus

__all__ = ["front_end_summary_markdown", "log_z_text", "result_rows"]


def log_z_text(report: LogZReport) -> str:
    """``AIS a ± s``, with the exact value and the AIS z-score where there is one."""
    text = f"AIS {plus_minus(report.ais, report.ais_stderr)}"
    if math.isfinite(report.exact):
        text += f", exact {report.exact:.3f} (z = {report.z_score:+.2f})"
    return text


def result_rows(result: FrontEndResult) -> list[list[Any]]:
    """``[quantity, value]`` rows of every number the run measured."""
    values = {
        "n_visible": result.standardizer.n_visible,
        "gaussian_log_z_ais": result.gaussian_log_z.ais,
        "gaussian_log_z_ais_stderr": result.gaussian_log_z.ais_stderr,
        "gaussian_log_z_exact": result.gaussian_log_z.exact,
        "gaussian_train_log_likelihood": result.gaussian_train_log_likelihood,
        "gaussian_test_log_likelihood": result.gaussian_test_log_likelihood,
        "gaussian_test_stderr": result.gaussian_test_stderr,
        "independent_gaussian_test_log_likelihood": result.independent_test_log_likelihood,
        "log_jacobian_to_grey_levels": result.standardizer.log_jacobian,
        "reconstruction_error": result.reconstruction_error,
        "code_activity": result.code_activity,
        "dbm_log_z_ais": result.dbm_log_z.ais,
        "dbm_log_z_ais_stderr": result.dbm_log_z.ais_stderr,
        "dbm_log_z_exact": result.dbm_log_z.exact,
        "dbm_train_bound": result.dbm_train_bound,
        "dbm_test_bound": result.dbm_test_bound,
        "independent_bernoulli_code_test_log_likelihood": result.independent_code_log_likelihood,
        "gaussian_seconds": result.gaussian_seconds,
        "dbm_seconds": result.dbm_seconds,
        "seconds": result.seconds,
    }
    return [[key, f"{float(value):.8g}"] for key, value in values.items()]


def front_end_summary_markdown(result: FrontEndResult, *, dataset: str, label: str) -> str:
    """The run's ``summary.md``: settings, the two stages' numbers and their baselines."""
    config, standardizer = result.config, result.standardizer
    height, width = standardizer.image_shape
    sizes = "-".join(str(size) for size in config.dbm_layer_sizes)
    gain = result.gaussian_test_log_likelihood - result.independent_test_log_likelihood
    code_gain = result.dbm_test_bound - result.independent_code_log_likelihood
    header = ["stage", "log Z", "train", "test", "independent units (test)", "gain"]
    rows = [
        [
            f"Gaussian-binary RBM {standardizer.n_visible}×{config.n_hidden}, log p(v)",
            log_z_text(result.gaussian_log_z),
            f"{result.gaussian_train_log_likelihood:.2f}",
            plus_minus(result.gaussian_test_log_likelihood, result.gaussian_test_stderr),
            f"{result.independent_test_log_likelihood:.2f}",
            f"{gain:+.2f}",
        ],
        [
            f"DBM {sizes}, lower bound on log p(codes)",
            log_z_text(result.dbm_log_z),
            f"{result.dbm_train_bound:.2f}",
            f"{result.dbm_test_bound:.2f}",
            f"{result.independent_code_log_likelihood:.2f}",
            f"{code_gain:+.2f}",
        ],
    ]
    lines = [
        f"# Real-valued front end ({label})",
        "",
        f"Grey-level {dataset}: {config.n_train or 'all'} training / {config.n_test or 'all'} test images, "
        f"pooled {config.downsample}×{config.downsample} to {height}×{width}, pixels with training "
        f"std < {config.min_pixel_std} dropped ({standardizer.n_visible} kept), standardised (σ = 1 fixed). "
        f"Stage 1: Gaussian-binary RBM, {config.gaussian_algorithm.upper()}, {config.gaussian_updates} updates, "
        f"learning rate {config.gaussian_learning_rate} ({config.gaussian_lr_schedule} schedule), momentum {config.gaussian_momentum}, minibatch "
        f"{config.batch_size}, {config.n_chains} chains; Gaussian base fitted to the pixels. Codes: "
        f"{'h ~ p(h|v)' if config.code_mode == 'sample' else 'p(h|v) > 1/2'} (mean activity "
        f"{result.code_activity:.3f}). Stage 2: DBM {sizes}, greedy pretraining {config.pretrain_updates} "
        f"updates per RBM, SAP {config.dbm_updates} updates at {config.dbm_learning_rate}·2000/(2000 + t). "
        f"log Z by AIS ({config.ais_chains} runs, {config.ais_temperatures} temperatures; ± one standard "
        f"error), exact where the enumerated layers have ≤ {config.exact_limit} units; the likelihoods use "
        f"the exact value when there is one. Seed {config.seed}.",
        "",
        markdown_table(header, rows),
        "",
        "Nats per example. Stage 1 is a density of standardised pixels (add "
        f"{standardizer.log_jacobian:.2f} for grey levels in [0, 1] over the kept pixels); its baseline is "
        "the independent Gaussian fitted to the training pixels (the model without hidden units). Stage 2 "
        "bounds the probability of the binary codes, not of the pixels; its baseline is independent "
        "Bernoulli units with the codes' smoothed rates. The test ± is the standard error over examples.",
        "",
        f"Time: stage 1 {format_seconds(result.gaussian_seconds)}, stage 2 {format_seconds(result.dbm_seconds)}, "
        f"total {format_seconds(result.seconds)}; boltzlab {boltzlab.__version__}, "
        f"{torch.get_num_threads()} torch thread(s).",
        "",
    ]
    return "\n".join(lines)
