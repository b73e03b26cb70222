"""``boltzlab reproduce``: re-run a paper's demonstration or study and write its figures and tables.

* ``two-node`` — the CAST paper's two-node demonstration (Salakhutdinov 2010, §3): occupancy of
  the four states over time under Gibbs, FPCD and Wang-Landau (:mod:`boltzlab.experiments.two_node`).
* ``flip-the-state`` — the flip-the-state study (Brügge, Fischer & Igel 2013): SLEM fractions,
  learning curves with a Wilcoxon test, autocorrelation times and class changes, and a
  ``summary.md`` that says whether flip beat Gibbs where the paper says it does
  (:mod:`boltzlab.experiments.flip_the_state`).

The computations are pure functions in :mod:`boltzlab.experiments`; this module loads data,
shows progress, writes the files and prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
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
    progress_bar,
    write_csv,
)
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab.evaluation.slem_study import SlemStudyResult
from boltzlab.experiments.flip_the_state import (
    PAPER_TAU_GAIN,
    Finding,
    FlipTheStateConfig,
    LearningResult,
    MixingResult,
    ModeHoppingResult,
    WilcoxonRow,
    findings,
    run_learning,
    run_mixing,
    run_mode_hopping,
    run_slem,
    wilcoxon_table,
)
from boltzlab.experiments.two_node import TwoNodeResult, gibbs_escape_probability, run_two_node, state_labels
from boltzlab.io import write_atomic

__all__ = ["markdown_table", "reproduce", "summary_markdown"]

PARTS = ("slem", "learning", "mixing")


def _ascii(text: str) -> str:
    return text.replace("−", "-")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@click.group(
    "reproduce",
    epilog="""\b
Example:
  boltzlab reproduce two-node --out results/two-node
  boltzlab reproduce flip-the-state --out results/flip --data-root ../shared/data
  boltzlab reproduce flip-the-state --parts slem --full --out results/slem-full""",
)
def reproduce() -> None:
    """Re-run a paper's demonstration or study and write its figures, tables and summary."""


# -------------------------------------------------------------------------------------- two-node
def _two_node_rows(result: TwoNodeResult) -> list[list[Any]]:
    rows = []
    for run in result.runs:
        occupancy = run.running_occupancy
        for step in range(1, run.n_steps + 1):
            rows.append(
                [run.sampler, step, _ascii(state_labels()[int(run.states[step])])]
                + [f"{value:.6g}" for value in occupancy[step - 1].tolist()]
                + [f"{value:.6g}" for value in run.log_weights[step].tolist()]
            )
    return rows


