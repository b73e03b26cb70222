"""``boltzlab sample MODEL``: run chains on a saved model; write them as a PNG strip or as data.

``--out`` says what is written by its extension, or ``--format`` does
(:mod:`boltzlab.cli.sample_files`): ``.png`` the picture, one row per chain and time left to
right (a sample every ``--keep-every`` sweeps); ``.npy``, ``.npz`` or ``.csv`` the 0/1 samples
themselves (a Potts RBM's as symbol indices); ``.fasta`` a Potts RBM's samples as sequences in
its alphabet; any other extension is refused before sampling starts. The plain sampler runs in chunks behind a progress bar (on a
terminal, :mod:`boltzlab.cli.progress_display`); the chunks pass the chains and the one
generator on, so the samples are those of a single :func:`boltzlab.sample` call with the same
seed. The tempered samplers show their chain-sweeps the same way.

Tempered samplers (``--sampler pt | st | ast | cast | tt``, any of
:func:`boltzlab.sampling.samplers`) draw their β = 1 chains in the strip and also write
``<out-stem>-temperatures.png``: temperature trajectories and level occupancy (simulated
tempering, adaptive ST, CAST's fast chains), swap acceptance per pair (parallel tempering,
whose summary records no per-replica trajectories) or acceptance per chain (tempered
transitions); one line sums the run up. pt and tt run on 10 uniform levels from β = 0; st,
ast and cast first place a ladder from β = 0 at equal thermodynamic length from a pilot
anneal, learn level weights on it, freeze them and then sample
(:mod:`boltzlab.tempering.adaptation`); a line reports what that learning cost.
``--levels`` and ``--low`` set the ladder: a uniform one from ``low`` to 1 for pt and tt,
the placed ladder's size and hottest level for st, ast and cast.
``--sampler ptt`` exchanges replicas across the training snapshots instead
(docs/algorithms.md §4.6): its levels are the run's ``trajectory.safetensors`` (beside the
model file, or ``--trajectory PATH``), and its figure shows swap acceptance per pair of
snapshots.

``--json`` prints one JSON object on stdout instead of the lines (:func:`_sample_record`): the
files written, the samples' shape, sampler, operator, settings, seed, timing, the verdict and
the sampler's diagnostics; the progress bar stays on stderr.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click
import torch
from click.core import ParameterSource

from boltzlab import distributed, operators, progress, sampling
from boltzlab.cli.common import (
    choose_threads,
    describe_model,
    image_shape_of,
    load_model_file,
    operator_params,
    parse_image_shape,
    printable,
    report_written,
)
from boltzlab.cli.json_output import echo_json, estimate_diagnostics
from boltzlab.cli.memory import check_memory
from boltzlab.cli.progress_display import bar_size, method_progress, show_progress
from boltzlab.cli.sample_files import resolve_format, write_fasta, write_samples
from boltzlab.errors import ValidationError
from boltzlab.models.spin import SpinVisible
from boltzlab.operators import Operator
from boltzlab.rng import make_generator
from boltzlab.tempering import ladders
from boltzlab.tempering.cast import CASTSummary
from boltzlab.tempering.level_summary import SimulatedTemperingSummary
from boltzlab.tempering.parallel import ParallelTemperingSummary
from boltzlab.tempering.ptt_state import TrajectoryTemperingSummary
from boltzlab.tempering.transitions import TemperedTransitionsSummary
from boltzlab.training.settings import operator_record

__all__ = ["run"]

# About this many progress-bar steps per run.
_N_CHUNKS = 50
# Samplers that place their own ladder (adapt, then freeze) and take its ``low`` and size.
_LOW_SAMPLERS = ("st", "ast", "cast")
# Levels of the pt, st and tt default ladders, used when only --low is given.
_DEFAULT_LEVELS = 10
# Samplers whose levels are training snapshots, not temperatures.
_TRAJECTORY_SAMPLERS = ("ptt",)


def ladder_options(sampler: str, levels: int | None, low: float | None) -> dict[str, Any]:
    """The sampler's ladder options from ``--levels`` and ``--low``; refused for ``plain``."""
    if levels is None and low is None:
        return {}
    if sampler == "plain" or sampler in _TRAJECTORY_SAMPLERS:
        given = "--levels" if levels is not None else "--low"
        what = "temperature ladders" if sampler != "plain" else "tempered samplers"
        raise ValidationError(f"{given} applies to {what}, not --sampler {sampler}")
    if low is None:
        return {"n_levels": levels}
    if sampler in _LOW_SAMPLERS:
        return {"low": low} if levels is None else {"low": low, "n_levels": levels}
    return {"ladder": ladders.uniform(_DEFAULT_LEVELS if levels is None else levels, low=low)}


