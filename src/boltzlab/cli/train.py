"""``boltzlab train``: train an RBM on a dataset and write a run directory.

The run directory (DESIGN.md, "Command line") holds ``config.toml`` (the effective options,
written before training so even a killed run keeps it; feed it back with ``--config``),
``metrics.csv``, ``checkpoints/`` (the final checkpoint always, and every
``--checkpoint-every`` updates; ``--resume`` continues from the newest), ``model.safetensors``
and ``plots/training.png`` and ``plots/samples.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
import torch
from click.core import ParameterSource

import boltzlab
from boltzlab import data as datasets
from boltzlab.cli.common import (
    choose_threads,
    command_options,
    format_seconds,
    operator_help,
    operator_params,
    report_written,
)
from boltzlab.cli.config import recorded_options, write_config
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import RBM
from boltzlab.rng import make_generator, spawn
from boltzlab.training import find_latest_checkpoint
from boltzlab.training import train as train_model

__all__ = ["train"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Options that say where and whether to continue, not what the run is: left out of config.toml.
_NOT_RECORDED = ("out", "resume")
_N_SHOWN_SAMPLES = 64


def run_length(ctx: click.Context, epochs: int | None, updates: int | None) -> tuple[int | None, int | None]:
    """``(epochs, updates)`` with exactly one set: a flag beats a config-file value; default 10 epochs."""
    if epochs is not None and updates is not None:
        from_command_line = {
            name
            for name in ("epochs", "updates")
            if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE
        }
        if from_command_line == {"epochs"}:
            return epochs, None
        if from_command_line == {"updates"}:
            return None, updates
        raise ValidationError(f"give --epochs or --updates, not both (got {epochs} and {updates})")
    if epochs is None and updates is None:
        return 10, None
    return epochs, updates


def _held_out(dataset: datasets.Dataset) -> tuple[Any, str]:
    """The validation split, else the test split, with its name for legends."""
    if dataset.valid is not None:
        return dataset.valid, "validation"
    if dataset.test is not None:
        return dataset.test, "test"
    return None, "validation"


def data_metadata(dataset: datasets.Dataset) -> dict[str, Any]:
    """What a model file records about its training data (``sample`` reads ``image_shape``)."""
    return {
        "name": dataset.name,
        "source": dataset.source,
        "n_train": int(dataset.train.shape[0]),
        "n_visible": dataset.n_visible,
        "image_shape": list(dataset.image_shape) if dataset.image_shape else None,
    }


def write_plots(
    result: boltzlab.TrainResult,
    dataset: datasets.Dataset,
    plots: Path,
    *,
    samples: Any,
    samples_title: str,
    held_out_label: str,
    title: str,
) -> list[Path]:
    """``plots/training.png`` and ``plots/samples.png``; returns the paths written."""
    from boltzlab.plotting import samples_figure, save_figure, training_figure

    written = [
        save_figure(
            training_figure(result, validation_label=held_out_label, title=title), plots / "training.png"
        )
    ]
    if samples is not None:
        figure = samples_figure(
            samples[:_N_SHOWN_SAMPLES].cpu(),
            data=dataset.train[:_N_SHOWN_SAMPLES],
            image_shape=dataset.image_shape,
            title=samples_title,
        )
        written.append(save_figure(figure, plots / "samples.png"))
    return written


def last_metrics(result: boltzlab.TrainResult) -> str:
    """The newest value of each metric in the history, e.g. ``train log-lik -18.2``."""
    shown = []
    for name, label in (
        ("reconstruction_error", "reconstruction error"),
        ("train_log_likelihood", "train log-likelihood"),
        ("validation_log_likelihood", "held-out log-likelihood"),
    ):
        value = next((r.get(name) for r in reversed(result.history) if r.get(name) is not None), None)
        if value is not None:
            shown.append(f"{label} {value:.4f}")
    return ", ".join(shown)


@click.command(
    "train",
    epilog="""\b
