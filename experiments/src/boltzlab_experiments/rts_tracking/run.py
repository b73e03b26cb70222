"""Tracking the log-likelihood during training with RTS, checked against AIS.

Carlson, Stinson, Pakman & Paninski (2016), *Partition functions from Rao-Blackwellized
tempered sampling*, ICML, §4.4 (Fig. 6): an RBM on the dna data (180 binary features, 500
hidden units) is pretrained with CD-1, then trained by RMSspectral (step 1e-5, λ = 0.99) on the
model term of 2,000 simulated-tempering chains (25 sweeps between updates, 100 temperatures,
prior ``r_k ∝ exp(2β_k)``) whose ``log Ẑ`` is kept current by the damped RTS update (α = 0.2);
the tracked train and validation log-likelihoods follow those of AIS checkpoints, at little
extra cost. docs/algorithms.md §4.3; the negative phase and the callback are
:mod:`boltzlab.training.tracking`.

:func:`run_tracking` — CD-1 pretraining, then RTS-phase training with
:class:`~boltzlab.training.RTSLikelihoodTracker` every ``track_every`` updates and AIS
(:func:`boltzlab.estimate_log_z`) on the same model every ``ais_every`` updates. What tracking
costs is :mod:`boltzlab_experiments.rts_tracking.timing`. The sizes are
:class:`~boltzlab_experiments.rts_tracking.config.RTSTrackingConfig` presets; everything is a
pure function of a configuration, data and a seed, and ``boltzlab reproduce rts-tracking``
writes the files.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM, TrainResult, estimate_log_z, log_likelihood, train
from boltzlab.data import Dataset
from boltzlab.errors import ValidationError
from boltzlab.training import Callback, RTSLikelihoodTracker
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig

__all__ = [
    "ProgressReport",
    "RTSTrackingResult",
    "TrackingCurve",
    "check_inputs",
    "pretrain",
    "run_tracking",
]


@dataclass(frozen=True)
class TrackingCurve:
    """Log Z and mean log-likelihoods (nats per example) at a series of updates.

    Attributes
    ----------
    updates : Tensor, shape (n,), int64
    log_z, log_z_stderr : Tensor, shape (n,), float64
    train_log_likelihood, validation_log_likelihood : Tensor, shape (n,), float64
        ``NaN`` where there is no validation data.
    """

    updates: Tensor
    log_z: Tensor
    log_z_stderr: Tensor
    train_log_likelihood: Tensor
    validation_log_likelihood: Tensor


@dataclass(frozen=True)
class RTSTrackingResult:
    """What :func:`run_tracking` measured.

    Attributes
    ----------
    config : RTSTrackingConfig
    tracked : TrackingCurve
        RTS's tracked values every ``track_every`` updates (stderr from the phase).
    ais : TrackingCurve
        AIS at every ``ais_every`` updates, on the same models.
    pretrain_seconds, train_seconds, ais_seconds : float
        Wall-clock time of CD-1 pretraining, of the tracked training (AIS excluded) and of AIS.
    initial_stop_statistics : Tensor, shape (I,), float64
        ``max_k |ĉ_k/r_k − 1|`` after each of RTS's initial iterations.
    n_train, n_validation : int
    """

    config: RTSTrackingConfig
    tracked: TrackingCurve
    ais: TrackingCurve
    pretrain_seconds: float
    train_seconds: float
    ais_seconds: float
    initial_stop_statistics: Tensor
    n_train: int
    n_validation: int

    def differences(self) -> tuple[Tensor, Tensor]:
        """Tracked minus AIS ``log Z`` at the AIS checkpoints, and its standard error."""
        position = {int(update): index for index, update in enumerate(self.tracked.updates.tolist())}
        rows = [position[int(update)] for update in self.ais.updates.tolist()]
        difference = self.tracked.log_z[rows] - self.ais.log_z
        stderr = (self.tracked.log_z_stderr[rows].square() + self.ais.log_z_stderr.square()).sqrt()
        return difference, stderr

    def expected_lag(self) -> Tensor:
        """The damped update's expected lag behind ``log Z`` at the AIS checkpoints, in nats.

        ``d/α`` with ``d`` the tracked ``log Ẑ``'s slope per update over the preceding
        ``track_every`` updates (0 at the first record): when ``log Z`` rises, the tracked
        value sits about this much below it.
        """
        values = self.tracked.log_z
        position = {int(update): index for index, update in enumerate(self.tracked.updates.tolist())}
        lags = []
        for update in self.ais.updates.tolist():
            index = position[int(update)]
            if index == 0:
                lags.append(0.0)
                continue
            steps = int(self.tracked.updates[index] - self.tracked.updates[index - 1])
            slope = float(values[index] - values[index - 1]) / steps
            lags.append(slope / self.config.step_size)
        return torch.tensor(lags, dtype=torch.float64)


class _AISCheckpoints(Callback):
    """AIS of the current model every ``every`` updates (its own generator; time kept apart)."""

    def __init__(self, config: RTSTrackingConfig, validation: Tensor | None, *, seed: int) -> None:
        self.config = config
        self.validation = validation
        self.seed = seed
        self.seconds = 0.0

    def wants_record(self, update: int) -> bool:
        return update % self.config.ais_every == 0

    def measure(self, run) -> dict[str, float]:
        if run.update % self.config.ais_every != 0 and run.update != run.n_updates:
            return {}
        started = time.perf_counter()
        estimate = estimate_log_z(
            run.model,
            method="ais",
            n_chains=self.config.ais_chains,
            n_temperatures=self.config.ais_temperatures,
            generator=self.seed * 1_000_003 + run.update,
        )
        metrics = {
            "ais_log_z": estimate.log_z,
            "ais_log_z_stderr": estimate.stderr,
            "ais_train_log_likelihood": log_likelihood(run.model, run.data, estimate.log_z),
        }
        if self.validation is not None:
            metrics["ais_validation_log_likelihood"] = log_likelihood(
                run.model, self.validation, estimate.log_z
            )
        self.seconds += time.perf_counter() - started
        return metrics


class _InitialPhase(Callback):
    """Keeps the stopping statistics of the RTS phase's initial iterations."""

    def __init__(self) -> None:
        self.stop_statistics = torch.zeros(0, dtype=torch.float64)

    def on_train_begin(self, run) -> None:
        self.stop_statistics = run.phase_state.initial_stop_statistics.clone()


