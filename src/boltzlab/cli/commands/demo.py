"""``boltzlab demo``'s declaration: its arguments, options and help, light to import.

``boltzlab demo --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.demo.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.common import SEED, FiniteFloat, command_options, operator_help

__all__ = ["demo"]


@click.command(
    "demo",
    short_help="Train an RBM on a built-in dataset and show what boltzlab measures.",
    epilog="""\b
Example:
  boltzlab demo --out demo-run
  boltzlab demo --out demo-flip --operator flip""",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("demo-run"),
    show_default=True,
    metavar="DIR",
    help="Where to write the model, metrics, config and plots.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of every random choice.")
@click.option("--hidden", type=click.IntRange(min=1), default=16, show_default=True, help="Hidden units.")
@click.option(
    "--epochs", type=click.IntRange(min=1), default=300, show_default=True, help="Passes over the data."
)
@click.option(
    "--operator", default="gibbs", show_default=True, help=operator_help("Training and sampling operator")
)
@click.option("--alpha", type=FiniteFloat(), help="Flip weight of --operator mixture (default 0.5).")
@click.option("--algorithm", default="pcd", show_default=True, help="Negative phase: cd or pcd.")
@click.option("--ais-chains", type=click.IntRange(min=2), default=100, show_default=True, hidden=True)
@click.option("--ais-temperatures", type=click.IntRange(min=2), hidden=True, help="Default: the schedule's.")
@click.option("--sample-sweeps", type=click.IntRange(min=1), default=1000, show_default=True, hidden=True)
@command_options
def demo(**options: Any) -> None:
    """Train an RBM on the built-in digits, then compare exact and AIS log Z.

    Prints exact log Z, three independent estimates (AIS with Gibbs and with flip-the-state
    sweeps, RTS) with their error bars and pairwise agreement, and the train and test log-likelihoods; writes the model,
    metrics, config and PNGs of samples and training curves.
    """
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab demo --help` must not wait for them.
    from boltzlab.cli import demo as implementation

    implementation.run(**options)
