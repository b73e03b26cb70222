"""``boltzlab reproduce flip-the-state``: does flip-the-state beat Gibbs where Brügge et al. say it does?

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2: SLEM fractions, learning curves with a
Wilcoxon test, autocorrelation times and class changes, and a ``summary.md`` that says whether
flip beat Gibbs where the paper says it does. The computations are the pure functions of
:mod:`boltzlab_experiments.flip_the_state`; this module loads data, shows progress, writes
the files (:mod:`~boltzlab_experiments.flip_the_state.report`) and prints. With ``--model-file``
it measures only τ of flip against Gibbs on the given RBMs
(:mod:`~boltzlab_experiments.flip_the_state.tau_command`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from boltzlab import data as datasets
from boltzlab.cli.common import command_options, format_seconds, format_table, report_written
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab_experiments import REPRODUCE_HELP
from boltzlab_experiments.cli import choose_preset, data_root_option, default_to_one_thread, progress_bar
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.findings import findings
from boltzlab_experiments.flip_the_state.learning import run_learning, wilcoxon_table
from boltzlab_experiments.flip_the_state.mixing import run_mixing
from boltzlab_experiments.flip_the_state.modes import run_mode_hopping
from boltzlab_experiments.flip_the_state.report import (
    learning_files,
    mixing_files,
    mixing_markdown,
    modes_markdown,
    slem_files,
    wilcoxon_markdown,
)
from boltzlab_experiments.flip_the_state.slem import run_slem
from boltzlab_experiments.flip_the_state.summary import summary_markdown
from boltzlab_experiments.flip_the_state.tau_command import (
    model_file_config,
    model_file_options,
    run_model_files,
)
from boltzlab_experiments.tables import write_text

__all__ = ["PARTS", "flip_the_state", "load_datasets", "parse_parts", "sized_mixing"]

PARTS = ("slem", "learning", "mixing")


def parse_parts(text: str) -> tuple[str, ...]:
    """``"slem,mixing"`` → ``("slem", "mixing")``, in the study's order; unknown names refused."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PARTS]
    if unknown or not names:
        raise ValidationError(f"--parts takes a comma-separated list of {', '.join(PARTS)}, got {text!r}")
    return tuple(part for part in PARTS if part in names)


def load_datasets(
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


def sized_mixing(config: FlipTheStateConfig, **options: Any) -> FlipTheStateConfig:
    """``config`` with the mixing part's chains, steps, burn-in and lags replaced by the options given."""
    fields = {
        "chains": "mixing_chains",
        "steps": "mixing_steps",
        "burn_in": "mixing_burn_in",
        "max_lag": "mixing_max_lag",
    }
    given = {field: options[name] for name, field in fields.items() if options.get(name) is not None}
    return dataclasses.replace(config, **given)


def _model_files_only(parts_given: bool, parts: str, full: bool, tiny: bool) -> None:
    """Refuse the options that size the study's own parts when τ is measured on model files."""
    if full or tiny:
        raise ValidationError(
            "--full and --tiny size the study's own RBMs; with --model-file give --chains, --steps"
        )
    if parts_given and parse_parts(parts) != ("mixing",):
        raise ValidationError(f"--model-file measures τ only (--parts mixing), got --parts {parts!r}")


@click.command(
    "flip-the-state",
    short_help=REPRODUCE_HELP["flip-the-state"],
    epilog="""\b
Example:
  boltzlab reproduce flip-the-state --out results/flip --data-root /path/to/data
  boltzlab reproduce flip-the-state --parts slem,mixing --seed 3 --out results/flip-3
  boltzlab reproduce flip-the-state --parts mixing --model-file runs/a/model.safetensors --out results/tau""",
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
@model_file_options
@command_options
def flip_the_state(
    out: Path, full: bool, tiny: bool, seed: int, data_root: Path | None, parts: str, **options: Any
) -> None:
    """Brügge et al. (2013) again: does flip-the-state beat Gibbs where the paper says it does?

    \b
    Parts (--parts):
      slem      fraction of random RBMs whose flip sweep has the smaller SLEM, against the weight scale
      learning  exact log-likelihood curves of CD, PCD and PT with Gibbs and flip; Wilcoxon test
      mixing    autocorrelation time of the energy on MNIST RBMs; class changes on Artificial Modes
    Writes slem.png/.csv, learning-*.png/.csv, wilcoxon.csv/.md, mixing.csv/.md/.png,
    mixing-acf.csv, modes.csv/.md and summary.md. The scaled default takes a few minutes on two
    cores; --chains, --steps, --burn-in and --max-lag resize the mixing part's chains.

    \b
    With --model-file PATH (repeatable) only τ of flip against Gibbs is measured, on the given
    RBMs (default 100 chains × 50,000 sweeps after 5,000: 10–12 minutes per 784×500 model at
    one thread); mixing.*, mixing-acf.csv and summary.md say whether the paper's 17.28 % held.
    To share the chains among processes, run it under torchrun as
    'torchrun --nproc-per-node N -m boltzlab_experiments.flip_the_state.tau_command ...'.
    """
    if options["model_files"]:
        source = click.get_current_context().get_parameter_source("parts")
        _model_files_only(source is not ParameterSource.DEFAULT, parts, full, tiny)
        default_to_one_thread()
        run_model_files(
            out, options["model_files"], model_file_config(**options), seed=seed, data_root=data_root
        )
        return
    for name in ("blocks", "init"):
        if options[name] is not None:
            raise ValidationError(f"--{name} applies with --model-file only")
    config = sized_mixing(choose_preset(FlipTheStateConfig, full, tiny), **options)
    chosen = parse_parts(parts)
    default_to_one_thread(full=full)
    loaded, skipped = load_datasets(config, chosen, data_root, seed)
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
        written += slem_files(out, slem)
    if "learning" in chosen:
        started = time.perf_counter()
        with progress_bar("learning") as progress:
            learning = run_learning(config, loaded, generator=seed, progress=progress)
        timings["learning"] = time.perf_counter() - started
        if learning.runs:
            tables["learning"] = wilcoxon_markdown(wilcoxon_table(learning))
            written += learning_files(out, learning)
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
            tables["mixing"] = mixing_markdown(mixing)
        started = time.perf_counter()
        mode_data = {
            p_mut: loaded[spec.name]
            for p_mut, spec in zip(config.mode_p_mut, config.mode_data(), strict=True)
            if spec.name in loaded
        }
        with progress_bar("mode hopping") as progress:
            modes = run_mode_hopping(config, mode_data, generator=seed, progress=progress)
        timings["mode hopping"] = time.perf_counter() - started
        tables["modes"] = modes_markdown(modes)
        written += mixing_files(out, mixing, modes)
    found = findings(slem=slem, learning=learning, mixing=mixing, modes=modes)
    summary = summary_markdown(
        config, found, parts=chosen, seed=seed, tables=tables, timings=timings, skipped=skipped
    )
    written.append(write_text(out / "summary.md", summary))
    for name, reason in skipped.items():
        click.echo(f"skipped {name}: {reason}", err=True)
    click.echo(format_table(["part", "verdict"], [[finding.part, finding.verdict] for finding in found]))
    click.echo(f"done in {format_seconds(sum(timings.values()))}")
    report_written(written)
