"""``train``: the public door of the trainer — validate, assemble, run.

Trains by stochastic gradient ascent on the average log-likelihood, data term − model term
(docs/algorithms.md §3.1), with CD-k (Hinton 2002, *Training products of experts by minimizing
contrastive divergence*) or PCD-k / SAP (Tieleman 2008, *Training restricted Boltzmann
machines using approximations to the likelihood gradient*; Younes 1988) and any transition
operator (Brügge, Fischer & Igel 2013), stepped by ``torch.optim``.

Beyond the gradient itself (docs/training.md): centred gradients (``centering``), L2, L1 and
L1² penalties on the weights, maximum pseudo-likelihood (``algorithm="pl"``) and per-example
``sample_weights``.

All randomness comes from one ``torch.Generator``: the same seed gives the same run, and a
run resumed from a checkpoint ends bit-identical to the run that was not interrupted.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab import distributed
from boltzlab import operators as operator_registry
from boltzlab.errors import ValidationError
from boltzlab.io import load_checkpoint
from boltzlab.io.run_lock import claim_run_folder
from boltzlab.models.witness import DEFAULT_WITNESS_ROWS, check_witness_rows
from boltzlab.rng import resolve_generator
from boltzlab.training.callbacks import (
    Callback,
    Checkpointer,
    CSVLogger,
    ExactLikelihoodTracker,
    ProgressBar,
)
from boltzlab.training.centering import Centering
from boltzlab.training.data_parallel import DataParallel, plan_data_parallel
from boltzlab.training.loop import TrainingLoop
from boltzlab.training.negative import NegativePhase, get_phase
from boltzlab.training.objective import Objective, objective_for
from boltzlab.training.optim import (
    Schedule,
    check_optimizer,
    check_optimizer_state,
    make_schedule,
    schedule_record,
)
from boltzlab.training.penalties import check_penalty
from boltzlab.training.settings import operator_record
from boltzlab.training.snapshots import DEFAULT_MAX_SNAPSHOTS, SnapshotRecorder
from boltzlab.training.state import TrainConfig, TrainResult, find_latest_checkpoint
from boltzlab.validation import as_model_data, check_positive_int, check_sample_weights

__all__ = ["DEFAULT_CAST_CHAINS", "DEFAULT_CHAINS", "train"]

DEFAULT_CHAINS = 100
# Salakhutdinov (2010): 50 slow + 50 fast chains, so CAST costs about what 100 SAP chains do.
DEFAULT_CAST_CHAINS = 50
_DEFAULT_LEARNING_RATE = 0.01


def _check_number(value: Any, name: str, *, low: float, high: float = math.inf, low_open: bool) -> float:
    """A finite float in (low, high) or [low, high); the message names the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number, got {value!r}")
    value = float(value)
    if (value <= low if low_open else value < low) or value >= high:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g})"
        raise ValidationError(f"{name} must be in {interval}, got {value!r}")
    return value


def _optional_positive_int(value: Any, name: str) -> int | None:
    return None if value is None else check_positive_int(value, name)


