"""``boltzlab logz MODEL``: the log partition function of a saved model, with its error bar.

Any method of :func:`boltzlab.estimate_log_z` by name: ``exact`` (enumeration), the
annealing methods ``ais`` and ``raise`` (Neal 2001; Burda, Grosse & Salakhutdinov 2015),
the tempered-sampling methods ``rts``, ``ts``, ``ti``, ``ti-rb`` and ``mbar`` (Carlson et
al. 2016 and the methods it compares with), and the trajectory methods ``trajectory-ais``,
``trajectory-rts`` and ``trajectory-mbar``, which anneal or temper through the parameters saved
while the model was trained (docs/algorithms.md §4.6): the run's ``trajectory.safetensors``
beside the model file, or ``--trajectory PATH``; ``rts`` and ``mbar`` run along it too where
their temperature route is flagged (:mod:`boltzlab.estimators.routes`). The sampling options
are passed only when given, so each estimator's own defaults apply otherwise; a flag that means
nothing to the chosen method is refused in one line rather than ignored. AIS from a uniform base can miss by
nats on a data-trained model (docs/architecture.md, "Tempered family"): ``--data`` fits the base-rate
base of a model file that has none, starts the verdict's missing-mass witness from the training
split, and supplies RAISE's held-out examples (its test split). Without ``--data`` the witness
starts from the rows the model file keeps (docs/trust.md, "The witness rows"), and a model that
keeps none gets the verdict "unchecked".

The option handling here (:func:`estimator_options`, :func:`prepare_data`,
:func:`describe_estimate`) is shared with ``boltzlab evaluate``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import torch
from torch import Tensor, nn

from boltzlab import data as datasets
from boltzlab import distributed, estimators, operators
from boltzlab.cli.choices import DEFAULT_RAISE_EXAMPLES
from boltzlab.cli.common import (
    choose_threads,
    describe_model,
    format_seconds,
    load_data,
    load_model_file,
    operator_params,
    printable,
    refuse_data_file_options_without_data,
)
from boltzlab.cli.json_output import echo_json, estimate_record
from boltzlab.cli.memory import check_memory
from boltzlab.cli.progress_display import method_progress, show_progress
from boltzlab.cli.sequence_data import check_sequences_fit, recorded_reading
from boltzlab.data.sequence_dataset import SequenceDataset
from boltzlab.errors import ValidationError
from boltzlab.estimators.record import FAMILIES, FLAGS, get_record, records
from boltzlab.estimators.result import LogZEstimate
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import TRAJECTORY_FILE, find_trajectory_file
from boltzlab.progress import ProgressHook

__all__ = ["PreparedData", "describe_estimate", "estimator_options", "methods_taking", "run", "run_quietly"]

_AIS_UNIFORM_BASE_WARNING = "AIS is starting from a uniform base"


def estimator_options(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """Keyword options of ``estimate_log_z(method=...)`` from the command-line flags given.

    Which flags a method takes, and the option each sets, is its record's
    (:class:`~boltzlab.estimators.record.EstimatorRecord` ``flags`` and ``keywords``).

    Parameters
    ----------
    method : str
    given : dict
        Flag name (without ``--``) to value, for the flags the user gave (``None`` values are
        dropped): the keys of :data:`boltzlab.estimators.record.FLAGS` (``chains``,
        ``temperatures``, ``sweeps``, ``schedule``, ``decelerate``, ``target-stderr``,
        ``max-chains``, ``operator``, ``alpha``, ``examples``).

    Raises
    ------
    ValidationError
        Naming the flags that do not apply to ``method`` and the methods they apply to.
    """
    record = get_record(method)
    given = {flag: value for flag, value in given.items() if value is not None}
    refused = [flag for flag in given if flag not in record.flags]
    if refused:
        where = "; ".join(f"--{flag} applies to {', '.join(methods_taking(flag))}" for flag in refused)
        raise ValidationError(
            f"method {record.name!r} takes no {', '.join('--' + f for f in refused)} ({where})"
        )
    # --operator/--alpha build one operator; --examples picks RAISE's held-out rows (prepare_data).
    options = {
        record.keyword(flag): value
        for flag, value in given.items()
        if flag not in ("operator", "alpha", "examples")
    }
    if "operator" in given or "alpha" in given:
        name = given.get("operator", "gibbs")
        options["operator"] = operators.get(name, **operator_params(name, given.get("alpha")))
    return options


def methods_taking(flag: str) -> list[str]:
    """The methods whose record takes ``--flag``, by family (annealing, tempered, trajectory)."""
    return [record.name for family in FAMILIES for record in records(family) if flag in record.flags]


def _trajectory_methods() -> list[str]:
    """Methods that run along the training trajectory, then those that take it as a second route."""
    along = [record.name for record in records() if record.needs_trajectory]
    return along + [record.name for record in records() if record.trajectory_route is not None]


@dataclass(frozen=True)
class PreparedData:
    """The dataset given with ``--data``, and the held-out examples RAISE uses.

    Attributes
    ----------
    dataset : Dataset
    held_out : Tensor, shape (n_examples, n_visible), or None
        A random subset of the test split (else the validation split, else the training data).
    held_out_description : str
        E.g. ``"100 of 10000 test examples"``.
    """

    dataset: datasets.Dataset
    held_out: Tensor
    held_out_description: str


def prepare_data(
    model: nn.Module,
    name_or_path: str,
    *,
    root: Path | None,
    seed: int,
    n_examples: int,
    load_options: Mapping[str, Any] | None = None,
) -> PreparedData:
    """Load ``--data`` (with the ``data_file_options`` in ``load_options``), fit the model's
    base-rate base if it has none, and pick RAISE's examples.

    Says on stderr what it did with the base (kept or fitted).
    """
    dataset = load_data(
        name_or_path, root=root, seed=seed, options=load_options or {}, recorded=recorded_reading(model)
    )
    check_sequences_fit(model, dataset, name_or_path)
    if dataset.n_visible != model.layer_sizes[0]:
        raise ValidationError(
            f"--data {name_or_path!r} has {dataset.n_visible} variables but the model has "
            f"{model.layer_sizes[0]} visible units"
        )
    if getattr(model, "base_fitted", False):
        click.echo("base: the model file has a fitted base; kept", err=True)
    elif isinstance(dataset, SequenceDataset):
        model.set_base_rate(dataset.train, sample_weights=dataset.train_weights)
    else:
        model.set_base_rate(dataset.train)
        click.echo(
            f"base: base-rate base fitted to {printable(dataset.name)} ({dataset.train.shape[0]} examples)",
            err=True,
        )
    # RAISE wants examples the model was not trained on: test, else validation, else training.
    candidates = (("test", dataset.test), ("validation", dataset.valid), ("training", dataset.train))
    split_name, split = next(
        (name, split) for name, split in candidates if split is not None and split.shape[0] > 0
    )
    generator = torch.Generator().manual_seed(int(seed))
    chosen = torch.randperm(split.shape[0], generator=generator)[:n_examples]
    description = f"{chosen.numel()} of {split.shape[0]} {split_name} examples"
    return PreparedData(dataset, split[chosen], description)


def bias_words(estimate: LogZEstimate) -> str:
    """The direction of an estimate's bias, in words."""
    if estimate.method == "exact":
        return "exact"
    return {"lower": "lower bound", "upper": "upper bound"}.get(estimate.bound or "", "either sign")


