"""``boltzlab reproduce rts-vs-ais``: RTS against AIS and RAISE at matched sweeps (Carlson et al. 2016, Fig. 3).

The computation is :func:`boltzlab_experiments.accuracy.rts_vs_ais.run_rts_vs_ais`; this module
trains or loads the cached model (or reads ``--model-file`` with its reference ``log Z``), shows
progress, splits the repeats over the processes of a process group and merges them, and on rank
0 writes ``rts-vs-ais.png``, ``rts-vs-ais.csv`` (every estimate), ``rts-vs-ais-statistics.csv``,
``rts-vs-ais.md`` and ``summary.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import torch

from boltzlab import distributed
from boltzlab.cli.common import command_options, format_table
from boltzlab.cli.reproduce import SPLITS_ATTRIBUTE
from boltzlab.plotting import save_figure
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.accuracy.command_options import (
    benchmark_options,
    finish,
    gather_shares,
    held_out,
    model_option,
    paper_options,
    set_up_benchmark,
)
from boltzlab_experiments.accuracy.plots import rts_vs_ais_figure
from boltzlab_experiments.accuracy.report import (
    METHOD_LABELS,
    estimate_rows,
    long_markdown,
    model_line,
    pm,
    reference_note,
    statistics_rows,
    summary_markdown,
    training_label,
)
from boltzlab_experiments.accuracy.rts_vs_ais import (
    RTSvsAISConfig,
    RTSvsAISResult,
    merge_rts_vs_ais,
    rts_vs_ais_finding,
    run_rts_vs_ais,
)
from boltzlab_experiments.cli import progress_bar
from boltzlab_experiments.tables import write_csv, write_text

__all__ = ["rts_vs_ais", "rts_vs_ais_files"]


@click.command(
    "rts-vs-ais",
    short_help=REPRODUCE_HELP["rts-vs-ais"],
    epilog="""\b
Example:
  boltzlab reproduce rts-vs-ais --out results/rts-vs-ais --data-root /path/to/data
  boltzlab reproduce rts-vs-ais --model pcd --model-dir results/models --out results/rts-vs-ais-pcd
  boltzlab reproduce rts-vs-ais --preset paper --model-file runs/ref-784x500-cd25/model.safetensors \\
      --reference-log-z 568.1707 --reference-stderr 0.0129 --reference-source "long AIS runs" \\
      --out results/rts-vs-ais-paper

