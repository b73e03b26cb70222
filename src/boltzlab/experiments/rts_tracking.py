"""Tracking the log-likelihood during training with RTS, checked against AIS, and what it costs.

Carlson, Stinson, Pakman & Paninski (2016), *Partition functions from Rao-Blackwellized
tempered sampling*, ICML, §4.4 (Fig. 6): an RBM on the dna data (180 binary features, 500
hidden units) is pretrained with CD-1, then trained by RMSspectral (step 1e-5, λ = 0.99) on the
model term of 2,000 simulated-tempering chains (25 sweeps between updates, 100 temperatures,
prior ``r_k ∝ exp(2β_k)``) whose ``log Ẑ`` is kept current by the damped RTS update (α = 0.2);
the tracked train and validation log-likelihoods follow those of AIS checkpoints, at little
extra cost. ALGORITHMS.md §4.3; the negative phase and the callback are
:mod:`boltzlab.training.tracking`.

* :func:`run_tracking` — CD-1 pretraining, then RTS-phase training with
  :class:`~boltzlab.training.tracking.RTSLikelihoodTracker` every ``track_every`` updates and
  AIS (:func:`boltzlab.estimate_log_z`) on the same model every ``ais_every`` updates.
* :func:`run_timing` — the cost of tracking, CPU seconds of training runs of the same length
  from the same pretrained model and seed (RTS's initial iterations excluded): the RTS phase
  with the callback against the same run without the callback, against the same phase with
  ``Ẑ`` frozen (the sampler without any tracking), and against plain PCD with the same number
  of chain-sweeps (``n_chains × k`` per update); and, because whole runs on a shared machine
  vary by tens of per cent, two direct measurements: the time inside the callback, and a
  paired comparison of phase steps with and without the ``ĉ`` sums and the damped update.

:meth:`RTSTrackingConfig.scaled` (the default of ``boltzlab reproduce rts-tracking``) runs in a
few minutes on two CPU cores: 100 hidden units instead of 500, 30 temperatures instead of 100,
300 chains instead of 2,000, 10 sweeps per update instead of 25, a few hundred updates, AIS with
100 chains and 1,000 temperatures. :meth:`RTSTrackingConfig.paper` is the paper's setting
(hours here); ``tiny`` is for tests. Everything is a pure function of a configuration, data and
a seed; ``boltzlab reproduce rts-tracking`` writes the files.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from boltzlab.data.registry import Dataset
from boltzlab.errors import ValidationError
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.likelihood import log_likelihood
from boltzlab.models.rbm import RBM
from boltzlab.operators import get as get_operator
from boltzlab.rng import make_generator
from boltzlab.training import Callback, RTSLikelihoodTracker, RTSTracking, train
from boltzlab.training.state import TrainResult

__all__ = [
    "RTSTrackingConfig",
    "RTSTrackingResult",
    "TrackingCurve",
    "TrackingTimings",
    "run_timing",
    "run_tracking",
]

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RTSTrackingConfig:
    """Sizes and settings of the tracking experiment (paper values in :meth:`paper`).

    Attributes
    ----------
    label : str
    n_hidden : int
    pretrain_updates : int
        CD-1 updates before tracking (batch ``batch_size``, SGD at ``pretrain_learning_rate``).
    pretrain_learning_rate : float
    n_updates : int
        RTS-phase updates with RMSspectral.
    learning_rate : float
        RMSspectral's step η.
    optimizer : {"rmsspectral", "sgd"}
    batch_size : int
    n_chains, sweeps, n_levels : int
        Tempered chains, sweeps per update and temperatures (linear ladder from 0 to 1).
    step_size : float
        α of the damped update.
    n_initial_iterations, initial_sweeps : int
        RTS's initial iterations before training.
    density_dtype : {"float64", "float32"}
        Precision of the softplus in the all-levels densities.
    track_every : int
        Updates between tracked log-likelihoods.
    ais_every : int
        Updates between AIS checkpoints.
    ais_chains, ais_temperatures : int
        AIS runs and temperatures (Salakhutdinov & Murray's schedule shape, ``"sm08"``).
    timing_updates : int
        Updates of each timing run (0 skips the timing).
    timing_repeats : int
        Each timing run is repeated, interleaved, and the fastest kept (the machine is shared).
    """

    label: str
    n_hidden: int
    pretrain_updates: int
    pretrain_learning_rate: float
    n_updates: int
    learning_rate: float
    optimizer: str
    batch_size: int
    n_chains: int
    sweeps: int
    n_levels: int
    step_size: float
    n_initial_iterations: int
    initial_sweeps: int
    density_dtype: str
    track_every: int
    ais_every: int
    ais_chains: int
    ais_temperatures: int
    timing_updates: int
    timing_repeats: int

    @classmethod
    def paper(cls) -> RTSTrackingConfig:
        """The paper's §4.4 setting (its update count and AIS sizes were not recovered: ours)."""
        return cls(
            label="paper",
            n_hidden=500,
            pretrain_updates=2000,
            pretrain_learning_rate=0.05,
            n_updates=5000,
            learning_rate=1e-5,
            optimizer="rmsspectral",
            batch_size=100,
            n_chains=2000,
            sweeps=25,
            n_levels=100,
            step_size=0.2,
            n_initial_iterations=10,
            initial_sweeps=50,
            density_dtype="float32",
            track_every=10,
            ais_every=500,
            ais_chains=100,
            ais_temperatures=10_000,
            timing_updates=50,
            timing_repeats=1,
        )

    @classmethod
    def scaled(cls) -> RTSTrackingConfig:
        """Minutes on two cores: the paper's setting scaled down (module docstring says how)."""
        return replace(
            cls.paper(),
            label="scaled",
            n_hidden=100,
            pretrain_updates=300,
            n_updates=300,
            learning_rate=1e-4,
            n_chains=300,
            sweeps=10,
            n_levels=30,
            ais_every=50,
            ais_temperatures=1000,
            timing_updates=60,
            timing_repeats=3,
        )

    @classmethod
    def tiny(cls) -> RTSTrackingConfig:
        """Seconds; checks the pipeline only."""
        return replace(
            cls.scaled(),
            label="tiny",
            n_hidden=6,
            pretrain_updates=10,
            n_updates=20,
            learning_rate=1e-3,
            batch_size=20,
            n_chains=30,
            sweeps=2,
            n_levels=6,
            n_initial_iterations=2,
            initial_sweeps=5,
            track_every=5,
            ais_every=10,
            ais_chains=20,
            ais_temperatures=50,
            timing_updates=4,
            timing_repeats=1,
        )

    def phase_params(self, *, update_log_z: bool = True) -> dict[str, object]:
        """``algorithm_params`` of the ``"rts"`` phase."""
        return {
            "n_levels": self.n_levels,
            "step_size": self.step_size,
            "n_initial_iterations": self.n_initial_iterations,
            "initial_sweeps": self.initial_sweeps,
            "density_dtype": self.density_dtype,
            "update_log_z": update_log_z,
        }


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


def _median(values: tuple[float, ...]) -> float:
    return float(torch.tensor(values, dtype=torch.float64).median())


@dataclass(frozen=True)
class TrackingTimings:
    """CPU seconds of training (phase ``init`` excluded) for ``n_updates`` updates of each run.

    CPU time of this process, not wall-clock time: on a shared machine it is far less
    disturbed by other work (the wall-clock times are kept too); it still varies by tens of
    per cent between repeats, so every repeat is kept and ratios use medians. All runs start
    from one pretrained model with one seed.

    Attributes
    ----------
    n_updates, n_repeats, n_threads : int
    cpu, wall : dict of str to tuple of float
        Seconds of each repeat of each run:

        * ``"tracked"`` — RTS phase (damped ``Ẑ`` update) with the callback every ``track_every``;
        * ``"no_callback"`` — the same without the callback;
        * ``"frozen"`` — the same phase with ``Ẑ`` frozen (no ``ĉ`` sums, no update) and no
          callback: the sampler without any tracking. Frozen weights let the level occupancy
          drift as the model changes, so its model term holds more or fewer β = 1 states
          (``target_samples``): not exactly the same work;
        * ``"pcd"`` — PCD with the same chains and sweeps per update (``n_chains × k``).
    target_samples : dict of str to float
        β = 1 states in the last model term of each RTS run.
    callback_cpu : tuple of float
        CPU seconds spent inside the callback in each ``"tracked"`` repeat (measured directly).
    step_cpu : dict of str to tuple of float
        A paired measurement of the phase's own bookkeeping: ``n_updates`` phase steps with the
        parameters held fixed, from one state and one generator seed, with the damped update
        (``"tracked"``) and without it (``"frozen"``), alternating step by step — the same
        sweeps, differing only in the ``ĉ`` sums and the update.
    """

    n_updates: int
    n_repeats: int
    n_threads: int
    cpu: dict[str, tuple[float, ...]]
    wall: dict[str, tuple[float, ...]]
    target_samples: dict[str, float]
    callback_cpu: tuple[float, ...]
    step_cpu: dict[str, tuple[float, ...]]

    def median(self, run: str) -> float:
        """Median CPU seconds of ``run`` over the repeats."""
        return _median(self.cpu[run])

    @property
    def overhead_vs_no_callback(self) -> float:
        """(a) extra time of the run with the callback over the same run without it (medians)."""
        return self.median("tracked") / self.median("no_callback") - 1.0

    @property
    def overhead_vs_frozen(self) -> float:
        """Extra time of the tracked run over the sampler with ``Ẑ`` frozen (medians; confounded
        by the occupancy drift, see ``cpu``)."""
        return self.median("tracked") / self.median("frozen") - 1.0

    @property
    def overhead_vs_pcd(self) -> float:
        """(b) extra time over plain PCD with the same chain-sweeps (medians)."""
        return self.median("tracked") / self.median("pcd") - 1.0

    @property
    def callback_fraction(self) -> float:
        """Time inside the callback over the rest of the tracked run (directly measured)."""
        callback = _median(self.callback_cpu)
        return callback / (self.median("tracked") - callback)

    @property
    def bookkeeping_fraction(self) -> float:
        """Extra time of the ``ĉ`` sums and the damped update over the same sweeps without them
        (paired phase steps, medians)."""
        return _median(self.step_cpu["tracked"]) / _median(self.step_cpu["frozen"]) - 1.0

    @property
    def tracking_fraction(self) -> float:
        """All tracking — callback plus bookkeeping — as extra time over the sampler alone."""
        return (1.0 + self.callback_fraction) * (1.0 + self.bookkeeping_fraction) - 1.0


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


class _Clock(Callback):
    """CPU and wall-clock seconds between the start and the end of training (``init`` excluded)."""

    def __init__(self) -> None:
        self.cpu = self.wall = math.nan
        self._cpu = self._wall = 0.0

    def on_train_begin(self, run) -> None:
        self._cpu, self._wall = time.process_time(), time.perf_counter()

    def on_train_end(self, run) -> None:
        self.cpu, self.wall = time.process_time() - self._cpu, time.perf_counter() - self._wall


class _TimedTracker(RTSLikelihoodTracker):
    """The tracking callback, keeping the CPU seconds spent in it."""

    def __init__(self, every: int, validation_data: Tensor | None) -> None:
        super().__init__(every, validation_data)
        self.cpu = 0.0

    def measure(self, run) -> dict[str, float]:
        began = time.process_time()
        metrics = super().measure(run)
        self.cpu += time.process_time() - began
        return metrics


class _Report(Callback):
    def __init__(self, progress: Progress, label: str) -> None:
        self.progress, self.label = progress, label

    def on_update(self, run) -> None:
        self.progress(run.update, run.n_updates, self.label)


def _pretrained(config: RTSTrackingConfig, dataset: Dataset, *, seed: int) -> tuple[RBM, float]:
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


def _check(config: RTSTrackingConfig, dataset: Dataset) -> None:
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
    _check(config, dataset)
    model, pretrain_seconds = _pretrained(config, dataset, seed=seed)
    validation = dataset.valid
    ais = _AISCheckpoints(config, validation, seed=seed)
    initial = _InitialPhase()
    callbacks: list[Callback] = [RTSLikelihoodTracker(config.track_every, validation), ais, initial]
    if progress is not None:
        callbacks.append(_Report(progress, "tracking"))
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


def run_timing(
    config: RTSTrackingConfig, dataset: Dataset, *, seed: int = 0, progress: Progress | None = None
) -> TrackingTimings:
    """CPU seconds of ``timing_updates`` updates with tracking, without it, and with PCD.

    All runs start from one CD-1-pretrained model with the same seed and settings; each is
    repeated ``timing_repeats`` times, interleaved (:class:`TrackingTimings`). Then the paired
    measurement of the phase's bookkeeping, also interleaved.
    """
    _check(config, dataset)
    pretrained, _ = _pretrained(config, dataset, seed=seed)
    validation = dataset.valid
    common = {
        "k": config.sweeps,
        "n_chains": config.n_chains,
        "batch_size": config.batch_size,
        "n_updates": config.timing_updates,
        "learning_rate": config.learning_rate,
        "optimizer": config.optimizer,
        "log_every": config.timing_updates,
        "generator": seed + 2,
    }
    callback_cpu: list[float] = []

    def rts(update_log_z: bool, with_callback: bool) -> Callable[[RBM, _Clock], TrainResult]:
        def run(model: RBM, clock: _Clock) -> TrainResult:
            callbacks: list[Callback] = [clock]
            tracker = _TimedTracker(config.track_every, validation)
            if with_callback:
                callbacks.insert(0, tracker)
            result = train(
                model,
                dataset.train,
                algorithm="rts",
                algorithm_params=config.phase_params(update_log_z=update_log_z),
                callbacks=callbacks,
                **common,
            )
            if with_callback:
                callback_cpu.append(tracker.cpu)
            return result

        return run

    def pcd(model: RBM, clock: _Clock) -> TrainResult:
        return train(model, dataset.train, algorithm="pcd", callbacks=[clock], **common)

    runs = {
        "tracked": rts(True, True),
        "no_callback": rts(True, False),
        "frozen": rts(False, False),
        "pcd": pcd,
    }
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    target_samples: dict[str, float] = {}
    total, done = config.timing_repeats * (len(runs) + 2), 0
    for _ in range(config.timing_repeats):
        for name, run in runs.items():
            clock = _Clock()
            result = run(copy.deepcopy(pretrained), clock)
            cpu[name].append(clock.cpu)
            wall[name].append(clock.wall)
            if name != "pcd":
                target_samples[name] = float(result.history[-1].extra["rts_target_samples"])
            done += 1
            if progress is not None:
                progress(done, total, name)
    step_cpu = _paired_steps(
        config, pretrained, dataset, seed=seed, progress=progress, done=done, total=total
    )
    return TrackingTimings(
        n_updates=config.timing_updates,
        n_repeats=config.timing_repeats,
        n_threads=torch.get_num_threads(),
        cpu={name: tuple(values) for name, values in cpu.items()},
        wall={name: tuple(values) for name, values in wall.items()},
        target_samples=target_samples,
        callback_cpu=tuple(callback_cpu),
        step_cpu=step_cpu,
    )


def _paired_steps(
    config: RTSTrackingConfig,
    model: RBM,
    dataset: Dataset,
    *,
    seed: int,
    progress: Progress | None,
    done: int,
    total: int,
) -> dict[str, tuple[float, ...]]:
    """CPU seconds of ``timing_updates`` phase steps with and without the damped update."""
    model = copy.deepcopy(model)
    model.set_base_rate(dataset.train)  # as the trainer does before its phase starts
    operator = get_operator("gibbs")
    phases = {
        name: RTSTracking(
            operator=operator,
            k=config.sweeps,
            n_chains=config.n_chains,
            **config.phase_params(update_log_z=on),
        )
        for name, on in (("tracked", True), ("frozen", False))
    }
    start = phases["tracked"].init(model, dataset.train, generator=make_generator(seed + 3))
    seconds: dict[str, list[float]] = {name: [] for name in phases}
    with torch.no_grad():
        for _ in range(config.timing_repeats):
            # Both variants step from the same state with generators of the same seed, and they
            # alternate step by step, so a change in the machine's load hits both alike.
            generators = {name: make_generator(seed + 4) for name in phases}
            states = dict.fromkeys(phases, start)
            spent = dict.fromkeys(phases, 0.0)
            for _ in range(config.timing_updates):
                for name, phase in phases.items():
                    began = time.process_time()
                    states[name], _ = phase.step(
                        model, states[name], batch=dataset.train, positive=(), generator=generators[name]
                    )
                    spent[name] += time.process_time() - began
            for name in phases:
                seconds[name].append(spent[name])
            done += 2
            if progress is not None:
                progress(done, total, "paired steps")
    return {name: tuple(values) for name, values in seconds.items()}
