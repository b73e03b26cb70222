"""``boltzlab info FILE``: what a model file holds, and its exact log Z when that is cheap.

Reads the file through :func:`boltzlab.io.load_model`, which validates everything (so a
corrupt file is one line), then prints the kind, layer sizes, dtype, base, per-parameter
statistics, the metadata recorded at training, and exact ``log Z`` by enumeration when the
smaller layer has at most 25 units. ``--json`` prints the same as one JSON object instead
(docs/architecture.md, "Command line"), with the file's size, SHA-256 and format version.

A run's other safetensors file, ``trajectory.safetensors`` (the parameter snapshots of
training), is described too (:func:`_describe_trajectory`): its snapshots, their updates and
sizes, and which commands use it, rather than refused as a model file that needs re-saving.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab.cli.common import (
    MAX_EXACT_UNITS,
    choose_threads,
    format_seconds,
    format_table,
    load_model_file,
    printable,
)
from boltzlab.cli.json_output import echo_json
from boltzlab.errors import BoltzlabError, ModelFileError
from boltzlab.estimators import exact_log_z
from boltzlab.io import MODEL_FORMAT, MODEL_FORMAT_VERSION, MODEL_KINDS
from boltzlab.io.safetensors_file import TRAJECTORY_FORMAT
from boltzlab.models.trajectory import ANCHOR_UPDATE, Trajectory, load_trajectory

__all__ = ["run"]


def _flatten(metadata: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested metadata as ``(dotted.key, value)`` pairs, in key order."""
    pairs = []
    for key in sorted(metadata):
        value = metadata[key]
        if isinstance(value, dict) and value:
            pairs += _flatten(value, f"{prefix}{key}.")
        else:
            pairs.append((f"{prefix}{key}", value))
    return pairs


