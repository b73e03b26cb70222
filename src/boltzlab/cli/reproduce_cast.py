"""``boltzlab reproduce cast``: SAP, FPCD and CAST learning of a DBM, compared as in the CAST paper.

Salakhutdinov (2010, *Learning deep Boltzmann machines using adaptive MCMC*, Table 1 and
Fig. 5; ALGORITHMS.md §3.4): the same DBM trained by SAP, FPCD and CAST with the same budget
and seed on binarised MNIST (Fashion-MNIST if MNIST is absent); the training bound every
``eval_every`` updates (``log Z`` by AIS), the final test bound table, per-example AIS
``log p(v)`` on a few test cases, Gibbs vs adaptive-ST samples of the CAST model, and the
temperature trajectory of one CAST fast chain. The computation is
:func:`boltzlab.experiments.cast_comparison.run_cast_comparison`; this module loads data,
writes the files and prints.

Files in OUT: ``bounds.csv`` (every tracked bound), ``table.csv`` and ``summary.md`` (final
table, stability statistics, verdicts, the paper's numbers), ``bound-curves.png``,
``samples.png``, ``temperature.png`` and ``fast-chain.csv``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import torch

import boltzlab
from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_seconds, format_table, report_written
from boltzlab.cli.reproduce_common import (
    choose_preset,
    data_root_option,
    default_to_one_thread,
    markdown_table,
    plus_minus,
    progress_bar,
    write_csv,
)
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab.experiments.cast_comparison import (
    ALGORITHMS,
    PAPER_TEST_BOUNDS,
    CASTComparisonConfig,
    CASTComparisonResult,
    run_cast_comparison,
)
from boltzlab.io import write_atomic

__all__ = ["cast", "cast_summary_markdown", "load_cast_data", "verdicts"]

_DATASETS = ("mnist", "fashion-mnist")


def load_cast_data(root: Path | None, seed: int) -> datasets.Dataset:
    """Binarised MNIST, else Fashion-MNIST; a ValidationError naming both reasons if neither loads."""
    reasons = []
    for name in _DATASETS:
        try:
            return datasets.load(name, root=root, generator=seed)
        except (BoltzlabError, OSError) as error:
            reasons.append(f"{name}: {' '.join(str(error).split())}")
    raise ValidationError("no dataset for the CAST comparison; " + "; ".join(reasons))


def _table_rows(result: CASTComparisonResult) -> list[list[Any]]:
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


_TABLE_HEADER = [
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


def verdicts(result: CASTComparisonResult) -> list[str]:
    """Plain sentences: does CAST end higher than each baseline, and is its curve steadier?

    "Higher" needs the difference of test bounds to exceed 2 standard errors of the two
    ``log Z`` estimates (the bound's data term is exact given the model, and both models see
    the same test cases); "steadier" compares the largest drop and the late mean absolute
    change of the tracked bound.
    """
    runs = {run.algorithm: run for run in result.runs}
    if "cast" not in runs:
        return ["no CAST run: nothing to compare"]
    cast = runs["cast"]
    lines = []
    for name in ("sap", "fpcd"):
        if name not in runs:
            continue
        other = runs[name]
        gap = cast.test_bound - other.test_bound
        stderr = math.hypot(cast.final_log_z_stderr, other.final_log_z_stderr)
        if gap > 2 * stderr:
            outcome = "CAST ends higher"
        elif gap < -2 * stderr:
            outcome = "CAST ends lower"
        else:
            outcome = "no resolved difference"
        steadier = cast.max_drop < other.max_drop and cast.late_mean_abs_change < other.late_mean_abs_change
        shakier = cast.max_drop > other.max_drop and cast.late_mean_abs_change > other.late_mean_abs_change
        stability = "steadier" if steadier else "less steady" if shakier else "mixed (one statistic each way)"
        lines.append(
            f"CAST vs {name.upper()}: test bound {gap:+.2f} ± {stderr:.2f} nats ({outcome}); "
            f"curve {stability} (largest drop {cast.max_drop:.2f} vs {other.max_drop:.2f}, "
            f"late mean |change| {cast.late_mean_abs_change:.2f} vs {other.late_mean_abs_change:.2f})"
        )
    return lines


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


def _write_files(
    out: Path, result: CASTComparisonResult, dataset: datasets.Dataset, label: str
) -> list[Path]:
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.cast_comparison import (
        bound_curve_figure,
        samples_comparison_figure,
        temperature_figure,
    )

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
        write_csv(out / "table.csv", _TABLE_HEADER, _table_rows(result)),
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
    written.append(write_atomic(out / "summary.md", summary.encode("utf-8")))
    return written


def _parse_layers(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValidationError(
            f"--layers must be comma-separated integers like 784,200,200, got {text!r}"
        ) from None
    if len(sizes) < 3 or min(sizes) < 1:
        raise ValidationError(
            f"--layers needs at least 3 positive sizes (visible and 2 hidden), got {text!r}"
        )
    return sizes


@click.command(
    "cast",
    epilog="""\b
