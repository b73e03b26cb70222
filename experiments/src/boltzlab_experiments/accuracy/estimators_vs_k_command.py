"""``boltzlab reproduce estimators-vs-k``: RTS, TS, TI, TI-RB and MBAR against K (Carlson et al. 2016, Fig. 4).

The computation is :func:`boltzlab_experiments.accuracy.estimators_vs_k.run_estimators_vs_k`;
this module trains or loads the cached model, shows progress, writes ``estimators-vs-k.png``,
``estimators-vs-k.csv`` (every estimate), ``estimators-vs-k-statistics.csv``,
``estimators-vs-k.md`` and ``summary.md``.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_table
from boltzlab.plotting import save_figure
from boltzlab_experiments.accuracy.command_options import (
    announce,
    benchmark_options,
    configure,
    finish,
    load_models,
    model_option,
)
from boltzlab_experiments.accuracy.estimators_vs_k import (
    EstimatorsVsKConfig,
    estimators_vs_k_finding,
    run_estimators_vs_k,
)
from boltzlab_experiments.accuracy.plots import estimators_vs_k_figure
from boltzlab_experiments.accuracy.report import (
    METHOD_LABELS,
    estimate_rows,
    long_markdown,
    statistics_rows,
    summary_markdown,
    training_label,
    training_line,
    wide_markdown,
)
from boltzlab_experiments.cli import progress_bar
from boltzlab_experiments.tables import write_csv, write_text

__all__ = ["estimators_vs_k"]


@click.command(
    "estimators-vs-k",
    short_help="RTS, TS, TI, TI-RB, MBAR against K (RTS Fig. 4).",
    epilog="""\b
Example:
  boltzlab reproduce estimators-vs-k --out results/estimators-vs-k --data-root /path/to/data
  boltzlab reproduce estimators-vs-k --model-dir results/models --out results/k --seed 1""",
)
@benchmark_options("estimators-vs-k")
@model_option
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
) -> None:
    """Carlson et al. (2016), Fig. 4: RMSE of RTS, TS, TI, TI-RB and MBAR against the number of temperatures.

    For each K, independent runs of RTS's tempered sampler (100 chains, a fixed number of
    long-run sweeps); all five estimators read the same samples. Writes estimators-vs-k.png,
    estimators-vs-k.csv (every estimate), estimators-vs-k-statistics.csv, estimators-vs-k.md and
    summary.md. The scaled default takes under ten minutes on one core.
    """
    config: EstimatorsVsKConfig = configure(EstimatorsVsKConfig, full=full, tiny=tiny, model_name=model_name)
    loaded = datasets.load(dataset, root=data_root)
    announce("estimators-vs-k", config, out)
    (benchmark,), written, train_seconds = load_models(
        [config.model], config.training, loaded, dataset, model_dir or out / "models"
    )
    started = time.perf_counter()
    with progress_bar("estimators-vs-k", unit="step") as progress:
        result = run_estimators_vs_k(config, benchmark, seed=seed, progress=progress)
    timings = {
        training_label(written): train_seconds,
        "sampling and estimates": time.perf_counter() - started,
    }
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
    settings = [
        f"- configuration `{config.label}`, estimator seed {seed}",
        training_line(config.training, [benchmark], dataset),
        f"- per K and repeat: one run of RTS's tempered sampler, {config.n_chains} chains, linear ladder, uniform "
        f"prior, up to 10 × 50 initial sweeps then {config.n_sweeps:,} long-run sweeps; RTS, TS (level counts), "
        "TI (trapezoid, binned by drawn level), TI-RB (q-weighted) and MBAR (pymbar, samples thinned to at most "
        f"{config.max_log_densities:,} log-densities) from the same samples; {table.n_repeats} repeats",
        "- the paper bootstrapped 200 estimates (20 for MBAR) from one 3-million-sample run; we repeat "
        "independent runs and compare with the exact log Z",
    ]
    summary = summary_markdown(
        f"Estimators against the number of temperatures ({config.label})",
        "Carlson et al. (2016, Fig. 4) find RTS's RMSE nearly flat in K once K is large enough to mix, TI "
        "suffering from discretisation error, and TI-RB approaching RTS as K grows.",
        settings,
        finding,
        [
            ("RMSE (nats) against the exact log Z", rmse_table),
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