def train(
    model: nn.Module,
    data: Any,
    *,
    algorithm: str | NegativePhase = "cd",
    algorithm_params: dict[str, Any] | None = None,
    operator: str | operator_registry.Operator = "gibbs",
    operator_params: dict[str, Any] | None = None,
    k: int = 1,
    n_chains: int | None = None,
    batch_size: int = 100,
    n_updates: int | None = None,
    n_epochs: int | None = None,
    learning_rate: float | None = None,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    l1: float = 0.0,
    l1_squared: float = 0.0,
    centering: bool = False,
    sample_weights: Any = None,
    lr_schedule: str | Schedule | None = None,
    optimizer: str = "sgd",
    generator: torch.Generator | int | None = None,
    validation_data: Any = None,
    callbacks: Iterable[Callback] = (),
    log_every: int = 100,
    track_exact_every: int | None = None,
    metrics_path: str | Path | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    progress: bool = False,
    fit_base_rate: bool = True,
    witness_rows: int = DEFAULT_WITNESS_ROWS,
    snapshots: int | None = DEFAULT_MAX_SNAPSHOTS,
    snapshot_dir: str | Path | None = None,
    chain_blocks: int | None = None,
    run_id: str | None = None,
) -> TrainResult:
    """Train ``model`` on binary ``data`` by CD-k or PCD-k with any transition operator.

    Parameters
    ----------
    model : RBM (or any model with a training objective)
        Trained in place, in its own dtype and on its own device.
    data : Tensor or array, shape (n_examples, n_visible), values 0/1
        Not modified. Real values for a model with real-valued visible units (one with a
        ``validate_data`` method, e.g. :class:`~boltzlab.models.gaussian_rbm.GaussianRBM`);
        sequences (an Alignment, or indices ``(n, L)``) for a Potts RBM.
    algorithm : {"cd", "pcd", "fpcd", "pt", "ast", "cast", "trans-sap", "rts", "pl"} or NegativePhase, default "cd"
        ``"pl"`` maximises the pseudo-likelihood instead (binary and Potts RBMs; exact
        gradient, no chains; :mod:`boltzlab.training.pseudo_likelihood`).
        Otherwise, where the model-term samples come from: CD restarts at the minibatch; PCD/SAP keeps
        ``n_chains`` persistent chains; FPCD samples with slow + fast weights; PT, CAST and
        Trans-SAP move persistent chains with a tempering scheme; AST alternates SAP updates
        with adaptive simulated tempering runs (see :mod:`boltzlab.training.tempered` and :mod:`boltzlab.training.adaptive_tempering`); RTS
        keeps simulated-tempering chains that also track ``log Z`` (see
        :mod:`boltzlab.training.tracking`). A :class:`~boltzlab.training.NegativePhase` object
        plugs in any other sampler.
    algorithm_params : dict, optional
        Extra settings of the negative phase, e.g. ``{"init": "base"}`` for PCD,
        ``{"n_levels": 20}`` for PT, ``{"lag": 50}`` for CAST.
    operator : {"gibbs", "flip", "mixture"} or Operator, default "gibbs"
    operator_params : dict, optional
        E.g. ``{"alpha": 0.5}`` for the mixture.
    k : int, default 1
        Negative-phase steps per update: operator sweeps for CD, PCD and FPCD; scheme steps
        for PT, CAST and Trans-SAP; plain sweeps between tempering runs for AST.
    n_chains : int, optional
        Persistent chains (PCD); CD uses one chain per minibatch example. Default 100, and 50
        for CAST (the CAST paper's 50 slow + 50 fast chains, about the cost of 100 SAP chains).
    batch_size : int, default 100
        Examples per update; each epoch uses ``n_examples // batch_size`` minibatches of a fresh
        random permutation (the ragged remainder changes from epoch to epoch).
    n_updates, n_epochs : int
        Length of the run: give exactly one.
    learning_rate : float, optional
        Base learning rate; update ``t`` (from 0) uses ``learning_rate · schedule(t)``. Default:
        the objective's ``default_learning_rate`` if it has one (a DBM's: 0.005, the CAST
        paper's), else 0.01.
    momentum : float in [0, 1), default 0
    weight_decay : float >= 0, default 0
        L2 coefficient λ₂ on the weight matrices (not the biases): ``λ₂/2·Σ W²``.
    l1 : float >= 0, default 0
        L1 coefficient λ₁ on the weight matrices: ``λ₁·Σ |W|``.
    l1_squared : float >= 0, default 0
        The L1² penalty of protein RBMs (Tubiana, Cocco & Monasson 2019):
        ``λ/(2·n_rows)·Σ_j (Σ_i |W_ij|)²``, ``n_rows = L·q`` for a Potts RBM, ``n_visible``
        for a binary one (:mod:`boltzlab.training.penalties`; docs/training.md, "Penalties").
    centering : bool, default False
        Centred gradients (Montavon & Müller 2012; Melchior, Fischer & Wiskott 2016): the
        update of the centred model, expressed for the standard parameters the model keeps
        (binary and Potts RBMs, DBMs; :mod:`boltzlab.training.centering`). The offsets are
        saved in checkpoints; a run resumes only with the same setting.
    sample_weights : Tensor or array, shape (n_examples,), optional
        Non-negative per-example weights with a positive sum (e.g.
        :func:`boltzlab.data.sequence_weights.sequence_weights`). Minibatch rows are then drawn
        with probability ``w_n / Σ w``, with replacement, from ``generator``, so every objective
        and negative phase sees the weighted data distribution and the run stays reproducible;
        the base-rate (profile) base is fitted to the weighted marginals, and exact tracking
        reports the weighted mean log-likelihood of the training data (docs/training.md,
        "Sequence weights").
    lr_schedule : {"constant", "linear", "inverse"} or callable, optional
        See :mod:`boltzlab.training.optim`; ``"inverse"`` with ``learning_rate=0.005`` is the
        CAST paper's ``10/(2000 + t)``. Default: the objective's ``default_lr_schedule`` if it
        has one (a DBM's: ``"inverse"``, so a DBM trains with ``10/(2000 + t)`` unless told
        otherwise), else ``"constant"``.
    optimizer : {"sgd", "rmsspectral"}, default "sgd"
        ``torch.optim.SGD``, or :class:`~boltzlab.training.rmsspectral.RMSspectral`
        (preconditioned spectral descent, as in the RTS paper's tracking runs; its step is
        ``learning_rate``, e.g. 1e-5 there; no momentum or weight decay). A resumed run must
        use the optimiser of its checkpoint.
    generator : torch.Generator or int, optional
        The run's only source of randomness (a seed is accepted); same seed, same run.
    validation_data : Tensor or array, optional
        Held-out data for exact tracking and early stopping.
    callbacks : iterable of Callback
        Run between the built-in metric callbacks and the writers (CSV, progress, checkpoints).
    log_every : int, default 100
        A history record every ``log_every`` updates (also before the first and after the last).
    track_exact_every : int, optional
        Exact ``log Z`` and train/validation log-likelihoods every that many updates (small
        models only: min(n_visible, n_hidden) <= 25).
    metrics_path : str or Path, optional
        The history as CSV, rewritten atomically after every record.
    checkpoint_dir : str or Path, optional
        Where checkpoints go (every ``checkpoint_every`` updates, and at the end).
    checkpoint_every : int, optional
    resume : bool, default False
        Continue from the newest checkpoint in ``checkpoint_dir`` if there is one (else start
        afresh). Structural settings must match; the learning rate, momentum, weight decay,
        schedule and ``n_updates`` may change.
    progress : bool, default False
        Show a ``tqdm`` progress bar.
    fit_base_rate : bool, default True
        Fit the model's base-rate base to ``data`` before training.
    witness_rows : int, default 1000
        With ``fit_base_rate``, rows of ``data`` a binary model keeps (and saves) as the
        witness of its log Z verdicts (``model.set_witness``, docs/trust.md); 0 keeps no data
        in the model, and its estimates then say ``"unchecked"`` unless given ``check_data``.
    snapshots : int or None, default 64
        Most parameter snapshots of an RBM recorded along the run, geometrically spaced in
        updates (:class:`~boltzlab.training.snapshots.SnapshotRecorder`): the training
        trajectory that ``estimate_log_z(..., method="trajectory-ais")`` and
        ``sample(..., sampler="ptt")`` anneal through (docs/algorithms.md §4.6). A copy of the
        parameters each, nothing else; ``None`` or 0 records none. Other models record none.
    snapshot_dir : str or Path, optional
        Where ``trajectory.safetensors`` is written (at every checkpoint and at the end).
        Default: ``checkpoint_dir``, else the metrics file's directory, else nowhere (the
        trajectory is still returned as ``TrainResult.trajectory``). A resumed run restores
        its snapshots from there.
    chain_blocks : int, optional
        Under torchrun (a ``torch.distributed`` process group): the number of blocks the
        negative chains are cut into, each with its own random stream, a multiple of the
        number of processes (default: one block per process). Runs with the same total
        minibatch, chains and ``chain_blocks`` give the same parameters on any number of
        processes, up to float rounding (:mod:`boltzlab.training.data_parallel`). Only
        rank 0 writes the metrics, snapshots and checkpoints.
    run_id : str, optional
        The run's identity, written into every checkpoint (default: a new random one for a
        fresh run, the checkpoint's for a resumed one). Given with ``resume=True``, a
        checkpoint of another run is refused (``boltzlab train`` keeps one per run folder).
        ``checkpoint_dir`` is claimed for the run's duration (:mod:`boltzlab.io.run_lock`): a
        second run into the same folder is refused while the first is alive.

    Returns
    -------
    TrainResult

    Raises
    ------
    ValidationError
        Bad data or arguments (the message names the argument, the value, the expectation).
    DivergenceError
        A parameter became NaN or infinite; the message gives the update and the learning rate
        and names the last good checkpoint, which stays on disk. ``error.partial`` holds the
        history up to the last record; the model's parameters are left as they are.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> data = (torch.rand(60, 7, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.training.train(model, data, algorithm="pcd", n_chains=13, batch_size=20,
    ...                            n_updates=30, log_every=10, track_exact_every=10, generator=0)
    >>> [record.update for record in result.history]
    [0, 10, 20, 30]
    """
    settings = _settings(
        model,
        data,
        algorithm=algorithm,
        algorithm_params=algorithm_params,
        operator=operator,
        operator_params=operator_params,
        k=k,
        n_chains=n_chains,
        batch_size=batch_size,
        n_updates=n_updates,
        n_epochs=n_epochs,
        learning_rate=learning_rate,
        momentum=momentum,
        weight_decay=weight_decay,
        l1=l1,
        l1_squared=l1_squared,
        centering=centering,
        sample_weights=sample_weights,
        lr_schedule=lr_schedule,
        optimizer=optimizer,
        generator=generator,
        validation_data=validation_data,
        callbacks=callbacks,
        log_every=log_every,
        track_exact_every=track_exact_every,
        metrics_path=metrics_path,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        resume=resume,
        progress=progress,
        fit_base_rate=fit_base_rate,
        witness_rows=witness_rows,
        snapshots=snapshots,
        snapshot_dir=snapshot_dir,
        chain_blocks=chain_blocks,
    )
    if run_id is not None and not (isinstance(run_id, str) and run_id.isalnum()):
        raise ValidationError(f"run_id must be a non-empty string of letters and digits, got {run_id!r}")
    # One run per checkpoint folder, claimed before anything there is read or written; rank 0
    # alone writes it under torchrun.
    claimed = (
        claim_run_folder(settings.checkpoint_dir)
        if settings.checkpoint_dir is not None and distributed.topology().is_main
        else None
    )
    try:
        loop, recorder = _assemble(model, settings, run_id)
        _open(loop, settings)
        result = loop.run()
    finally:
        if claimed is not None:
            claimed.release()
    if recorder is None:
        return result
    return dataclasses.replace(result, trajectory=recorder.trajectory())


