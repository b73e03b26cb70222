"""DBM rows for ``boltzlab evaluate``: the variational lower bound and per-example AIS log p(v).

A DBM's ``log p(v)`` needs a sum over all hidden layers, so ``evaluate`` reports what the CAST
paper reports (Salakhutdinov 2010, Table 1; docs/algorithms.md §1.2): the mean-field lower bound
``E_Q[−E(v, h)] + H(Q) − log Z`` per split, with ``log Z`` from any estimator, and optionally
per-example AIS on a few cases (:mod:`boltzlab.estimators.dbm_likelihood`) to show how tight
the bound is. :func:`dbm_bound_rows` and :func:`dbm_likelihood_rows` return
:class:`DBMBoundRow` objects; :func:`format_dbm_rows` turns them into aligned text. Kept apart
from :mod:`boltzlab.cli.evaluate` so either can change without the other.

Error bars: ``± log Z`` is the estimator's standard error (common to every example);
``± spread`` is the standard error of the mean over the examples (how much the mean would move
with other examples from the same distribution); for per-example AIS it is the AIS noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.cli.common import format_table
from boltzlab.errors import ValidationError
from boltzlab.models.dbm import DBM
from boltzlab.models.mean_field import variational_lower_bound_per_example
from boltzlab.validation import as_model_data, check_positive_int

__all__ = ["DBMBoundRow", "dbm_bound_rows", "dbm_likelihood_rows", "format_dbm_rows"]


@dataclass(frozen=True)
class DBMBoundRow:
    """One line of the DBM table.

    Attributes
    ----------
    quantity : str
        ``"lower bound"`` or ``"AIS log p(v)"``.
    split : str
        ``"train"``, ``"test"``, ...
    n_examples : int
    value : float
        Mean over the examples, nats per example.
    stderr : float
        Standard error of the mean over examples (bound) or the AIS noise (log p(v)).
    log_z : float
    log_z_stderr : float
        The ``log Z`` used and its standard error.
    log_z_method : str
    """

    quantity: str
    split: str
    n_examples: int
    value: float
    stderr: float
    log_z: float
    log_z_stderr: float
    log_z_method: str


def _log_z_parts(log_z_estimate: Any) -> tuple[float, float, str]:
    if hasattr(log_z_estimate, "log_z"):
        return float(log_z_estimate.log_z), float(log_z_estimate.stderr), str(log_z_estimate.method)
    try:
        return float(log_z_estimate), 0.0, "given"
    except (TypeError, ValueError):
        raise ValidationError(
            f"log_z_estimate must be a LogZEstimate or a number, got {log_z_estimate!r}"
        ) from None


def _splits(model: DBM, data: Any) -> dict[str, Tensor]:
    """``{split name: examples}`` from a Dataset, a mapping of tensors, or one tensor ("data")."""
    if isinstance(data, Mapping):
        items = dict(data)
    elif hasattr(data, "train"):
        items = {
            "train": data.train,
            "validation": getattr(data, "valid", None),
            "test": getattr(data, "test", None),
        }
    else:
        items = {"data": data}
    return {
        name: as_model_data(model, examples, name)
        for name, examples in items.items()
        if examples is not None and len(examples) > 0
    }


def dbm_bound_rows(
    model: DBM, data: Any, log_z_estimate: Any, *, n_mean_field_updates: int = 5
) -> list[DBMBoundRow]:
    """The mean variational lower bound of each split, with ``log Z`` from ``log_z_estimate``.

    Parameters
    ----------
    model : DBM
    data : Dataset, mapping of split name to Tensor, or Tensor of shape (n, n_visible)
        A :class:`boltzlab.data.Dataset` gives its train, validation and test splits.
    log_z_estimate : LogZEstimate or float
        E.g. ``bl.estimate_log_z(model, method="ais")``; an AIS ``log Z`` tends to be low, so
        the bound tends to be high by the same amount.
    n_mean_field_updates : int, default 5
        Mean-field updates per example (the CAST paper's 5).

    Returns
    -------
    list of DBMBoundRow
        One per non-empty split, ``quantity = "lower bound"``.
    """
    if not isinstance(model, DBM):
        raise ValidationError(f"model must be a boltzlab.DBM, got {type(model).__name__}")
    log_z, log_z_stderr, method = _log_z_parts(log_z_estimate)
    rows = []
    for split, examples in _splits(model, data).items():
        bounds = variational_lower_bound_per_example(model, examples, log_z, n_updates=n_mean_field_updates)
        n = bounds.numel()
        spread = float(bounds.std()) / math.sqrt(n) if n > 1 else math.nan
        rows.append(
            DBMBoundRow("lower bound", split, n, float(bounds.mean()), spread, log_z, log_z_stderr, method)
        )
    return rows


def dbm_likelihood_rows(
    model: DBM,
    data: Any,
    log_z_estimate: Any,
    *,
    n_examples: int = 20,
    n_chains: int = 50,
    n_temperatures: int = 1000,
    generator: torch.Generator | int | None = 0,
) -> list[DBMBoundRow]:
    """Per-example AIS ``log p(v)`` of the first ``n_examples`` of each split, and the bound on them.

    Two rows per split: ``"AIS log p(v)"`` (± its AIS noise, ``log Z``'s error apart) and
    ``"lower bound"`` on the same examples, so the gap is the bound's looseness there.
    """
    from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood

    if not isinstance(model, DBM):
        raise ValidationError(f"model must be a boltzlab.DBM, got {type(model).__name__}")
    n_examples = check_positive_int(n_examples, "n_examples")
    log_z, log_z_stderr, method = _log_z_parts(log_z_estimate)
    rows = []
    for split, examples in _splits(model, data).items():
        subset = examples[:n_examples]
        estimate = estimate_log_likelihood(
            model,
            subset,
            log_z=log_z,
            n_chains=n_chains,
            n_temperatures=n_temperatures,
            generator=generator,
        )
        n = subset.shape[0]
        label = f"{split} (first {n})"
        rows.append(
            DBMBoundRow(
                "AIS log p(v)", label, n, estimate.mean, estimate.mean_stderr, log_z, log_z_stderr, method
            )
        )
        bounds = estimate.variational_bound
        spread = float(bounds.std()) / math.sqrt(n) if n > 1 else math.nan
        rows.append(
            DBMBoundRow("lower bound", label, n, estimate.mean_bound, spread, log_z, log_z_stderr, method)
        )
    return rows


def format_dbm_rows(rows: list[DBMBoundRow]) -> str:
    """Aligned text: quantity, split, examples, mean ± spread, log Z ± error, method."""

    def number(value: float) -> str:
        return "—" if not math.isfinite(value) else f"{value:.4f}"

    header = ["quantity", "split", "examples", "nats/example", "± spread", "log Z", "± log Z", "log Z by"]
    cells = [
        [
            row.quantity,
            row.split,
            str(row.n_examples),
            number(row.value),
            number(row.stderr),
            number(row.log_z),
            "0" if row.log_z_stderr == 0 else number(row.log_z_stderr),
            row.log_z_method,
        ]
        for row in rows
    ]
    return format_table(header, cells)