@reproduce.command(
    "two-node",
    epilog="""\b
Example:
  boltzlab reproduce two-node --out results/two-node --steps 2000 --seed 1""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("two-node"),
    show_default=True,
    metavar="DIR",
    help="Directory for two-node.png and two-node.csv.",
)
@click.option(
    "--steps", type=click.IntRange(min=1), default=1000, show_default=True, help="Sweeps per sampler."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--eta",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    help="Constant step of the weight updates, in nats (the paper's γ = 10 is η = log 11 ≈ 2.40).",
)
@command_options
def two_node(out: Path, steps: int, seed: int, eta: float) -> None:
    """The CAST paper's two-node MRF: Gibbs stays stuck, FPCD falls into the data mode, WL roams.

    Writes the occupancy of the four states over time (two-node.png, one panel per sampler)
    and the numbers behind it (two-node.csv), and prints the final occupancy fractions.
    """
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.experiments import two_node_figure

    result = run_two_node(n_steps=steps, learning_rate=eta, generator=seed)
    labels = [_ascii(label) for label in state_labels()]
    header = ["sampler", "step", "state"] + [f"occupancy{label}" for label in labels]
    header += [f"log_g{label}" for label in labels]
    written = [
        save_figure(two_node_figure(result), out / "two-node.png"),
        write_csv(out / "two-node.csv", header, _two_node_rows(result)),
    ]
    click.echo(
        f"final occupancy of the four states after {steps} steps (start (−1,−1), data (1,1), η = {eta:g}):"
    )
    click.echo(
        format_table(
            ["sampler", *state_labels()],
            [[run.sampler, *(f"{value:.3f}" for value in run.occupancy().tolist())] for run in result.runs],
        )
    )
    fpcd = result.run("fpcd").states
    arrived = (fpcd == 0).nonzero()
    click.echo(
        f"Gibbs leaves (−1,−1) within {steps} steps with probability {gibbs_escape_probability(steps):.3g}; "
        + (
            f"FPCD first reached the data mode at step {int(arrived[0])}."
            if arrived.numel()
            else "FPCD never reached it."
        )
    )
    report_written(written)


# -------------------------------------------------------------------------------- flip-the-state
def parse_parts(text: str) -> tuple[str, ...]:
    """``"slem,mixing"`` → ``("slem", "mixing")``, in the study's order; unknown names refused."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if unknown or not names:
        raise ValidationError(f"--parts takes a comma-separated list of {', '.join(PARTS)}, got {text!r}")
    return tuple(part for part in PARTS if part in names)


def _load(
    config: FlipTheStateConfig, parts: Sequence[str], root: Path | None, seed: int
) -> tuple[dict[str, datasets.Dataset], dict[str, str]]:
    """Every dataset the parts need; the ones that cannot be loaded are skipped with the reason."""
    loaded, skipped = {}, {}
    for spec in config.datasets(parts):
        try:
            loaded[spec.name] = datasets.load(spec.source, root=root, generator=seed, **dict(spec.options))
        except (BoltzlabError, OSError) as error:
            skipped[spec.name] = " ".join(str(error).split())
    return loaded, skipped


def _slem_files(out: Path, result: SlemStudyResult) -> list[Path]:
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.experiments import slem_figure

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


def _wilcoxon_markdown(rows: Sequence[WilcoxonRow]) -> str:
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


def _learning_files(out: Path, result: LearningResult) -> list[Path]:
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.experiments import learning_figure

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
        write_atomic(out / "wilcoxon.md", (_wilcoxon_markdown(rows) + "\n").encode("utf-8")),
    ]
    for dataset in dict.fromkeys(run.dataset for run in result.runs):
        written.append(save_figure(learning_figure(result, dataset), out / f"learning-{dataset}.png"))
    return written


def _mixing_markdown(result: MixingResult) -> str:
    gibbs, flip = result.operators.index("gibbs"), result.operators.index("flip")
    header = ["model", "mean abs W"]
    for method in result.methods:
        header += [f"τ Gibbs ({method})", f"τ flip ({method})", f"gain ({method})"]
    gains = {method: result.gain(method) for method in result.methods}
    body = []
    for model in range(result.tau.shape[0]):
        row = [str(model), f"{float(result.weight_scale[model]):.3f}"]
        for index, method in enumerate(result.methods):
            tau, stderr = result.tau[model, :, index], result.tau_stderr[model, :, index]
            rough = ["" if bool(result.reliable[model, op, index]) else "*" for op in (gibbs, flip)]
            gain, gain_stderr = gains[method][0][model], gains[method][1][model]
            row += [
                f"{float(tau[gibbs]):.3g} ± {float(stderr[gibbs]):.2g}{rough[0]}",
                f"{float(tau[flip]):.3g} ± {float(stderr[flip]):.2g}{rough[1]}",
                f"{float(gain):+.1%} ± {float(gain_stderr):.1%}",
            ]
        body.append(row)
    note = "\n\n\\* shorter than 50 τ: a rough estimate." if not bool(result.reliable.all()) else ""
    return markdown_table(header, body) + note


def _modes_markdown(result: ModeHoppingResult) -> str:
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


