"""What ``train`` and ``demo`` write beside the model: plots, TensorBoard logs and the report page.

``--tensorboard [DIR]`` on ``train`` becomes a :class:`boltzlab.training.tensorboard.TensorBoardLogger`
writing to DIR (default ``RUN_DIR/tensorboard``); it is built before training starts, so a
missing ``tensorboard`` package stops the command at once with the line that installs it.
:func:`finish_report` writes ``RUN_DIR/report.html`` at the end of a run
(:mod:`boltzlab.cli.run_report`); a report that cannot be built becomes a warning, because the
run it describes has already been saved.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from boltzlab.data.dataset import Dataset
from boltzlab.errors import BoltzlabError
from boltzlab.training.state import TrainResult

__all__ = []

#: Chains (and training examples beside them) drawn in ``plots/samples.png``.
_N_SHOWN_SAMPLES = 64
#: Hidden units whose weight logos ``plots/weight_logos.png`` shows (those with the largest weights).
N_LOGOS = 20
LOGOS_FILE = "weight_logos.png"

# --tensorboard's default folder in RUN_DIR (its help: boltzlab.cli.choices.TENSORBOARD_HELP).
_TENSORBOARD_DIR = "tensorboard"


def tensorboard_dir(value: str | None, out: Path) -> Path | None:
    """The log directory of ``--tensorboard``: ``None`` when not given, ``out/tensorboard`` when
    given without a directory."""
    if value is None:
        return None
    return Path(value) if value else out / _TENSORBOARD_DIR


def tensorboard_callbacks(
    value: str | None, out: Path, *, image_shape: tuple[int, int] | None, seed: int
) -> list[Any]:
    """``[TensorBoardLogger]`` for ``--tensorboard``, else ``[]``."""
    directory = tensorboard_dir(value, out)
    if directory is None:
        return []
    from boltzlab.training.tensorboard import TensorBoardLogger

    return [TensorBoardLogger(directory, image_shape=image_shape, seed=seed)]


def finish_report(out: Path, *, seed: int) -> list[Path]:
    """``[out/report.html]`` once written; ``[]`` with a warning when it could not be built."""
    from boltzlab.cli.run_report import write_report  # here: matplotlib stays out of `boltzlab --help`

    try:
        return [write_report(out, seed=seed)]
    except BoltzlabError as error:
        warnings.warn(f"report.html not written: {error}", stacklevel=2)
        return []


def write_logos(model: Any, plots: Path, *, title: str) -> list[Path]:
    """``plots/weight_logos.png``: the weight logos of a Potts RBM's hidden units with the largest
    weights (:func:`boltzlab.plotting.sequences.weight_logos_figure`); ``[]`` for a model
    without an alphabet."""
    from boltzlab.plotting import save_figure
    from boltzlab.plotting.sequences import weight_logos_figure

    alphabet = getattr(model, "alphabet", None)
    if alphabet is None:
        return []
    shown = min(N_LOGOS, model.n_hidden)
    figure = weight_logos_figure(
        model.potts_weights,
        alphabet.symbols,
        alphabet_name=alphabet.name,
        max_units=shown,
        title=f"{title}: the {shown} hidden units with the largest weights"
        + (f" (of {model.n_hidden})" if shown < model.n_hidden else ""),
    )
    return [save_figure(figure, plots / LOGOS_FILE, dpi=90)]


def write_plots(
    result: TrainResult,
    dataset: Dataset,
    plots: Path,
    *,
    samples: Any,
    samples_title: str,
    held_out_label: str,
    title: str,
) -> list[Path]:
    """``plots/training.png`` and ``plots/samples.png``; returns the paths written."""
    from boltzlab.plotting import samples_figure, save_figure, training_figure

    written = [
        save_figure(
            training_figure(result, validation_label=held_out_label, title=title), plots / "training.png"
        )
    ]
    if samples is not None:
        figure = samples_figure(
            samples[:_N_SHOWN_SAMPLES].cpu(),
            data=dataset.train[:_N_SHOWN_SAMPLES],
            image_shape=dataset.image_shape,
            title=samples_title,
        )
        written.append(save_figure(figure, plots / "samples.png"))
    return written
