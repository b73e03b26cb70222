"""τ of flip against Gibbs on model files: the options, the run, and a torchrun entry point.

Two ways in, one run (:func:`run_model_files`):

* ``boltzlab reproduce flip-the-state --model-file PATH [--model-file PATH2] ...`` — one
  process (``boltzlab reproduce`` runs on rank 0 alone under torchrun);
* ``torchrun --nproc-per-node N -m boltzlab_experiments.flip_the_state.tau_command --model-file
  PATH ...`` — the same measurement with the chains shared by the ranks
  (:mod:`boltzlab_experiments.flip_the_state.model_files`); rank 0 prints and writes. Without
  torchrun, ``python -m boltzlab_experiments.flip_the_state.tau_command`` runs it in one process.

Writes ``mixing.csv`` (τ by Sokal and AR with standard errors and reliable flags, flip rate,
seconds), ``mixing.md``, ``mixing-acf.csv``, ``mixing.png`` (the autocorrelation functions) and
``summary.md`` (whether the paper's 17.28 % held, with the numbers and what differs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab import data as datasets
from boltzlab import distributed
from boltzlab.cli.common import format_seconds, format_table, report_written
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab_experiments.cli import data_root_option, progress_bar
from boltzlab_experiments.flip_the_state.findings import mixing_finding, paper_gain_finding
from boltzlab_experiments.flip_the_state.model_files import (
    INIT_CHOICES,
    ModelFileMixingConfig,
    load_rbm,
    run_model_file_mixing,
    training_label,
)
from boltzlab_experiments.flip_the_state.report import mixing_files, mixing_markdown
from boltzlab_experiments.flip_the_state.summary import model_files_summary_markdown
from boltzlab_experiments.tables import write_text

__all__ = [
    "SIZE_OPTIONS",
    "flip_tau",
    "main",
    "model_file_config",
    "model_file_options",
    "model_names",
    "run_model_files",
]

# The sizing options and the ModelFileMixingConfig fields they set.
SIZE_OPTIONS = {"chains": "n_chains", "steps": "n_steps", "burn_in": "burn_in", "max_lag": "max_lag"}


def model_file_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--model-file`` (repeatable), ``--chains``, ``--steps``, ``--burn-in``, ``--max-lag``,
    ``--blocks`` and ``--init``; the command receives them under their names with ``-`` as ``_``."""
    defaults = ModelFileMixingConfig()
    positive = click.IntRange(min=1)
    options = [
        click.option(
            "--model-file",
            "model_files",
            multiple=True,
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="PATH",
            help="An RBM file (boltzlab train's model.safetensors); repeat for several. Measures τ of "
            "flip against Gibbs on it instead of training the study's own RBMs.",
        ),
        click.option(
            "--chains",
            type=positive,
            help=f"Chains per model and operator, pooled for τ (model files: default {defaults.n_chains}).",
        ),
        click.option(
            "--steps",
            type=click.IntRange(min=3),
            help=f"Recorded sweeps per chain after the burn-in (model files: default {defaults.n_steps}).",
        ),
        click.option(
            "--burn-in",
            type=click.IntRange(min=0),
            help=f"Sweeps before recording (model files: default {defaults.burn_in}).",
        ),
        click.option(
            "--max-lag",
            type=positive,
            help=f"Lags of the autocorrelation function kept for the figure (model files: default "
            f"{defaults.max_lag}).",
        ),
        click.option(
            "--blocks",
            type=positive,
            help=f"Model files: cut the chains into this many blocks with their own random streams; the "
            f"numbers are the same on up to this many torchrun processes (default {defaults.blocks}).",
        ),
        click.option(
            "--init",
            type=click.Choice(INIT_CHOICES),
            help="Model files: start the chains from random MNIST training examples (data, the default) "
            "or from the model's base distribution (base).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def model_file_config(**options: Any) -> ModelFileMixingConfig:
    """The :class:`ModelFileMixingConfig` from the options given (``None`` keeps the default)."""
    fields = {**SIZE_OPTIONS, "blocks": "blocks", "init": "init"}
    return ModelFileMixingConfig(
        **{field: options[name] for name, field in fields.items() if options.get(name) is not None}
    )


def model_names(paths: Sequence[Path]) -> list[str]:
    """A short name per file: its name, or ``folder/name`` when two files share a name
    (``runs/a/model.safetensors`` and ``runs/b/model.safetensors``), else the path as given."""
    names = [path.name for path in paths]
    if len(set(names)) < len(names):
        names = [f"{path.parent.name}/{path.name}" for path in paths]
    if len(set(names)) < len(names):
        names = [str(path) for path in paths]
    return names


def _start_data(config: ModelFileMixingConfig, root: Path | None, seed: int) -> torch.Tensor | None:
    """MNIST's training examples when the chains start from data, else ``None``."""
    if config.init != "data":
        return None
    try:
        return datasets.load("mnist", root=root, generator=seed).train
    except (BoltzlabError, OSError) as error:
        raise ValidationError(
            f"--init data starts the chains from MNIST, which could not be loaded ({' '.join(str(error).split())}); "
            "pass --data-root DIR (or set BOLTZLAB_DATA), or start from the model's base with --init base"
        ) from None


def run_model_files(
    out: Path, paths: Sequence[Path], config: ModelFileMixingConfig, *, seed: int, data_root: Path | None
) -> list[Path]:
    """Measure τ of flip against Gibbs on the RBMs in ``paths`` and write the files to ``out``.

    In a process group every rank samples its blocks of chains; rank 0 prints and writes, and
    is the only one that returns the written paths (the others return an empty list).
    """
    here = distributed.topology()
    models = [load_rbm(path) for path in paths]
    names = model_names(paths)
    data = _start_data(config, data_root, seed)
    sizes = "×".join(str(size) for size in models[0].layer_sizes)
    click.echo(
        f"flip-the-state τ on {len(models)} model file(s) ({sizes}; {', '.join(names)}): {config.n_chains} chains "
        f"× ({config.burn_in} + {config.n_steps}) sweeps per operator, {config.blocks} blocks on "
        f"{here.world_size} {'process' if here.world_size == 1 else 'processes'}; writing to {out}/"
    )
    with progress_bar("τ of the energy", unit="sweep") as progress:
        result = run_model_file_mixing(models, names, config, data=data, generator=seed, progress=progress)
    if not here.is_main:
        return []
    found = (paper_gain_finding(result), mixing_finding(result))
    table = mixing_markdown(result)
    written = mixing_files(out, result, None)
    summary = model_files_summary_markdown(
        result,
        found,
        config,
        training=[training_label(model) for model in models],
        seed=seed,
        processes=here.world_size,
        table=table,
    )
    written.append(write_text(out / "summary.md", summary))
    click.echo(table)
    click.echo(found[0].text)
    click.echo(format_table(["part", "verdict"], [[finding.part, finding.verdict] for finding in found]))
    if result.seconds is not None:
        click.echo(f"sampling took {format_seconds(float(result.seconds.sum()))}")
    report_written(written)
    return written


@click.command(
    "flip-tau",
    epilog="""\b
Example:
  python -m boltzlab_experiments.flip_the_state.tau_command --model-file runs/a/model.safetensors
  torchrun --nproc-per-node 2 -m boltzlab_experiments.flip_the_state.tau_command \\
      --model-file runs/a/model.safetensors --out results/flip-tau""",
)
@model_file_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("flip-tau"),
    show_default=True,
    metavar="DIR",
    help="Directory for mixing.csv/.md/.png, mixing-acf.csv and summary.md.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the chains.")
@data_root_option("MNIST")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Torch threads per process.",
)
def flip_tau(out: Path, seed: int, data_root: Path | None, threads: int, **options: Any) -> None:
    """τ of the energy under flip-the-state against Gibbs on RBM model files (Brügge et al. 2013).

    Under torchrun the ranks share the chains; rank 0 writes. The same measurement as
    'boltzlab reproduce flip-the-state --model-file PATH', which runs in one process.
    """
    if not options["model_files"]:
        raise ValidationError("give at least one --model-file PATH")
    torch.set_num_threads(threads)
    run_model_files(out, options["model_files"], model_file_config(**options), seed=seed, data_root=data_root)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m boltzlab_experiments.flip_the_state.tau_command`` (and of torchrun).

    Joins the process group a launcher prepared; only rank 0 prints (the others keep their
    error lines, prefixed with the rank), as ``boltzlab`` itself does. An error is one line.
    """
    prog = "python -m boltzlab_experiments.flip_the_state.tau_command"
    errors = sys.stderr  # where this process's error lines go, whatever the rank
    try:
        here = distributed.init_from_environment()
    except BoltzlabError as error:
        click.echo(f"error: {error}", file=errors)
        sys.exit(1)
    if not here.is_main:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  # for the life of the process
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    prefix = "" if here.is_main else f"rank {here.rank}: "
    code = 0
    try:
        # Not standalone: click returns (rather than exits) so that a process group is ended here.
        returned = flip_tau.main(
            args=list(argv) if argv is not None else None, prog_name=prog, standalone_mode=False
        )
        code = returned if isinstance(returned, int) else 0
    except click.ClickException as error:
        click.echo(f"{prefix}error: {error.format_message()}", file=errors)
        code = error.exit_code
    except BoltzlabError as error:
        click.echo(f"{prefix}error: {' '.join(str(error).split())}", file=errors)
        code = 1
    if here.active:
        if code:
            distributed.exit_now(code)  # the group may be broken: no clean shutdown
        distributed.finish(code)  # waits for every rank; does not return in a group
    sys.exit(code)


if __name__ == "__main__":
    main()