def _describe_summary(summary: Any) -> str:
    """One line on a tempered run: acceptance, occupancy, round trips or exchanges."""
    if isinstance(summary, CASTSummary):
        return f"fast chains: {_describe_summary(summary.fast)}; {summary.n_exchanges} exchanges (lag {summary.lag})"
    if isinstance(summary, SimulatedTemperingSummary):
        occupancy = summary.occupancy
        return (
            f"level-move acceptance {summary.acceptance_rate:.1%}; occupancy {float(occupancy.min()):.1%} to "
            f"{float(occupancy.max()):.1%} over {occupancy.numel()} levels (uniform {1 / occupancy.numel():.1%}); "
            f"{int(summary.round_trips.sum())} round trips"
        )
    if isinstance(summary, ParallelTemperingSummary | TrajectoryTemperingSummary):
        rates = summary.swap_acceptance[~summary.swap_acceptance.isnan()]
        span = f"{float(rates.min()):.1%} to {float(rates.max()):.1%}" if rates.numel() else "none proposed"
        levels = ""
        if isinstance(summary, TrajectoryTemperingSummary):
            levels = f" over {summary.positions.numel()} training snapshots"
        return f"swap acceptance per pair {span}{levels}; {summary.total_round_trips} round trips"
    if isinstance(summary, TemperedTransitionsSummary):
        return (
            f"acceptance {summary.acceptance_rate:.1%} (mean acceptance probability "
            f"{summary.mean_acceptance_probability:.1%}); {summary.sweeps_per_step} sweeps per move"
        )
    return f"summary: {type(summary).__name__}"


def _describe_adaptation(adaptation: Any) -> str:
    """One line on how a frozen tempered sampler learnt its level weights, and at what cost."""
    state = "balanced" if adaptation.converged else "NOT balanced (the verdict below says more)"
    return (
        f"adaptation: {adaptation.ladder.betas.numel()} levels, {adaptation.n_sweeps} steps per chain, "
        f"{int(adaptation.round_trips.sum())} round trips, {state}; "
        f"{adaptation.cost_sweeps:,} chain-sweeps incl. a {adaptation.pilot_sweeps:,}-sweep pilot"
    )


def _summary_diagnostics(summary: Any) -> dict[str, Any]:
    """A tempered run's summary for ``--json``: its scalars (acceptance rate, round trips,
    exchanges, ...) and its per-level or per-pair vectors (swap acceptance, occupancy, β, ...),
    and those of a summary it holds as a nested object (CAST's ``fast``); 2-D histories are left out."""
    return estimate_diagnostics(summary, vectors=True)


def _adaptation_record(adaptation: Any) -> dict[str, Any] | None:
    """What :func:`_describe_adaptation` says, as fields."""
    if adaptation is None:
        return None
    return {
        "n_levels": adaptation.ladder.betas.numel(),
        "betas": adaptation.ladder.betas.tolist(),
        "steps_per_chain": adaptation.n_sweeps,
        "round_trips": int(adaptation.round_trips.sum()),
        "converged": bool(adaptation.converged),
        "cost_sweeps": int(adaptation.cost_sweeps),
        "pilot_sweeps": int(adaptation.pilot_sweeps),
    }


