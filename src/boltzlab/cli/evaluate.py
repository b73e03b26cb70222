"""``boltzlab evaluate MODEL --data ...``: several log Z estimators side by side, and what they imply.

Runs each chosen method of :func:`boltzlab.estimate_log_z` on one saved model and prints one
table row per method: log Z, its standard error, the direction of its bias (AIS is a
stochastic lower bound, Neal 2001; RAISE-derived log Z an upper bound in expectation,
Burda, Grosse & Salakhutdinov 2015; RTS and the other tempered estimators, Carlson et al.
2016, have no fixed sign), the cost in chain-sweeps, the mean train and test log-likelihood
``mean log f(v) − log Ẑ`` that this log Z implies, and the wall-clock time. When both AIS and
RAISE ran, a last line states their sandwich ``log Ẑ_AIS ≲ log Z ≲ log Ẑ_RAISE``
(docs/algorithms.md §7). When the run directory holds the training trajectory
(``trajectory.safetensors`` beside the model file, which ``boltzlab train`` writes), the
default methods include ``trajectory-ais`` next to ``ais`` (docs/algorithms.md §4.6), and
``rts`` and ``mbar`` run along the trajectory too where their temperature route is flagged,
reporting the route whose verdict passes (:mod:`boltzlab.estimators.routes`; right where the
temperature path crosses a first-order-like transition). ``trajectory-rts`` and
``trajectory-mbar`` run that route alone when asked for.

The pieces are functions of a model and a list of methods (:func:`_evaluate_methods`,
:func:`row_from_estimate`, :func:`_format_rows`, :func:`sandwich_line`). A DBM's ``log p(v)``
needs a sum over every hidden layer, so for a DBM the log-likelihood columns are left empty
and a second table (:mod:`boltzlab.cli.dbm_report`) gives what the CAST paper reports: the
mean-field lower bound per split with the most precise ``log Z`` of the table, and
per-example AIS ``log p(v)`` on a few cases to show how tight that bound is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from torch import Tensor, nn

from boltzlab import distributed, estimators, operators, progress
from boltzlab.cli.choices import DEFAULT_RAISE_EXAMPLES, MAX_ANCHORED_UNITS
from boltzlab.cli.common import (
    MAX_EXACT_UNITS,
    choose_threads,
    describe_model,
    format_seconds,
    format_table,
    load_model_file,
    operator_params,
    printable,
    verdict_word,
)
from boltzlab.cli.comparison import disagreement_lines, sandwich_line
from boltzlab.cli.cost_cap import NO_CAP, CostCap, default_cap
from boltzlab.cli.dbm_report import dbm_bound_rows, dbm_likelihood_rows, format_dbm_rows
from boltzlab.cli.generative_output import (
    CHECK_FIGURE,
    check_lines,
    check_record,
    run_check,
    write_check_figure,
)
from boltzlab.cli.json_output import echo_json, estimate_diagnostics
from boltzlab.cli.logz import (
    PreparedData,
    bias_words,
    describe_estimate,
    prepare_data,
    run_quietly,
    trajectory_for,
)
from boltzlab.cli.progress_display import method_progress, show_progress
from boltzlab.cli.run_files import evaluation_payload, write_evaluation
from boltzlab.cli.sequence_data import weighted_mean_log_f
from boltzlab.data.sequence_dataset import SequenceDataset
from boltzlab.errors import ValidationError
from boltzlab.estimators.budget import matched_options
from boltzlab.estimators.likelihood import log_unnormalized
from boltzlab.estimators.record import get_record
from boltzlab.estimators.record import records as estimators_records
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.routes import route_note
from boltzlab.models.dbm import DBM
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import find_trajectory_file

__all__ = ["EvaluationRow", "row_from_estimate", "run", "verdict_column"]


@dataclass(frozen=True)
class EvaluationRow:
    """One line of the ``evaluate`` table.

    Attributes
    ----------
    method : str
    log_z : float
        Estimate of ``log Z`` (nats).
    stderr : float
        Its standard error (0 for exact).
    bias : str
        ``"exact"``, ``"lower bound"``, ``"upper bound"`` or ``"either sign"``.
    cost_sweeps : int
        Single-chain sweeps spent (0 for exact).
    train_log_likelihood, test_log_likelihood : float
        Mean ``log p(v)`` per example implied by ``log_z`` (NaN when the split is absent), nats.
    seconds : float
        Wall-clock time of the estimate.
    reliable : bool
        Whether the estimate can be trusted (docs/trust.md): ``False`` for ``"unchecked"`` too.
    verdict : {"reliable", "unchecked", "unreliable"}
        The estimate's verdict (:attr:`~boltzlab.estimators.result.LogZEstimate.status`); a row
        built with ``reliable=False`` alone is ``"unreliable"``, never shown as reliable.
    warnings : tuple of str
        Its reasons and notes.
    diagnostics : dict
        The estimator's diagnostics, as ``--json`` prints them.
    budget_grew : str or None
        How a budget grew (``logz``'s description of the run), or ``None`` when it ran one
        round (estimators/tempered/budget.py, estimators/annealing/chain_budget.py): ``null``
        in the JSON, not an empty string.
    route_note : str or None
        Where ``rts`` or ``mbar`` answered along the trajectory for a flagged temperature
        route, the note that says so (estimators/routes.py), else ``None``.
    """

    method: str
    log_z: float
    stderr: float
    bias: str
    cost_sweeps: int
    train_log_likelihood: float
    test_log_likelihood: float
    seconds: float
    reliable: bool = True
    verdict: str = ""
    warnings: tuple[str, ...] = ()
    diagnostics: dict[str, Any] = field(default_factory=dict)
    budget_grew: str | None = None
    route_note: str | None = None

    def __post_init__(self) -> None:
        # One verdict, whichever of the two fields a caller gave: "reliable" needs both.
        if self.verdict not in ("unchecked", "unreliable"):
            object.__setattr__(self, "verdict", "reliable" if self.reliable else "unreliable")
        elif self.reliable:
            object.__setattr__(self, "reliable", False)


def _default_methods(model: nn.Module, *, has_trajectory: bool = False) -> tuple[str, ...]:
    """``exact`` (when it can be enumerated), ``ais``, ``anchored-ais`` (a binary RBM whose
    smaller layer has at most ``MAX_ANCHORED_UNITS`` units),
    ``trajectory-ais`` (an RBM whose training trajectory is at hand), ``raise`` and ``rts``; a
    DBM gets no RAISE (it needs the visible layer to be the only one left after summing out)."""
    if isinstance(model, DBM):
        sizes = model.layer_sizes
        smaller_parity = min(sum(sizes[0::2]), sum(sizes[1::2]))
        exact = ("exact",) if smaller_parity <= MAX_EXACT_UNITS else ()
        return (*exact, "ais", "rts")
    exact = ("exact",) if min(model.layer_sizes) <= MAX_EXACT_UNITS else ()
    trajectory = ("trajectory-ais",) if has_trajectory and isinstance(model, RBM) else ()
    # Anchored AIS is the default route that stays right on sharply trained RBMs, where plain
    # AIS lands 0.5–2 nats low (docs/algorithms.md §4.7; measured in docs/trust.md). Its anchor
    # is a set of states of the smaller layer; with hundreds of units there the set holds a
    # negligible share of Z and anchored AIS is a second run of plain AIS, not another method
    # (at 784×500 it gave 598.91 ± 0.24 where AIS with the same 100 chains gave 598.80 ± 0.32;
    # not measured between 24 and 500 units, hence the generous limit).
    anchors = isinstance(model, RBM) and min(model.layer_sizes) <= MAX_ANCHORED_UNITS
    anchored = ("anchored-ais",) if anchors else ()
    return (*exact, "ais", *anchored, *trajectory, "raise", "rts")


def _parse_methods(text: str | None, model: nn.Module, *, has_trajectory: bool = False) -> tuple[str, ...]:
    """``"exact,ais,rts"`` → ``("exact", "ais", "rts")``, checked against :func:`boltzlab.estimators.methods`;
    ``None`` gives :func:`_default_methods`."""
    if text is None:
        return _default_methods(model, has_trajectory=has_trajectory)
    names = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    if not names:
        raise ValidationError(f"--methods must name at least one method, got {text!r}")
    known = estimators.methods()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValidationError(
            f"--methods: unknown method(s) {', '.join(unknown)}; choose from {', '.join(known)}"
        )
    return names


def mean_log_f(model: nn.Module, examples: Tensor | None) -> float:
    """Mean unnormalised ``log f(v)`` (hidden units summed out) over ``examples``; NaN for none
    and for a DBM, whose ``f(v)`` is itself intractable (its bound is reported instead)."""
    if examples is None or examples.shape[0] == 0 or isinstance(model, DBM):
        return math.nan
    return float(log_unnormalized(model, examples).mean())


def _test_split(dataset: Any) -> str | None:
    """The split the test column scores: ``"test"``, else ``"valid"``, else ``None``."""
    return "test" if dataset.test is not None else "valid" if dataset.valid is not None else None


def _mean_log_f_of_splits(model: nn.Module, dataset: Any) -> tuple[float, float]:
    """Mean ``log f(v)`` of the training and test splits; for aligned sequences each sequence
    counts with its weight (:func:`boltzlab.cli.sequence_data.weighted_mean_log_f`)."""
    test = _test_split(dataset)
    if isinstance(dataset, SequenceDataset):
        return (
            weighted_mean_log_f(model, dataset.train, dataset.train_weights),
            math.nan
            if test is None
            else weighted_mean_log_f(model, getattr(dataset, test), dataset.weights(test)),
        )
    return mean_log_f(model, dataset.train), mean_log_f(
        model, None if test is None else getattr(dataset, test)
    )


def _likelihood_note(dataset: Any) -> str | None:
    """For aligned sequences: what the log-likelihood columns average over."""
    if not isinstance(dataset, SequenceDataset):
        return None
    test = _test_split(dataset)
    held = (
        ""
        if test is None
        else f", test {getattr(dataset, test).shape[0]:,} (N_eff {dataset.effective_number(test):,.1f})"
    )
    if not dataset.weighted:
        return "log-likelihoods: mean log p(v) per sequence, nats (unweighted)"
    return (
        "log-likelihoods: mean log p(v) per sequence, nats, each sequence weighted by 1/(neighbours within "
        f"identity {dataset.identity:g}): training {dataset.train.shape[0]:,} sequences (N_eff "
        f"{dataset.effective_number('train'):,.1f}){held}"
    )


def row_from_estimate(
    estimate: LogZEstimate, *, train_log_f: float, test_log_f: float, seconds: float
) -> EvaluationRow:
    """A table row from an estimate and the mean ``log f`` of the train and test splits."""
    budget = getattr(estimate.info, "budget", None)
    return EvaluationRow(
        method=estimate.method,
        log_z=float(estimate.log_z),
        stderr=float(estimate.stderr),
        bias=bias_words(estimate),
        cost_sweeps=int(estimate.cost_sweeps),
        train_log_likelihood=train_log_f - float(estimate.log_z),
        test_log_likelihood=test_log_f - float(estimate.log_z),
        seconds=seconds,
        reliable=bool(estimate.reliable),
        verdict=estimate.status,
        warnings=tuple(estimate.warnings),
        diagnostics=estimate_diagnostics(estimate.info),
        budget_grew=describe_estimate(estimate) if len(getattr(budget, "rounds", ())) > 1 else None,
        route_note=route_note(estimate) if not estimate.failed else None,
    )


def _options(
    method: str,
    *,
    budget: int | None,
    chains: int | None,
    operator: Any,
    held_out: Tensor,
    trajectory: Path | None = None,
) -> dict[str, Any]:
    """Estimator options of one method: the matched budget, the chains, the operator (the
    trajectory's tempered methods sweep with Gibbs), RAISE's data, the trajectory."""
    record = get_record(method)
    if record.family == "exact":
        return {}
    options = matched_options(method, budget) if budget is not None else {}
    if record.needs_trajectory:
        options["trajectory"] = trajectory
    if chains is not None:
        options["n_chains"] = chains
    if operator is not None and "operator" in record.flags:
        options["operator"] = operator
    if record.trajectory_route is not None and trajectory is not None:
        # Where the temperature route is flagged, the same method along the trajectory too.
        options["trajectory"] = trajectory
    if record.data_option == "data":
        options["data"] = held_out
    return options


def verdict_column(row: EvaluationRow) -> str:
    """``exact``, ``reliable``, ``unchecked`` or ``UNRELIABLE`` for the table."""
    if row.method == "exact":
        return "exact"
    return verdict_word(row.verdict)


def _evaluate_methods(
    model: nn.Module,
    methods: Sequence[str],
    prepared: PreparedData,
    *,
    seed: int = 0,
    budget: int | None = None,
    chains: int | None = None,
    operator: Any = None,
    trajectory: Path | None = None,
    cap: CostCap = NO_CAP,
    examples_given: bool = False,
    show: bool = False,
) -> tuple[list[EvaluationRow], list[str]]:
    """Run every method on ``model``: one :class:`EvaluationRow` each, and what the cap cut.

    Parameters
    ----------
    model : TemperedModel
    methods : sequence of str
        Names accepted by :func:`boltzlab.estimate_log_z`.
    prepared : PreparedData
        The dataset (its train and test splits give the log-likelihood columns) and RAISE's
        held-out examples.
    seed : int, default 0
        Seed of every estimator (each gets the same seed).
    budget : int, optional
        Gibbs sweeps per chain for every sampling method
        (:func:`boltzlab.estimators.budget.matched_options`: AIS/RAISE get that many
        temperatures); default: each estimator's own defaults.
    chains : int, optional
        Chains of AIS and the tempered methods, reverse chains per example of RAISE.
    operator : Operator, optional
    trajectory : Path, optional
        The training trajectory the trajectory methods follow (a file or run directory).
    cap : CostCap
        Chain-sweeps any one method may spend (:mod:`boltzlab.cli.cost_cap`).
    examples_given : bool
        Whether the user chose RAISE's examples (the cap then keeps them all).
    show : bool
        Show each method's progress on stderr while it runs (:mod:`boltzlab.cli.progress_display`).
    """
    dataset = prepared.dataset
    train_log_f, test_log_f = _mean_log_f_of_splits(model, dataset)
    rows, cuts = [], []
    for position, method in enumerate(methods, start=1):
        options = _options(
            method,
            budget=budget,
            chains=chains,
            operator=operator,
            held_out=prepared.held_out,
            trajectory=trajectory,
        )
        options, cut = cap.apply(method, options, examples_given=examples_given)
        if cut:
            cuts.append(cut)
        if method != "exact":
            options["check_data"] = dataset.train
        started = time.perf_counter()
        with method_progress(method, position, len(methods), show=show) as hook:
            estimate = run_quietly(model, method, seed=seed, options=options, progress=hook)
        rows.append(
            row_from_estimate(
                estimate,
                train_log_f=train_log_f,
                test_log_f=test_log_f,
                seconds=time.perf_counter() - started,
            )
        )
    return rows, cuts


def _most_precise(rows: Sequence[EvaluationRow]) -> EvaluationRow:
    """The row to take ``log Z`` from for the DBM bound: exact if present, else the smallest
    standard error."""
    exact = [row for row in rows if row.method == "exact"]
    return exact[0] if exact else min(rows, key=lambda row: row.stderr)


def _dbm_tables(
    model: DBM,
    rows: Sequence[EvaluationRow],
    prepared: PreparedData,
    *,
    likelihood_examples: int,
    seed: int,
) -> str:
    """The DBM's bound table (every split) and, unless ``likelihood_examples`` is 0, the
    per-example AIS table on the first ``likelihood_examples`` test examples."""
    chosen = _most_precise(rows)
    text = format_dbm_rows(dbm_bound_rows(model, prepared.dataset, chosen))
    if likelihood_examples > 0:
        dataset = prepared.dataset
        test = dataset.test if dataset.test is not None else dataset.valid
        if test is None:
            test = dataset.train
        likelihood = dbm_likelihood_rows(
            model, {"test": test}, chosen, n_examples=likelihood_examples, generator=seed
        )
        text += "\n" + format_dbm_rows(likelihood)
    return text


def _number(value: float, digits: int = 4) -> str:
    return "—" if not math.isfinite(value) else f"{value:.{digits}f}"


def _format_rows(rows: Sequence[EvaluationRow]) -> str:
    """The table as aligned text: method, log Z, ± s.e., bias, cost, train/test log-likelihood, time."""
    header = ["method", "log Z", "± s.e.", "bias", "chain-sweeps", "train LL", "test LL", "time", "verdict"]
    cells = [
        [
            row.method,
            _number(row.log_z),
            "0" if row.stderr == 0 else _number(row.stderr),
            row.bias,
            f"{row.cost_sweeps:,}",
            _number(row.train_log_likelihood),
            _number(row.test_log_likelihood),
            format_seconds(row.seconds),
            verdict_column(row),
        ]
        for row in rows
    ]
    return format_table(header, cells)


def run(
    model_path: Path,
    data_name: str,
    methods: str | None,
    budget: int | None,
    chains: int | None,
    examples: int | None,
    max_cost: int | None,
    likelihood_examples: int,
    operator: str | None,
    alpha: float | None,
    seed: int,
    trajectory: Path | None,
    data_root: Path | None,
    as_json: bool,
    out: Path | None,
    check_sweeps: int,
    check_chains: int,
    **data_file: Any,
) -> None:
    """``boltzlab evaluate`` with its options (declared in :mod:`boltzlab.cli.commands.evaluate`):
    estimate log Z of a saved model with several methods and print the comparison table."""
    model = load_model_file(model_path)
    choose_threads(model)
    found = trajectory if trajectory is not None else find_trajectory_file(model_path.parent)
    chosen = _parse_methods(methods, model, has_trajectory=found is not None)
    records = [get_record(method) for method in chosen]
    if any(record.needs_trajectory for record in records) or (
        found is not None
        and isinstance(model, RBM)
        and any(record.trajectory_route is not None for record in records)
    ):
        trajectory = trajectory_for(model_path, trajectory)
    _refuse_unused(records, examples=examples, operator=operator, alpha=alpha)
    op = None
    if operator is not None or alpha is not None:
        name = operator or "gibbs"
        op = operators.get(name, **operator_params(name, alpha))
    prepared = prepare_data(
        model,
        data_name,
        root=data_root,
        seed=seed,
        n_examples=examples or DEFAULT_RAISE_EXAMPLES,
        load_options=data_file,
    )
    cap = CostCap(default_cap(model) if max_cost is None else (max_cost or None))
    echo = (lambda _text: None) if as_json else click.echo
    echo(f"model: {printable(model_path)} ({describe_model(model)})")
    raise_note = f"; RAISE uses {prepared.held_out_description}" if "raise" in chosen else ""
    echo(f"data: {printable(prepared.dataset.name)}{raise_note}")
    if trajectory is not None:
        echo(f"trajectory: {trajectory}")
    held = [method for method in chosen if cap.holds(method)]
    if held:
        echo(
            f"cost cap: at most {cap.chain_sweeps:,} chain-sweeps for each of {', '.join(held)} (--max-cost)"
        )
    rows, cuts = _evaluate_methods(
        model,
        chosen,
        prepared,
        seed=seed,
        budget=budget,
        chains=chains,
        operator=op,
        trajectory=trajectory,
        cap=cap,
        examples_given=examples is not None,
        show=show_progress(quiet=as_json),
    )
    dataset = prepared.dataset
    check = None
    if isinstance(dataset, SequenceDataset) and check_sweeps > 0:
        with (
            method_progress("generative check", 1, 1, show=show_progress(quiet=as_json)) as hook,
            progress.reporting(hook),
        ):
            check = run_check(model, dataset, sweeps=check_sweeps, chains=check_chains, seed=seed)
    figure = None
    if check is not None and out is not None and distributed.topology().is_main:
        figure = write_check_figure(
            check, out / CHECK_FIGURE, title=f"{describe_model(model)} on {dataset.name}"
        )
    payload = evaluation_payload(
        rows,
        model=str(model_path),
        data=dataset.name,
        disagreements=disagreement_lines(rows),
        sandwich=sandwich_line(rows),
        cost_cap=cap.chain_sweeps,
        cuts=cuts,
        likelihood_note=_likelihood_note(dataset),
        generative=None if check is None else check_record(check, dataset, figure),
    )
    if as_json:
        _save(out, payload, seed=seed, err=True, figure=figure)  # stderr: stdout is the one JSON object
        echo_json(payload)
        return
    click.echo(_format_rows(rows))
    note = _likelihood_note(dataset)
    if note is not None:
        click.echo(note)
    for cut in cuts:
        click.echo(f"capped by --max-cost: {cut}")
    for row in rows:
        if row.budget_grew:
            click.echo(f"{row.method}'s budget grew: {row.budget_grew}")
        if row.route_note:
            click.echo(f"{row.method}: {row.route_note}")
    for row in rows:
        if row.method != "exact" and not row.reliable:
            click.echo(f"{row.method} is {verdict_word(row.verdict)}:")
            for warning in row.warnings:
                click.echo(f"  - {warning}")
    for line in disagreement_lines(rows):
        click.echo(line)
    sandwich = sandwich_line(rows)
    if sandwich is not None:
        click.echo(sandwich)
    if isinstance(model, DBM):
        # Per-example AIS on the test examples is one more long estimate: its own progress line.
        with (
            method_progress("DBM log p(v), per-example AIS", 1, 1, show=show_progress()) as hook,
            progress.reporting(hook),
        ):
            tables = _dbm_tables(model, rows, prepared, likelihood_examples=likelihood_examples, seed=seed)
        click.echo(tables)
    if check is not None:
        for line in check_lines(check, dataset):
            click.echo(line)
    _save(out, payload, seed=seed, err=False, figure=figure)


def _refuse_unused(
    records: Sequence[Any], *, examples: int | None, operator: str | None, alpha: float | None
) -> None:
    """Refuse ``--examples``, ``--operator`` and ``--alpha`` when no chosen method uses them, as
    ``logz`` refuses a flag its method does not take, rather than ignore them."""
    given = [flag for flag, value in (("--operator", operator), ("--alpha", alpha)) if value is not None]
    if given and not any("operator" in record.flags for record in records):
        users = [record.name for record in estimators_records() if "operator" in record.flags]
        raise ValidationError(
            f"{', '.join(given)} applies to the methods {', '.join(users)}, and --methods "
            f"{','.join(record.name for record in records)} has none of them"
        )
    if examples is not None and not any(record.data_option == "data" for record in records):
        users = [record.name for record in estimators_records() if record.data_option == "data"]
        raise ValidationError(
            f"--examples applies to {', '.join(users)}, and --methods "
            f"{','.join(record.name for record in records)} does not include it"
        )


def _save(
    out: Path | None, payload: dict[str, Any], *, seed: int, err: bool, figure: Path | None = None
) -> None:
    """``--out``: ``evaluation.json`` and a fresh ``report.html`` in ``out`` (and the generative
    check's figure, already drawn), saying where (rank 0 only)."""
    if out is None or not distributed.topology().is_main:
        return
    from boltzlab.cli.run_report import write_report

    written = [write_evaluation(out, payload), write_report(out, seed=seed)]
    for path in ([figure] if figure is not None else []) + written:
        click.echo(f"wrote {path}", err=err)