@dataclass(frozen=True)
class _Settings:
    """Every argument of :func:`train`, validated once and with its defaults resolved."""

    data: Tensor
    validation_data: Tensor | None
    sample_weights: Tensor | None
    config: TrainConfig
    phase: NegativePhase
    objective: Objective
    schedule: Schedule
    optimizer: str
    generator: torch.Generator
    callbacks: tuple[Callback, ...]
    metrics_path: str | Path | None
    progress: bool
    checkpoint_dir: str | Path | None
    resume: bool
    snapshots: int | None
    snapshot_dir: str | Path | None
    parallel: DataParallel | None


def _settings(
    model: nn.Module,
    data: Any,
    *,
    algorithm: str | NegativePhase,
    algorithm_params: dict[str, Any] | None,
    operator: str | operator_registry.Operator,
    operator_params: dict[str, Any] | None,
    k: int,
    n_chains: int | None,
    batch_size: int,
    n_updates: int | None,
    n_epochs: int | None,
    learning_rate: float | None,
    momentum: float,
    weight_decay: float,
    l1: float,
    l1_squared: float,
    centering: bool,
    sample_weights: Any,
    lr_schedule: str | Schedule | None,
    optimizer: str,
    generator: torch.Generator | int | None,
    validation_data: Any,
    callbacks: Iterable[Callback],
    log_every: int,
    track_exact_every: int | None,
    metrics_path: str | Path | None,
    checkpoint_dir: str | Path | None,
    checkpoint_every: int | None,
    resume: bool,
    progress: bool,
    fit_base_rate: bool,
    witness_rows: int,
    snapshots: int | None,
    snapshot_dir: str | Path | None,
    chain_blocks: int | None,
) -> _Settings:
    """Check :func:`train`'s arguments in the order its docstring lists them; resolve defaults.

    Long because it is one check per argument, in order (the first bad argument is the one
    reported); each check is a line or a named helper.
    """
    objective = objective_for(model)
    # Defaults that depend on the model and the algorithm (see train's docstring).
    if n_chains is None:
        n_chains = DEFAULT_CAST_CHAINS if algorithm == "cast" else DEFAULT_CHAINS
    if learning_rate is None:
        learning_rate = getattr(objective, "default_learning_rate", _DEFAULT_LEARNING_RATE)
    if lr_schedule is None:
        lr_schedule = getattr(objective, "default_lr_schedule", "constant")
    # Binary models take 0/1 data; a model with real-valued visible units checks its own.
    data = as_model_data(model, data, "data")
    if validation_data is not None:
        validation_data = as_model_data(model, validation_data, "validation_data")
    k = check_positive_int(k, "k")
    n_chains = check_positive_int(n_chains, "n_chains")
    batch_size, n_updates, n_epochs = _run_length(data, batch_size, n_updates, n_epochs)
    learning_rate = _check_number(learning_rate, "learning_rate", low=0.0, low_open=True)
    momentum = _check_number(momentum, "momentum", low=0.0, high=1.0, low_open=False)
    weight_decay = _check_number(weight_decay, "weight_decay", low=0.0, low_open=False)
    l1 = check_penalty(l1, "l1")
    l1_squared = check_penalty(l1_squared, "l1_squared")
    if not isinstance(centering, bool):
        raise ValidationError(f"centering must be True or False, got {centering!r}")
    if centering:
        Centering(model)  # refuses a model it cannot centre, before anything runs
    if sample_weights is not None:
        sample_weights = _check_weights(model, sample_weights, data, fit_base_rate=bool(fit_base_rate))
    optimizer = check_optimizer(optimizer, momentum=momentum, weight_decay=weight_decay)
    log_every = check_positive_int(log_every, "log_every")
    track_exact_every = _optional_positive_int(track_exact_every, "track_exact_every")
    checkpoint_every = _optional_positive_int(checkpoint_every, "checkpoint_every")
    snapshots = _check_snapshots(snapshots)
    if checkpoint_dir is None and (checkpoint_every is not None or resume):
        raise ValidationError(
            f"checkpoint_every={checkpoint_every!r} and resume={resume!r} need checkpoint_dir (a directory)"
        )
    generator = _check_generator(generator, model.device)
    callbacks = _check_callbacks(callbacks)
    the_operator = operator_registry.get(operator, **(operator_params or {}))
    phase = get_phase(algorithm, operator=the_operator, k=k, n_chains=n_chains, **(algorithm_params or {}))
    # A phase that is its own gradient (pseudo-likelihood) supplies the objective.
    own_objective = getattr(phase, "training_objective", None)
    if callable(own_objective):
        objective = own_objective(model, objective)
    schedule = make_schedule(lr_schedule, n_updates=n_updates)
    parallel = plan_data_parallel(phase, batch_size=batch_size, n_chains=n_chains, chain_blocks=chain_blocks)
    if not distributed.topology().is_main:
        # One writer per run: the other processes compute alike and keep quiet.
        metrics_path, progress = None, False
    check_witness_rows(witness_rows)  # before anything runs, whether or not the base is fitted
    # What a checkpoint records of the run (plain values): names, or the repr of objects.
    config = TrainConfig(
        algorithm=algorithm if isinstance(algorithm, str) else repr(algorithm),
        algorithm_params=dict(algorithm_params or {}),
        operator=repr(the_operator),
        k=k,
        n_chains=n_chains,
        batch_size=batch_size,
        n_updates=n_updates,
        n_epochs=n_epochs,
        learning_rate=learning_rate,
        momentum=momentum,
        weight_decay=weight_decay,
        centering=centering,
        l1=l1,
        l1_squared=l1_squared,
        weighted=sample_weights is not None,
        model=type(model).__name__,
        lr_schedule=repr(schedule),
        log_every=log_every,
        track_exact_every=track_exact_every,
        checkpoint_every=checkpoint_every,
        fit_base_rate=bool(fit_base_rate),
        witness_rows=witness_rows,
        readable={**operator_record(the_operator), **schedule_record(schedule)},
    )
    return _Settings(
        data=data,
        validation_data=validation_data,
        sample_weights=sample_weights,
        config=config,
        phase=phase,
        objective=objective,
        schedule=schedule,
        optimizer=optimizer,
        generator=generator,
        callbacks=callbacks,
        metrics_path=metrics_path,
        progress=bool(progress),
        checkpoint_dir=checkpoint_dir,
        resume=bool(resume),
        snapshots=snapshots,
        snapshot_dir=snapshot_dir,
        parallel=parallel,
    )


