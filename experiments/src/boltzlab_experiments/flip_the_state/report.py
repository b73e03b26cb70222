"""The files of the flip-the-state study: CSV and markdown tables and the figures of each part.

One writer per part (:func:`slem_files`, :func:`learning_files`, :func:`mixing_files`) and the
markdown tables the summary also shows; ``summary.md`` itself is
:mod:`boltzlab_experiments.flip_the_state.summary`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

from boltzlab.plotting import save_figure
from boltzlab_experiments.flip_the_state.learning import LearningResult, WilcoxonRow, wilcoxon_table
from boltzlab_experiments.flip_the_state.mixing import MixingResult
from boltzlab_experiments.flip_the_state.modes import ModeHoppingResult
from boltzlab_experiments.flip_the_state.plots import learning_figure, mixing_figure, slem_figure
from boltzlab_experiments.flip_the_state.slem import SlemStudyResult
from boltzlab_experiments.tables import markdown_table, write_csv, write_text

__all__ = [
    "learning_files",
    "mixing_files",
    "mixing_markdown",
    "modes_markdown",
    "slem_files",
    "wilcoxon_markdown",
]


def slem_files(out: Path, result: SlemStudyResult) -> list[Path]:
    """``slem.png`` and ``slem.csv``: the fraction per size and weight scale."""
    rows = []
    for size_index, (n_visible, n_hidden) in enumerate(result.sizes):
        for scale_index, scale in enumerate(result.scales):
            rows.append(
                [
                    f"{n_visible}x{n_hidden}",
                    f"{scale:g}",
                    result.n_models,
                    int(result.n_smaller[size_index, scale_index]),
                    f"{float(result.fraction[size_index, scale_index]):.6g}",
                    f"{float(result.fraction_stderr[size_index, scale_index]):.6g}",
                    f"{float(result.slem_operator[size_index, scale_index].mean()):.6g}",
                    f"{float(result.slem_reference[size_index, scale_index].mean()):.6g}",
                ]
            )
    header = [
        "size",
        "c",
        "n_models",
        "n_flip_smaller",
        "fraction",
        "stderr",
        "mean_slem_flip",
        "mean_slem_gibbs",
    ]
    return [save_figure(slem_figure(result), out / "slem.png"), write_csv(out / "slem.csv", header, rows)]


def wilcoxon_markdown(rows: Sequence[WilcoxonRow]) -> str:
    """The Wilcoxon table in markdown, operator and reference named flip and Gibbs."""
    header = [
        "dataset",
        "lr",
        "algorithm",
        "seeds",
        "median max LL Gibbs",
        "median max LL flip",
        "median flip − Gibbs",
        "flip higher",
        "p",
        "verdict",
    ]
    body = [
        [
            row.dataset,
            f"{row.learning_rate:g}",
            row.algorithm,
            str(row.n_pairs),
            f"{row.median_reference:.3f}",
            f"{row.median_operator:.3f}",
            f"{row.median_difference:+.3f}",
            f"{row.operator_wins}/{row.n_pairs}",
            f"{row.p_value:.3g}",
            row.verdict.replace("operator", "flip").replace("reference", "Gibbs"),
        ]
        for row in rows
    ]
    return markdown_table(header, body)


def learning_files(out: Path, result: LearningResult) -> list[Path]:
    """Learning curves and maxima (CSV), the Wilcoxon table (CSV, markdown), one figure per dataset."""
    keys = ["dataset", "learning_rate", "algorithm", "operator", "seed"]
    curves, maxima = [], []
    for run in result.runs:
        key = [run.dataset, f"{run.learning_rate:g}", run.algorithm, run.operator, run.seed]
        curves += [
            [*key, int(u), f"{ll:.8g}"]
            for u, ll in zip(run.updates, run.log_likelihood.tolist(), strict=True)
        ]
        maxima.append([*key, f"{run.max_log_likelihood:.8g}", run.update_of_max])
    rows = wilcoxon_table(result)
    written = [
        write_csv(out / "learning-curves.csv", [*keys, "update", "log_likelihood"], curves),
        write_csv(out / "learning-maxima.csv", [*keys, "max_log_likelihood", "update_of_max"], maxima),
        write_csv(
            out / "wilcoxon.csv",
            [
                "dataset",
                "learning_rate",
                "algorithm",
                "n_pairs",
                "median_gibbs",
                "median_flip",
                "median_difference",
                "flip_wins",
                "statistic",
                "p_value",
                "min_p_value",
                "verdict",
            ],
            [
                [
                    r.dataset,
                    f"{r.learning_rate:g}",
                    r.algorithm,
                    r.n_pairs,
                    f"{r.median_reference:.8g}",
                    f"{r.median_operator:.8g}",
                    f"{r.median_difference:.8g}",
                    r.operator_wins,
                    f"{r.statistic:.6g}",
                    f"{r.p_value:.6g}",
                    f"{r.min_p_value:.6g}",
                    r.verdict,
                ]
                for r in rows
            ],
        ),
        write_text(out / "wilcoxon.md", wilcoxon_markdown(rows) + "\n"),
    ]
    for dataset in dict.fromkeys(run.dataset for run in result.runs):
        written.append(save_figure(learning_figure(result, dataset), out / f"learning-{dataset}.png"))
    return written


def mixing_markdown(result: MixingResult) -> str:
    """τ of the energy per model and estimator (± standard error), flip against Gibbs, the gain
    (± its delta-method error) and the fraction of units each operator changed per sweep."""
    gibbs, flip = result.operators.index("gibbs"), result.operators.index("flip")
    header = ["model", "mean abs W"]
    for method in result.methods:
        header += [f"τ Gibbs ({method})", f"τ flip ({method})", f"gain ({method})"]
    header.append("units changed per sweep, Gibbs / flip")
    gains = {method: result.gain(method) for method in result.methods}
    body = []
    for model in range(result.tau.shape[0]):
        row = [result.model_name(model), f"{float(result.weight_scale[model]):.3f}"]
        for index, method in enumerate(result.methods):
            tau, stderr = result.tau[model, :, index], result.tau_stderr[model, :, index]
            rough = ["" if bool(result.reliable[model, op, index]) else "*" for op in (gibbs, flip)]
            gain, gain_stderr = gains[method][0][model], gains[method][1][model]
            row += [
                f"{float(tau[gibbs]):.3g} ± {float(stderr[gibbs]):.2g}{rough[0]}",
                f"{float(tau[flip]):.3g} ± {float(stderr[flip]):.2g}{rough[1]}",
                f"{float(gain):+.1%} ± {float(gain_stderr):.1%}",
            ]
        row.append(
            f"{float(result.flip_rate[model, gibbs]):.1%} / {float(result.flip_rate[model, flip]):.1%}"
        )
        body.append(row)
    note = "\n\n\\* shorter than 50 τ: a rough estimate." if not bool(result.reliable.all()) else ""
    return markdown_table(header, body) + note


def modes_markdown(result: ModeHoppingResult) -> str:
    """Class changes and steps to the first change per mutation probability and operator."""
    header = [
        "p_mut",
        "operator",
        "class changes from all-ones (sum over models)",
        f"changed within {result.start_steps} steps",
        "median steps to first change",
    ]
    changed, medians = result.changed_fraction(), result.median_first_change()
    body = [
        [
            f"{p_mut:g}",
            operator,
            str(int(result.class_changes[p_index, :, op_index].sum())),
            f"{float(changed[p_index, op_index]):.1%}",
            "never (censored)"
            if math.isinf(float(medians[p_index, op_index]))
            else f"{float(medians[p_index, op_index]):g}",
        ]
        for p_index, p_mut in enumerate(result.p_mut)
        for op_index, operator in enumerate(result.operators)
    ]
    return markdown_table(header, body)


def mixing_files(out: Path, mixing: MixingResult | None, modes: ModeHoppingResult | None) -> list[Path]:
    """``mixing.csv/.md/.png``, ``mixing-acf.csv`` (the autocorrelation functions) and
    ``modes.csv/.md`` for the parts that ran."""
    written = []
    if mixing is not None:
        rows, lags = [], []
        for model in range(mixing.tau.shape[0]):
            name = mixing.model_name(model)
            for op_index, operator in enumerate(mixing.operators):
                row = [
                    name,
                    operator,
                    f"{float(mixing.weight_scale[model]):.6g}",
                    f"{float(mixing.flip_rate[model, op_index]):.6g}",
                ]
                for m in range(len(mixing.methods)):
                    row += [
                        f"{float(mixing.tau[model, op_index, m]):.6g}",
                        f"{float(mixing.tau_stderr[model, op_index, m]):.6g}",
                        bool(mixing.reliable[model, op_index, m]),
                    ]
                seconds = mixing.seconds
                row.append("" if seconds is None else f"{float(seconds[model, op_index]):.4g}")
                rows.append(row)
                acf = mixing.autocorrelation[model, op_index]
                lags += [
                    [name, operator, lag, f"{value:.8g}"]
                    for lag, value in enumerate(acf.tolist())
                    if math.isfinite(value)
                ]
        header = ["model", "operator", "mean_abs_weight", "flip_rate"]
        for method in mixing.methods:
            header += [f"tau_{method}", f"tau_{method}_stderr", f"{method}_reliable"]
        header.append("seconds")
        written += [
            write_csv(out / "mixing.csv", header, rows),
            write_csv(out / "mixing-acf.csv", ["model", "operator", "lag", "autocorrelation"], lags),
            write_text(out / "mixing.md", mixing_markdown(mixing) + "\n"),
            save_figure(mixing_figure(mixing), out / "mixing.png"),
        ]
    if modes is not None:
        rows = []
        for p_index, p_mut in enumerate(modes.p_mut):
            for model in range(modes.class_changes.shape[1]):
                for op_index, operator in enumerate(modes.operators):
                    first = modes.first_change[p_index, model, op_index]
                    done = first[first >= 0].to(torch.float64)
                    rows.append(
                        [
                            f"{p_mut:g}",
                            model,
                            operator,
                            int(modes.class_changes[p_index, model, op_index]),
                            f"{float((first >= 0).to(torch.float64).mean()):.6g}",
                            f"{float(done.mean()):.6g}" if done.numel() else "",
                        ]
                    )
        header = [
            "p_mut",
            "model",
            "operator",
            "class_changes_from_all_ones",
            "changed_fraction",
            "mean_first_change_if_changed",
        ]
        written += [
            write_csv(out / "modes.csv", header, rows),
            write_text(out / "modes.md", modes_markdown(modes) + "\n"),
        ]
    return written