class ProgressReport(Callback):
    """Calls ``progress(update, n_updates, label)`` after every update."""

    def __init__(self, progress: Progress, label: str) -> None:
        self.progress, self.label = progress, label

    def on_update(self, run) -> None:
        self.progress(run.update, run.n_updates, self.label)


def pretrain(config: RTSTrackingConfig, dataset: Dataset, *, seed: int) -> tuple[RBM, float]:
    """A CD-1-pretrained RBM (``pretrain_updates`` updates) and the seconds it took."""
    model = RBM(n_visible=dataset.train.shape[1], n_hidden=config.n_hidden, generator=seed)
    started = time.perf_counter()
    train(
        model,
        dataset.train,
        algorithm="cd",
        k=1,
        batch_size=config.batch_size,
        n_updates=config.pretrain_updates,
        learning_rate=config.pretrain_learning_rate,
        log_every=config.pretrain_updates,
        generator=seed,
    )
    return model, time.perf_counter() - started


def _curve(result: TrainResult, prefix: str, every: int) -> TrackingCurve:
    stderr_name = f"{prefix}log_z_stderr"
    rows = [
        record
        for record in result.history
        if record.get(f"{prefix}log_z") is not None
        and (record.update % every == 0 or record.update == result.n_updates)
    ]

    def column(name: str) -> Tensor:
        values = [record.get(name) for record in rows]
        return torch.tensor([math.nan if value is None else value for value in values], dtype=torch.float64)

    train_name = "ais_train_log_likelihood" if prefix == "ais_" else "train_log_likelihood"
    validation_name = "ais_validation_log_likelihood" if prefix == "ais_" else "validation_log_likelihood"
    return TrackingCurve(
        updates=torch.tensor([record.update for record in rows], dtype=torch.int64),
        log_z=column(f"{prefix}log_z"),
        log_z_stderr=column(stderr_name),
        train_log_likelihood=column(train_name),
        validation_log_likelihood=column(validation_name),
    )


def check_inputs(config: RTSTrackingConfig, dataset: Dataset) -> None:
    """Refuse a configuration or dataset the experiment cannot run, naming the setting."""
    if not isinstance(config, RTSTrackingConfig):
        raise ValidationError(f"config must be an RTSTrackingConfig, got {type(config).__name__}")
    if config.ais_every % config.track_every != 0:
        raise ValidationError(
            f"ais_every ({config.ais_every}) must be a multiple of track_every ({config.track_every}) so "
            "that AIS checkpoints have tracked values beside them"
        )
    if dataset.train.shape[0] < config.batch_size:
        raise ValidationError(
            f"{dataset.name} has fewer training examples than batch_size={config.batch_size}"
        )


def run_tracking(
    config: RTSTrackingConfig, dataset: Dataset, *, seed: int = 0, progress: Progress | None = None
) -> RTSTrackingResult:
    """CD-1 pretraining, then RTS-tracked training with AIS checkpoints (module docstring).

    Parameters
    ----------
    config : RTSTrackingConfig
    dataset : Dataset
        Its ``train`` split trains, its ``valid`` split (if any) validates.
    seed : int
        Model initialisation, training and AIS seeds derive from it.
    progress : callable ``(done, total, label)``, optional
    """
    check_inputs(config, dataset)
    model, pretrain_seconds = pretrain(config, dataset, seed=seed)
    validation = dataset.valid
    ais = _AISCheckpoints(config, validation, seed=seed)
    initial = _InitialPhase()
    callbacks: list[Callback] = [RTSLikelihoodTracker(config.track_every, validation), ais, initial]
    if progress is not None:
        callbacks.append(ProgressReport(progress, "tracking"))
    result = train(
        model,
        dataset.train,
        algorithm="rts",
        k=config.sweeps,
        n_chains=config.n_chains,
        batch_size=config.batch_size,
        n_updates=config.n_updates,
        learning_rate=config.learning_rate,
        optimizer=config.optimizer,
        log_every=config.track_every,
        generator=seed + 1,
        algorithm_params=config.phase_params(),
        callbacks=callbacks,
    )
    return RTSTrackingResult(
        config=config,
        tracked=_curve(result, "rts_", config.track_every),
        ais=_curve(result, "ais_", config.ais_every),
        pretrain_seconds=pretrain_seconds,
        train_seconds=result.history[-1].time - ais.seconds,
        ais_seconds=ais.seconds,
        initial_stop_statistics=initial.stop_statistics,
        n_train=int(dataset.train.shape[0]),
        n_validation=0 if validation is None else int(validation.shape[0]),
    )
