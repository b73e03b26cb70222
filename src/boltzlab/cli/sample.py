"""``boltzlab sample MODEL``: run chains on a saved model and draw them as a PNG strip.

One row per chain, time left to right: a sample every ``--keep-every`` sweeps. The plain
sampler runs in chunks with a progress bar; the chunks pass the chains and the one generator
on, so the samples are those of a single :func:`boltzlab.sample` call with the same seed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab import operators, sampling
from boltzlab.cli.common import (
    choose_threads,
    command_options,
    describe_model,
    image_shape_of,
    load_model_file,
    operator_help,
    operator_params,
    parse_image_shape,
    report_written,
)
from boltzlab.errors import ValidationError
from boltzlab.operators import Operator
from boltzlab.rng import make_generator

__all__ = ["sample"]

# About this many progress-bar steps per run.
_N_CHUNKS = 50


def _run_plain(model: Any, options: dict[str, Any], operator: Operator) -> tuple[torch.Tensor, float]:
    """Samples ``(n_kept, n_chains, n_visible)`` and the mean flip rate, in chunks behind a bar."""
    from tqdm.auto import tqdm

    keep_every, n_sweeps = options["keep_every"], options["sweeps"]
    # Chunks are whole multiples of keep_every, so the kept sweeps are the single run's.
    chunk = keep_every * max(1, math.ceil(n_sweeps / keep_every / _N_CHUNKS))
    generator = make_generator(options["seed"], model.device)
    chains: Any = "base"
    kept, flip_rates = [], []
    done = 0
    with tqdm(total=n_sweeps, desc="sampling", unit="sweep") as bar:
        while done < n_sweeps:
            length = min(chunk, n_sweeps - done)
            result = sampling.sample(
                model,
                sampler="plain",
                operator=operator,
                n_chains=options["chains"],
                n_sweeps=length,
                generator=generator,
                init=chains,
                keep_every=keep_every,
                burn_in=options["burn_in"] if done == 0 else 0,
            )
            chains = result.chains
            if result.samples is not None:
                kept.append(result.samples)
            flip_rates.append(result.info.flip_rate)
            done += length
            bar.update(length)
    return torch.cat(kept), float(torch.cat(flip_rates).mean())


@click.command(
    "sample",
    epilog="""\b
Example:
  boltzlab sample runs/digits/model.safetensors --chains 8 --sweeps 1000 --keep-every 100 --out samples.png
  boltzlab sample runs/digits/model.safetensors --operator flip --out samples-flip.png""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--sampler", default="plain", show_default=True, help=f"Sampler: {', '.join(sampling.samplers())}."
)
@click.option("--operator", default="gibbs", show_default=True, help=operator_help())
@click.option("--alpha", type=float, help="Flip weight of --operator mixture (default 0.5).")
@click.option("--chains", type=click.IntRange(min=1), default=8, show_default=True, help="Chains (rows).")
@click.option(
    "--sweeps", type=click.IntRange(min=1), default=1000, show_default=True, help="Sweeps after burn-in."
)
@click.option(
    "--keep-every",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="A sample every N sweeps (columns).",
)
@click.option(
    "--burn-in",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Sweeps before the first kept one.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--image-shape", metavar="HxW", help="Image shape, e.g. 28x28 (default: from the model file).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("samples.png"),
    show_default=True,
    help="PNG file to write.",
)
@command_options
def sample(model_path: Path, **options: Any) -> None:
    """Draw consecutive samples of a few chains from a saved model as a PNG (rows = chains)."""
    from boltzlab.plotting import chain_strip_figure, save_figure

    if options["keep_every"] > options["sweeps"]:
        raise ValidationError(
            f"--keep-every {options['keep_every']} exceeds --sweeps {options['sweeps']}: no sample would be kept"
        )
    model = load_model_file(model_path)
    choose_threads(model)
    image_shape = image_shape_of(model, parse_image_shape(options["image_shape"]))
    # Built here, so a bad name fails before the progress bar starts.
    operator = operators.get(options["operator"], **operator_params(options["operator"], options["alpha"]))
    click.echo(f"model: {model_path} ({describe_model(model)})")
    if options["sampler"].lower() == "plain":
        samples, flip_rate = _run_plain(model, options, operator)
    else:
        result = sampling.sample(
            model,
            sampler=options["sampler"],
            operator=operator,
            n_chains=options["chains"],
            n_sweeps=options["sweeps"],
            generator=options["seed"],
            keep_every=options["keep_every"],
            burn_in=options["burn_in"],
        )
        samples, flip_rate = result.samples, None
    if samples is None:
        raise ValidationError(f"the {options['sampler']} sampler kept no samples; check --keep-every")
    title = (
        f"{options['sampler']} sampler, {options['operator']} sweeps: {samples.shape[1]} chains, "
        f"a sample every {options['keep_every']} sweeps"
    )
    figure = chain_strip_figure(
        samples.cpu(), image_shape=image_shape, n_chains=samples.shape[1], title=title
    )
    path = save_figure(figure, options["out"])
    if flip_rate is not None:
        click.echo(f"mean fraction of units changed per sweep: {flip_rate:.4f}")
    click.echo(
        f"{samples.shape[1]} chains × {samples.shape[0]} samples, one every {options['keep_every']} sweeps"
    )
    report_written([path])
