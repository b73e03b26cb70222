"""Checkpoints: any tensors plus JSON metadata, written atomically, read back checked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import Tensor

from boltzlab.errors import ModelFileError
from boltzlab.io.atomic import write_atomic
from boltzlab.io.safetensors_file import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    check_format,
    cpu_copies,
    json_entry,
    read_safetensors,
    serialize,
)

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "Checkpoint", "load_checkpoint", "save_checkpoint"]


@dataclass(frozen=True)
class Checkpoint:
    """Tensors and JSON metadata read back from a checkpoint file.

    Attributes
    ----------
    tensors : dict of str to Tensor
        CPU tensors of any dtype (e.g. a ``torch.Generator`` state is uint8).
    metadata : dict
        The JSON-serialisable metadata given to :func:`save_checkpoint`.
    """

    tensors: dict[str, Tensor]
    metadata: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(path: str | Path, *, tensors: dict[str, Tensor], metadata: dict[str, Any]) -> Path:
    """Atomically write ``tensors`` (CPU copies, contiguous) and JSON-serialisable ``metadata``.

    Parameters
    ----------
    path : str or Path
    tensors : dict of str to Tensor
        Any shapes and dtypes; the caller's tensors are copied, never modified.
    metadata : dict
        JSON-serialisable (str, int, float, bool, None, lists, dicts; no NaN).

    Returns
    -------
    Path
        ``path``, written atomically.
    """
    try:
        header = json.dumps(metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ModelFileError(
            f"checkpoint metadata is not JSON-serialisable ({error}); keep only str, int, float, bool, "
            "None, lists and dicts there and put tensors in tensors="
        ) from None
    data = serialize(
        cpu_copies(tensors, "tensors"),
        metadata={"format": CHECKPOINT_FORMAT, "format_version": str(CHECKPOINT_VERSION), "metadata": header},
    )
    return write_atomic(path, data)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`; refuses anything else clearly.

    Raises
    ------
    ModelFileError
        Missing, truncated, corrupt or hostile file, a model file, or a newer format version.
    """
    path = Path(path)
    tensors, header = read_safetensors(path, "checkpoint")
    check_format(path, header, what="checkpoint", expected=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION)
    metadata = json_entry(path, "checkpoint", {"metadata": "{}", **header}, "metadata", dict)
    return Checkpoint(tensors=tensors, metadata=metadata)
