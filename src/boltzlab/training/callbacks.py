"""Callbacks: what happens around the training loop without being part of it.

The trainer calls every callback at fixed points (:class:`Callback`); a callback sees the run
through :class:`RunView` and may add metrics to a history record, react to a record, stop
the run, or keep state that is saved in checkpoints. The ones here track the exact
log-likelihood of small models, show a progress bar, write the metrics CSV, write checkpoints
and stop early. Those that write files do so only through :mod:`boltzlab.io` (atomic writes).

Exact tracking computes ``log Z`` by enumeration of the smaller layer (docs/algorithms.md §1.1),
as in the small-model experiments of Tieleman (2008) and Brügge, Fischer & Igel (2013), where
the exact log-likelihood of the training data is reported during learning.
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path
from typing import Any, Protocol

from torch import Tensor

from boltzlab import distributed
from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import exact_log_z
from boltzlab.estimators.likelihood import log_likelihood
from boltzlab.io import Checkpoint, save_checkpoint, write_atomic
from boltzlab.training.state import (
    TrainConfig,
    TrainRecord,
    checkpoint_path,
)
from boltzlab.validation import check_positive_int

__all__ = [
    "CSVLogger",
    "Callback",
    "Checkpointer",
    "EarlyStopping",
    "ExactLikelihoodTracker",
    "ProgressBar",
    "RunView",
]

MAX_EXACT_UNITS = 25


class RunView(Protocol):
    """What a callback may read from, and ask of, a running trainer."""

    @property
    def model(self) -> Any: ...
    @property
    def data(self) -> Tensor: ...
    @property
    def validation_data(self) -> Tensor | None: ...
    @property
    def config(self) -> TrainConfig: ...
    @property
    def update(self) -> int: ...
    @property
    def n_updates(self) -> int: ...
    @property
    def history(self) -> tuple[TrainRecord, ...]: ...

    def request_stop(self) -> None:
        """End the run after the current update (``TrainResult.stopped_early`` is then true)."""
        ...

    def checkpoint(self) -> Checkpoint:
        """The tensors and metadata of a checkpoint of the current state (checks finiteness)."""
        ...


class Callback:
    """Base class of callbacks; every hook does nothing unless overridden.

    Order of calls: ``on_train_begin``; per update ``wants_record`` → (when a record is made)
    ``measure`` of every callback, then ``on_record`` of every callback → ``on_update``; at a
    normal end ``on_train_end``; always, even after an error, ``close``.
    """

    def on_train_begin(self, run: RunView) -> None:
        """Before the first update (of this segment, when resuming)."""

    def wants_record(self, update: int) -> bool:
        """Whether a history record must be made after ``update`` updates."""
        return False

    def measure(self, run: RunView) -> dict[str, float]:
        """Metrics to put in the record being made (names of TrainRecord fields or extras)."""
        return {}

    def on_record(self, run: RunView, record: TrainRecord) -> None:
        """A record was appended to the history."""

    def on_update(self, run: RunView) -> None:
        """After every update (keep it cheap: it runs in the hot loop)."""

    def on_train_end(self, run: RunView) -> None:
        """After the last update of a run that ended normally (or stopped early)."""

    def close(self) -> None:
        """Release resources (progress bars); called even when training raised."""

    def state(self) -> dict[str, Any]:
        """JSON-able state saved in checkpoints (empty for stateless callbacks)."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`'s output when resuming."""


class ExactLikelihoodTracker(Callback):
    """Exact ``log Z`` by enumeration every ``every`` updates, with the train and validation
    mean log-likelihoods (nats per example; the training data's weighted by the run's
    ``sample_weights`` when it has them).

    Parameters
    ----------
    every : int
        Track after every ``every``-th update (and before training).

    Raises
    ------
    ValidationError
        At the start of training, if the smaller layer has more than 25 units (2^25 states).
    """

    def __init__(self, every: int) -> None:
        self.every = check_positive_int(every, "track_exact_every")

    def on_train_begin(self, run: RunView) -> None:
        smaller = min(run.model.layer_sizes)
        if smaller > MAX_EXACT_UNITS:
            raise ValidationError(
                f"track_exact_every needs a small model: exact log Z enumerates 2^{smaller} states "
                f"(the smaller layer has {smaller} units, at most {MAX_EXACT_UNITS} allowed); "
                "use an estimator (boltzlab.estimate_log_z) after training instead"
            )

    def wants_record(self, update: int) -> bool:
        return update % self.every == 0

    def measure(self, run: RunView) -> dict[str, float]:
        if run.update % self.every != 0:
            return {}
        log_z = exact_log_z(run.model)
        # With per-example weights the training data's mean is the weighted one (what is fitted).
        weights = getattr(run, "sample_weights", None)
        train = log_likelihood(run.model, run.data, log_z, sample_weights=weights)
        metrics = {"log_z": log_z, "train_log_likelihood": train}
        if run.validation_data is not None:
            metrics["validation_log_likelihood"] = log_likelihood(run.model, run.validation_data, log_z)
        return metrics