\b
Repeats split over processes (the same numbers as one process):
  torchrun --nproc-per-node 4 --no-python boltzlab reproduce rts-vs-ais --preset paper ...""",
)
@benchmark_options("rts-vs-ais")
@model_option
@paper_options
@command_options
def rts_vs_ais(
    out: Path,
    full: bool,
    tiny: bool,
    seed: int,
    dataset: str,
    data_root: Path | None,
    model_dir: Path | None,
    model_name: str | None,
    preset: str | None,
    model_file: Path | None,
    reference_log_z: float | None,
    reference_stderr: float | None,
    reference_source: str | None,
) -> None:
    """Carlson et al. (2016), Fig. 3: RMSE and bias of RTS, AIS and RAISE against Gibbs sweeps.

    RTS with K = 100 temperatures, AIS and RAISE with as many temperatures as RTS's sweeps per
    chain, 100 chains each (RAISE: 10 test examples × 10 reverse chains), repeated over seeds,
    all against the exact log Z of a 784×20 RBM — or, with --model-file, of a saved RBM (the
    paper's 784×500) against a reference log Z and its standard error. Writes rts-vs-ais.png,
    rts-vs-ais.csv (every estimate), rts-vs-ais-statistics.csv, rts-vs-ais.md and summary.md,
    which says whether RTS at 1,000 sweeps beats AIS at 10,000. The scaled default takes under
    ten minutes on one core. Under torchrun (``torchrun --no-python boltzlab reproduce ...``)
    the processes share the repeats; rank 0 writes.
    """
    setup = set_up_benchmark(
        "rts-vs-ais",
        RTSvsAISConfig,
        full=full,
        tiny=tiny,
        preset=preset,
        dataset=dataset,
        data_root=data_root,
        out=out,
        model_name=model_name,
        model_dir=model_dir,
        model_file=model_file,
        reference_log_z=reference_log_z,
        reference_stderr=reference_stderr,
        reference_source=reference_source,
    )
    config: RTSvsAISConfig = setup.config
    loaded, repeats, benchmark = setup.loaded, setup.repeats, setup.benchmark
    written, train_seconds = setup.written, setup.train_seconds
    started = time.perf_counter()
    with progress_bar("rts-vs-ais", unit="step") as progress:
        share = run_rts_vs_ais(
            config, benchmark, held_out(loaded), seed=seed, repeats=repeats, progress=progress
        )
    result = gather_shares(share, merge_rts_vs_ais)
    if not distributed.topology().is_main:
        return  # rank 0 writes and prints
    timings = {"estimates": time.perf_counter() - started}
    if model_file is None:
        timings = {training_label(written): train_seconds, **timings}
    finding = rts_vs_ais_finding(result)
    written += rts_vs_ais_files(out, result)
    table = result.table
    per_chain = [config.n_chains, config.n_chains, config.raise_examples * config.raise_chains]
    word, reference = table.reference_word, table.reference_label(4)
    if config.rts_ladder == "linear":
        rts_ladder = (
            f"K = {config.rts_levels} temperatures on the paper's linear ladder, from Ẑ = 1; the first tenth of "
            "the budget, reserved for the adaptive ladder's pilot, goes unspent"
        )
    else:
        rts_ladder = (
            f"K = {config.rts_levels} temperatures on the library's adaptive ladder (equal thermodynamic "
            "length, placed by a pilot annealing run with as many chains and a tenth of the budget in "
            "temperatures, which also gives the starting log Ẑ; its sweeps count in RTS's)"
        )
    settings = [
        f"- configuration `{config.label}`, estimator seed {seed}"
        + (
            f"; the {config.n_repeats} repeats split over {distributed.topology().world_size} processes "
            "(each repeat from its own seeds: the same numbers as one process)"
            if repeats is not None
            else ""
        ),
        model_line(config.training, benchmark, dataset, model_file),
        f"- RTS: {rts_ladder}; uniform prior, {config.n_chains} chains; the budget is split between the initial "
        "iterations (10 × min(50, budget/20) sweeps, stopping early when max|ĉ/r − 1| < 0.1) and the long "
        "run, so RTS may spend less than its budget",
        f"- AIS: {config.n_chains} chains, the `{config.schedule}` schedule with K = budget temperatures "
        f"(K − 1 sweeps per chain); {table.n_repeats} repeats, each a separate run with its own seed",
        f"- RAISE: {config.raise_examples} random held-out examples × {config.raise_chains} reverse chains per "
        "repeat, same schedule, log Ẑ = mean over the examples of log f(v) − log p̂(v) (Carlson et al.'s "
        "construction)",
        f"- every estimate compared with the {reference}; RMSE error bars by the delta method over repeats; "
        + (
            "'within 2 reported s.e.' checks each method's own error bar"
            if table.is_exact
            else "'within 2 s.e.' checks each method's own error bar combined in quadrature with the reference's"
        ),
    ]
    raise_row, ais_row = table.index("raise"), table.index("ais")
    # "Decisively" off the reference counts its error too: the zero line itself is uncertain.
    bias, spread = table.bias(), torch.sqrt(table.bias_stderr().square() + table.reference_se**2)
    raise_low = [
        str(s) for b, s in enumerate(table.settings)
        if float(bias[raise_row, b]) + 2 * float(spread[raise_row, b]) < 0
    ]  # fmt: skip
    ais_high = [
        str(s) for b, s in enumerate(table.settings)
        if float(bias[ais_row, b]) - 2 * float(spread[ais_row, b]) > 0
    ]  # fmt: skip
    notes = [
        "- AIS is a stochastic lower bound (biased down) and RAISE-derived log Z a stochastic upper bound in "
        "expectation over data drawn from the model; RTS's bias has no fixed sign.",
        (
            f"- RAISE's mean estimate lies decisively *below* the {word} value at budget(s) {', '.join(raise_low)}: "
            "its upward bias needs held-out data typical of the model, and test digits are not samples of the "
            "RBM (p_ann can exceed p on them)."
            if raise_low
            else f"- RAISE's mean estimate is never decisively below the {word} value."
        ),
        (
            f"- AIS's mean estimate lies decisively above the {word} value at budget(s) {', '.join(ais_high)} "
            "(unexpected for a lower bound; check the error bars)."
            if ais_high
            else f"- AIS's mean estimate is never decisively above the {word} value."
        ),
    ]
    if not table.is_exact:
        notes.append(reference_note(table))
    ours = (
        "ours (784×20) do."
        if table.is_exact
        else f"neither has this one ({benchmark.label}): the estimates are scored against a reference "
        f"log Z = {table.exact_log_z:.3f} ± {table.reference_se:.3f} ({benchmark.reference_source})."
    )
    summary = summary_markdown(
        f"RTS vs AIS and RAISE at matched sweeps ({config.label})",
        "Carlson, Stinson, Pakman & Paninski (2016, Fig. 3) report that RTS's bias shrinks faster than "
        "AIS's and RAISE's at equal numbers of Gibbs sweeps, and that AIS needs more than an order of "
        f"magnitude more sweeps to match RTS's RMSE at 10^3 sweeps. Their RBMs (784-500, 784-100) have no exact "
        f"log Z; {ours}",
        settings,
        finding,
        [
            (
                f"Bias and RMSE against the {word} log Z",
                long_markdown(table, "budget (sweeps/chain)", per_chain),
            ),
            ("Notes", "\n".join(notes)),
        ],
        timings,
    )
    click.echo(
        format_table(
            ["method", "budget", "bias", "RMSE"],
            [
                [
                    METHOD_LABELS[method],
                    f"{setting:,}",
                    pm(float(table.bias()[m, s]), float(table.bias_stderr()[m, s])),
                    pm(float(table.rmse()[m, s]), float(table.rmse_stderr()[m, s])),
                ]
                for m, method in enumerate(table.methods)
                for s, setting in enumerate(table.settings)
            ],
        )
    )
    finish(out, summary, finding, written, timings)


# Every process runs its share of the repeats, so `boltzlab reproduce` keeps torchrun's group.
setattr(rts_vs_ais, SPLITS_ATTRIBUTE, True)


def rts_vs_ais_files(out: Path, result: RTSvsAISResult) -> list[Path]:
    """The figure, every estimate, the statistics and the markdown table."""
    config = result.config
    per_chain = [config.n_chains, config.n_chains, config.raise_examples * config.raise_chains]
    return [
        save_figure(rts_vs_ais_figure(result), out / "rts-vs-ais.png"),
        write_csv(out / "rts-vs-ais.csv", *estimate_rows(result.table, "budget_sweeps")),
        write_csv(out / "rts-vs-ais-statistics.csv", *statistics_rows(result.table, "budget_sweeps")),
        write_text(
            out / "rts-vs-ais.md",
            long_markdown(result.table, "budget (sweeps/chain)", per_chain) + "\n",
        ),
    ]
