"""``boltzlab reproduce estimators-vs-k``: RTS, TS, TI, TI-RB and MBAR against K (Carlson et al. 2016, Fig. 4).

The computation is :func:`boltzlab_experiments.accuracy.estimators_vs_k.run_estimators_vs_k`;
this module trains or loads the cached model (or reads ``--model-file`` with its reference
``log Z``), shows progress, splits the repeats over the processes of a process group and merges
them, and on rank 0 writes ``estimators-vs-k.png``, ``estimators-vs-k.csv`` (every estimate),
``estimators-vs-k-statistics.csv``, ``estimators-vs-k.md`` and ``summary.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from boltzlab import distributed
from boltzlab.cli.common import command_options, format_table
from boltzlab.cli.reproduce import SPLITS_ATTRIBUTE
from boltzlab.plotting import save_figure
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.accuracy.command_options import (
    benchmark_options,
    finish,
    gather_shares,
    model_option,
    paper_options,
    set_up_benchmark,
)
from boltzlab_experiments.accuracy.estimators_vs_k import (
    EstimatorsVsKConfig,
    estimators_vs_k_finding,
    merge_estimators_vs_k,
    run_estimators_vs_k,
)
from boltzlab_experiments.accuracy.plots import estimators_vs_k_figure
from boltzlab_experiments.accuracy.report import (
    METHOD_LABELS,
    estimate_rows,
    long_markdown,
    model_line,
    reference_note,
    statistics_rows,
    summary_markdown,
    training_label,
    wide_markdown,
)
from boltzlab_experiments.cli import progress_bar
from boltzlab_experiments.tables import write_csv, write_text

__all__ = ["estimators_vs_k"]


@click.command(
    "estimators-vs-k",
    short_help=REPRODUCE_HELP["estimators-vs-k"],
    epilog="""\b
Example:
  boltzlab reproduce estimators-vs-k --out results/estimators-vs-k --data-root /path/to/data
  boltzlab reproduce estimators-vs-k --model-dir results/models --out results/k --seed 1
  boltzlab reproduce estimators-vs-k --preset paper --model-file runs/ref-784x500-cd25/model.safetensors \\
      --reference-log-z 568.1707 --reference-stderr 0.0129 --reference-source "long AIS runs" \\
      --out results/estimators-vs-k-paper

