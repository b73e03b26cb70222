"""``boltzlab train``: train an RBM on a dataset and write a run directory.

The run directory (docs/architecture.md, "Command line") holds ``config.toml`` (the effective options,
written before training so even a killed run keeps it; feed it back with ``--config``),
``metrics.csv``, ``checkpoints/`` (the final checkpoint always, and every
``--checkpoint-every`` updates; ``--resume`` continues from the newest), ``model.safetensors``,
``trajectory.safetensors`` (an RBM's parameters at up to ``--snapshots`` geometrically spaced
updates, which ``boltzlab evaluate`` and ``boltzlab logz --method trajectory-ais`` anneal
through; ``--snapshots 0`` records none) and ``plots/training.png`` and ``plots/samples.png``.

``--algorithm`` is any registered negative phase (:func:`boltzlab.training.available_phases`:
CD, PCD, FPCD, parallel tempering, adaptive simulated tempering, CAST, Trans-SAP), or ``pl``,
maximum pseudo-likelihood. ``--centering``, ``--l1`` and ``--l1-squared`` (with
``--weight-decay``) shape the update whatever the algorithm (docs/training.md). The options
that shape them become ``algorithm_params``: ``--levels`` (ladder size of pt, ast, cast and
trans-sap), ``--lag`` (CAST's exchange lag), ``--fast-learning-rate`` and ``--fast-decay``
(FPCD); giving one to an algorithm that does not use it is a one-line error.

``--model dbm --layers 784,500,1000`` trains a deep Boltzmann machine instead (Salakhutdinov &
Hinton 2009; the mean-field objective of :mod:`boltzlab.training.mean_field_objective`):
``--algorithm sap`` is an alias of ``pcd`` (SAP, as the CAST paper calls it), ``--pretrain``
starts from greedily pretrained RBMs (:mod:`boltzlab.training.pretraining`,
``--pretrain-updates`` per RBM), and ``--track-bound-every N`` records the variational lower
bound every N updates (``log Z`` exact when enumerable, else by AIS).
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from pathlib import Path
from typing import Any

import click
import torch
from click.core import ParameterSource

import boltzlab
from boltzlab import data as datasets
from boltzlab import distributed
from boltzlab.cli.choices import DEFAULT_PRETRAIN_UPDATES, MAX_UPDATES, TRAIN_MODELS
from boltzlab.cli.common import (
    choose_threads,
    format_seconds,
    load_data,
    operator_params,
    printable,
    report_written,
)
from boltzlab.cli.config import recorded_options, write_config
from boltzlab.cli.memory import check_memory
from boltzlab.cli.progress_display import show_progress
from boltzlab.cli.run_outputs import (
    finish_report,
    tensorboard_callbacks,
    tensorboard_dir,
    write_logos,
    write_plots,
)
from boltzlab.cli.sequence_data import (
    TrainingRows,
    describe_sequences,
    sequence_record,
    weighted_training_data,
)
from boltzlab.data.sequence_dataset import SequenceDataset
from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import exact_log_z
from boltzlab.estimators.likelihood import log_likelihood
from boltzlab.io.run_lock import read_run_id, run_folder, write_run_id
from boltzlab.models.dbm import DBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import RBM
from boltzlab.models.spin_dbm import SpinDBM
from boltzlab.models.spin_rbm import SpinRBM
from boltzlab.models.trajectory import TRAJECTORY_FILE
from boltzlab.rng import make_generator, spawn
from boltzlab.training import available_phases, find_latest_checkpoint
from boltzlab.training import train as train_model
from boltzlab.training.data_parallel import check_data_parallel_algorithm
from boltzlab.training.negative import PHASE_ALIASES
from boltzlab.training.snapshots import DEFAULT_MAX_SNAPSHOTS

__all__ = ["run"]

# The float types of --dtype (its names: boltzlab.cli.choices.DTYPES).
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# Options that say where and whether to continue, not what the run is: left out of config.toml.
_NOT_RECORDED = ("out", "resume", "tensorboard")
# Which algorithms use each algorithm option: flag name → (algorithm_params key, algorithms).
_ALGORITHM_OPTIONS = {
    "levels": ("n_levels", ("pt", "ast", "cast", "trans-sap")),
    "lag": ("lag", ("cast",)),
    "fast_learning_rate": ("fast_learning_rate", ("fpcd",)),
    "fast_decay": ("fast_decay", ("fpcd",)),
}

# Algorithms that keep no persistent chains, so --chains means nothing to them.
_CHAINLESS = ("cd", "pl")
# What the end of training reports, in this order: name in the history → words.
_END_METRICS = (
    ("reconstruction_error", "reconstruction error"),
    ("log_z", "exact log Z"),
    ("train_log_likelihood", "train log-likelihood"),
    ("validation_log_likelihood", "validation log-likelihood"),
    ("train_bound", "train lower bound"),
    ("validation_bound", "validation lower bound"),
)
# The bound tracker's AIS budget on models too large to enumerate (a training-time monitor).
_TRACK_AIS = {"n_chains": 100, "n_temperatures": 1000}


def _algorithm_name(algorithm: str) -> str:
    """The trainer's name of ``--algorithm`` (``sap`` → ``pcd``)."""
    return PHASE_ALIASES.get(algorithm.lower(), algorithm)


