"""Recording the training trajectory: parameter snapshots at geometrically spaced updates.

On by default: :func:`boltzlab.train` adds a recorder (``snapshots=64``) before its
checkpointer and returns the result as ``TrainResult.trajectory`` (docs/algorithms.md §4.6).

Trajectory AIS and parallel tempering across training snapshots (Béreux et al. 2024,
"Fast, accurate training and sampling of Restricted Boltzmann Machines") anneal through
the parameters a model visited while it learnt. Early updates change the model most per
update, so snapshots are dense at the start and geometrically spaced later: every update
while the geometric grid is finer than one update, then updates ``≈ n^(k/(m−1))``, with the
grid's ratio chosen so that at most ``max_snapshots`` are kept, update 0 and the last
update always among them (:func:`geometric_updates`).

A snapshot is a copy of ``(W, b, c)`` on the CPU (no matrix product, no synchronisation
outside the snapshot updates). The recorder writes ``trajectory.safetensors``
(:class:`~boltzlab.models.trajectory.Trajectory`) atomically into its directory at every
checkpoint update of the run and at the end, and restores its snapshots from that file when
the run resumes, so a resumed run records the same trajectory as one never interrupted.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import TRAJECTORY_FILE, Trajectory
from boltzlab.training.callbacks import Callback, RunView
from boltzlab.validation import check_positive_int

__all__ = ["DEFAULT_MAX_SNAPSHOTS", "SnapshotRecorder", "geometric_updates"]

DEFAULT_MAX_SNAPSHOTS = 64


def geometric_updates(n_updates: int, max_snapshots: int = DEFAULT_MAX_SNAPSHOTS) -> tuple[int, ...]:
    """Update indices ``0 = u_0 < u_1 < … = n_updates``, geometrically spaced, at most ``max_snapshots``.

    The points are ``{0} ∪ {round(n^(k/(m−1))) : k = 0..m−1}`` for the largest ``m`` whose
    distinct values number at most ``max_snapshots``: every update at first (where the
    geometric grid is finer than one update), then a constant ratio.

    >>> geometric_updates(1000, 12)
    (0, 1, 2, 4, 8, 16, 32, 63, 126, 251, 501, 1000)
    """
    n_updates = check_positive_int(n_updates, "n_updates")
    max_snapshots = check_positive_int(max_snapshots, "max_snapshots")
    if max_snapshots < 2:
        raise ValidationError(
            f"max_snapshots must be at least 2 (the first and last update), got {max_snapshots}"
        )
    if n_updates + 1 <= max_snapshots:
        return tuple(range(n_updates + 1))

    def grid(m: int) -> tuple[int, ...]:
        exponents = torch.linspace(0.0, 1.0, m, dtype=torch.float64)
        values = torch.round(torch.pow(torch.tensor(float(n_updates), dtype=torch.float64), exponents))
        return tuple(sorted({0, n_updates, *(int(value) for value in values.tolist())}))

    best: tuple[int, ...] = (0, n_updates)
    last_fit = 1
    m, step = 2, max(1, max_snapshots // 2)
    while m <= n_updates + 1:
        candidate = grid(m)
        if len(candidate) <= max_snapshots:
            best, last_fit = candidate, m
            m += step
        elif step > 1:  # overshot with a long stride: go back and walk one point at a time
            m, step = last_fit + 1, 1
        else:
            break
    return best


class SnapshotRecorder(Callback):
    """Keep parameter snapshots of an RBM during training; write them as a trajectory.

    Parameters
    ----------
    directory : str or Path, optional
        Where ``trajectory.safetensors`` is written (at every checkpoint update of the run,
        ``config.checkpoint_every``, and at the end). ``None`` keeps the snapshots in memory
        only (:meth:`trajectory`).
    max_snapshots : int, default 64
        Most snapshots kept (:func:`geometric_updates`); each is a copy of the parameters, so
        a 784×500 float32 RBM costs 1.6 MB per snapshot.

    Notes
    -----
    Models other than :class:`~boltzlab.models.rbm.RBM` (a DBM, a Gaussian RBM) are not
    recorded: the recorder then does nothing, so it can be on by default.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training.snapshots import SnapshotRecorder
    >>> data = (torch.rand(60, 7, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    >>> recorder = SnapshotRecorder(max_snapshots=6)
    >>> _ = bl.train(bl.RBM(7, 3, generator=0), data, algorithm="pcd", n_chains=13, batch_size=20,
    ...              n_updates=40, callbacks=[recorder], generator=0)
    >>> recorder.trajectory().updates.tolist()
    [-1, 0, 1, 3, 6, 16, 40]
    """

    def __init__(
        self, directory: str | Path | None = None, *, max_snapshots: int = DEFAULT_MAX_SNAPSHOTS
    ) -> None:
        self.directory = None if directory is None else Path(directory)
        self.max_snapshots = check_positive_int(max_snapshots, "max_snapshots")
        if self.max_snapshots < 2:
            raise ValidationError(f"max_snapshots must be at least 2, got {self.max_snapshots}")
        self._snapshots: list[tuple[int, Tensor, Tensor, Tensor]] = []
        self._planned: frozenset[int] = frozenset()
        self._enabled = True
        self._base_logits: Tensor | None = None
        self._metadata: dict[str, Any] = {}
        self._checkpoint_every: int | None = None

    @property
    def path(self) -> Path | None:
        """The trajectory file, or ``None`` when the recorder keeps it in memory only."""
        return None if self.directory is None else self.directory / TRAJECTORY_FILE

    @property
    def updates(self) -> tuple[int, ...]:
        """Updates recorded so far."""
        return tuple(update for update, *_ in self._snapshots)

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self, run: RunView) -> None:
        model = run.model
        self._enabled = isinstance(model, RBM)
        if not self._enabled:
            return
        if self._snapshots and tuple(self._snapshots[0][1].shape) != tuple(model.weights.shape):
            raise ValidationError(
                f"the recorder holds snapshots of a {tuple(self._snapshots[0][1].shape)} RBM, not "
                f"{tuple(model.weights.shape)}; use a new SnapshotRecorder per run"
            )
        self._planned = frozenset(geometric_updates(run.n_updates, self.max_snapshots))
        self._checkpoint_every = run.config.checkpoint_every
        self._metadata = {"source": "boltzlab training", "training": run.config.to_record()}
        if getattr(model, "base_fitted", False):
            self._base_logits = model.base_logits.detach().to("cpu", copy=True)
        if run.update == 0:
            self._snapshots = []  # a fresh run (a recorder reused for another run starts over)
        if not self._snapshots:
            self._record(run)  # update 0, or the resume point when nothing could be restored

    def on_update(self, run: RunView) -> None:
        if not self._enabled:
            return
        update = run.update
        if update in self._planned:
            self._record(run)
        if self._checkpoint_every is not None and update % self._checkpoint_every == 0:
            self.write()

    def on_train_end(self, run: RunView) -> None:
        if not self._enabled:
            return
        if not self._snapshots or self._snapshots[-1][0] != run.update:
            self._record(run)
        self.write()

    def state(self) -> dict[str, Any]:
        return {"updates": list(self.updates)} if self._snapshots else {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore the snapshots a checkpoint lists from the trajectory file written beside it.

        When the file is missing, damaged or lacks some of them, a warning says so and the
        trajectory restarts at the resume point (still a valid path, with fewer points).
        """
        wanted = [int(update) for update in state.get("updates", [])]
        if not wanted:
            return
        problem = None
        if self.path is None or not self.path.is_file():
            problem = (
                f"{self.path} does not exist" if self.path is not None else "the recorder has no directory"
            )
        else:
            try:
                trajectory = Trajectory.load(self.path)
            except ModelFileError as error:
                problem = str(error)
            else:
                recorded = trajectory.updates.tolist()
                missing = [update for update in wanted if update not in recorded]
                if missing:
                    problem = f"{self.path} lacks the snapshots of updates {missing[:5]}"
                else:
                    self._snapshots = [
                        (
                            update,
                            trajectory.weights[recorded.index(update)].clone(),
                            trajectory.visible_bias[recorded.index(update)].clone(),
                            trajectory.hidden_bias[recorded.index(update)].clone(),
                        )
                        for update in wanted
                    ]
                    return
        warnings.warn(
            f"cannot restore the training trajectory ({problem}); it restarts at the resume point",
            UserWarning,
            stacklevel=2,
        )
        self._snapshots = []

    # ------------------------------------------------------------------ snapshots
    def _record(self, run: RunView) -> None:
        model = run.model
        copies = tuple(
            tensor.detach().to("cpu", copy=True)
            for tensor in (model.weights, model.visible_bias, model.hidden_bias)
        )
        # A diverged update is left out; the trainer reports the divergence itself.
        if all(bool(torch.isfinite(tensor).all()) for tensor in copies):
            self._snapshots.append((int(run.update), *copies))

    def trajectory(self) -> Trajectory | None:
        """The snapshots so far as a :class:`Trajectory` (anchor prepended), or ``None`` if none."""
        if not self._snapshots:
            return None
        updates, weights, visible_bias, hidden_bias = zip(*self._snapshots, strict=True)
        return Trajectory.from_snapshots(
            list(weights),
            list(visible_bias),
            list(hidden_bias),
            updates=list(updates),
            base_logits=self._base_logits,
            metadata=self._metadata,
        )

    def write(self) -> Path | None:
        """Write ``trajectory.safetensors`` (atomically) if the recorder has a directory."""
        if self.path is None or not self._snapshots or not distributed.topology().is_main:
            return None  # under torchrun, rank 0 alone writes (every rank holds the same snapshots)
        trajectory = self.trajectory()
        return None if trajectory is None else trajectory.save(self.path)