\b
Repeats split over processes (the same numbers as one process):
  torchrun --nproc-per-node 4 --no-python boltzlab reproduce estimators-vs-k --preset paper ...""",
)
@benchmark_options("estimators-vs-k")
@model_option
@paper_options
@command_options
def estimators_vs_k(
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
    """Carlson et al. (2016), Fig. 4: RMSE of RTS, TS, TI, TI-RB and MBAR against the number of temperatures.

    For each K, independent runs of RTS's tempered sampler (100 chains, a fixed number of
    long-run sweeps); all five estimators read the same samples. Against the exact log Z of a
    784×20 RBM, or with --model-file against a reference log Z and its standard error. Writes
    estimators-vs-k.png, estimators-vs-k.csv (every estimate), estimators-vs-k-statistics.csv,
    estimators-vs-k.md and summary.md. The scaled default takes under ten minutes on one core.
    Under torchrun (``torchrun --no-python boltzlab reproduce ...``) the processes share
    the repeats; rank 0 writes.
    """
    setup = set_up_benchmark(
        "estimators-vs-k",
        EstimatorsVsKConfig,
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
    config: EstimatorsVsKConfig = setup.config
    repeats, benchmark = setup.repeats, setup.benchmark
    written, train_seconds = setup.written, setup.train_seconds
    started = time.perf_counter()
    with progress_bar("estimators-vs-k", unit="step") as progress:
        share = run_estimators_vs_k(config, benchmark, seed=seed, repeats=repeats, progress=progress)
    result = gather_shares(share, merge_estimators_vs_k)
    if not distributed.topology().is_main:
        return  # rank 0 writes and prints
    timings = {"sampling and estimates": time.perf_counter() - started}
    if model_file is None:
        timings = {training_label(written): train_seconds, **timings}
    finding = estimators_vs_k_finding(result)
    table = result.table
    written += [
        save_figure(estimators_vs_k_figure(result), out / "estimators-vs-k.png"),
        write_csv(out / "estimators-vs-k.csv", *estimate_rows(table, "n_temperatures")),
        write_csv(out / "estimators-vs-k-statistics.csv", *statistics_rows(table, "n_temperatures")),
    ]
    rmse_table = wide_markdown(table, "rmse", "K")
    bias_table = wide_markdown(table, "bias", "K")
    detail = long_markdown(table, "K", [config.n_chains] * len(table.methods))
    written.append(
        write_text(
            out / "estimators-vs-k.md",
            f"RMSE (nats) ± s.e.\n\n{rmse_table}\n\nBias (nats) ± s.e.\n\n{bias_table}\n\n{detail}\n",
        )
    )
    sampling = ", ".join(
        f"K = {k}: {float(s):.1f} s"
        for k, s in zip(table.settings, result.sampling_seconds.tolist(), strict=True)
    )
    stopped = ", ".join(
        f"K = {k}: {float(s):.0%}" for k, s in zip(table.settings, result.stopped.tolist(), strict=True)
    )
    if config.ladder == "linear":
        ladder = "the sampler's default linear ladder from Ẑ = 1 (the paper's)"
    else:
        ladder = (
            f"the library's adaptive ladder (equal thermodynamic length, placed by a pilot annealing run of "
            f"{config.n_chains} chains × {config.pilot_temperatures:,} temperatures that also gives the starting "
            "log Ẑ; its sweeps count in every method's cost)"
        )
    settings = [
        f"- configuration `{config.label}`, estimator seed {seed}"
        + (
            f"; the {config.n_repeats} repeats split over {distributed.topology().world_size} processes "
            "(each repeat from its own seed: the same numbers as one process)"
            if repeats is not None
            else ""
        ),
        model_line(config.training, benchmark, dataset, model_file),
        f"- per K and repeat: one run of RTS's tempered sampler, {config.n_chains} chains, {ladder}, uniform "
        f"prior, up to 10 × 50 initial sweeps then {config.n_sweeps:,} long-run sweeps; RTS, TS (level counts), "
        "TI (trapezoid, binned by drawn level), TI-RB (q-weighted) and MBAR (pymbar, samples thinned to at most "
        f"{config.max_log_densities:,} log-densities) from the same samples; {table.n_repeats} repeats",
        "- the paper bootstrapped 200 estimates (20 for MBAR) from one 3-million-sample run; we repeat "
        f"independent runs and compare with the {table.reference_label(4)}"
        + ("" if table.is_exact else f" ({benchmark.reference_source})"),
    ]
    if not table.is_exact:
        settings.append(reference_note(table))
    summary = summary_markdown(
        f"Estimators against the number of temperatures ({config.label})",
        "Carlson et al. (2016, Fig. 4) find RTS's RMSE nearly flat in K once K is large enough to mix, TI "
        "suffering from discretisation error, and TI-RB approaching RTS as K grows.",
        settings,
        finding,
        [
            (f"RMSE (nats) against the {table.reference_word} log Z", rmse_table),
            ("Bias (nats)", bias_table),
            ("Details", detail),
            (
                "Sampler",
                f"Mean seconds per sampler run: {sampling}. Runs whose initial iterations met the stopping rule: "
                f"{stopped}. The 's per estimate' column is the analysis alone; every method's cost in sweeps is "
                "the sampler run's.",
            ),
        ],
        timings,
    )
    click.echo(
        format_table(
            ["K", *(METHOD_LABELS[method] for method in table.methods)],
            [
                [str(k), *(f"{float(table.rmse()[m, s]):.4f}" for m in range(len(table.methods)))]
                for s, k in enumerate(table.settings)
            ],
        )
    )
    finish(out, summary, finding, written, timings)


# Every process runs its share of the repeats, so `boltzlab reproduce` keeps torchrun's group.
setattr(estimators_vs_k, SPLITS_ATTRIBUTE, True)