Example:
  boltzlab train --data digits --hidden 16 --algorithm pcd --epochs 50 \\
      --learning-rate 0.05 --momentum 0.5 --track-exact-every 100 --out runs/digits
  boltzlab train --config runs/digits/config.toml --updates 2000 --resume --out runs/digits""",
)
@click.option(
    "--data",
    required=True,
    metavar="NAME|PATH",
    help=f"Dataset name ({', '.join(datasets.available())}) or file.",
)
@click.option("--hidden", type=click.IntRange(min=1), required=True, help="Number of hidden units.")
@click.option("--algorithm", default="cd", show_default=True, help="Negative phase: cd or pcd.")
@click.option("--operator", default="gibbs", show_default=True, help=operator_help())
@click.option("--alpha", type=float, help="Flip weight of --operator mixture (default 0.5).")
@click.option("--k", type=click.IntRange(min=1), default=1, show_default=True, help="Sweeps per update.")
@click.option(
    "--chains", type=click.IntRange(min=1), default=100, show_default=True, help="Persistent chains (PCD)."
)
@click.option("--batch-size", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), help="Passes over the data (default 10).")
@click.option("--updates", type=click.IntRange(min=1), help="Parameter updates (instead of --epochs).")
@click.option("--learning-rate", type=float, default=0.01, show_default=True)
@click.option("--momentum", type=float, default=0.0, show_default=True)
@click.option("--weight-decay", type=float, default=0.0, show_default=True, help="L2 on the weights.")
@click.option(
    "--lr-schedule",
    default="constant",
    show_default=True,
    help="Learning-rate schedule: constant, linear, inverse.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random choice.")
@click.option(
    "--track-exact-every",
    type=click.IntRange(min=1),
    help="Exact log Z and log-likelihoods every N updates (min(layer sizes) <= 25).",
)
@click.option(
    "--log-every",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Metrics row every N updates.",
)
@click.option(
    "--checkpoint-every", type=click.IntRange(min=1), help="Checkpoint every N updates (always at the end)."
)
@click.option("--resume", is_flag=True, help="Continue from the newest checkpoint in RUN_DIR/checkpoints.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("run"),
    show_default=True,
    metavar="RUN_DIR",
    help="Run directory.",
)
@click.option(
    "--data-root", type=click.Path(path_type=Path), metavar="DIR", help="Where to look for dataset files."
)
@click.option("--binarize", help="Binarise grey-level data files: threshold or stochastic.")
@click.option("--dtype", type=click.Choice(sorted(_DTYPES)), default="float32", show_default=True)
@command_options
def train(**options: Any) -> None:
    """Train an RBM on a dataset; write config, metrics, checkpoints, model and plots to RUN_DIR."""
    ctx = click.get_current_context()
    options["epochs"], options["updates"] = run_length(ctx, options["epochs"], options["updates"])
    out: Path = options["out"]
    checkpoints = out / "checkpoints"
    latest = find_latest_checkpoint(checkpoints) if checkpoints.is_dir() else None
    if latest is not None and not options["resume"]:
        raise ValidationError(
            f"{out} already holds a run (checkpoint {latest.name}); pass --resume to continue it "
            "or choose another --out"
        )
    params = operator_params(options["operator"], options["alpha"])
    load_options = {} if options["binarize"] is None else {"binarize": options["binarize"]}
    dataset = datasets.load(
        options["data"], root=options["data_root"], generator=options["seed"], **load_options
    )
    held_out, held_out_label = _held_out(dataset)

    model_generator, train_generator = spawn(make_generator(options["seed"]), 2)
    model = RBM(
        dataset.n_visible, options["hidden"], generator=model_generator, dtype=_DTYPES[options["dtype"]]
    )
    choose_threads(model)

    def record_config() -> Path:
        return write_config(
            out / "config.toml",
            recorded_options(ctx, options, leave_out=_NOT_RECORDED),
            comment=f"boltzlab {boltzlab.__version__} train: the options of this run.\n"
            f"Repeat it with: boltzlab train --config {out / 'config.toml'} --out NEW_DIR",
        )

    # A fresh run records its options first, so even a killed run keeps them; a resumed run
    # only once it has succeeded, so a refused resume leaves the old record alone.
    written = [] if latest is not None else [record_config()]
    click.echo(
        f"training RBM {dataset.n_visible}×{options['hidden']} on {dataset.name} "
        f"({dataset.train.shape[0]} examples) with {options['algorithm']}-{options['k']} "
        f"and the {options['operator']} operator; writing to {out}/"
    )
    started = time.perf_counter()
    result = train_model(
        model,
        dataset.train,
        algorithm=options["algorithm"],
        operator=options["operator"],
        operator_params=params,
        k=options["k"],
        n_chains=options["chains"],
        batch_size=options["batch_size"],
        n_updates=options["updates"],
        n_epochs=options["epochs"],
        learning_rate=options["learning_rate"],
        momentum=options["momentum"],
        weight_decay=options["weight_decay"],
        lr_schedule=options["lr_schedule"],
        generator=train_generator,
        validation_data=held_out,
        track_exact_every=options["track_exact_every"],
        log_every=options["log_every"],
        metrics_path=out / "metrics.csv",
        checkpoint_dir=checkpoints,
        checkpoint_every=options["checkpoint_every"],
        resume=options["resume"],
        progress=True,
    )
    elapsed = time.perf_counter() - started
    if latest is not None:
        written.append(record_config())
    written.append(out / "metrics.csv")
    newest = find_latest_checkpoint(checkpoints)
    if newest is not None:
        written.append(newest)
    written.append(
        model.save(
            out / "model.safetensors",
            metadata={"data": data_metadata(dataset), "created_by": "boltzlab train"},
        )
    )
    negative = None if result.final_chains is None else result.final_chains.layers[0]
    written += write_plots(
        result,
        dataset,
        out / "plots",
        samples=negative,
        samples_title=f"final {options['algorithm']} chains",
        held_out_label=held_out_label,
        title=f"RBM {dataset.n_visible}×{options['hidden']} on {dataset.name}, "
        f"{options['algorithm']}-{options['k']}, {options['operator']}",
    )
    click.echo(f"trained to update {result.n_updates} in {format_seconds(elapsed)}: {last_metrics(result)}")
    report_written(written)
