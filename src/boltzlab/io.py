"""Model files and checkpoints: safetensors (no pickle) with a JSON metadata header.

Loading a file never runs code. Every write goes to a temporary file in the same directory,
is fsynced, and is renamed over the target, so a killed run never leaves a half-written file.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import Tensor

from boltzlab.errors import ModelFileError

__all__ = [
    "Checkpoint",
    "load_checkpoint",
    "save_checkpoint",
    "write_atomic",
]

CHECKPOINT_FORMAT = "boltzlab-checkpoint"
CHECKPOINT_VERSION = 1


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError:
        pass
    return path


@dataclass(frozen=True)
class Checkpoint:
    """Tensors and JSON metadata read back from a checkpoint file."""

    tensors: dict[str, Tensor]
    metadata: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(path: str | Path, *, tensors: dict[str, Tensor], metadata: dict[str, Any]) -> Path:
    """Atomically write ``tensors`` (CPU copies, contiguous) and JSON-serialisable ``metadata``."""
    try:
        header = json.dumps(metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ModelFileError(f"checkpoint metadata is not JSON-serialisable: {error}") from None
    payload = {name: tensor.detach().to("cpu").contiguous() for name, tensor in tensors.items()}
    data = safetensors_save(
        payload,
        metadata={"format": CHECKPOINT_FORMAT, "format_version": str(CHECKPOINT_VERSION), "metadata": header},
    )
    return write_atomic(path, data)


def _read_safetensors(path: Path, what: str) -> tuple[dict[str, Tensor], dict[str, str]]:
    if not path.is_file():
        raise ModelFileError(f"{what} {path} does not exist")
    data = path.read_bytes()
    if len(data) < 8:
        raise ModelFileError(f"{path} is not a {what}: only {len(data)} bytes (truncated or empty)")
    header_length = int.from_bytes(data[:8], "little")
    if header_length > len(data) - 8 or header_length > 100_000_000:
        raise ModelFileError(
            f"{path} is not a valid {what}: its header claims {header_length} bytes (corrupt or truncated)"
        )
    try:
        header = json.loads(data[8 : 8 + header_length])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ModelFileError(
            f"{path} is not a valid {what}: unreadable header (corrupt, or not a safetensors file)"
        ) from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path} is not a valid {what}: the header is not a JSON object")
    metadata = header.get("__metadata__", {}) or {}
    try:
        tensors = safetensors_load(data)
    except (SafetensorError, ValueError, RuntimeError) as error:
        raise ModelFileError(f"{path} is not a valid {what}: {error}") from None
    return tensors, metadata


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; refuses anything else clearly."""
    path = Path(path)
    tensors, header = _read_safetensors(path, "checkpoint")
    if header.get("format") != CHECKPOINT_FORMAT:
        raise ModelFileError(f"{path} is not a boltzlab checkpoint (format {header.get('format')!r})")
    if header.get("format_version") != str(CHECKPOINT_VERSION):
        raise ModelFileError(
            f"{path} has checkpoint format version {header.get('format_version')!r}; this boltzlab reads version {CHECKPOINT_VERSION}"
        )
    try:
        metadata = json.loads(header.get("metadata", "{}"))
    except json.JSONDecodeError:
        raise ModelFileError(f"{path}: checkpoint metadata is not valid JSON") from None
    return Checkpoint(tensors=tensors, metadata=metadata)


def _ensure_torch_dtype(name: str) -> torch.dtype:
    dtypes = {
        "float32": torch.float32,
        "float64": torch.float64,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
    }
    if name not in dtypes:
        raise ModelFileError(f"unsupported dtype {name!r} (expected one of {', '.join(dtypes)})")
    return dtypes[name]