def describe_estimate(estimate: LogZEstimate) -> str:
    """Operator, chains, temperatures and sweeps of an estimate, e.g. ``gibbs sweeps, 100 chains, 1000 temperatures``."""
    info = estimate.info
    samples = getattr(info, "samples", None)
    detail = []
    operator = getattr(info, "operator", None) or getattr(samples, "operator", None)
    if operator:
        detail.append(f"{operator} sweeps")
    if samples is not None:
        budget = getattr(info, "budget", None)
        rounds = getattr(budget, "rounds", ())
        if getattr(budget, "ladder", None) == "trajectory":
            levels = f"{samples.n_levels} levels along the training trajectory ({info.path})"
        else:
            levels = f"{samples.n_levels} temperatures"
        detail += [f"{samples.n_chains} chains", levels]
        if len(rounds) > 1:  # the tempered budget grew (estimators/tempered/budget.py)
            lengths = " + ".join(str(round_.long_run_sweeps) for round_ in rounds)
            detail.append(
                f"{rounds[0].initial_sweeps} initial sweeps, then {len(rounds)} rounds of {lengths} "
                f"long-run sweeps ({budget.sweeps_per_chain} per chain; {budget.stop_reason})"
            )
        else:
            detail += [
                f"{samples.n_initial_iterations} initial iterations",
                f"{samples.n_sweeps} long-run sweeps",
            ]
    else:
        if getattr(info, "n_chains", None):
            per = " per example" if estimate.method == "raise" else ""
            budget = getattr(info, "budget", None)
            rounds = getattr(budget, "rounds", ())
            if len(rounds) > 1:  # AIS's chain budget grew (estimators/annealing/chain_budget.py)
                per = f" in {len(rounds)} rounds ({' + '.join(map(str, rounds))}; {budget.stopped})"
            detail.append(f"{info.n_chains} chains{per}")
        schedule = getattr(info, "schedule", None)
        schedule_info = getattr(info, "schedule_info", None)
        betas = schedule if schedule is not None else getattr(schedule_info, "betas", None)
        if betas is not None:
            name = getattr(schedule_info, "name", None)
            detail.append(f"{len(betas) - 1} temperatures" + (f" ({name} schedule)" if name else ""))
        log_likelihoods = getattr(info, "log_likelihoods", None)
        if log_likelihoods is not None:
            detail.append(f"{log_likelihoods.numel()} held-out examples")
        path = getattr(info, "path", None)
        if isinstance(path, str):
            detail.append(f"path: {path}, {info.n_distributions - 1} steps")
    return ", ".join(detail)


