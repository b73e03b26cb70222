"""Training curves from a run's history: exact log-likelihood and reconstruction error vs update.

The log-likelihood panel shows the exact mean log-likelihood per example (nats) of the
training and validation data wherever the run tracked it (``track_exact_every``), as in the
learning curves of Tieleman (2008, Fig. 1) and Brügge, Fischer & Igel (2013, Figs. 2–4);
the reconstruction error is the cheap proxy every record has (and a poor one: it can fall
while the likelihood falls too, which is why both are drawn).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from matplotlib.axes import Axes

from boltzlab.training.state import TrainRecord, TrainResult

__all__ = ["has_log_likelihood", "plot_log_likelihood", "plot_reconstruction_error", "records_of"]


def records_of(history: TrainResult | Iterable[TrainRecord]) -> tuple[TrainRecord, ...]:
    """The records of a :class:`TrainResult` or of an iterable of :class:`TrainRecord`."""
    if isinstance(history, TrainResult):
        return history.history
    return tuple(history)


def _series(records: tuple[TrainRecord, ...], name: str) -> tuple[list[int], list[float]]:
    """Updates and values of the metric ``name`` where it was measured and finite."""
    points = [(record.update, record.get(name)) for record in records]
    kept = [(update, float(value)) for update, value in points if value is not None and math.isfinite(value)]
    return [update for update, _ in kept], [value for _, value in kept]


def has_log_likelihood(history: TrainResult | Iterable[TrainRecord]) -> bool:
    """Whether any record holds an exact train or validation log-likelihood."""
    records = records_of(history)
    return any(_series(records, name)[0] for name in ("train_log_likelihood", "validation_log_likelihood"))


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_log_likelihood(
    ax: Axes,
    history: TrainResult | Iterable[TrainRecord],
    *,
    validation_label: str = "validation",
    title: str | None = "exact log-likelihood",
) -> Axes:
    """Train and validation log-likelihood (nats per example) against the update number.

    Parameters
    ----------
    ax : Axes
    history : TrainResult or iterable of TrainRecord
        Records without a log-likelihood are skipped; with none at all the panel says so.
    validation_label : str, default "validation"
        Legend entry of the held-out curve (e.g. ``"test"``).
    """
    records = records_of(history)
    drawn = 0
    style: dict[str, Any] = {"marker": "o", "markersize": 2.5, "linewidth": 1.2}
    for name, label in (("train_log_likelihood", "train"), ("validation_log_likelihood", validation_label)):
        updates, values = _series(records, name)
        if updates:
            ax.plot(updates, values, label=label, **style)
            drawn += 1
    if drawn == 0:
        _note(ax, "log-likelihood not tracked\n(use track_exact_every on small models)")
    else:
        ax.set_xlabel("update")
        ax.set_ylabel("log-likelihood (nats / example)")
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        ax.set_title(title)
    return ax


def plot_reconstruction_error(
    ax: Axes,
    history: TrainResult | Iterable[TrainRecord],
    *,
    title: str | None = "reconstruction error",
) -> Axes:
    """Mean-field reconstruction error (squared, summed over units) against the update number."""
    updates, values = _series(records_of(history), "reconstruction_error")
    if updates:
        ax.plot(updates, values, color="C2", linewidth=1.2)
        ax.set_xlabel("update")
        ax.set_ylabel("squared error / example")
        ax.grid(alpha=0.3)
    else:
        _note(ax, "no records")
    if title:
        ax.set_title(title)
    return ax
