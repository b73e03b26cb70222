"""``boltzlab train``'s declaration: its arguments, options and help, light to import.

``boltzlab train --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.train.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.choices import (
    DATASETS,
    DEFAULT_MAX_SNAPSHOTS,
    DEFAULT_PRETRAIN_UPDATES,
    DEFAULT_WITNESS_ROWS,
    DTYPES,
    MAX_EPOCHS,
    MAX_LEARNING_RATE,
    MAX_UPDATES,
    MAX_WITNESS_ROWS,
    NEGATIVE_PHASES,
    PHASE_ALIASES,
    TENSORBOARD_HELP,
    TRAIN_MODELS,
    VISIBLE_UNITS,
)
from boltzlab.cli.common import SEED, FiniteFloat, command_options, data_file_options, operator_help

__all__ = ["train"]


@click.command(
    "train",
    short_help="Train an RBM or a DBM and write a run folder.",
    epilog="""\b
Example:
  boltzlab train --data digits --hidden 16 --algorithm pcd --epochs 50 \\
      --learning-rate 0.05 --momentum 0.5 --track-exact-every 100 --out runs/digits
  boltzlab train --config runs/digits/config.toml --updates 2000 --resume --out runs/digits
  boltzlab train --data digits --hidden 16 --algorithm cast --levels 10 --lag 20 --operator flip \\
      --updates 500 --out runs/digits-cast
  boltzlab train --data pixels.csv --binarize threshold --pixel-max 255 --validation-fraction 0.1 \\
      --hidden 64 --out runs/pixels
  boltzlab train --model dbm --layers 784,500,1000 --algorithm cast --data mnist \\
      --learning-rate 0.005 --lr-schedule inverse --pretrain --updates 20000 --out runs/mnist-dbm
  boltzlab train --data digits --hidden 16 --algorithm pcd --centering --l1 1e-4 --out runs/centred
  boltzlab train --data WW_domain_MSA.fasta --hidden 100 --algorithm pcd --updates 60000 --out runs/ww""",
)
@click.option(
    "--data",
    required=True,
    metavar="NAME|PATH",
    help=f"Dataset name ({', '.join(DATASETS)}) or file; an aligned FASTA file (.fasta, .fa, .a2m, ...) "
    "trains a Potts RBM (one categorical unit per column).",
)
@click.option(
    "--model",
    type=click.Choice(TRAIN_MODELS),
    default="rbm",
    show_default=True,
    help="rbm (--hidden) or dbm (--layers).",
)
@click.option(
    "--visible-units",
    type=click.Choice(VISIBLE_UNITS),
    default="binary",
    show_default=True,
    help="binary: 0/1 units; spin: ±1 units (the same data, −1 for 0; trained in spin coordinates).",
)
@click.option("--hidden", type=click.IntRange(min=1), help="Number of hidden units (--model rbm).")
@click.option("--layers", metavar="SIZES", help="DBM layer sizes with the visible first, e.g. 784,500,1000.")
@click.option("--pretrain", is_flag=True, help="DBM: start from greedily pretrained RBMs (CD-1).")
@click.option(
    "--pretrain-updates",
    type=click.IntRange(min=1),
    help=f"DBM --pretrain: updates of each RBM (default {DEFAULT_PRETRAIN_UPDATES}).",
)
@click.option(
    "--track-bound-every",
    type=click.IntRange(min=1),
    help="DBM: variational lower bound every N updates (exact log Z when enumerable, else AIS).",
)
@click.option(
    "--algorithm",
    default="cd",
    show_default=True,
    help=f"Negative phase: {', '.join(NEGATIVE_PHASES)}; "
    + ", ".join(f"{alias} = {name}" for alias, name in PHASE_ALIASES.items())
    + "; pl maximises the pseudo-likelihood instead (no chains).",
)
@click.option("--operator", default="gibbs", show_default=True, help=operator_help())
@click.option("--alpha", type=FiniteFloat(), help="Flip weight of --operator mixture (default 0.5).")
@click.option("--k", type=click.IntRange(min=1), default=1, show_default=True, help="Sweeps per update.")
@click.option(
    "--chains",
    type=click.IntRange(min=1),
    help="Persistent chains (every algorithm but cd; pt runs this many per level, cast as many fast "
    "ones); default 100, cast 50 (+ 50 fast, the CAST paper's).",
)
@click.option(
    "--levels",
    type=click.IntRange(min=2),
    help="Temperatures of pt, ast, cast and trans-sap (defaults: pt 10, ast 20, cast 20, trans-sap 10).",
)
@click.option(
    "--lag", type=click.IntRange(min=1), help="CAST: steps between slow/fast exchanges (default 50)."
)
@click.option(
    "--fast-learning-rate",
    type=FiniteFloat(min=0.0),
    help="FPCD: step size of the fast weights (default: --learning-rate).",
)
@click.option(
    "--fast-decay",
    type=FiniteFloat(min=0.0, max=1.0),
    help="FPCD: factor on the fast weights per update (default 0.95).",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=100, show_default=True)
@click.option(
    "--epochs", type=click.IntRange(min=1, max=MAX_EPOCHS), help="Passes over the data (default 10)."
)
@click.option(
    "--updates", type=click.IntRange(min=1, max=MAX_UPDATES), help="Parameter updates (instead of --epochs)."
)
@click.option(
    "--learning-rate",
    type=FiniteFloat(min=0.0, min_open=True, max=MAX_LEARNING_RATE),
    help="Base learning rate (default 0.01; a DBM: 0.005 with --lr-schedule inverse, the CAST paper's).",
)
@click.option("--momentum", type=FiniteFloat(), default=0.0, show_default=True)
@click.option("--weight-decay", type=FiniteFloat(), default=0.0, show_default=True, help="L2 on the weights.")
@click.option(
    "--l1", type=FiniteFloat(min=0.0), default=0.0, show_default=True, help="L1 on the weights: l1·Σ|W|."
)
@click.option(
    "--l1-squared",
    type=FiniteFloat(min=0.0),
    default=0.0,
    show_default=True,
    help="L1² on the weights (Tubiana et al. 2019): λ/(2·n_visible)·Σ_j (Σ_i |W_ij|)².",
)
@click.option(
    "--centering",
    is_flag=True,
    help="Centred gradients (Melchior et al. 2016): offsets from the data mean and a running "
    "average of the hidden means; same model, better-conditioned updates.",
)
@click.option(
    "--lr-schedule",
    help="Learning-rate schedule: constant, linear, inverse (default constant; a DBM: inverse, "
    "i.e. 10/(2000 + t) with the default rate).",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of every random choice.")
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
    "--chain-blocks", type=click.IntRange(min=1), help="torchrun: chain blocks (default 1 per process)."
)
@click.option(
    "--snapshots",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_SNAPSHOTS,
    show_default=True,
    help="RBM parameter snapshots kept along training (geometrically spaced) in "
    "RUN_DIR/trajectory.safetensors, for trajectory AIS and ptt; 0 keeps none.",
)
@click.option(
    "--witness-rows",
    type=click.IntRange(min=0, max=MAX_WITNESS_ROWS),
    default=DEFAULT_WITNESS_ROWS,
    show_default=True,
    help="Training rows saved in the model file for the log Z verdict's missing-mass check "
    "(docs/trust.md); 0 keeps no data in the model, and its estimates without --data say unchecked.",
)
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
@data_file_options
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True)
@click.option("--tensorboard", is_flag=False, flag_value="", metavar="[DIR]", help=TENSORBOARD_HELP)
@command_options
def train(**options: Any) -> None:
    """Train an RBM or a DBM on a dataset; write config, metrics, checkpoints, model and plots to RUN_DIR."""
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab train --help` must not wait for them.
    from boltzlab.cli import train as implementation

    implementation.run(**options)
