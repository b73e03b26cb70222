"""``boltzlab info MODEL``: what a model file holds, and its exact log Z when that is cheap.

Reads the file through :func:`boltzlab.io.load_model`, which validates everything (so a
corrupt file is one line), then prints the kind, layer sizes, dtype, base, per-parameter
statistics, the metadata recorded at training, and exact ``log Z`` by enumeration when the
smaller layer has at most 25 units.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
import torch

from boltzlab.cli.common import (
    MAX_EXACT_UNITS,
    choose_threads,
    command_options,
    format_seconds,
    format_table,
    load_model_file,
)
from boltzlab.errors import BoltzlabError
from boltzlab.estimators import exact_log_z
from boltzlab.io import MODEL_KINDS

__all__ = ["info"]


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
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _parameter_rows(model: torch.nn.Module) -> list[list[str]]:
    rows = []
    for name, parameter in model.named_parameters():
        values = parameter.detach().to(torch.float64)
        rows.append(
            [
                name,
                "×".join(map(str, values.shape)),
                f"{float(values.min()):.4g}",
                f"{float(values.max()):.4g}",
                f"{float(values.mean()):.4g}",
                f"{float(values.std()) if values.numel() > 1 else 0.0:.4g}",
                f"{float(torch.linalg.vector_norm(values)):.4g}",
            ]
        )
    return rows


@click.command(
    "info",
    epilog="""\b
Example:
  boltzlab info runs/digits/model.safetensors""",
)
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@command_options
def info(model_path: Path) -> None:
    """Describe a model file: kind, shapes, dtype, base, parameters, training metadata, exact log Z."""
    model = load_model_file(model_path)
    choose_threads(model)
    kind = next((name for name, kind in MODEL_KINDS.items() if isinstance(model, kind.model_class)), "?")
    sizes = model.layer_sizes
    click.echo(f"file: {model_path}")
    click.echo(f"kind: {kind} ({type(model).__name__})")
    click.echo(f"layers: {' × '.join(map(str, sizes))} (visible first)")
    click.echo(f"dtype: {str(model.dtype).removeprefix('torch.')}")
    if getattr(model, "base_fitted", False):
        click.echo("base: base-rate (fitted to data)")
    else:
        click.echo("base: uniform (never fitted to data; AIS works better after fitting, e.g. logz --data)")
    click.echo("parameters:")
    click.echo(format_table(["name", "shape", "min", "max", "mean", "std", "norm"], _parameter_rows(model)))
    metadata = _flatten(getattr(model, "metadata", {}) or {})
    if metadata:
        click.echo("metadata:")
        for key, value in metadata:
            click.echo(f"  {key}: {_show(value)}")
    smaller = min(sizes)
    if smaller <= MAX_EXACT_UNITS:
        started = time.perf_counter()
        try:
            log_z = exact_log_z(model)
        except BoltzlabError as error:  # e.g. a kind that has no exact enumeration
            click.echo(f"exact log Z: not available ({error})")
        else:
            click.echo(
                f"exact log Z: {log_z:.6f} (2^{smaller} states enumerated in "
                f"{format_seconds(time.perf_counter() - started)})"
            )
    else:
        click.echo(
            f"exact log Z: not computed (2^{smaller} states; at most 2^{MAX_EXACT_UNITS}); "
            f"estimate it with: boltzlab logz {model_path}"
        )