def _mixing_files(out: Path, mixing: MixingResult | None, modes: ModeHoppingResult | None) -> list[Path]:
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.experiments import mixing_figure

    written = []
    if mixing is not None:
        rows = []
        for model in range(mixing.tau.shape[0]):
            for op_index, operator in enumerate(mixing.operators):
                row = [
                    model,
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
                rows.append(row)
        header = ["model", "operator", "mean_abs_weight", "flip_rate"]
        for method in mixing.methods:
            header += [f"tau_{method}", f"tau_{method}_stderr", f"{method}_reliable"]
        written += [
            write_csv(out / "mixing.csv", header, rows),
            write_atomic(out / "mixing.md", (_mixing_markdown(mixing) + "\n").encode("utf-8")),
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
            write_atomic(out / "modes.md", (_modes_markdown(modes) + "\n").encode("utf-8")),
        ]
    return written


def _settings(config: FlipTheStateConfig, parts: Sequence[str], seed: int) -> list[str]:
    lines = [f"- configuration `{config.label}`, study seed {seed}, parts: {', '.join(parts)}"]
    if "slem" in parts:
        sizes = ", ".join(f"{v}×{h}" for v, h in config.slem_sizes)
        lines.append(
            f"- SLEM: sizes {sizes}; c = {', '.join(f'{c:g}' for c in config.slem_scales)}; "
            f"{config.slem_models} RBMs per (size, c); W ~ U[−c, c], biases 0; exact joint sweep T_h T_v"
        )
    if "learning" in parts:
        setups = "; ".join(
            f"{s.data.name} ({s.n_hidden} hidden, {'full batch' if s.batch_size is None else f'batch {s.batch_size}'}, "
            f"{s.n_updates} updates)"
            for s in config.learning
        )
        lines.append(
            f"- learning: {setups}; {', '.join(config.algorithms)} with k = {config.k} (PT: "
            f"{config.pt_levels} inverse temperatures uniform in [0, 1]); learning rate(s) "
            f"{', '.join(f'{r:g}' for r in config.learning_rates)}; {config.n_seeds} seeds; exact "
            f"training log-likelihood every {config.evaluate_every} updates; no momentum or weight decay"
        )
    if "mixing" in parts:
        params = ", ".join(f"{k} {v}" for k, v in config.mixing_algorithm_params)
        lines.append(
            f"- mixing: {_count(config.mixing_models, 'RBM')} with {config.mixing_hidden} hidden units on "
            f"{config.mixing_data.name}, trained by {config.mixing_algorithm}-{config.mixing_k}"
            f"{f' ({params})' if params else ''} for {config.mixing_updates} updates at learning rate "
            f"{config.mixing_learning_rate:g}; then {config.mixing_chains} chains × {config.mixing_steps} "
            f"sweeps (after {config.mixing_burn_in}) per operator from training examples; τ of the joint "
            f"energy by Sokal's adaptive window and by an AR fit"
        )
        lines.append(
            f"- mode hopping: Artificial Modes with p_mut {', '.join(f'{p:g}' for p in config.mode_p_mut)}; "
            f"{_count(config.mode_models, 'RBM')} with {config.mode_hidden} hidden units trained by CD-{config.mode_k} "
            f"for {config.mode_updates} updates; {config.mode_starts} chains from training examples for up "
            f"to {config.mode_start_steps} sweeps, one chain from all-ones for {config.mode_long_steps} "
            f"sweeps; class = nearest thresholded class mean (Hamming), ties discarded"
        )
    return lines


def summary_markdown(
    config: FlipTheStateConfig,
    found: Sequence[Finding],
    *,
    parts: Sequence[str],
    seed: int,
    tables: dict[str, str] | None = None,
    timings: dict[str, float] | None = None,
    skipped: dict[str, str] | None = None,
) -> str:
    """The study's ``summary.md``: what was measured, the verdicts in plain words, tables, times."""
    tables, timings, skipped = tables or {}, timings or {}, skipped or {}
    titles = {
        "slem": "SLEM of the exact sweep (Fig. 3, upper)",
        "learning": "Learning curves",
        "mixing": "Autocorrelation time of the energy",
        "modes": "Mode hopping on Artificial Modes",
    }
    lines = [
        f"# Flip-the-state study ({config.label})",
        "",
        "Brügge, Fischer & Igel (2013) propose the flip-the-state operator, a Metropolis-type single-unit "
        "update that changes a unit's state as often as detailed balance allows, and claim that it mixes "
        "faster than Gibbs sampling when the weights are large. This run measured their claims again "
        f"with boltzlab {boltzlab.__version__}:",
        "",
        *_settings(config, parts, seed),
        "",
        "## Verdicts",
        "",
        markdown_table(
            ["part", "the paper's claim", "verdict"], [[f.part, f.claim, f.verdict] for f in found]
        ),
        "",
    ]
    for finding in found:
        lines += [f"## {titles.get(finding.part, finding.part)}", "", finding.text, ""]
        if finding.part in tables:
            lines += [tables[finding.part], ""]
    if config.label != "full":
        lines += [
            "## Caveats",
            "",
            f"This is the `{config.label}` configuration, far smaller than the paper's (25 repetitions of "
            "20,000 updates at three learning rates; 24 RBMs 784×500 sampled for 10⁶ steps): few seeds give "
            "the signed-rank test little power, short runs stop in the early phase where the paper finds Gibbs "
            f"slightly better, and the paper's {PAPER_TAU_GAIN:.2%} gain was measured on larger, PT-trained "
            "models. Run with `--full` for the paper's sizes.",
            "",
        ]
    if skipped:
        lines += ["## Skipped", ""] + [f"- {name}: {reason}" for name, reason in skipped.items()] + [""]
    if timings:
        total = sum(timings.values())
        lines += ["## Runtime", ""] + [f"- {name}: {format_seconds(s)}" for name, s in timings.items()]
        lines += [f"- total: {format_seconds(total)} ({torch.get_num_threads()} torch thread(s))", ""]
    return "\n".join(lines)


@reproduce.command(
    "flip-the-state",
    epilog="""\b
Example:
  boltzlab reproduce flip-the-state --out results/flip --data-root ../shared/data
  boltzlab reproduce flip-the-state --parts slem,mixing --seed 3 --out results/flip-3""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("flip-the-state"),
    show_default=True,
    metavar="DIR",
    help="Directory for the figures, tables and summary.md.",
)
@click.option(
    "--full", is_flag=True, help="The paper's sizes (days on two cores) instead of the scaled default."
)
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean nothing."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Study seed.")
@data_root_option("MNIST")
@click.option(
    "--parts",
    default=",".join(PARTS),
    show_default=True,
    help="Comma-separated parts to run: slem, learning, mixing.",
)
@command_options
def flip_the_state(out: Path, full: bool, tiny: bool, seed: int, data_root: Path | None, parts: str) -> None:
    """Brügge et al. (2013) again: does flip-the-state beat Gibbs where the paper says it does?

    \b
    Parts (--parts):
      slem      fraction of random RBMs whose flip sweep has the smaller SLEM, against the weight scale
      learning  exact log-likelihood curves of CD, PCD and PT with Gibbs and flip; Wilcoxon test
      mixing    autocorrelation time of the energy on MNIST RBMs; class changes on Artificial Modes
    Writes slem.png/.csv, learning-*.png/.csv, wilcoxon.csv/.md, mixing.csv/.md/.png,
    modes.csv/.md and summary.md. The scaled default takes a few minutes on two cores.
    """
    config = choose_preset(FlipTheStateConfig, full, tiny)
    chosen = parse_parts(parts)
    default_to_one_thread(full=full)
    loaded, skipped = _load(config, chosen, data_root, seed)
    click.echo(f"flip-the-state study ({config.label}): {', '.join(chosen)}; writing to {out}/")
    timings: dict[str, float] = {}
    tables: dict[str, str] = {}
    written: list[Path] = []
    slem = learning = mixing = modes = None
    if "slem" in chosen:
        started = time.perf_counter()
        slem = run_slem(config, generator=seed)
        timings["slem"] = time.perf_counter() - started
        tables["slem"] = "```\n" + slem.table() + "\n```"
        written += _slem_files(out, slem)
    if "learning" in chosen:
        started = time.perf_counter()
        with progress_bar("learning") as progress:
            learning = run_learning(config, loaded, generator=seed, progress=progress)
        timings["learning"] = time.perf_counter() - started
        if learning.runs:
            tables["learning"] = _wilcoxon_markdown(wilcoxon_table(learning))
            written += _learning_files(out, learning)
        else:
            learning = None
    if "mixing" in chosen:
        if config.mixing_data.name in loaded:
            started = time.perf_counter()
            with progress_bar("mixing") as progress:
                mixing = run_mixing(
                    config, loaded[config.mixing_data.name], generator=seed, progress=progress
                )
            timings["mixing (τ)"] = time.perf_counter() - started
            tables["mixing"] = _mixing_markdown(mixing)
        started = time.perf_counter()
        mode_data = {
            p_mut: loaded[spec.name]
            for p_mut, spec in zip(config.mode_p_mut, config.mode_data(), strict=True)
            if spec.name in loaded
        }
        with progress_bar("mode hopping") as progress:
            modes = run_mode_hopping(config, mode_data, generator=seed, progress=progress)
        timings["mode hopping"] = time.perf_counter() - started
        tables["modes"] = _modes_markdown(modes)
        written += _mixing_files(out, mixing, modes)
    found = findings(slem=slem, learning=learning, mixing=mixing, modes=modes)
    summary = summary_markdown(
        config, found, parts=chosen, seed=seed, tables=tables, timings=timings, skipped=skipped
    )
    written.append(write_atomic(out / "summary.md", summary.encode("utf-8")))
    for name, reason in skipped.items():
        click.echo(f"skipped {name}: {reason}", err=True)
    click.echo(format_table(["part", "verdict"], [[finding.part, finding.verdict] for finding in found]))
    click.echo(f"done in {format_seconds(sum(timings.values()))}")
    report_written(written)


# ---------------------------------------------------------------------------------- rts-tracking
def _rts_tracking_rows(result: Any) -> list[list[Any]]:
    """One row per tracked record, with the AIS values where AIS ran."""
    tracked, ais = result.tracked, result.ais
    at = {int(update): index for index, update in enumerate(ais.updates.tolist())}

    def cell(value: float) -> str:
        return "" if math.isnan(value) else f"{value:.8g}"

    rows = []
    for index, update in enumerate(tracked.updates.tolist()):
        row = [
            update,
            cell(float(tracked.log_z[index])),
            cell(float(tracked.log_z_stderr[index])),
            cell(float(tracked.train_log_likelihood[index])),
            cell(float(tracked.validation_log_likelihood[index])),
        ]
        if update in at:
            j = at[update]
            row += [
                cell(float(ais.log_z[j])),
                cell(float(ais.log_z_stderr[j])),
                cell(float(ais.train_log_likelihood[j])),
                cell(float(ais.validation_log_likelihood[j])),
            ]
        else:
            row += ["", "", "", ""]
        rows.append(row)
    return rows


def _rts_tracking_summary(result: Any, timings: Any, *, dataset: str, seed: int) -> str:
    config = result.config
    difference, stderr = result.differences()
    lag = result.expected_lag()
    body = [
        [
            str(int(update)),
            f"{float(result.tracked.log_z[result.tracked.updates == update][0]):.3f}",
            f"{float(result.ais.log_z[j]):.3f} ± {float(result.ais.log_z_stderr[j]):.3f}",
            f"{float(difference[j]):+.3f} ± {float(stderr[j]):.3f}",
            f"{0.0 - float(lag[j]) + 0.0:+.3f}",
            f"{float(result.tracked.validation_log_likelihood[result.tracked.updates == update][0]):.3f}",
            f"{float(result.ais.validation_log_likelihood[j]):.3f}",
        ]
        for j, update in enumerate(result.ais.updates.tolist())
    ]
    lines = [
        f"# RTS log-likelihood tracking ({config.label})",
        "",
        "Carlson et al. (2016, §4.4) keep `log Ẑ` current during training from the training chains "
        "themselves (simulated tempering, prior r ∝ exp(2β), damped RTS update α = "
        f"{config.step_size:g}) and compare the tracked log-likelihoods with AIS checkpoints. This run, "
        f"boltzlab {boltzlab.__version__}, seed {seed}:",
        "",
        f"- data `{dataset}`: {result.n_train} training, {result.n_validation} validation examples",
        f"- RBM with {config.n_hidden} hidden units; CD-1 pretraining for {config.pretrain_updates} updates "
        f"(SGD {config.pretrain_learning_rate:g}, batch {config.batch_size})",
        f"- then {config.n_updates} updates of {config.optimizer} (η = {config.learning_rate:g}) with the "
        f"`rts` phase: {config.n_chains} chains × {config.sweeps} sweeps per update, K = {config.n_levels} "
        f"linear temperatures, initial iterations {int(result.initial_stop_statistics.numel())} "
        f"(last max|ĉ/r − 1| = "
        + (
            f"{float(result.initial_stop_statistics[-1]):.3f})"
            if result.initial_stop_statistics.numel()
            else "none)"
        ),
        f"- AIS every {config.ais_every} updates: {config.ais_chains} chains, {config.ais_temperatures} "
        "temperatures (sm08 schedule)",
        "",
        "## Tracked against AIS",
        "",
        markdown_table(
            [
                "update",
                "tracked log Ẑ",
                "AIS log Z",
                "tracked − AIS",
                "expected from the lag",
                "tracked valid LL",
                "AIS valid LL",
            ],
            body,
        ),
        "",
        f"Mean |tracked − AIS| = {float(difference.abs().mean()):.3f} nats; after subtracting the expected lag, "
        f"{float((difference + lag).abs().mean()):.3f} nats. The damped update trails a rising log Z by about "
        f"d/α when log Z rises by d nats per update (α = {config.step_size:g}; the column 'expected from the "
        "lag' is −d/α with d the tracked curve's own slope over the preceding records), and AIS is biased "
        "low, which pulls the difference the other way.",
        "",
    ]
    if timings is not None:
        rows = []
        for label, key in (
            ("RTS phase + tracking callback", "tracked"),
            ("same, without the callback", "no_callback"),
            ("same RTS phase, Ẑ frozen, no callback", "frozen"),
            ("PCD, same chains × sweeps", "pcd"),
        ):
            cpu, wall = timings.cpu[key], timings.wall[key]
            rows.append(
                [
                    label,
                    f"{timings.median(key):.2f} ({min(cpu):.2f}–{max(cpu):.2f})",
                    f"{sorted(wall)[len(wall) // 2]:.2f}",
                    f"{timings.median(key) / timings.n_updates:.4f}",
                    f"{timings.target_samples[key]:.0f}" if key in timings.target_samples else "(n_chains)",
                ]
            )
        steps = timings.step_cpu
        lines += [
            "## Cost",
            "",
            f"{timings.n_updates} updates per run, training time only (initial iterations excluded), "
            f"{timings.n_repeats} interleaved repeats, {timings.n_threads} torch thread(s); CPU seconds of this "
            "process (the machine is shared: repeats vary by tens of per cent, so medians and ranges):",
            "",
            markdown_table(
                [
                    "run",
                    "CPU s: median (range)",
                    "wall s: median",
                    "CPU s per update",
                    "β = 1 states in last model term",
                ],
                rows,
            ),
            "",
            "Measured directly (low noise):",
            "",
            f"- time inside the tracking callback: {timings.callback_fraction:+.1%} of the rest of the tracked run "
            f"(median {sorted(timings.callback_cpu)[len(timings.callback_cpu) // 2]:.3f} s)",
            f"- ĉ sums and damped update (paired: {timings.n_updates} phase steps from one state and one seed, "
            f"parameters fixed): {timings.bookkeeping_fraction:+.1%} (range {min(steps['tracked']):.2f}–"
            f"{max(steps['tracked']):.2f} s with, {min(steps['frozen']):.2f}–{max(steps['frozen']):.2f} s without)",
            f"- so (a) all tracking over the same sampler untracked: **{timings.tracking_fraction:+.1%}**",
            "",
            "From the whole runs (noisier):",
            "",
            f"- (a) tracked run vs the same run without the callback: {timings.overhead_vs_no_callback:+.1%}",
            f"- tracked run vs the sampler with Ẑ frozen: {timings.overhead_vs_frozen:+.1%} (frozen weights let "
            "the level occupancy drift, so the two model terms differ in size: last column)",
            f"- (b) tracked run vs plain PCD with equal chain-sweeps: **{timings.overhead_vs_pcd:+.1%}** — the "
            "Gibbs level move needs log f_k(x) at all K levels every sweep (n·K·J softplus), which RTS "
            "reuses for ĉ; on a CPU that, not the tracking, is the cost",
            "",
        ]
    lines += [
        "## Runtime",
        "",
        f"- pretraining {format_seconds(result.pretrain_seconds)}, tracked training "
        f"{format_seconds(result.train_seconds)}, AIS {format_seconds(result.ais_seconds)}",
        "",
    ]
    return "\n".join(lines)


@reproduce.command(
    "rts-tracking",
    epilog="""\b
Example:
  boltzlab reproduce rts-tracking --out results/rts-tracking --data-root ../shared/data
  boltzlab reproduce rts-tracking --tiny --no-timing --out /tmp/rts""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("rts-tracking"),
    show_default=True,
    metavar="DIR",
    help="Directory for tracking.png, tracking.csv, timing.csv and summary.md.",
)
@click.option(
    "--full", is_flag=True, help="The paper's sizes (hours on two cores) instead of the scaled default."
)
@click.option(
    "--tiny", is_flag=True, help="Toy sizes (seconds), to check the pipeline; the numbers mean nothing."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--dataset",
    default="nade-dna",
    show_default=True,
    help="Binary dataset with a validation split (nade-dna: 1400/600; dna has no validation split).",
)
@data_root_option("the data")
@click.option("--no-timing", is_flag=True, help="Skip the three timing runs.")
@command_options
def rts_tracking(
    out: Path, full: bool, tiny: bool, seed: int, dataset: str, data_root: Path | None, no_timing: bool
) -> None:
    """Carlson et al. (2016, §4.4): track train/validation log-likelihood with RTS during training.

    Pretrains an RBM with CD-1, trains it with RMSspectral on simulated-tempering chains whose
    log Ẑ the damped RTS update keeps current, runs AIS every few hundred updates on the same
    model, and times the tracking against the same sampler untracked and against PCD with the
    same chain-sweeps. Writes tracking.png (tracked vs AIS), tracking.csv, timing.csv and
    summary.md. The scaled default takes a few minutes on one core (one torch thread unless
    --threads is given; --full uses torch's default).
    """
    from boltzlab.experiments.rts_tracking import RTSTrackingConfig, run_timing, run_tracking
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.tracking import tracking_figure

    if full and tiny:
        raise ValidationError("give --full or --tiny, not both")
    config = (
        RTSTrackingConfig.paper()
        if full
        else RTSTrackingConfig.tiny()
        if tiny
        else RTSTrackingConfig.scaled()
    )
    loaded = datasets.load(dataset, root=data_root)
    default_to_one_thread(full=full)
    click.echo(
        f"rts-tracking ({config.label}) on {dataset} with {torch.get_num_threads()} torch thread(s); writing to {out}/"
    )
    with progress_bar("tracking") as progress:
        result = run_tracking(config, loaded, seed=seed, progress=progress)
    timings = None
    if not no_timing and config.timing_updates > 0:
        with progress_bar("timing") as progress:
            timings = run_timing(config, loaded, seed=seed, progress=progress)
    header = [
        "update",
        "rts_log_z",
        "rts_log_z_stderr",
        "rts_train_log_likelihood",
        "rts_validation_log_likelihood",
        "ais_log_z",
        "ais_log_z_stderr",
        "ais_train_log_likelihood",
        "ais_validation_log_likelihood",
    ]
    written = [
        save_figure(tracking_figure(result, timings), out / "tracking.png"),
        write_csv(out / "tracking.csv", header, _rts_tracking_rows(result)),
    ]
    if timings is not None:
        written.append(
            write_csv(
                out / "timing.csv",
                ["run", "repeat", "n_updates", "cpu_seconds", "wall_seconds", "n_threads"],
                [
                    [name, repeat, timings.n_updates, f"{cpu:.6g}", f"{wall:.6g}", timings.n_threads]
                    for name in timings.cpu
                    for repeat, (cpu, wall) in enumerate(
                        zip(timings.cpu[name], timings.wall[name], strict=True)
                    )
                ]
                + [
                    [f"{name} phase steps", repeat, timings.n_updates, f"{cpu:.6g}", "", timings.n_threads]
                    for name, values in timings.step_cpu.items()
                    for repeat, cpu in enumerate(values)
                ]
                + [
                    ["inside callback", repeat, timings.n_updates, f"{cpu:.6g}", "", timings.n_threads]
                    for repeat, cpu in enumerate(timings.callback_cpu)
                ],
            )
        )
    summary = _rts_tracking_summary(result, timings, dataset=dataset, seed=seed)
    written.append(write_atomic(out / "summary.md", summary.encode("utf-8")))
    difference, stderr = result.differences()
    click.echo(
        format_table(
            ["update", "tracked − AIS log Z", "s.e."],
            [
                [str(int(update)), f"{float(d):+.3f}", f"{float(s):.3f}"]
                for update, d, s in zip(result.ais.updates.tolist(), difference, stderr, strict=True)
            ],
        )
    )
    if timings is not None:
        click.echo(
            f"extra CPU time of tracking: {timings.tracking_fraction:+.1%} over the same sampler untracked "
            f"(callback {timings.callback_fraction:+.1%}, ĉ sums and update {timings.bookkeeping_fraction:+.1%}); "
            f"{timings.overhead_vs_pcd:+.1%} over PCD with equal chain-sweeps"
        )
    report_written(written)