Example:
  boltzlab reproduce cast --out results/cast --data-root ../shared/data
  boltzlab reproduce cast --tiny --out results/cast-tiny
  boltzlab reproduce cast --full --out results/cast-full   # the paper's 784-500-1000, on a GPU""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("cast-comparison"),
    show_default=True,
    metavar="DIR",
    help="Directory for the figures, tables and summary.md.",
)
@click.option("--full", is_flag=True, help="The paper's size (784-500-1000, 200,000 updates): for a GPU.")
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean nothing."
)
@click.option("--layers", metavar="SIZES", help="DBM layer sizes, e.g. 784,200,200 (overrides the preset).")
@click.option(
    "--updates", type=click.IntRange(min=1), help="Updates of every algorithm (overrides the preset)."
)
@click.option("--eval-every", type=click.IntRange(min=1), help="Updates between tracked bounds.")
@click.option("--pretrain-updates", type=click.IntRange(min=0), help="Pretraining updates per RBM (0: none).")
@click.option(
    "--algorithms",
    default=",".join(ALGORITHMS),
    show_default=True,
    help="Comma-separated algorithms among sap, fpcd, cast.",
)
@click.option("--operator", default="gibbs", show_default=True, help="Transition operator of every chain.")
@click.option(
    "--cast-chains",
    type=click.IntRange(min=1),
    help="CAST's slow (= fast) chains (default 50, the paper's; 100 matches SAP's gradient chains).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The seed shared by every algorithm.")
@data_root_option("MNIST / Fashion-MNIST")
@click.option("--device", default="cpu", show_default=True, help="Torch device (cuda for --full).")
@command_options
def cast(
    out: Path,
    full: bool,
    tiny: bool,
    layers: str | None,
    updates: int | None,
    eval_every: int | None,
    pretrain_updates: int | None,
    algorithms: str,
    operator: str,
    cast_chains: int | None,
    seed: int,
    data_root: Path | None,
    device: str,
) -> None:
    """Salakhutdinov (2010) again: is CAST's DBM learning steadier and better than SAP and FPCD?

    Writes bounds.csv, table.csv, fast-chain.csv, bound-curves.png, samples.png, temperature.png
    and summary.md. The scaled default (784-200-200, 2,000 updates) takes about 6 minutes on one core.
    """
    from dataclasses import replace

    config = choose_preset(CASTComparisonConfig, full, tiny)
    label = "paper size" if full else "tiny" if tiny else "scaled"
    overrides: dict[str, Any] = {"seed": seed, "operator": operator, "device": device}
    overrides["algorithms"] = tuple(part.strip().lower() for part in algorithms.split(",") if part.strip())
    for name, value in (
        ("layer_sizes", _parse_layers(layers)),
        ("n_updates", updates),
        ("eval_every", eval_every),
        ("pretrain_updates", pretrain_updates),
        ("cast_chains", cast_chains),
    ):
        if value is not None:
            overrides[name] = value
    config = replace(config, **overrides)
    default_to_one_thread(full=full)
    dataset = load_cast_data(data_root, seed)
    if dataset.n_visible != config.layer_sizes[0]:
        raise ValidationError(
            f"{dataset.name} has {dataset.n_visible} pixels but --layers starts with {config.layer_sizes[0]}"
        )
    test = dataset.test if dataset.test is not None else dataset.valid
    if test is None:
        raise ValidationError(f"{dataset.name} has no test split")
    sizes = "-".join(str(size) for size in config.layer_sizes)
    click.echo(
        f"CAST comparison ({label}): DBM {sizes} on {dataset.name}, {', '.join(config.algorithms)}, "
        f"{config.n_updates} updates each; writing to {out}/"
    )
    with progress_bar("cast comparison") as progress:
        result = run_cast_comparison(config, dataset.train, test, progress=progress)
    click.echo(
        format_table(
            ["algorithm", "test bound", "largest drop", "late |change|"],
            [
                [
                    run.algorithm,
                    plus_minus(run.test_bound, run.final_log_z_stderr),
                    f"{run.max_drop:.2f}",
                    f"{run.late_mean_abs_change:.2f}",
                ]
                for run in result.runs
            ],
        )
    )
    for line in verdicts(result):
        click.echo(line)
    click.echo(f"done in {format_seconds(result.seconds)}")
    report_written(_write_files(out, result, dataset, label))
