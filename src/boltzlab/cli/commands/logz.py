"""``boltzlab logz``'s declaration: its arguments, options and help, light to import.

``boltzlab logz --help`` reads only this module; the work, which imports torch and the
library, is :func:`boltzlab.cli.logz.run`, imported when the command runs
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from boltzlab.cli.choices import (
    DEFAULT_RAISE_EXAMPLES,
    ESTIMATOR_METHODS,
    MAX_CHAINS_METHODS,
    TARGET_STDERR_METHODS,
)
from boltzlab.cli.common import SEED, FiniteFloat, command_options, data_file_options, operator_help

__all__ = ["logz"]


@click.command(
    "logz",
    short_help="Estimate log Z of a saved model, with an error bar and a verdict.",
    epilog="""\b
Example:
  boltzlab logz runs/digits/model.safetensors --method exact
  boltzlab logz runs/digits/model.safetensors --method ais --chains 200 --operator flip --seed 1
  boltzlab logz model.safetensors --method ais --schedule varopt --decelerate 0.009 --temperatures 10000
  boltzlab logz model.safetensors --method rts --temperatures 100 --sweeps 1000
  boltzlab logz model.safetensors --method raise --data mnist --examples 50 --temperatures 1000
  boltzlab logz runs/fmnist/model.safetensors --method trajectory-ais --data fashion-mnist""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--method", default="ais", show_default=True, help=f"Estimator: {', '.join(ESTIMATOR_METHODS)}."
)
@click.option(
    "--chains",
    type=click.IntRange(min=1),
    help="Chains (AIS, tempered methods) or reverse chains per example (RAISE); default: the estimator's.",
)
@click.option(
    "--temperatures",
    type=click.IntRange(min=1),
    help="AIS/RAISE: increments K of the schedule; rts, ts, ti, ti-rb, mbar: levels K of the ladder; "
    "trajectory-ais: increments K along its path; trajectory-rts, trajectory-mbar: levels K along it.",
)
@click.option(
    "--sweeps",
    type=click.IntRange(min=1),
    help="Long-run sweeps per chain of rts, ts, ti, ti-rb, mbar, trajectory-rts and trajectory-mbar.",
)
@click.option("--schedule", help="AIS/RAISE schedule: sm08, linear, varopt or gms13 (default sm08).")
@click.option(
    "--decelerate",
    type=FiniteFloat(min=0.0, min_open=True),
    metavar="DELTA",
    help="AIS/RAISE: cap every β increment at DELTA (Kiwaki's deceleration, e.g. 0.009).",
)
@click.option(
    "--target-stderr",
    type=FiniteFloat(min=0.0, min_open=True, max=math.inf, max_open=True),
    metavar="NATS",
    help=f"{', '.join(TARGET_STDERR_METHODS)}: the standard error (nats) the budget adds chains "
    "towards once its checks pass (default 0.1). A budget fixed by --chains without --max-chains, or by "
    "--sweeps alone, ignores it.",
)
@click.option(
    "--max-chains",
    type=click.IntRange(min=1),
    help=f"{', '.join(MAX_CHAINS_METHODS)}: the most chains the budget may grow to (AIS 1,600, "
    "the tempered methods 800 by default).",
)
@click.option("--operator", help=operator_help("Transition operator (default gibbs)"))
@click.option("--alpha", type=FiniteFloat(), help="Flip weight of --operator mixture (default 0.5).")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option(
    "--data",
    metavar="NAME|PATH",
    help="Dataset: fits the base-rate base when the model has none; starts the verdict's witness from its "
    "training split (default: the rows the model keeps; none: verdict unchecked); RAISE's held-out examples.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    help=f"RAISE: held-out examples to anneal back from (default {DEFAULT_RAISE_EXAMPLES}).",
)
@click.option(
    "--trajectory",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="trajectory-ais, trajectory-rts, trajectory-mbar, and rts and mbar as their second route: the "
    "training trajectory (trajectory.safetensors or a run directory; default: the one beside MODEL).",
)
@click.option(
    "--data-root", type=click.Path(path_type=Path), metavar="DIR", help="Where to look for dataset files."
)
@data_file_options
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (log_z, stderr, verdict, diagnostics) instead.",
)
@command_options
def logz(**options: Any) -> None:
    """Estimate log Z of a saved model: value ± standard error, bias direction, cost and ESS."""
    # Imported here, not at the top: the implementation imports torch and the library, and
    # `boltzlab logz --help` must not wait for them.
    from boltzlab.cli import logz as implementation

    implementation.run(**options)