def _verdict_lines(estimate: LogZEstimate) -> list[str]:
    """``verdict: reliable``, ``unchecked`` or ``UNRELIABLE``, each reason and note, and the witness."""
    if estimate.method == "exact":
        return []
    first = {
        "reliable": "verdict: reliable",
        "unchecked": "verdict: unchecked (every check that ran passed, but missing mass was not looked "
        "for from data: not reliable)",
        "unreliable": "verdict: UNRELIABLE (do not report this number)",
    }[estimate.status]
    lines = [first]
    lines += [f"  - {warning}" for warning in estimate.warnings]
    bound = estimate.lower_bound
    if bound is not None:
        lines.append(
            f"certified lower bound: log Z >= {bound.log_z:.6f} ({bound.n_states:,} {bound.layer} states "
            f"from chains started at the {bound.started_from}; estimated missing mass {bound.missing_mass:.2%})"
        )
    return lines


def trajectory_for(model_path: Path, given: Path | None) -> Path:
    """The training trajectory of the model in ``model_path``: ``given`` (a file or run
    directory), else the one beside the model file (or in its ``checkpoints/``).

    Raises
    ------
    ValidationError
        When there is none, saying how to get one.
    """
    if given is not None:
        return given
    found = find_trajectory_file(model_path.parent)
    if found is None:
        raise ValidationError(
            f"{', '.join(r.name for r in records() if r.needs_trajectory)} need the training trajectory: no {TRAJECTORY_FILE} beside {model_path} "
            "(boltzlab train records one by default); pass --trajectory PATH"
        )
    return found


def run_quietly(
    model: nn.Module,
    method: str,
    *,
    seed: int,
    options: dict[str, Any],
    progress: ProgressHook | None = None,
) -> LogZEstimate:
    """``estimate_log_z`` with the library's uniform-base warning replaced by the command line's;
    ``progress`` receives the estimate's progress events (:mod:`boltzlab.cli.progress_display`)."""
    with warnings.catch_warnings():
        if not getattr(model, "base_fitted", True):
            # Said once by the command in its own terms (--data), not by the library (set_base_rate).
            warnings.filterwarnings("ignore", message=_AIS_UNIFORM_BASE_WARNING)
        return estimators.estimate_log_z(model, method=method, generator=seed, progress=progress, **options)


def _check_logz_size(model: Any, flags: dict[str, Any]) -> None:
    """Refuse chains or temperatures that cannot fit before any is allocated (cli/memory.py).

    A ladder or schedule of K temperatures holds a few float64 values per temperature (βs,
    weights, the running ESS); tempered methods keep a level for each chain's draws too.
    """
    units = sum(model.layer_sizes)
    chains = flags["chains"] or 1_600  # AIS's chain budget may grow to 1,600
    temperatures = flags["temperatures"] or 0
    check_memory(
        {
            f"the chains ({chains:,} × {units:,} units, with their probabilities)": 3 * chains * units * 8,
            f"the schedule's {temperatures:,} temperatures": 4 * temperatures * 8,
        },
        command="boltzlab logz",
        fix="use fewer --chains or --temperatures",
    )


