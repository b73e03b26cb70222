"""``boltzlab demo``: train an RBM on the built-in digits and measure it four ways.

Trains a 64×16 RBM on scikit-learn's 8×8 digits (binarised; offline) by PCD-1 with
momentum and a linearly decaying learning rate, tracking the exact log-likelihood as it goes
(2^16 hidden states are cheap to enumerate). Then log Z four ways: exact enumeration, and
three independent sampling estimates — AIS with Gibbs sweeps (Salakhutdinov & Murray 2008),
AIS with flip-the-state sweeps (Brügge, Fischer & Igel 2013) and Rao-Blackwellized tempered
sampling (Carlson et al. 2016), each with its default settings. Each estimate is reported in
standard errors from the exact one, every pair of them in combined standard errors, and the
train and test log-likelihoods follow from each. The defaults train in under 10 s on one
core and reach about −18 nats per example; the two AIS runs (about 7 and 9 s) and RTS (about
3 s) dominate the total of about 30 s.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click
import torch

import boltzlab
from boltzlab import data as datasets
from boltzlab.cli.common import (
    MAX_EXACT_UNITS,
    alone_on_rank_zero,
    choose_threads,
    format_seconds,
    format_table,
    operator_params,
    report_written,
    verdict_word,
)
from boltzlab.cli.comparison import disagreement_lines
from boltzlab.cli.config import recorded_options, write_config
from boltzlab.cli.evaluate import mean_log_f, row_from_estimate
from boltzlab.cli.progress_display import method_progress, show_progress
from boltzlab.cli.run_files import evaluation_payload, write_evaluation
from boltzlab.cli.run_outputs import finish_report, write_plots
from boltzlab.cli.train import data_metadata
from boltzlab.estimators import estimate_log_z
from boltzlab.evaluation import log_likelihood
from boltzlab.models.rbm import RBM
from boltzlab.rng import make_generator, spawn
from boltzlab.sampling import sample
from boltzlab.training import train

__all__ = ["run"]

# Training settings found to reach about -18 nats/example on digits in a few seconds
# (64×16, 300 epochs): a fixed part of the demo, not options, to keep it a demo.
_TRAINING = {
    "n_chains": 100,
    "batch_size": 100,
    "learning_rate": 0.1,
    "momentum": 0.5,
    "lr_schedule": "linear",
    "k": 1,
}
_N_SAMPLE_CHAINS = 64
_N_CURVE_POINTS = 30  # exact tracking costs about 80 ms a point here


@dataclass(frozen=True)
class _Measured:
    """One log Z estimate as the demo reports it."""

    label: str  # in the log Z table
    source: str  # in the log-likelihood table: where its log Z came from
    estimate: boltzlab.LogZEstimate
    seconds: float


def _estimate_log_z(
    model: RBM,
    options: dict[str, Any],
    generators: dict[str, torch.Generator],
    rts_generator: torch.Generator,
) -> list[_Measured]:
    """Exact log Z (when enumerable), AIS once per operator in ``generators``, then RTS."""
    measured = []
    smaller = min(model.layer_sizes)
    show, total = show_progress(), len(generators) + 1  # the sampling estimates get a bar each
    if smaller <= MAX_EXACT_UNITS:
        started = time.perf_counter()
        estimate = estimate_log_z(model, method="exact")
        measured.append(
            _Measured(f"exact (2^{smaller} states)", "exact log Z", estimate, time.perf_counter() - started)
        )
    temperatures = options["ais_temperatures"]
    for operator, generator in generators.items():
        click.echo(
            f"estimating log Z by AIS with {operator} sweeps ({options['ais_chains']} chains, "
            f"{'the default' if temperatures is None else temperatures} temperatures) ...",
            err=True,
        )
        started = time.perf_counter()
        position = len(measured) + 1 - (smaller <= MAX_EXACT_UNITS)
        with method_progress(f"AIS, {operator} sweeps", position, total, show=show) as hook:
            estimate = estimate_log_z(
                model,
                method="ais",
                generator=generator,
                progress=hook,
                n_chains=options["ais_chains"],
                n_temperatures=temperatures,
                operator=operator,
            )
        measured.append(
            _Measured(
                f"AIS, {operator} sweeps", f"AIS log Z ({operator})", estimate, time.perf_counter() - started
            )
        )
    click.echo("estimating log Z by RTS with gibbs sweeps (its default ladder and budget) ...", err=True)
    started = time.perf_counter()
    with method_progress("RTS, gibbs sweeps", total, total, show=show) as hook:
        estimate = estimate_log_z(model, method="rts", generator=rts_generator, progress=hook)
    measured.append(_Measured("RTS, gibbs sweeps", "RTS log Z", estimate, time.perf_counter() - started))
    return measured


def _agreement_lines(measured: list[_Measured]) -> list[str]:
    """Every pair of sampled estimates: their difference in nats and in combined standard errors."""
    sampled = [item for item in measured if item.estimate.method != "exact"]
    lines = []
    for index, first in enumerate(sampled):
        for second in sampled[index + 1 :]:
            difference = first.estimate.log_z - second.estimate.log_z
            combined = math.hypot(first.estimate.stderr, second.estimate.stderr)
            in_errors = f" = {difference / combined:+.2f} combined s.e." if combined > 0 else ""
            lines.append(f"  {first.label} − {second.label}: {difference:+.5f} nats{in_errors}")
    return lines


def _log_z_row(item: _Measured, exact: float | None) -> list[str]:
    estimate = item.estimate
    sampled = estimate.method != "exact"
    ess = getattr(estimate.info, "ess", None)
    return [
        item.label,
        f"{estimate.log_z:.5f}",
        f"{estimate.stderr:.5f}" if sampled else "0",
        f"{estimate.z_score(exact):+.2f} σ" if sampled and exact is not None else "-",
        "-" if ess is None else f"{ess:.1f}",
        f"{estimate.cost_sweeps:,}" if sampled else "-",
        format_seconds(item.seconds),
        verdict_word(estimate.status) if sampled else "exact",
    ]


def _print_report(model: RBM, dataset: datasets.Dataset, measured: list[_Measured]) -> None:
    """The log Z table, the agreement of the sampled estimates, and the log-likelihood table."""
    exact = next((item.estimate.log_z for item in measured if item.estimate.method == "exact"), None)
    click.echo("log Z (nats)")
    click.echo(
        format_table(
            ["method", "log Z", "± stderr", "vs exact", "ESS", "chain-sweeps", "time", "verdict"],
            [_log_z_row(item, exact) for item in measured],
        )
    )
    for item in measured:
        if not item.estimate.reliable:
            click.echo(f"{item.label} is {verdict_word(item.estimate.status)} (docs/trust.md):")
            for warning in item.estimate.warnings:
                click.echo(f"  - {warning}")
    click.echo("agreement of the independent estimates")
    for line in _agreement_lines(measured):
        click.echo(line)
    click.echo("")
    rows = []
    for item in measured:
        cells = [f"from {item.source}"]
        for split in (dataset.train, dataset.test):
            value = log_likelihood(model, split, item.estimate.log_z)
            error = item.estimate.stderr  # log p(v) = −F(v) − log Z: the error bar is log Z's
            cells.append(f"{value:.4f}" if error == 0 else f"{value:.4f} ± {error:.4f}")
        rows.append(cells)
    click.echo("log-likelihood (nats per example, mean log p(v))")
    click.echo(format_table(["", "train", "test"], rows))
    click.echo("")


def _save_estimates(out: Path, model: RBM, dataset: datasets.Dataset, measured: list[_Measured]) -> Path:
    """``out/evaluation.json``: the log Z table as ``evaluate --out`` saves it, for ``report.html``."""
    train_log_f, test_log_f = mean_log_f(model, dataset.train), mean_log_f(model, dataset.test)
    rows = [
        replace(
            row_from_estimate(
                item.estimate, train_log_f=train_log_f, test_log_f=test_log_f, seconds=item.seconds
            ),
            method=item.label,
        )
        for item in measured
    ]
    payload = evaluation_payload(
        rows, model=str(out / "model.safetensors"), data=dataset.name, disagreements=disagreement_lines(rows)
    )
    return write_evaluation(out, payload)


def run(**options: Any) -> None:
    """``boltzlab demo`` with its options (declared in :mod:`boltzlab.cli.commands.demo`): train an
    RBM on the built-in digits, compare exact log Z with three sampling estimates, write the run."""
    # Long because it is the demo's script: each step prints what a newcomer reads, in that order.
    if not alone_on_rank_zero():
        return  # under torchrun, rank 0 runs it whole, alone
    out: Path = options["out"]
    params = operator_params(options["operator"], options["alpha"])
    dataset = datasets.load("digits")
    n_visible, n_hidden = dataset.n_visible, options["hidden"]
    model_generator, train_generator, gibbs_generator, flip_generator, sample_generator, rts_generator = (
        spawn(make_generator(options["seed"]), 6)
    )
    model = RBM(n_visible, n_hidden, generator=model_generator)
    choose_threads(model)
    n_updates = options["epochs"] * (dataset.train.shape[0] // _TRAINING["batch_size"])
    exact_possible = min(n_visible, n_hidden) <= MAX_EXACT_UNITS  # else tracking would refuse
    track_every = max(1, math.ceil(n_updates / _N_CURVE_POINTS))

    operator_name = options["operator"] + "".join(f" ({key} {value})" for key, value in params.items())
    chains = f"{_TRAINING['n_chains']} persistent chains, " if options["algorithm"].lower() == "pcd" else ""
    click.echo(
        f"boltzlab demo: an RBM with {n_visible} visible and {n_hidden} hidden units on the 8×8 binarised digits\n"
        f"  data: {dataset.train.shape[0]} training and {dataset.test.shape[0]} test images ({dataset.source})\n"
        f"  training: {options['algorithm'].upper()}-1 with the {operator_name} operator, {chains}"
        f"batch {_TRAINING['batch_size']}, {options['epochs']} epoch{'s' if options['epochs'] > 1 else ''} = "
        f"{n_updates} updates,\n"
        f"            learning rate {_TRAINING['learning_rate']} decaying linearly, momentum {_TRAINING['momentum']}"
    )
    written = [
        write_config(
            out / "config.toml",
            recorded_options(click.get_current_context(), options, leave_out=("out",)),
            comment=f"boltzlab {boltzlab.__version__} demo: the options of this run.\n"
            f"Repeat it with: boltzlab demo --config {out / 'config.toml'} --out NEW_DIR",
        )
    ]
    started = time.perf_counter()
    result = train(
        model,
        dataset.train,
        algorithm=options["algorithm"],
        operator=options["operator"],
        operator_params=params,
        n_epochs=options["epochs"],
        generator=train_generator,
        validation_data=dataset.test,
        track_exact_every=track_every if exact_possible else None,
        log_every=track_every,
        metrics_path=out / "metrics.csv",
        progress=show_progress(),
        **_TRAINING,
    )
    tracked = (
        f"; exact log-likelihood tracked every {track_every} updates on the training and validation "
        "(the test split) examples"
        if exact_possible
        else ""
    )
    click.echo(
        f"trained {result.n_updates} updates in {format_seconds(time.perf_counter() - started)} (the whole "
        f"training call; its training loop took {format_seconds(result.history[-1].time)}, metrics.csv's "
        f"time){tracked}\n"
    )
    written.append(out / "metrics.csv")
    written.append(
        model.save(
            out / "model.safetensors",
            metadata={"data": data_metadata(dataset), "created_by": "boltzlab demo"},
        )
    )

    estimates = _estimate_log_z(
        model, options, {"gibbs": gibbs_generator, "flip": flip_generator}, rts_generator
    )
    _print_report(model, dataset, estimates)
    written.append(_save_estimates(out, model, dataset, estimates))

    final = sample(
        model,
        operator=options["operator"],
        operator_params=params,
        n_chains=_N_SAMPLE_CHAINS,
        n_sweeps=options["sample_sweeps"],
        generator=sample_generator,
    )
    written += write_plots(
        result,
        dataset,
        out / "plots",
        samples=final.chains.layers[0],
        samples_title=f"{_N_SAMPLE_CHAINS} chains after {options['sample_sweeps']} {options['operator']} sweeps",
        held_out_label="validation, the test split",
        title=f"RBM {n_visible}×{n_hidden} on digits, {options['algorithm'].upper()}-1, {options['operator']}",
    )
    written += finish_report(out, seed=options["seed"])
    report_written(written)