def parse_layers(text: str | None, n_visible: int) -> tuple[int, ...]:
    """``--layers 784,500,1000`` → ``(784, 500, 1000)``; the first size must be the data's."""
    if text is None:
        raise ValidationError("--model dbm needs --layers, e.g. --layers 784,500,1000")
    try:
        sizes = tuple(int(part) for part in text.replace(" ", "").split(","))
    except ValueError:
        raise ValidationError(
            f"--layers must be comma-separated integers like 784,500,1000, got {text!r}"
        ) from None
    if len(sizes) < 3 or min(sizes) < 1:
        raise ValidationError(f"--layers needs the visible size and at least 2 hidden sizes, got {text!r}")
    if sizes[0] != n_visible:
        raise ValidationError(f"--layers starts with {sizes[0]} but the data has {n_visible} visible units")
    return sizes


def _check_run_size(options: dict[str, Any], dataset: datasets.Dataset) -> None:
    """Refuse a run whose length or arrays are absurd before anything is built (cli/memory.py)."""
    per_epoch = max(1, dataset.train.shape[0] // options["batch_size"])
    updates = options["updates"] or (options["epochs"] or 10) * per_epoch
    if updates > MAX_UPDATES:
        raise ValidationError(
            f"--epochs {options['epochs']} is {updates:,} updates of {options['batch_size']} examples, more than "
            f"{MAX_UPDATES:,}; use fewer --epochs (or a larger --batch-size)"
        )
    if options["model"] == "dbm":
        sizes = parse_layers(options["layers"], dataset.n_visible)
    else:
        sizes = (dataset.n_visible, options["hidden"])
    weights = sum(a * b for a, b in itertools.pairwise(sizes))
    units = sum(sizes)
    chains = (options["chains"] or 100) * (options["levels"] or 1)
    width = 8 if options["dtype"] == "float64" else 4
    snapshots = DEFAULT_MAX_SNAPSHOTS if options["snapshots"] is None else options["snapshots"]
    check_memory(
        {
            f"the weights ({weights:,}) with their gradient, momentum and copies": 4 * weights * width,
            f"the trajectory's {snapshots} snapshots of the weights": snapshots * weights * width,
            f"the chains ({chains:,} × {units:,} units, with their probabilities)": 3
            * chains
            * units
            * width,
            f"a minibatch ({options['batch_size']:,} × {units:,} units)": 3
            * options["batch_size"]
            * units
            * width,
        },
        command="boltzlab train",
        fix="use fewer --hidden (--layers), --chains, --levels or a smaller --batch-size",
    )
    n_train = dataset.train.shape[0]
    if options["batch_size"] > n_train:
        # Here, in flag names, rather than from the trainer as batch_size=... after "training ...".
        raise ValidationError(
            f"--batch-size {options['batch_size']} exceeds the {n_train} training examples of "
            f"{printable(dataset.name)}; use --batch-size {n_train} or less"
        )


def _check_model_options(options: dict[str, Any]) -> None:
    """Refuse flags that do not fit ``--model``, naming them."""
    kind = options["model"]
    if kind not in TRAIN_MODELS:
        raise ValidationError(f"--model must be one of {', '.join(TRAIN_MODELS)}, got {kind!r}")
    if kind == "rbm":
        if options["hidden"] is None:
            raise ValidationError("--model rbm needs --hidden")
        for flag in ("layers", "pretrain", "track_bound_every", "pretrain_updates"):
            if options.get(flag) not in (None, False):
                raise ValidationError(f"--{flag.replace('_', '-')} applies to --model dbm only")
    elif options["hidden"] is not None:
        raise ValidationError("--hidden applies to --model rbm; give a DBM's sizes with --layers")
    elif options["track_exact_every"] is not None:
        raise ValidationError("--track-exact-every applies to RBMs; use --track-bound-every for a DBM")


def _build_dbm(options: dict[str, Any], dataset: datasets.Dataset, generator: torch.Generator) -> DBM:
    """A random or greedily pretrained DBM with the sizes of ``--layers``."""
    sizes = parse_layers(options["layers"], dataset.n_visible)
    dtype = _DTYPES[options["dtype"]]
    if not options["pretrain"]:
        model_class = SpinDBM if options.get("visible_units") == "spin" else DBM
        return model_class(layer_sizes=list(sizes), generator=generator, dtype=dtype)
    from boltzlab.training.pretraining import pretrain_dbm

    n_updates = options["pretrain_updates"] or DEFAULT_PRETRAIN_UPDATES
    click.echo(f"pretraining {len(sizes) - 1} RBMs greedily, {n_updates} CD-1 updates each")
    return pretrain_dbm(
        sizes,
        dataset.train,
        n_updates=n_updates,
        batch_size=min(options["batch_size"], dataset.train.shape[0]),
        generator=generator,
        dtype=dtype,
    ).dbm


def _bound_callbacks(model: Any, every: int | None) -> list[Any]:
    """The variational-bound tracker of a DBM (exact log Z when enumerable, else AIS)."""
    if every is None:
        return []
    from boltzlab.cli.common import MAX_EXACT_UNITS
    from boltzlab.training.mean_field_objective import VariationalBoundTracker

    odd = sum(model.layer_sizes[index] for index in model.update_groups[0])
    even = sum(model.layer_sizes[index] for index in model.update_groups[1])
    if min(odd, even) <= MAX_EXACT_UNITS:
        return [VariationalBoundTracker(every)]
    return [VariationalBoundTracker(every, log_z="ais", ais_options=dict(_TRACK_AIS))]


def algorithm_params(algorithm: str, options: dict[str, Any]) -> dict[str, Any]:
    """``algorithm_params`` for ``train`` from the flags; refuses unknown algorithms and flags
    that the algorithm does not use (``--chains`` with CD too), naming both."""
    known = available_phases()
    algorithm = _algorithm_name(algorithm)
    if algorithm not in known:
        raise ValidationError(
            f"--algorithm must be one of {', '.join(known)} (or sap = pcd), got {algorithm!r}"
        )
    if options.get("chains") is not None and algorithm in _CHAINLESS:
        # Refused like --levels with pcd: accepted, it was written to config.toml and ignored.
        users = [name for name in known if name not in _CHAINLESS]
        raise ValidationError(
            f"--chains applies to --algorithm {' or '.join(users)}, not {algorithm!r} "
            "(CD starts a chain at every minibatch example; PL samples nothing)"
        )
    params = {}
    for flag, (key, users) in _ALGORITHM_OPTIONS.items():
        value = options.get(flag)
        if value is None:
            continue
        if algorithm not in users:
            raise ValidationError(
                f"--{flag.replace('_', '-')} applies to --algorithm {' or '.join(users)}, not {algorithm!r}"
            )
        params[key] = value
    return params


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
    """The split training is tracked on, and its legend: the validation split, else the test
    split, called "validation" either way (one name in the console, metrics.csv, the plots and
    the report), with ", the test split" where the test split stands in."""
    if dataset.valid is not None:
        return dataset.valid, "validation"
    if dataset.test is not None:
        return dataset.test, "validation, the test split"
    return None, "validation"


def data_metadata(dataset: datasets.Dataset, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a model file records about its training data (``sample`` reads ``image_shape``;
    ``evaluate`` and ``logz`` read how aligned sequences were weighted and split)."""
    record = {
        "name": dataset.name,
        "source": dataset.source,
        "n_train": int(dataset.train.shape[0]),
        "n_visible": dataset.n_visible,
        "image_shape": list(dataset.image_shape) if dataset.image_shape else None,
    }
    if isinstance(dataset, SequenceDataset):
        record.update(sequence_record(dataset, options or {}))
    return record


def _refuse_dbm_on_sequences(options: dict[str, Any], dataset: datasets.Dataset) -> None:
    if options["model"] == "dbm" and isinstance(dataset, SequenceDataset):
        raise ValidationError(
            f"--model dbm takes binary data; {printable(dataset.name)} holds aligned sequences, which "
            "train a Potts RBM: --model rbm --hidden N"
        )
    if options.get("visible_units", "binary") == "spin":
        if isinstance(dataset, SequenceDataset):
            raise ValidationError(
                f"--visible-units spin takes binary data; {printable(dataset.name)} holds aligned sequences "
                "(categorical units): leave --visible-units out"
            )
        if options.get("pretrain"):
            raise ValidationError(
                "--pretrain builds a DBM of 0/1 units from greedily trained RBMs; leave it out with "
                "--visible-units spin"
            )


def _build_potts(options: dict[str, Any], dataset: SequenceDataset, generator: torch.Generator) -> PottsRBM:
    """The RBM of aligned sequences: one categorical unit per column (docs/data.md, "Aligned sequences")."""
    return PottsRBM(
        dataset.n_sites,
        dataset.n_states,
        options["hidden"],
        alphabet=dataset.alphabet,
        generator=generator,
        dtype=_DTYPES[options["dtype"]],
    )


def final_exact_metrics(model: Any, train: Any, validation: Any) -> dict[str, float]:
    """Exact ``log Z`` of the trained model and the mean log-likelihoods it implies, by name.

    Exact tracking runs every ``--track-exact-every`` updates, so its last value may belong to
    an earlier model than the final one; this measures the final one, as the tracker would.
    """
    log_z = exact_log_z(model)
    metrics = {"log_z": log_z, "train_log_likelihood": log_likelihood(model, train, log_z)}
    if validation is not None:
        metrics["validation_log_likelihood"] = log_likelihood(model, validation, log_z)
    return metrics


def result_lines(
    result: boltzlab.TrainResult,
    *,
    final: dict[str, float] | None,
    call_seconds: float,
    resumed: bool,
) -> list[str]:
    """The end of training: what the two times measured, then every metric with its update.

    The first line gives the training loop's clock (the ``time`` of metrics.csv, summed over
    resumed segments) and the wall-clock time of the whole training call (setup and files
    included). Each further line is an update: the final model's metrics (``final`` adds the
    exact ones measured after training), then those last tracked earlier, saying so.
    """
    end = result.n_updates
    loop_seconds = result.history[-1].time if result.history else math.nan
    summed = ", summed over resumed segments" if resumed else ""
    lines = [
        f"trained to update {end} in {format_seconds(loop_seconds)} of training loop (metrics.csv's time{summed}); "
        f"the whole training call took {format_seconds(call_seconds)} (the loop plus its setup: imports, "
        "base fit, chains, files)"
    ]
    by_update: dict[int, list[str]] = {}
    for name, label in _END_METRICS:
        if final is not None and name in final:
            found: tuple[int, float] | None = (end, final[name])
        else:
            found = next(
                ((r.update, value) for r in reversed(result.history) if (value := r.get(name)) is not None),
                None,
            )
        if found is not None:
            by_update.setdefault(found[0], []).append(f"{label} {found[1]:.4f}")
    for update in sorted(by_update, reverse=True):
        when = f"final model (update {update:,})" if update == end else f"last tracked at update {update:,}"
        lines.append(f"{when}: {', '.join(by_update[update])}")
    return lines


def run(**options: Any) -> None:
    """``boltzlab train`` with its options (declared in :mod:`boltzlab.cli.commands.train`): train an
    RBM or a DBM on a dataset; write config, metrics, checkpoints, model and plots to RUN_DIR."""
    # Long because it is the command's steps in the order of a run (options, data, model, training,
    # files, report); each is a call.
    ctx = click.get_current_context()
    _check_model_options(options)
    check_data_parallel_algorithm(options["algorithm"])  # before anything is written
    options["epochs"], options["updates"] = run_length(ctx, options["epochs"], options["updates"])
    out: Path = options["out"]
    checkpoints = out / "checkpoints"
    main = distributed.topology().is_main  # under torchrun, rank 0 alone writes
    if main:
        # One run per folder (io/run_lock.py): claimed before anything in it is read or written,
        # so a second run is refused before it can touch config.toml; released when the command
        # ends (the operating system releases it if the process is killed).
        ctx.with_resource(run_folder(out))
    latest = find_latest_checkpoint(checkpoints) if checkpoints.is_dir() else None
    if latest is not None and not options["resume"]:
        raise ValidationError(
            f"{out} already holds a run (checkpoint {latest.name}); pass --resume to continue it "
            "or choose another --out"
        )
    # The run's identity (run.json): every checkpoint carries it, and --resume refuses a
    # checkpoint of another run (one copied here from another folder).
    run_id = read_run_id(out) if latest is not None else secrets.token_hex(8)
    params = operator_params(options["operator"], options["alpha"])
    phase_params = algorithm_params(options["algorithm"], options)
    dataset = load_data(options["data"], root=options["data_root"], seed=options["seed"], options=options)
    _refuse_dbm_on_sequences(options, dataset)
    _check_run_size(options, dataset)
    held_out, held_out_label = _held_out(dataset)

    model_generator, train_generator = spawn(make_generator(options["seed"]), 2)
    sequences = dataset if isinstance(dataset, SequenceDataset) else None
    rows = TrainingRows(dataset.train)
    if sequences is not None:
        model: Any = _build_potts(options, sequences, model_generator)
        shape = (
            f"Potts RBM {sequences.n_sites} sites × {sequences.n_states} states × {options['hidden']} hidden"
        )
        rows = weighted_training_data(sequences)
    elif options["model"] == "dbm":
        model = _build_dbm(options, dataset, model_generator)
        shape = f"DBM {'-'.join(str(size) for size in model.layer_sizes)}"
    else:
        model_class = SpinRBM if options.get("visible_units") == "spin" else RBM
        model = model_class(
            dataset.n_visible, options["hidden"], generator=model_generator, dtype=_DTYPES[options["dtype"]]
        )
        shape = f"RBM {dataset.n_visible}×{options['hidden']}"
    if options.get("visible_units") == "spin":
        shape = f"{shape} (±1 visible units)"
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
    if latest is None and main:
        write_run_id(out, run_id)
    written = [] if latest is not None or not main else [record_config()]
    validation = "" if held_out is None else f" ({held_out_label}: {held_out.shape[0]} examples)"
    method = (
        "by maximum pseudo-likelihood"
        if _algorithm_name(options["algorithm"]) == "pl"
        else f"with {options['algorithm']}-{options['k']} and the {options['operator']} operator"
    )
    click.echo(
        f"training {shape} on {printable(dataset.name)} "
        f"({dataset.train.shape[0]} examples) {method}{validation}; writing to {out}/"
    )
    if sequences is not None:
        click.echo(describe_sequences(sequences))
        click.echo(rows.note)
    logger = tensorboard_callbacks(
        options["tensorboard"] if main else None, out, image_shape=dataset.image_shape, seed=options["seed"]
    )
    started = time.perf_counter()
    result = train_model(
        model,
        rows.data,
        algorithm=_algorithm_name(options["algorithm"]),
        algorithm_params=phase_params,
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
        l1=options["l1"],
        l1_squared=options["l1_squared"],
        centering=options["centering"],
        lr_schedule=options["lr_schedule"],
        generator=train_generator,
        validation_data=held_out,
        track_exact_every=options["track_exact_every"],
        log_every=options["log_every"],
        callbacks=_bound_callbacks(model, options["track_bound_every"]) + logger,
        metrics_path=out / "metrics.csv",
        checkpoint_dir=checkpoints,
        checkpoint_every=options["checkpoint_every"],
        resume=options["resume"],
        progress=show_progress(),
        snapshots=options["snapshots"],
        witness_rows=options["witness_rows"],
        snapshot_dir=out,
        chain_blocks=options["chain_blocks"],
        run_id=run_id,
        **rows.keywords,
    )
    if not main:
        return
    elapsed = time.perf_counter() - started
    if latest is not None:
        written.append(record_config())
    written.append(out / "metrics.csv")
    newest = find_latest_checkpoint(checkpoints)
    if newest is not None:
        written.append(newest)
    if result.trajectory is not None and (out / TRAJECTORY_FILE).is_file():
        written.append(out / TRAJECTORY_FILE)
    written.append(
        model.save(
            out / "model.safetensors",
            metadata={"data": data_metadata(dataset, options), "created_by": "boltzlab train"},
        )
    )
    negative = None if result.final_chains is None or sequences is not None else result.final_chains.layers[0]
    if sequences is not None:
        written += write_logos(model, out / "plots", title=f"{shape} on {dataset.name}")
    written += write_plots(
        result,
        dataset,
        out / "plots",
        samples=negative,
        samples_title=f"final {options['algorithm']} chains",
        held_out_label=held_out_label,
        title=f"{shape} on {dataset.name}, {options['algorithm']}-{options['k']}, {options['operator']}",
    )
    final = None
    tracked = [record.update for record in result.history if record.log_z is not None]
    if options["track_exact_every"] is not None and tracked and tracked[-1] != result.n_updates:
        final = final_exact_metrics(model, dataset.train, held_out)
    for line in result_lines(result, final=final, call_seconds=elapsed, resumed=latest is not None):
        click.echo(line)
    if logger:
        written.append(tensorboard_dir(options["tensorboard"], out))
    written += finish_report(out, seed=options["seed"])
    report_written(written)