def run(model_path: Path, method: str, seed: int, as_json: bool, **flags: Any) -> None:
    """``boltzlab logz`` with its options (declared in :mod:`boltzlab.cli.commands.logz`): estimate
    log Z of a saved model and print value ± standard error, bias direction, cost, ESS, verdict."""
    # Long because it is the command's steps in the order of its output (options, data, trajectory,
    # estimate, print); each is a call.
    model = load_model_file(model_path)
    choose_threads(model)
    _check_logz_size(model, flags)
    record = get_record(method)
    method = record.name
    if distributed.topology().active and record.family != "exact" and not record.shards:
        # Every process would run the whole estimate and only rank 0's would be printed.
        sharded = ", ".join(r.name for r in records() if r.shards)
        raise ValidationError(
            f"{method} does not split its chains over processes: run it without torchrun, or use one of "
            f"{sharded} under torchrun"
        )
    sampling = {flag: flags[flag.replace("-", "_")] for flag in FLAGS}
    options = estimator_options(method, sampling)
    if record.data_option == "data" and flags["data"] is None:
        raise ValidationError(
            f"{method} anneals back from held-out examples: pass --data NAME|PATH (its test split is used)"
        )
    prepared = None
    if flags["data"] is None:
        refuse_data_file_options_without_data(flags)
    else:
        prepared = prepare_data(
            model,
            flags["data"],
            root=flags["data_root"],
            seed=seed,
            n_examples=flags["examples"] or DEFAULT_RAISE_EXAMPLES,
            load_options=flags,
        )
    if record.data_option == "data" and prepared is not None:
        options["data"] = prepared.held_out
    if record.needs_trajectory:
        options["trajectory"] = trajectory_for(model_path, flags["trajectory"])
    elif record.trajectory_route is not None and isinstance(model, RBM):
        # rts and mbar take the run's trajectory as a second route (estimators/routes.py).
        if flags["trajectory"] is not None or find_trajectory_file(model_path.parent) is not None:
            options["trajectory"] = trajectory_for(model_path, flags["trajectory"])
    elif flags["trajectory"] is not None:
        raise ValidationError(f"--trajectory applies to {', '.join(_trajectory_methods())}, not {method!r}")
    if prepared is not None and method != "exact":
        # The verdict's lower-bound witness starts from data: it finds modes annealing misses.
        options["check_data"] = prepared.dataset.train

    if not as_json:
        click.echo(f"model: {printable(model_path)} ({describe_model(model)})")
    if method != "exact" and not getattr(model, "base_fitted", True):
        click.echo(
            "warning: the model's base was never fitted to data, so the estimator starts from a uniform base "
            "and may miss log Z by nats; pass --data with the training data",
            err=True,
        )
    started = time.perf_counter()
    with method_progress(method, 1, 1, show=show_progress(quiet=as_json)) as hook:
        estimate = run_quietly(model, method, seed=seed, options=options, progress=hook)
    elapsed = time.perf_counter() - started
    if as_json:
        echo_json({"model": str(model_path), **estimate_record(estimate, seconds=elapsed)})
        return

    if estimate.method == "exact":
        click.echo(f"log Z = {estimate.log_z:.6f} (exact)")
    else:
        bias = {"lower": ", a stochastic lower bound", "upper": ", a stochastic upper bound"}.get(
            estimate.bound or "", ", bias of either sign"
        )
        click.echo(f"log Z = {estimate.log_z:.6f} ± {estimate.stderr:.6f} (1 standard error{bias})")
    detail = describe_estimate(estimate)
    click.echo(f"method: {estimate.method}" + (f" ({detail})" if detail else ""))
    if estimate.method == "exact":
        click.echo(f"cost: 2^{min(model.layer_sizes)} states enumerated in {format_seconds(elapsed)}")
    else:
        click.echo(f"cost: {estimate.cost_sweeps:,} chain-sweeps in {format_seconds(elapsed)}")
    info = estimate.info
    ess = getattr(info, "ess", None)
    if isinstance(ess, float):
        total = getattr(info, "n_chains", None)
        click.echo(f"ESS: {ess:.1f}" + (f" of {total} chains" if total else ""))
    for line in _verdict_lines(estimate):
        click.echo(line)
    if estimate.method == "raise" and prepared is not None:
        click.echo(
            f"RAISE: {prepared.held_out_description}; their mean log p̂(v) = {info.mean_log_likelihood:.4f} nats "
            "(a conservative estimate of their log-likelihood)"
        )
