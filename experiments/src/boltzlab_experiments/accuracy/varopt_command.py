"""``boltzlab reproduce varopt``: AIS schedules' log Ẑ and ESS (Kiwaki 2015, Table 1).

The computation is :func:`boltzlab_experiments.accuracy.varopt.run_varopt`; this module trains
or loads the cached models, shows progress, writes ``varopt.png``, ``varopt.csv`` (every run),
``varopt.md`` and ``summary.md``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import click

from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_table
from boltzlab.plotting import save_figure
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.accuracy.command_options import (
    announce,
    benchmark_options,
    configure,
    finish,
    load_models,
)
from boltzlab_experiments.accuracy.plots import varopt_figure
from boltzlab_experiments.accuracy.report import (
    pm,
    summary_markdown,
    training_label,
    training_line,
)
from boltzlab_experiments.accuracy.varopt import (
    VaroptConfig,
    VaroptResult,
    run_varopt,
    schedule_label,
    varopt_finding,
)
from boltzlab_experiments.cli import progress_bar
from boltzlab_experiments.tables import markdown_table, write_csv, write_text

__all__ = ["varopt", "varopt_error_markdown", "varopt_markdown"]


def varopt_markdown(result: VaroptResult, k_index: int) -> str:
    """Kiwaki's Table 1 layout at one K: rows RBMs, cells ``log Ẑ (ESS ± s.e.)``, best ESS in bold."""
    mean_log_z = result.log_z.mean(3)
    ess, ess_se = result.mean_ess(), result.ess_stderr()
    header = ["RBM", "exact log Z", *(schedule_label(name) for name in result.schedules)]
    rows = []
    for m, label in enumerate(result.model_labels):
        best = int(ess[m, :, k_index].argmax())
        cells = []
        for s in range(len(result.schedules)):
            spread = float(ess_se[m, s, k_index])
            size = f"{float(ess[m, s, k_index]):.1f}" + (f" ± {spread:.1f}" if math.isfinite(spread) else "")
            cells.append(
                f"{float(mean_log_z[m, s, k_index]):.3f} ({'**' + size + '**' if s == best else size})"
            )
        rows.append([label, f"{float(result.exact_log_z[m]):.3f}", *cells])
    return markdown_table(header, rows)


def varopt_error_markdown(result: VaroptResult, k_index: int) -> str:
    """Mean ``log Ẑ − exact`` in units of its standard error over runs, at one K."""
    error = result.mean_error()
    n = result.log_z.shape[3]
    spread = (result.log_z.std(3) / math.sqrt(n)) if n > 1 else result.stderr.mean(3)
    header = ["RBM", *(schedule_label(name) for name in result.schedules)]
    rows = [
        [
            label,
            *(
                pm(float(error[m, s, k_index]), float(spread[m, s, k_index]))
                for s in range(len(result.schedules))
            ),
        ]
        for m, label in enumerate(result.model_labels)
    ]
    return markdown_table(header, rows)