def _show(value: Any) -> str:
    """A metadata value as the text output prints it: untrusted, so through :func:`printable`."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


_STATISTICS = ("min", "max", "mean", "std", "norm")


def _parameter_statistics(model: torch.nn.Module) -> list[dict[str, Any]]:
    """Per parameter: name, shape, number of values and min/max/mean/std/norm (in float64)."""
    records = []
    for name, parameter in model.named_parameters():
        values = parameter.detach().to(torch.float64)
        records.append(
            {
                "name": name,
                "shape": list(values.shape),
                "numel": values.numel(),
                "min": float(values.min()),
                "max": float(values.max()),
                "mean": float(values.mean()),
                "std": float(values.std()) if values.numel() > 1 else 0.0,
                "norm": float(torch.linalg.vector_norm(values)),
            }
        )
    return records


def _parameter_rows(statistics: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [record["name"], "×".join(map(str, record["shape"])), *(f"{record[key]:.4g}" for key in _STATISTICS)]
        for record in statistics
    ]


def _exact(model: torch.nn.Module) -> dict[str, Any]:
    """Exact log Z when the smaller layer has at most ``MAX_EXACT_UNITS`` units, with its cost,
    or why it was not computed: ``{"log_z", "units_enumerated", "seconds", "reason"}``."""
    smaller = min(model.layer_sizes)
    record: dict[str, Any] = {"log_z": None, "units_enumerated": smaller, "seconds": None, "reason": None}
    if smaller > MAX_EXACT_UNITS:
        record["reason"] = f"2^{smaller} states; at most 2^{MAX_EXACT_UNITS}"
        return record
    started = time.perf_counter()
    try:
        record["log_z"] = exact_log_z(model)
    except BoltzlabError as error:  # e.g. a kind that has no exact enumeration
        record["reason"] = str(error)
    record["seconds"] = time.perf_counter() - started
    return record


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _info_record(model_path: Path, model: torch.nn.Module, kind: str) -> dict[str, Any]:
    """The ``--json`` object of ``info`` (every field the text prints, and the file's identity).

    ``format`` and ``format_version`` are those :func:`boltzlab.io.load_model` accepted.
    """
    statistics = _parameter_statistics(model)
    return {
        "file": str(model_path),
        "bytes": model_path.stat().st_size,
        "sha256": _sha256(model_path),
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "kind": kind,
        "class": type(model).__name__,
        "layer_sizes": list(model.layer_sizes),
        "dtype": str(model.dtype).removeprefix("torch."),
        "base": "base-rate" if getattr(model, "base_fitted", False) else "uniform",
        "base_fitted": bool(getattr(model, "base_fitted", False)),
        "witness_rows": _witness_rows(model),
        "n_parameters": sum(record["numel"] for record in statistics),
        "parameters": statistics,
        "metadata": getattr(model, "metadata", {}) or {},
        "exact": _exact(model),
    }


def _witness_rows(model: torch.nn.Module) -> int:
    """Rows of training data the model keeps as its verdict's witness (0: none)."""
    bits = getattr(model, "witness_bits", None)
    return 0 if bits is None else int(bits.shape[0])


def _witness_line(model: torch.nn.Module) -> str:
    rows = _witness_rows(model)
    if not hasattr(model, "set_witness"):
        return "witness: none kept (no certified lower bound for this kind of model: estimates say unchecked)"
    if rows:
        return (
            f"witness: {rows} training rows kept for the log Z verdict's missing-mass check "
            "(model.clear_witness() before saving leaves them out)"
        )
    return "witness: none (estimates without --data say unchecked; docs/trust.md)"


def _trajectory_in(path: Path) -> Trajectory | None:
    """The training trajectory in the file ``path``, or ``None`` when it holds none."""
    if not path.is_file():
        return None
    try:
        return load_trajectory(path)
    except ModelFileError:
        return None


def _describe_trajectory(path: Path, trajectory: Trajectory, *, as_json: bool) -> None:
    """What ``info`` says of a training trajectory: its snapshots, sizes and metadata, and its uses."""
    updates = [int(update) for update in trajectory.updates.tolist()]
    trained = [update for update in updates if update != ANCHOR_UPDATE]
    sizes = [int(trajectory.weights.shape[1]), int(trajectory.weights.shape[2])]
    dtype = str(trajectory.weights.dtype).removeprefix("torch.")
    if as_json:
        echo_json(
            {
                "file": str(path),
                "bytes": path.stat().st_size,
                "sha256": _sha256(path),
                "format": TRAJECTORY_FORMAT,
                "kind": "trajectory",
                "layer_sizes": sizes,
                "dtype": dtype,
                "n_points": trajectory.n_points,
                "updates": trained,
                "anchor": len(trained) < len(updates),
                "base_logits": trajectory.base_logits is not None,
                "metadata": trajectory.metadata,
            }
        )
        return
    click.echo(f"file: {printable(path)}")
    anchor = " after the zero-weight anchor" if len(trained) < len(updates) else ""
    span = f"updates {trained[0]:,} to {trained[-1]:,}" if trained else "no training updates"
    click.echo(
        f"kind: training trajectory ({TRAJECTORY_FORMAT}): {len(trained)} snapshots of an RBM "
        f"{sizes[0]}×{sizes[1]}{anchor}, {span}"
    )
    click.echo(f"dtype: {dtype}")
    click.echo(
        "base: the trained model's base-rate base kept"
        if trajectory.base_logits is not None
        else "base: none kept"
    )
    metadata = _flatten(trajectory.metadata)
    if metadata:
        click.echo("metadata:")
        for key, value in metadata:
            click.echo(f"  {printable(key)}: {_show(value)}")
    model = path.parent / "model.safetensors"
    click.echo(
        f"used by: boltzlab logz {printable(model)} --method trajectory-ais (or evaluate), and "
        f"boltzlab sample {printable(model)} --sampler ptt; they find it beside the model file, or take "
        "--trajectory PATH. It is not a model file: boltzlab info MODEL describes the model."
    )


def run(model_path: Path, as_json: bool) -> None:
    """``boltzlab info`` with its options (declared in :mod:`boltzlab.cli.commands.info`): print what
    a model file holds, and its exact log Z when that is cheap; a training trajectory is described
    too (its snapshots)."""
    try:
        model = load_model_file(model_path)
    except ModelFileError:
        trajectory = _trajectory_in(model_path)
        if trajectory is None:
            raise
        _describe_trajectory(model_path, trajectory, as_json=as_json)
        return
    choose_threads(model)
    kind = next((name for name, kind in MODEL_KINDS.items() if isinstance(model, kind.model_class)), "?")
    if as_json:
        echo_json(_info_record(model_path, model, kind))
        return
    sizes = model.layer_sizes
    click.echo(f"file: {printable(model_path)}")
    click.echo(f"kind: {kind} ({type(model).__name__})")
    click.echo(f"layers: {' × '.join(map(str, sizes))} (visible first)")
    click.echo(f"dtype: {str(model.dtype).removeprefix('torch.')}")
    if getattr(model, "base_fitted", False):
        click.echo("base: base-rate (fitted to data)")
    else:
        click.echo("base: uniform (never fitted to data; AIS works better after fitting, e.g. logz --data)")
    click.echo(_witness_line(model))
    click.echo("parameters:")
    click.echo(format_table(["name", "shape", *_STATISTICS], _parameter_rows(_parameter_statistics(model))))
    metadata = _flatten(getattr(model, "metadata", {}) or {})
    if metadata:
        click.echo("metadata:")
        for key, value in metadata:
            click.echo(f"  {printable(key)}: {_show(value)}")
    smaller = min(sizes)
    if smaller <= MAX_EXACT_UNITS:
        exact = _exact(model)
        if exact["log_z"] is None:
            click.echo(f"exact log Z: not available ({exact['reason']})")
        else:
            click.echo(
                f"exact log Z: {exact['log_z']:.6f} (2^{smaller} states enumerated in "
                f"{format_seconds(exact['seconds'])})"
            )
    else:
        click.echo(
            f"exact log Z: not computed (2^{smaller} states; at most 2^{MAX_EXACT_UNITS}); "
            f"estimate it with: boltzlab logz {model_path}"
        )
