"""What tracking the log-likelihood with RTS costs (Carlson et al. 2016, §4.4; docs/algorithms.md §4.3).

:func:`run_timing` — CPU seconds of training runs of the same length from the same pretrained
model and seed (RTS's initial iterations excluded): the RTS phase with the tracking callback
against the same run without the callback, against the same phase with ``Ẑ`` frozen (the
sampler without any tracking), and against plain PCD with the same number of chain-sweeps
(``n_chains × k`` per update); and, because whole runs on a shared machine vary by tens of per
cent, two direct measurements: the time inside the callback, and a paired comparison of phase
steps with and without the ``ĉ`` sums and the damped update.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM, TrainResult, train
from boltzlab.data import Dataset
from boltzlab.operators import get as get_operator
from boltzlab.rng import make_generator
from boltzlab.training import Callback, RTSLikelihoodTracker, RTSTracking
from boltzlab_experiments.cli import Progress
from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig
from boltzlab_experiments.rts_tracking.run import check_inputs, pretrain

__all__ = ["TrackingTimings", "run_timing"]


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


def run_timing(
    config: RTSTrackingConfig, dataset: Dataset, *, seed: int = 0, progress: Progress | None = None
) -> TrackingTimings:
    """CPU seconds of ``timing_updates`` updates with tracking, without it, and with PCD.

    All runs start from one CD-1-pretrained model with the same seed and settings; each is
    repeated ``timing_repeats`` times, interleaved (:class:`TrackingTimings`). Then the paired
    measurement of the phase's bookkeeping, also interleaved.
    """
    check_inputs(config, dataset)
    pretrained, _ = pretrain(config, dataset, seed=seed)
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
