"""``boltzlab evaluate``'s declaration: its arguments, options and help, light to import.

``boltzlab evaluate --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.evaluate.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from boltzlab.cli.choices import (
    DEFAULT_CHECK_CHAINS,
    DEFAULT_CHECK_SWEEPS,
    DEFAULT_METHOD_WORK,
    DEFAULT_RAISE_EXAMPLES,
    ESTIMATOR_METHODS,
    MAX_ANCHORED_UNITS,
)
from boltzlab.cli.common import SEED, FiniteFloat, command_options, data_file_options, operator_help

__all__ = ["evaluate"]


@click.command(
    "evaluate",
    short_help="Compare log Z estimators and log-likelihoods.",
    epilog="""\b
Example:
  boltzlab evaluate runs/mnist/model.safetensors --data mnist
  boltzlab evaluate model.safetensors --data mnist --methods exact,ais,raise,rts,mbar --budget 1000
  boltzlab evaluate model.safetensors --data digits.npz --chains 200 --operator flip --seed 3
  boltzlab evaluate runs/ww/model.safetensors --data WW_domain.fasta --out runs/ww""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--data",
    "data_name",
    required=True,
    metavar="NAME|PATH",
    help="Dataset: train/test log-likelihood, RAISE's held-out examples, the base when the model has none.",
)
@click.option(
    "--methods",
    metavar="LIST",
    help="Comma-separated estimators (default: exact when enumerable, ais, anchored-ais for binary RBMs "
    f"whose smaller layer has at most {MAX_ANCHORED_UNITS} units, "
    "trajectory-ais when the run has a trajectory, raise, rts); any of " + ", ".join(ESTIMATOR_METHODS) + ".",
)
@click.option(
    "--budget",
    type=click.IntRange(min=20),
    metavar="SWEEPS",
    help="Gibbs sweeps per chain for every sampling method (AIS/RAISE: that many temperatures); "
    "default: each estimator's own.",
)
@click.option("--chains", type=click.IntRange(min=1), help="Chains per method (RAISE: per example).")
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    help=f"RAISE: held-out examples to anneal back from (default {DEFAULT_RAISE_EXAMPLES}, fewer where "
    "--max-cost binds).",
)
@click.option(
    "--max-cost",
    type=click.IntRange(min=0),
    metavar="CHAIN_SWEEPS",
    help="Chain-sweeps AIS, RAISE and the tempered methods may each spend (0: no cap). Default: "
    f"{DEFAULT_METHOD_WORK:.0e} weight-sweeps over the model's weights, which binds only on large "
    "models (784x500: 2.6M; AIS gets fewer chains, RAISE fewer examples, the tempered budget no more "
    "chains).",
)
@click.option(
    "--likelihood-examples",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="DBM only: test examples whose log p(v) is estimated by per-example AIS (0: skip).",
)
@click.option("--operator", help=operator_help("Transition operator (default gibbs)"))
@click.option("--alpha", type=FiniteFloat(), help="Flip weight of --operator mixture (default 0.5).")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option(
    "--trajectory",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="trajectory-ais, trajectory-rts, trajectory-mbar, and rts and mbar as their second route: the "
    "training trajectory (default: trajectory.safetensors beside MODEL).",
)
@click.option(
    "--data-root", type=click.Path(path_type=Path), metavar="DIR", help="Where to look for dataset files."
)
@data_file_options
@click.option(
    "--check-sweeps",
    type=click.IntRange(min=0),
    default=DEFAULT_CHECK_SWEEPS,
    show_default=True,
    metavar="SWEEPS",
    help="Aligned sequences: PT steps (10 levels) of the generative check, after 0.4× as many of burn-in, "
    "a sample every 1% of them; 0 skips the check.",
)
@click.option(
    "--check-chains",
    type=click.IntRange(min=1),
    default=DEFAULT_CHECK_CHAINS,
    show_default=True,
    help="Aligned sequences: chains of the generative check.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (every row, with diagnostics).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="RUN_DIR",
    help="Also save the --json object as RUN_DIR/evaluation.json and rewrite RUN_DIR/report.html with it.",
)
@command_options
def evaluate(**options: Any) -> None:
    """Estimate log Z of a saved model with several methods and print the comparison table.

    Columns: method, log Z, standard error, bias direction, cost in chain-sweeps, the mean
    train and test log-likelihood implied by that log Z (nats per example), and time. When AIS
    and RAISE both ran, the sandwich they give is printed last. For a DBM the log-likelihood
    columns are empty and a second table gives the variational lower bound per split (with
    the most precise log Z above) and per-example AIS log p(v) on a few test examples.

    For a Potts RBM with aligned FASTA, the log-likelihoods weight each sequence by its sequence
    weight, and a generative check follows: the samples' single-site frequencies and connected
    correlations against the training sequences' (Pearson r and slope); with --out it is also
    drawn as RUN_DIR/plots/correlations.png.
    """
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab evaluate --help` must not wait for them.
    from boltzlab.cli import evaluate as implementation

    implementation.run(**options)
