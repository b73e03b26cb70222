"""``--json``: one JSON object on stdout, for scripts (``logz``, ``evaluate``).

An estimate becomes ``{"method", "log_z", "stderr", "bias", "cost_sweeps", "seconds",
"reliable", "verdict", "unchecked", "warnings", "lower_bound", "world_size", "diagnostics"}``:
``verdict`` is ``"reliable"``, ``"unchecked"`` or ``"unreliable"`` (``reliable`` is true for the
first alone; docs/trust.md, "Three verdicts") and ``unchecked`` the sentence saying what was not
checked, or ``null``; ``diagnostics`` holds
every scalar of the estimator's ``info`` (ESS, chains, operator, round trips, ...) and, as a
nested object under the field's name, those of the dataclasses it holds one level down
(``"budget": {"max_chains": 1600, ...}``). Non-finite numbers become ``null`` (JSON has no NaN
or infinity), and so does a value that is missing (never an empty string). Objects appear by
name (an operator as ``"gibbs"``), never as a Python ``repr``. ``world_size`` is the number of
processes of the run (1 without torchrun); which methods share their work between them is in
docs/architecture.md, "Scaling out".
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import click

from boltzlab import distributed
from boltzlab.estimators.result import LogZEstimate

__all__ = []


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (lists and dicts recursively)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


def _scalar(value: Any) -> Any | None:
    """A JSON scalar for a bool, int, float or str (a one-element tensor too); else ``None``."""
    if isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel) and numel() == 1:
        return item()
    return None


def _is_record(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def estimate_diagnostics(info: Any, *, vectors: bool = False) -> dict[str, Any]:
    """Scalar fields of ``info`` (a dataclass), and those of the dataclasses it holds one level
    down as a nested object under the field's name (left out when it has none).

    ``vectors``: one-dimensional tensors too, as lists (a tempered sampler's per-level rates);
    2-D histories are always left out.
    """
    return _fields(info, vectors=vectors, depth=1)


def _fields(record: Any, *, vectors: bool, depth: int) -> dict[str, Any]:
    if not _is_record(record):
        return {}
    out: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        scalar = _scalar(value)
        if scalar is not None:
            out[field.name] = None if scalar == "" else scalar  # an empty text is a missing value
        elif vectors and getattr(value, "dim", None) is not None and value.dim() == 1:
            out[field.name] = value.tolist()
        elif depth > 0 and _is_record(value):
            inner = _fields(value, vectors=vectors, depth=depth - 1)
            if inner:
                out[field.name] = inner
    return out


def estimate_record(estimate: LogZEstimate, *, seconds: float | None = None) -> dict[str, Any]:
    """The JSON object of one estimate (see the module docstring)."""
    bound = estimate.lower_bound
    return {
        "method": estimate.method,
        "log_z": float(estimate.log_z),
        "stderr": float(estimate.stderr),
        "bias": estimate.bound,
        "cost_sweeps": int(estimate.cost_sweeps),
        "seconds": seconds,
        "reliable": bool(estimate.reliable),
        "verdict": estimate.status,
        "unchecked": estimate.unchecked or None,
        "warnings": list(estimate.warnings),
        "lower_bound": None
        if bound is None
        else {
            "log_z": float(bound.log_z),
            "layer": bound.layer,
            "n_states": int(bound.n_states),
            "missing_mass": float(bound.missing_mass),
            "started_from": bound.started_from,
        },
        "world_size": distributed.topology().world_size,
        "diagnostics": estimate_diagnostics(estimate.info),
    }


def echo_json(value: dict[str, Any]) -> None:
    """Print ``value`` as one JSON object on stdout."""
    click.echo(json.dumps(json_ready(value), allow_nan=False, sort_keys=False))