def _sample_record(
    model_path: Path,
    settings: dict[str, Any],
    *,
    seed: int,
    sampler: str,
    operator: Operator,
    samples: torch.Tensor,
    written: list[Path],
    seconds: float,
    flip_rate: float | None,
    result: Any = None,
) -> dict[str, Any]:
    """The ``--json`` object of ``sample`` (every number the text prints, and the settings).

    ``settings`` are the effective run options (chains, sweeps, keep-every, burn-in, ladder,
    trajectory, image shape, output file).

    ``result`` is the tempered sampler's :class:`~boltzlab.sampling.SampleResult` (``None``
    for the plain sampler, which has no verdict of its own and is reported reliable).
    """
    summary = None if result is None else result.info.summary
    return {
        "model": str(model_path),
        "written": [str(path) for path in written],
        "shape": list(samples.shape),
        "n_chains": samples.shape[1],
        "n_samples": samples.shape[0],
        "sampler": sampler,
        **operator_record(operator),
        "settings": {
            key: str(value) if isinstance(value, Path) else value for key, value in settings.items()
        },
        "seed": seed,
        "seconds": seconds,
        "reliable": True if result is None else bool(result.reliable),
        "warnings": [] if result is None else list(result.warnings),
        "flip_rate": flip_rate,
        "summary": None if summary is None else _describe_summary(summary),
        "diagnostics": _summary_diagnostics(summary),
        "adaptation": None
        if result is None
        else _adaptation_record(getattr(result.info, "adaptation", None)),
        # The verdict's chain-group check (None with too few chains or sweeps to run it).
        "group_agreement": None if result is None else estimate_diagnostics(result.info.groups) or None,
        "world_size": distributed.topology().world_size,
    }


def _run_plain(
    model: Any, options: dict[str, Any], operator: Operator, *, show: bool
) -> tuple[torch.Tensor, float]:
    """Samples ``(n_kept, n_chains, n_visible)`` and the mean flip rate, in chunks behind a bar
    (``show``: on a terminal, :func:`boltzlab.cli.progress_display.show_progress`)."""
    from tqdm.auto import tqdm

    keep_every, n_sweeps = options["keep_every"], options["sweeps"]
    # Chunks are whole multiples of keep_every, so the kept sweeps are the single run's.
    chunk = keep_every * max(1, math.ceil(n_sweeps / keep_every / _N_CHUNKS))
    generator = make_generator(options["seed"], model.device)
    chains: Any = "base"
    kept, flip_rates = [], []
    done = 0
    with tqdm(total=n_sweeps, desc="sampling", unit="sweep", disable=not show, **bar_size()) as bar:
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


def _check_sample_size(model: Any, options: dict[str, Any]) -> None:
    """Refuse chains or kept samples that cannot fit before any is allocated (cli/memory.py)."""
    units = sum(model.layer_sizes)
    width = model.dtype.itemsize
    chains = options["chains"] * (options["levels"] or 1)
    kept = options["sweeps"] // options["keep_every"] + 1
    check_memory(
        {
            f"the chains ({chains:,} × {units:,} units, with their probabilities)": 3
            * chains
            * units
            * width,
            f"the kept samples ({kept:,} × {options['chains']:,} chains × {model.layer_sizes[0]:,} units)": kept
            * options["chains"]
            * model.layer_sizes[0]
            * width,
        },
        command="boltzlab sample",
        fix="use fewer --chains or --levels, or keep fewer samples (--sweeps, --keep-every)",
    )