def _check_weights(model: nn.Module, sample_weights: Any, data: Tensor, *, fit_base_rate: bool) -> Tensor:
    """``sample_weights`` as float64 ``(n_examples,)`` on the data's device; refused, too, for a
    model whose base cannot be fitted to weighted data when the base is to be fitted."""
    weights = check_sample_weights(sample_weights, data.shape[0], device=data.device)
    fit = getattr(model, "set_base_rate", None)
    if fit_base_rate and fit is not None and "sample_weights" not in inspect.signature(fit).parameters:
        raise ValidationError(
            f"sample_weights: a {type(model).__name__}'s base cannot be fitted to weighted data; "
            "pass fit_base_rate=False (and fit the base yourself) or train without weights"
        )
    return weights


def _check_generator(generator: Any, device: torch.device) -> torch.Generator:
    try:
        return resolve_generator(generator, device)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"generator: {error}") from None


def _check_callbacks(callbacks: Iterable[Any]) -> tuple[Callback, ...]:
    callbacks = tuple(callbacks)
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise ValidationError(
                f"callbacks must be boltzlab.training.Callback instances, got {type(callback).__name__}"
            )
    return callbacks


def _run_length(data: Tensor, batch_size: Any, n_updates: Any, n_epochs: Any) -> tuple[int, int, int | None]:
    """``batch_size``, ``n_updates`` (from ``n_epochs`` when that is given) and ``n_epochs``."""
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > data.shape[0]:
        raise ValidationError(
            f"batch_size={batch_size} exceeds the {data.shape[0]} training examples; "
            f"use batch_size <= {data.shape[0]}"
        )
    if (n_updates is None) == (n_epochs is None):
        raise ValidationError(
            f"give exactly one of n_updates and n_epochs, got n_updates={n_updates!r}, n_epochs={n_epochs!r}"
        )
    if n_epochs is not None:
        n_epochs = check_positive_int(n_epochs, "n_epochs")
        n_updates = n_epochs * (data.shape[0] // batch_size)
    return batch_size, check_positive_int(n_updates, "n_updates"), n_epochs


def _check_snapshots(snapshots: Any) -> int | None:
    """``None``, 0 (none recorded) or at least 2 (the first and the last)."""
    if snapshots is not None and not (isinstance(snapshots, int) and snapshots == 0):
        snapshots = check_positive_int(snapshots, "snapshots")
        if snapshots < 2:
            raise ValidationError(
                f"snapshots must be 0, None or at least 2 (the first and last), got {snapshots}"
            )
    return snapshots


def _assemble(
    model: nn.Module, settings: _Settings, run_id: str | None = None
) -> tuple[TrainingLoop, SnapshotRecorder | None]:
    """The training loop with its callbacks in order, and the snapshot recorder if any.

    Order: exact tracking, the caller's callbacks, then the writers (CSV, progress bar,
    snapshots, checkpoints last, so that a checkpoint sees every callback's state).
    """
    config = settings.config
    before: list[Callback] = []
    if config.track_exact_every is not None:
        before.append(ExactLikelihoodTracker(config.track_exact_every))
    after: list[Callback] = []
    if settings.metrics_path is not None:
        after.append(CSVLogger(settings.metrics_path))
    if settings.progress:
        after.append(ProgressBar())
    run_dir = Path(settings.checkpoint_dir) if settings.checkpoint_dir is not None else None
    if run_dir is None and settings.metrics_path is not None:
        run_dir = Path(settings.metrics_path).parent
    recorder = None
    if settings.snapshots:
        # Before the Checkpointer, so that a checkpoint lists the snapshots written beside it.
        folder = settings.snapshot_dir if settings.snapshot_dir is not None else run_dir
        recorder = SnapshotRecorder(folder, max_snapshots=settings.snapshots)
        after.append(recorder)
    checkpointer = None
    if settings.checkpoint_dir is not None:
        checkpointer = Checkpointer(settings.checkpoint_dir, every=config.checkpoint_every)
        after.append(checkpointer)
    loop = TrainingLoop(
        model=model,
        data=settings.data,
        validation_data=settings.validation_data,
        config=config,
        phase=settings.phase,
        objective=settings.objective,
        schedule=settings.schedule,
        generator=settings.generator,
        callbacks=[*before, *settings.callbacks, *after],
        checkpointer=checkpointer,
        run_dir=run_dir,
        parallel=settings.parallel,
        optimizer=settings.optimizer,
        run_id=run_id,
        sample_weights=settings.sample_weights,
    )
    return loop, recorder


def _open(loop: TrainingLoop, settings: _Settings) -> None:
    """Restore the newest checkpoint (``resume``) or start afresh; refuse to mix two runs."""
    folder = settings.checkpoint_dir
    latest = None if folder is None else find_latest_checkpoint(folder)
    if latest is not None and not settings.resume:
        # A fresh run must not mix its checkpoints with an older run's: a later resume would
        # pick whichever has the highest update number.
        raise ValidationError(
            f"checkpoint_dir {folder} already holds checkpoints (newest {latest.name}); "
            "pass resume=True to continue that run, or use an empty directory"
        )
    if latest is None:
        loop.start_fresh()
        return
    saved_groups = load_checkpoint(latest).metadata.get("optimizer", {}).get("param_groups", [])
    check_optimizer_state(saved_groups, settings.optimizer, source=str(latest))
    loop.restore(latest)