class ProgressBar(Callback):
    """A ``tqdm`` bar over updates, showing the latest record's metrics."""

    _SHORT = (
        ("reconstruction_error", "recon"),
        ("train_log_likelihood", "train_ll"),
        ("validation_log_likelihood", "validation_ll"),
        ("learning_rate", "lr"),
    )

    def __init__(self, *, description: str = "training") -> None:
        self.description = description
        self._bar: Any = None

    def on_train_begin(self, run: RunView) -> None:
        from tqdm.auto import tqdm

        # A terminal that reports a size of zero (`script`, some containers) made tqdm draw
        # nothing (it took it for one of -1 rows): there, $COLUMNS × $LINES or 80 × 24.
        size = shutil.get_terminal_size() if sys.stderr.isatty() else None
        self._bar = tqdm(
            total=run.n_updates,
            initial=run.update,
            desc=self.description,
            unit="update",
            ncols=None if size is None else size.columns,
            nrows=None if size is None else size.lines,
        )

    def on_record(self, run: RunView, record: TrainRecord) -> None:
        if self._bar is None:
            return
        shown = {}
        for name, short in self._SHORT:
            value = record.get(name)
            if value is not None:
                shown[short] = f"{value:.4g}"
        self._bar.set_postfix(shown, refresh=False)

    def on_update(self, run: RunView) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class CSVLogger(Callback):
    """The history as CSV: a header row, then one row per record.

    The whole file is rewritten atomically (:func:`boltzlab.io.write_atomic`) after every
    record, so a crash leaves the previous complete file, a resumed run rewrites it from the
    checkpoint's history (dropping rows of updates that will be redone), and a metric that
    appears later simply adds a column. Empty cells mean "not measured at this update".

    Parameters
    ----------
    path : str or Path
    """

    COLUMNS = (
        "update",
        "epoch",
        "learning_rate",
        "time",
        "reconstruction_error",
        "log_z",
        "train_log_likelihood",
        "validation_log_likelihood",
    )

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._records: list[TrainRecord] = []

    def on_train_begin(self, run: RunView) -> None:
        self._records = list(run.history)
        self._write()

    def on_record(self, run: RunView, record: TrainRecord) -> None:
        self._records.append(record)
        self._write()

    @staticmethod
    def _cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        return repr(value) if isinstance(value, float) else str(value)

    def _write(self) -> None:
        extras = sorted({name for record in self._records for name in record.extra})
        columns = [*self.COLUMNS, *extras]
        lines = [",".join(columns)]
        lines.extend(",".join(self._cell(record.get(name)) for name in columns) for record in self._records)
        write_atomic(self.path, ("\n".join(lines) + "\n").encode())


class Checkpointer(Callback):
    """Atomic checkpoints every ``every`` updates and at the end, keeping the newest ``keep``.

    A checkpoint is written only after checking that every parameter is finite, so a diverged
    run never overwrites its last good checkpoint.

    Parameters
    ----------
    directory : str or Path
    every : int or None
        Interval in updates; ``None`` writes only the final checkpoint.
    keep : int, default 2
        Older checkpoint files beyond the newest ``keep`` are deleted.
    """

    def __init__(self, directory: str | Path, *, every: int | None = None, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.every = None if every is None else check_positive_int(every, "checkpoint_every")
        self.keep = check_positive_int(keep, "keep")
        self.last_path: Path | None = None
        self._written: list[Path] = []

    def on_train_begin(self, run: RunView) -> None:
        # A resumed run adopts the files already there: the newest is its last good checkpoint.
        self._written = (
            sorted(self.directory.glob("checkpoint-*.safetensors")) if self.directory.is_dir() else []
        )
        self.last_path = self._written[-1] if self._written else None

    def on_update(self, run: RunView) -> None:
        if self.every is not None and run.update % self.every == 0:
            self.save(run)

    def on_train_end(self, run: RunView) -> None:
        if self.last_path != checkpoint_path(self.directory, run.update):
            self.save(run)

    def save(self, run: RunView) -> Path:
        """Write a checkpoint of the current state; returns its path."""
        payload = run.checkpoint()  # raises DivergenceError before anything non-finite is written
        if not distributed.topology().is_main:
            # Under torchrun every process builds the checkpoint (it gathers the chains); rank 0 writes it.
            self.last_path = checkpoint_path(self.directory, run.update)
            return self.last_path
        path = save_checkpoint(
            checkpoint_path(self.directory, run.update), tensors=payload.tensors, metadata=payload.metadata
        )
        self.last_path = path
        self._written.append(path)
        while len(self._written) > self.keep:
            self._written.pop(0).unlink(missing_ok=True)
        return path


class EarlyStopping(Callback):
    """Stop when a metric has not improved for ``patience`` consecutive records that hold it.

    Parameters
    ----------
    metric : str, default "validation_log_likelihood"
        A :class:`TrainRecord` field or extra metric; records without it are ignored.
    patience : int, default 5
    min_delta : float, default 0.0
        Smallest change that counts as an improvement.
    mode : {"max", "min"}, default "max"
    """

    def __init__(
        self,
        metric: str = "validation_log_likelihood",
        *,
        patience: int = 5,
        min_delta: float = 0.0,
        mode: str = "max",
    ) -> None:
        if mode not in ("max", "min"):
            raise ValidationError(f"mode must be 'max' or 'min', got {mode!r}")
        if not (isinstance(min_delta, (int, float)) and min_delta >= 0):
            raise ValidationError(f"min_delta must be a number >= 0, got {min_delta!r}")
        self.metric = metric
        self.patience = check_positive_int(patience, "patience")
        self.min_delta = float(min_delta)
        self.mode = mode
        self.best: float | None = None
        self.stale = 0

    def on_record(self, run: RunView, record: TrainRecord) -> None:
        value = record.get(self.metric)
        if value is None:
            return
        sign = 1.0 if self.mode == "max" else -1.0
        if self.best is None or sign * (value - self.best) > self.min_delta:
            self.best, self.stale = value, 0
            return
        self.stale += 1
        if self.stale >= self.patience:
            run.request_stop()

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "stale": self.stale}

    def load_state(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.stale = int(state.get("stale", 0))