@click.command(
    "varopt",
    short_help=REPRODUCE_HELP["varopt"],
    epilog="""\b
Example:
  boltzlab reproduce varopt --out results/varopt --data-root /path/to/data
  boltzlab reproduce varopt --model-dir results/models --out results/varopt --full""",
)
@benchmark_options("varopt")
@command_options
def varopt(
    out: Path, full: bool, tiny: bool, seed: int, dataset: str, data_root: Path | None, model_dir: Path | None
) -> None:
    """Kiwaki (2015), Table 1: log Ẑ and ESS of AIS schedules on CD-1, CD-25 and PCD RBMs.

    LINEAR, SM08, GMS13, VAROPT and VAROPT decelerated with δ = 0.009, 0.006, 0.003, at
    K = 10^3 and 10^4 (10^5 with --full), M = 100 chains (1,000 with --full), on 784×20 RBMs
    with exact log Z. Writes varopt.png, varopt.csv (every run), varopt.md and summary.md, which
    says whether a VAROPT schedule has the highest ESS at the largest K. The scaled default
    takes about ten minutes on one core.
    """
    config: VaroptConfig = configure(VaroptConfig, full=full, tiny=tiny)
    loaded = datasets.load(dataset, root=data_root)
    announce("varopt", config, out)
    benchmarks, written, train_seconds = load_models(
        config.models, config.training, loaded, dataset, model_dir or out / "models"
    )
    started = time.perf_counter()
    with progress_bar("varopt", unit="step") as progress:
        result = run_varopt(config, benchmarks, seed=seed, progress=progress)
    timings = {training_label(written): train_seconds, "schedules and AIS": time.perf_counter() - started}
    finding = varopt_finding(result)
    rows = [
        [
            result.model_names[m], name, k, r,
            f"{float(result.log_z[m, s, k_index, r]):.10g}",
            f"{float(result.log_z[m, s, k_index, r] - result.exact_log_z[m]):.6g}",
            f"{float(result.stderr[m, s, k_index, r]):.6g}",
            f"{float(result.ess[m, s, k_index, r]):.6g}",
            f"{float(result.seconds[m, s, k_index]):.4g}",
        ]
        for m in range(len(result.model_names))
        for s, name in enumerate(result.schedules)
        for k_index, k in enumerate(config.temperatures)
        for r in range(result.log_z.shape[3])
    ]  # fmt: skip
    tables = [
        (f"K = {k:,}: log Ẑ (ESS ± s.e.), highest ESS in bold", varopt_markdown(result, k_index))
        for k_index, k in reversed(list(enumerate(config.temperatures)))
    ]
    errors = [
        (f"K = {k:,}: log Ẑ − exact (nats) ± s.e.", varopt_error_markdown(result, k_index))
        for k_index, k in reversed(list(enumerate(config.temperatures)))
    ]
    written += [
        save_figure(varopt_figure(result), out / "varopt.png"),
        write_csv(
            out / "varopt.csv",
            [
                "model",
                "schedule",
                "n_temperatures",
                "repeat",
                "log_z",
                "error",
                "stderr",
                "ess",
                "seconds_per_run",
            ],
            rows,
        ),
        write_text(
            out / "varopt.md",
            "\n\n".join(f"{title}\n\n{body}" for title, body in tables + errors) + "\n",
        ),
    ]
    main_sweeps = config.n_chains * (max(config.temperatures) - 1)
    pilot = ", ".join(
        f"{label}: VAROPT {float(result.pilot_sweeps[m, 0]):,.0f}, GMS13 {float(result.pilot_sweeps[m, 1]):,.0f}"
        for m, label in enumerate(result.model_labels)
    )
    settings = [
        f"- configuration `{config.label}`, estimator seed {seed}",
        training_line(config.training, benchmarks, dataset),
        f"- AIS with M = {config.n_chains} chains at K = {', '.join(f'{k:,}' for k in config.temperatures)}; "
        f"{result.log_z.shape[3]} independent run(s) per schedule and K (as one batch split into groups of M); "
        "ESS is Kish's (Σw)²/Σw² of each run's final weights",
        "- VAROPT: g(β) = Var[∂β log f] (hidden units summed out) from a pilot AIS on the linear schedule, "
        "smoothed, inverted in closed form (docs/open-questions.md items 1–3); decelerated VAROPT caps every "
        f"increment at δ ∈ {{{', '.join(f'{d:g}' for d in config.deltas)}}} and stretches the later ones "
        "(item 4); GMS13: constant Fisher speed on the joint (v, h) path measured at knots (item 28); SM08: "
        "Salakhutdinov & Murray's three-piece shape scaled to K; one pilot per model, reused at every K",
        f"- measuring sweeps per model ({pilot}) against {main_sweeps:,} sweeps of one main run at the largest K",
    ]
    summary = summary_markdown(
        f"AIS schedules: LINEAR, SM08, GMS13, VAROPT ({config.label})",
        "Kiwaki (2015, Table 1) reports log Ẑ and ESS at the largest K for 20-hidden MNIST RBMs trained by PCD, "
        "CD-1 and CD-25 (exact log Z 208.63, 193.951, 207.12): VAROPT_.009 had the highest ESS on all three "
        "(809, 814, 820 of an M that was probably 1,000), GMS13 the lowest on two.",
        settings,
        finding,
        [*tables, *errors],
        timings,
    )
    k_last = len(config.temperatures) - 1
    click.echo(
        format_table(
            ["RBM", *(schedule_label(name) for name in result.schedules)],
            [
                [
                    label,
                    *(f"{float(result.mean_ess()[m, s, k_last]):.1f}" for s in range(len(result.schedules))),
                ]
                for m, label in enumerate(result.model_labels)
            ],
        )
    )
    finish(out, summary, finding, written, timings)