def run(model_path: Path, as_json: bool, **options: Any) -> None:
    """``boltzlab sample`` with its options (declared in :mod:`boltzlab.cli.commands.sample`): run
    chains on a saved model; write a PNG strip or the samples themselves (tempered samplers: also
    their ladder)."""
    # Long because it is the command's steps in the order of its output (options, chains, sampler,
    # figure, summary); each is a call.
    from boltzlab.plotting import chain_strip_figure, save_figure
    from boltzlab.plotting.tempering import tempered_sampler_figure

    # Before any sweep: a bad name costs nothing.
    out_given = click.get_current_context().get_parameter_source("out") != ParameterSource.DEFAULT
    options["out"], out_format = resolve_format(options["out"], out_given, options.pop("out_format"))
    if options["keep_every"] > options["sweeps"]:
        raise ValidationError(
            f"--keep-every {options['keep_every']} exceeds --sweeps {options['sweeps']}: no sample would be kept"
        )
    sampler = options["sampler"].lower()
    if sampler not in sampling.samplers():
        raise ValidationError(
            f"--sampler must be one of {', '.join(sampling.samplers())}, got {options['sampler']!r}"
        )
    scheme_options = ladder_options(sampler, options["levels"], options["low"])
    if sampler in _TRAJECTORY_SAMPLERS:
        scheme_options["trajectory"] = options["trajectory"] or model_path.parent
    elif options["trajectory"] is not None:
        raise ValidationError(f"--trajectory applies to --sampler ptt, not --sampler {sampler}")
    model = load_model_file(model_path)
    choose_threads(model)
    _check_sample_size(model, options)
    alphabet = getattr(model, "alphabet", None)
    potts = getattr(model, "n_states", None) is not None
    if out_format == ".fasta" and alphabet is None:
        what = "records no alphabet" if potts else f"is a {type(model).__name__} of binary units"
        raise ValidationError(
            f"--out {options['out']}: FASTA holds sequences, and the model {what}; write .png, .npy, .npz or .csv"
        )
    image_shape = image_shape_of(model, parse_image_shape(options["image_shape"]))
    if potts and image_shape is None:
        image_shape = (model.n_sites, model.n_states)  # a sequence as its one-hot sites × states
    # Built here, so a bad name fails before the progress bar starts.
    operator = operators.get(options["operator"], **operator_params(options["operator"], options["alpha"]))
    echo = (lambda _text: None) if as_json else click.echo
    echo(f"model: {printable(model_path)} ({describe_model(model)})")
    summary, result = None, None
    show = show_progress(quiet=as_json)
    started = time.perf_counter()
    if sampler == "plain":
        samples, flip_rate = _run_plain(model, options, operator, show=show)
    else:
        with (
            method_progress(f"{sampler} sampler", 1, 1, show=show) as hook,
            progress.reporting(hook),
        ):
            result = sampling.sample(
                model,
                sampler=sampler,
                operator=operator,
                n_chains=options["chains"],
                n_sweeps=options["sweeps"],
                generator=options["seed"],
                keep_every=options["keep_every"],
                burn_in=options["burn_in"],
                **scheme_options,
            )
        samples, flip_rate, summary = result.samples, None, result.info.summary
        adaptation = getattr(result.info, "adaptation", None)
        if adaptation is not None:
            echo(_describe_adaptation(adaptation))
    seconds = time.perf_counter() - started
    if samples is None:
        raise ValidationError(f"the {options['sampler']} sampler kept no samples; check --keep-every")
    if not distributed.topology().is_main:
        return  # under torchrun, rank 0 alone draws and writes
    if out_format == ".png":
        title = (
            f"{options['sampler']} sampler, {options['operator']} sweeps: {samples.shape[1]} chains, "
            f"a sample every {options['keep_every']} sweeps"
        )
        figure = chain_strip_figure(
            samples.cpu(), image_shape=image_shape, n_chains=samples.shape[1], title=title
        )
        written = [save_figure(figure, options["out"])]
    else:
        if potts:  # symbol indices, one per site, rather than one-hot units
            samples = model.to_indices(samples.reshape(-1, samples.shape[-1])).view(*samples.shape[:2], -1)
        elif isinstance(model, SpinVisible):  # ±1, as the model's data were given
            samples = model.to_spins(samples)
        settings = {"keep_every": options["keep_every"], "burn_in": options["burn_in"]}
        if out_format == ".fasta":
            written = [write_fasta(samples, alphabet, options["out"], **settings)]
        else:
            written = [write_samples(samples, options["out"], out_format=out_format, **settings)]
    if summary is not None:
        out: Path = options["out"]
        temperatures = tempered_sampler_figure(
            summary, title=f"{sampler} sampler, {options['operator']} sweeps, {options['sweeps']} steps"
        )
        written.append(save_figure(temperatures, out.with_name(f"{out.stem}-temperatures.png")))
    if as_json:
        echo_json(
            _sample_record(
                model_path,
                {
                    **{
                        key: options[key]
                        for key in ("chains", "sweeps", "keep_every", "burn_in", "levels", "low")
                    },
                    "alpha": options["alpha"],
                    "trajectory": scheme_options.get("trajectory"),
                    "image_shape": None if image_shape is None else list(image_shape),
                    "out": options["out"],
                },
                seed=options["seed"],
                sampler=sampler,
                operator=operator,
                samples=samples,
                written=written,
                seconds=seconds,
                flip_rate=flip_rate,
                result=result,
            )
        )
        return
    if summary is not None:
        click.echo(f"{sampler}: {_describe_summary(summary)}")
        if result.reliable:
            click.echo("verdict: reliable (no diagnostic found a problem)")
        else:
            click.echo("verdict: UNRELIABLE (docs/trust.md)")
            for warning in result.warnings:
                click.echo(f"  - {warning}")
    if flip_rate is not None:
        click.echo(f"mean fraction of units changed per sweep: {flip_rate:.4f}")
    click.echo(
        f"{samples.shape[1]} chains × {samples.shape[0]} samples, one every {options['keep_every']} sweeps"
    )
    report_written(written)
