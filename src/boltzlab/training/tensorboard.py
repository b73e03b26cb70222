"""TensorBoard logging of a training run: scalars, sample images and parameter histograms.

:class:`TensorBoardLogger` is a :class:`~boltzlab.training.callbacks.Callback` that writes, at
every history record (every ``log_every`` updates, and whenever a tracker records):

* scalars ``metrics/<name>`` at step = update: every number of the record — learning rate,
  reconstruction error, wall-clock time, the tracked ``log_z`` and train / validation
  log-likelihood where a tracker ran, and the negative phase's and callbacks' extras (swap
  acceptance and round trips of PT, level acceptance and bottom occupancy of adaptive ST and
  CAST, the RTS tracker's log Z, …);
* an image ``samples``: the visible states of ``n_images`` chains the logger keeps for
  itself, advanced ``sample_sweeps`` Gibbs sweeps before each image (they start from the
  model's base and are not the training chains, so logging never changes the run: the
  logger has its own generator);
* histograms ``parameters/<name>`` of every parameter of the model (weights and biases).

It is the one writer of the training layer that does not go through :mod:`boltzlab.io`:
event files are append-only logs that TensorBoard reads while they grow, so the atomic
rewrite used for CSV and checkpoints does not apply. A resumed run opens the same directory
with ``purge_step`` at the resumed update, so TensorBoard drops events of updates that are
redone. ``torch.utils.tensorboard`` needs the ``tensorboard`` package, an optional extra:
without it the logger refuses at construction with the command that installs it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed
from boltzlab.errors import BoltzlabError
from boltzlab.rng import make_generator
from boltzlab.sampling import sample
from boltzlab.training.callbacks import Callback, RunView
from boltzlab.training.state import TrainRecord
from boltzlab.validation import check_positive_int

__all__ = ["INSTALL_HINT", "TensorBoardLogger", "TensorBoardMissingError", "tile_states"]

INSTALL_HINT = "pip install 'boltzlab[tensorboard]'"
_RECORD_SCALARS = (
    "learning_rate",
    "reconstruction_error",
    "time",
    "log_z",
    "train_log_likelihood",
    "validation_log_likelihood",
)


class TensorBoardMissingError(BoltzlabError, ImportError):
    """TensorBoard logging was asked for, but the ``tensorboard`` package is not installed."""


def _summary_writer_class() -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise TensorBoardMissingError(
            f"TensorBoard logging needs the tensorboard package, which is not installed: {INSTALL_HINT}"
        ) from None
    return SummaryWriter


def tile_states(states: Tensor, image_shape: tuple[int, int] | None = None, *, padding: int = 1) -> Tensor:
    """Visible states as one grey image, about ``sqrt(n)`` per row, padding 0.5.

    Parameters
    ----------
    states : Tensor, shape (n, n_visible)
        Values in [0, 1] are drawn as they are; any other range is scaled to [0, 1].
    image_shape : (height, width), optional
        Default: a square when ``n_visible`` is a square number, else one row per state.

    Returns
    -------
    Tensor, shape (rows · (height + padding) + padding, columns · (width + padding) + padding)
    """
    states = states.detach().to("cpu", torch.float32)
    n, n_visible = states.shape
    if image_shape is None:
        side = math.isqrt(n_visible)
        image_shape = (side, side) if side * side == n_visible else (1, n_visible)
    height, width = image_shape
    low, high = float(states.min()), float(states.max())
    if low < 0.0 or high > 1.0:
        states = (states - low) / max(high - low, 1e-12)
    columns = max(1, math.ceil(math.sqrt(n)))
    rows = math.ceil(n / columns)
    grid = torch.full((rows * (height + padding) + padding, columns * (width + padding) + padding), 0.5)
    for index in range(n):
        top = padding + (index // columns) * (height + padding)
        left = padding + (index % columns) * (width + padding)
        grid[top : top + height, left : left + width] = states[index].reshape(height, width)
    return grid


class TensorBoardLogger(Callback):
    """Scalars, sample images and parameter histograms for TensorBoard (module docstring).

    Parameters
    ----------
    log_dir : str or Path
        Where the event files go (created if needed); view with ``tensorboard --logdir DIR``.
    image_shape : (height, width), optional
        How to draw one visible state (e.g. ``(28, 28)``); default as :func:`tile_states`.
    n_images : int, default 16
        Chains drawn in the ``samples`` image; 0 logs no images.
    sample_sweeps : int, default 100
        Gibbs sweeps of those chains before each image.
    histograms : bool, default True
        Log ``parameters/<name>`` histograms.
    seed : int, default 0
        Seed of the logger's own chains (the run's generator is never touched).

    Raises
    ------
    TensorBoardMissingError
        The ``tensorboard`` package is not installed.
    """

    def __init__(
        self,
        log_dir: str | Path,
        *,
        image_shape: tuple[int, int] | None = None,
        n_images: int = 16,
        sample_sweeps: int = 100,
        histograms: bool = True,
        seed: int = 0,
    ) -> None:
        self._writer_class = _summary_writer_class()
        self.log_dir = Path(log_dir)
        self.image_shape = image_shape
        self.n_images = int(n_images)
        if self.n_images < 0:
            raise BoltzlabError(f"n_images must be >= 0, got {n_images!r}")
        self.sample_sweeps = check_positive_int(sample_sweeps, "sample_sweeps")
        self.histograms = bool(histograms)
        self.seed = int(seed)
        self._writer: Any = None
        self._chains: Any = None
        self._generator: torch.Generator | None = None

    def on_train_begin(self, run: RunView) -> None:
        purge = run.update if run.update > 0 else None
        self._writer = self._writer_class(log_dir=str(self.log_dir), purge_step=purge)
        self._generator = make_generator(self.seed, run.model.device)
        self._chains = None
        config = json.dumps(run.config.to_dict(), indent=1, default=str)
        # Markdown: four leading spaces make TensorBoard's text tab show it as code.
        self._writer.add_text("run/config", "    " + config.replace("\n", "\n    "), run.update)

    def on_record(self, run: RunView, record: TrainRecord) -> None:
        if self._writer is None:
            return
        step = record.update
        for name in (*_RECORD_SCALARS, *sorted(record.extra)):
            value = record.get(name)
            if value is not None and math.isfinite(value):
                self._writer.add_scalar(f"metrics/{name}", float(value), step)
        if self.n_images > 0:
            self._writer.add_image("samples", self._samples(run.model), step, dataformats="HW")
        if self.histograms:
            for name, parameter in run.model.named_parameters():
                self._writer.add_histogram(f"parameters/{name}", parameter.detach().cpu(), step)
        self._writer.flush()

    def _samples(self, model: Any) -> Tensor:
        """The logger's chains after ``sample_sweeps`` more Gibbs sweeps, tiled."""
        # Under torchrun only rank 0 logs: its samples must not wait for the other processes.
        with torch.no_grad(), distributed.local():
            result = sample(
                model,
                n_chains=self.n_images,
                n_sweeps=self.sample_sweeps,
                init="base" if self._chains is None else self._chains,
                generator=self._generator,
            )
        self._chains = result.chains
        return tile_states(result.chains.layers[0], self.image_shape)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
