"""``boltzlab logz MODEL``: the log partition function of a saved model, with its error bar.

Any method of :func:`boltzlab.estimate_log_z` by name; the sampling options are passed only
when given, so the estimator's own defaults apply otherwise. AIS from a uniform base can
miss by nats on a data-trained model (DESIGN.md, "Tempered family"): ``--data`` fits the
base-rate base of a model file that has none.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import click

from boltzlab import data as datasets
from boltzlab import estimators, operators
from boltzlab.cli.common import (
    choose_threads,
    command_options,
    describe_model,
    format_seconds,
    load_model_file,
    operator_help,
)
from boltzlab.errors import ValidationError

__all__ = ["logz"]

# Options of sampling estimators, by flag and by estimator keyword.
_SAMPLING_OPTIONS = {"chains": "n_chains", "temperatures": "n_temperatures", "schedule": "schedule"}
_AIS_UNIFORM_BASE_WARNING = "AIS is starting from a uniform base"


@click.command(
    "logz",
    epilog="""\b
Example:
  boltzlab logz runs/digits/model.safetensors --method exact
  boltzlab logz runs/digits/model.safetensors --method ais --chains 200 --operator flip --seed 1""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--method", default="ais", show_default=True, help=f"Estimator: {', '.join(estimators.methods())}."
)
@click.option("--chains", type=click.IntRange(min=1), help="Independent chains (default: the estimator's).")
@click.option(
    "--temperatures", type=click.IntRange(min=1), help="Number of temperatures (default: the schedule's)."
)
@click.option("--schedule", help="Temperature schedule, e.g. sm08 or linear (default: the estimator's).")
@click.option("--operator", help=operator_help("Transition operator (default gibbs)"))
@click.option("--alpha", type=float, help="Flip weight of --operator mixture (default 0.5).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--data", metavar="NAME|PATH", help="Fit the base-rate base to this dataset when the model has none."
)
@click.option(
    "--data-root", type=click.Path(path_type=Path), metavar="DIR", help="Where to look for dataset files."
)
@command_options
def logz(model_path: Path, method: str, seed: int, **options: Any) -> None:
    """Estimate log Z of a saved model: value ± standard error, method, cost and ESS."""
    model = load_model_file(model_path)
    choose_threads(model)
    if options["data"] is not None:
        if getattr(model, "base_fitted", False):
            click.echo("base: the model file has a fitted base-rate base; kept (--data not needed)", err=True)
        else:
            dataset = datasets.load(options["data"], root=options["data_root"], generator=seed)
            model.set_base_rate(dataset.train)
            click.echo(
                f"base: base-rate base fitted to {dataset.name} ({dataset.train.shape[0]} examples)", err=True
            )
    given = {
        keyword: options[flag] for flag, keyword in _SAMPLING_OPTIONS.items() if options[flag] is not None
    }
    if options["operator"] is not None or options["alpha"] is not None:
        params = {} if options["alpha"] is None else {"alpha": options["alpha"]}
        given["operator"] = operators.get(options["operator"] or "gibbs", **params)
    if method.lower() == "exact" and given:
        flags = ", ".join(
            f"--{flag}" for flag in (*_SAMPLING_OPTIONS, "operator", "alpha") if options[flag] is not None
        )
        raise ValidationError(
            f"{flags}: exact enumeration takes no sampling options; leave them out or use --method ais"
        )

    click.echo(f"model: {model_path} ({describe_model(model)})")
    started = time.perf_counter()
    with warnings.catch_warnings():
        if not getattr(model, "base_fitted", True):
            # Say it in the command line's terms rather than the library's (set_base_rate).
            warnings.filterwarnings("ignore", message=_AIS_UNIFORM_BASE_WARNING)
            if method.lower() != "exact":
                click.echo(
                    "warning: the model's base was never fitted to data, so AIS starts from a uniform base "
                    "and may miss log Z by nats; pass --data with the training data",
                    err=True,
                )
        estimate = estimators.estimate_log_z(model, method=method, generator=seed, **given)
    elapsed = time.perf_counter() - started

    if estimate.stderr == 0:
        click.echo(f"log Z = {estimate.log_z:.6f} (exact)")
    else:
        bias = {"lower": ", a stochastic lower bound", "upper": ", a stochastic upper bound"}.get(
            estimate.bound or "", ""
        )
        click.echo(f"log Z = {estimate.log_z:.6f} ± {estimate.stderr:.6f} (1 standard error{bias})")
    info = estimate.info
    detail = []
    if getattr(info, "operator", None):
        detail.append(f"{info.operator} sweeps")
    if getattr(info, "n_chains", None):
        detail.append(f"{info.n_chains} chains")
    schedule = getattr(info, "schedule", None)
    if schedule is not None:
        detail.append(f"{len(schedule) - 1} temperatures")
    click.echo(f"method: {estimate.method}" + (f" ({', '.join(detail)})" if detail else ""))
    if estimate.method == "exact":
        click.echo(f"cost: 2^{min(model.layer_sizes)} states enumerated in {format_seconds(elapsed)}")
    else:
        click.echo(f"cost: {estimate.cost_sweeps:,} chain-sweeps in {format_seconds(elapsed)}")
    ess = getattr(info, "ess", None)
    if ess is not None:
        total = getattr(info, "n_chains", None)
        click.echo(f"ESS: {ess:.1f}" + (f" of {total} chains" if total else ""))
