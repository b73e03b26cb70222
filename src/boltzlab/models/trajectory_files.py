"""The trajectory file: ``trajectory.safetensors`` written and read, and ``as_trajectory``.

**File.** ``trajectory.safetensors`` holds the stacked tensors ``weights (P, D, J)``,
``visible_bias (P, D)``, ``hidden_bias (P, J)``, ``updates (P,)`` int64 and optionally
``base_logits (D,)``, with the metadata ``format="boltzlab-trajectory"``, ``format_version``,
``n_points`` and ``metadata`` (JSON). Writes are atomic (:func:`boltzlab.io.write_atomic`);
reads never unpickle and check every shape, dtype and value first. A run directory keeps it
beside ``model.safetensors`` (``boltzlab train``) or in ``checkpoints/`` (``bl.train`` with a
``checkpoint_dir``); :func:`resolve_trajectory_path` looks in both.

:func:`as_trajectory` reads whatever an estimator or sampler is given as ``trajectory=``.
:class:`~boltzlab.models.trajectory.Trajectory`'s ``save`` and ``load`` call
:func:`save_trajectory` and :func:`load_trajectory`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import Tensor

from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.io import write_atomic
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import (
    TRAJECTORY_FILE,
    TRAJECTORY_FORMAT,
    TRAJECTORY_FORMAT_VERSION,
    Trajectory,
)

__all__ = [
    "as_trajectory",
    "find_trajectory_file",
    "load_trajectory",
    "resolve_trajectory_path",
    "save_trajectory",
]

_MAX_HEADER_BYTES = 100_000_000


def save_trajectory(trajectory: Trajectory, path: str | Path) -> Path:
    """Write ``trajectory`` as ``trajectory.safetensors`` atomically; returns the file's path.

    ``path`` is a file path ending in ``.safetensors`` or a directory (created if needed),
    in which case the file is ``path/trajectory.safetensors``. The tensors are written in
    their own dtype, so :func:`load_trajectory` gives them back bit for bit.
    """
    target = resolve_trajectory_path(path, for_writing=True)
    try:
        metadata_text = json.dumps(trajectory.metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            f"trajectory metadata is not JSON-serialisable ({error}); keep only str, int, float, "
            "bool, None, lists and dicts there"
        ) from None
    tensors = {
        "weights": trajectory.weights,
        "visible_bias": trajectory.visible_bias,
        "hidden_bias": trajectory.hidden_bias,
        "updates": trajectory.updates,
    }
    if trajectory.base_logits is not None:
        tensors["base_logits"] = trajectory.base_logits
    payload = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in tensors.items()}
    header = {
        "format": TRAJECTORY_FORMAT,
        "format_version": str(TRAJECTORY_FORMAT_VERSION),
        "n_points": str(trajectory.n_points),
        "metadata": metadata_text,
    }
    return write_atomic(target, safetensors_save(payload, metadata=header))


def load_trajectory(
    path: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Trajectory:
    """Read a trajectory file (or ``path/trajectory.safetensors`` for a run directory).

    Raises
    ------
    ModelFileError
        A missing, truncated or foreign file, another format or version, missing or extra
        tensors, inconsistent shapes, wrong dtypes, NaN/inf, update indices that do not
        increase, or a first point with weights; the message names the file and the problem.
    """
    source = resolve_trajectory_path(path, for_writing=False)
    tensors, header = _read_trajectory_file(source)
    try:
        trajectory = Trajectory(
            weights=tensors["weights"],
            visible_bias=tensors["visible_bias"],
            hidden_bias=tensors["hidden_bias"],
            updates=tensors["updates"],
            base_logits=tensors.get("base_logits"),
            metadata=header,
        )
    except ValidationError as error:
        raise ModelFileError(f"{source} is not a valid trajectory file: {error}") from None
    if dtype is not None or torch.device(device) != trajectory.device:
        trajectory = trajectory.to(device=device, dtype=dtype)
    return trajectory


def resolve_trajectory_path(path: str | Path, *, for_writing: bool) -> Path:
    """The trajectory file named by ``path``: the file itself, or ``path/trajectory.safetensors``.

    A run directory may also hold the file in ``checkpoints/``; reading looks there second.
    """
    if not isinstance(path, (str, Path)):
        raise ValidationError(f"a trajectory path must be a str or Path, got {type(path).__name__}")
    path = Path(path)
    if for_writing:
        return path if path.suffix == ".safetensors" else path / TRAJECTORY_FILE
    if path.is_dir():
        found = find_trajectory_file(path)
        if found is not None:
            return found
        raise ModelFileError(
            f"{path} holds no {TRAJECTORY_FILE}; bl.train and boltzlab train record one by default "
            "(snapshots=64), or build one with Trajectory.from_models(...)"
        )
    return path


def find_trajectory_file(directory: str | Path) -> Path | None:
    """``directory/trajectory.safetensors``, else ``directory/checkpoints/trajectory.safetensors``,
    else ``None``: where ``boltzlab train`` and ``bl.train(checkpoint_dir=...)`` put it."""
    directory = Path(directory)
    for candidate in (directory / TRAJECTORY_FILE, directory / "checkpoints" / TRAJECTORY_FILE):
        if candidate.is_file():
            return candidate
    return None


def as_trajectory(value: Any) -> Trajectory:
    """``value`` read as a :class:`Trajectory`: what estimators and samplers accept as ``trajectory=``.

    Accepted: a :class:`Trajectory`; the path of a ``trajectory.safetensors`` file; a run
    directory holding one (directly or in ``checkpoints/``); a directory of model files, one
    per snapshot (e.g. ``update-00000100.safetensors``), taken in the order of the number in
    their names; or a sequence of RBMs or of model-file paths in training order. Update
    indices come from the file names when each holds a number, else ``0, 1, …``.

    Raises
    ------
    ValidationError
        A value of another kind, or snapshots of different sizes.
    ModelFileError
        An unreadable file, or a directory with neither a trajectory nor model files.
    """
    if isinstance(value, Trajectory):
        return value
    if isinstance(value, (str, Path)):
        path = Path(value)
        if path.is_dir() and not any(
            (path / name).is_file() for name in (TRAJECTORY_FILE, f"checkpoints/{TRAJECTORY_FILE}")
        ):
            files = sorted(
                (
                    candidate
                    for candidate in path.glob("*.safetensors")
                    if candidate.name != "model.safetensors"
                ),
                key=lambda candidate: (
                    _number_in(candidate.name) is None,
                    _number_in(candidate.name) or 0,
                    candidate.name,
                ),
            )
            if files:
                return _from_model_files(files)
        return load_trajectory(path)
    if isinstance(value, Sequence) and value and not isinstance(value, (str, bytes)):
        items = list(value)
        if all(isinstance(item, (str, Path)) for item in items):
            return _from_model_files([Path(item) for item in items])
        if all(isinstance(item, RBM) for item in items):
            return Trajectory.from_models(items)
    raise ValidationError(
        "trajectory must be a Trajectory, a trajectory.safetensors file, a run directory, a directory of "
        f"model files, or a sequence of RBMs or model-file paths; got {type(value).__name__}"
    )


def _number_in(name: str) -> int | None:
    digits = re.findall(r"\d+", name)
    return int(digits[-1]) if digits else None


def _from_model_files(paths: list[Path]) -> Trajectory:
    models = [RBM.load(path) for path in paths]
    numbers = [_number_in(path.name) for path in paths]
    known = [number for number in numbers if number is not None]
    increasing = len(known) == len(numbers) and all(b > a for a, b in pairwise(known))
    return Trajectory.from_models(models, updates=numbers if increasing else None)


def _refuse(path: Path, problem: str) -> ModelFileError:
    return ModelFileError(
        f"{path} is not a valid trajectory file: {problem}; record it again (train with the snapshot "
        "recorder) or use another run's trajectory.safetensors"
    )


def _read_trajectory_file(path: Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Tensors and JSON metadata of a trajectory file; :class:`ModelFileError` for anything else."""
    if not path.exists():
        raise ModelFileError(f"trajectory file {path} does not exist; check the path")
    if not path.is_file():
        raise ModelFileError(f"trajectory file {path} is not a regular file; check the path")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ModelFileError(f"trajectory file {path} cannot be read ({error.strerror})") from None
    if len(data) < 8:
        raise _refuse(path, f"it has only {len(data)} bytes (empty or truncated)")
    header_length = int.from_bytes(data[:8], "little")
    if header_length > min(_MAX_HEADER_BYTES, len(data) - 8) or data[8:9] != b"{":
        raise _refuse(path, "it is not a safetensors file (bad or truncated header)")
    try:
        header = json.loads(data[8 : 8 + header_length])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise _refuse(path, f"its header is not valid JSON ({type(error).__name__})") from None
    if not isinstance(header, dict):
        raise _refuse(path, "its header is not a JSON object")
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict):
        raise _refuse(path, "its __metadata__ is not a table")
    found = metadata.get("format")
    if found != TRAJECTORY_FORMAT:
        what = {
            "boltzlab-model": "a boltzlab model file (load it with boltzlab.RBM.load)",
            "boltzlab-checkpoint": "a boltzlab checkpoint",
        }.get(str(found), f"format {str(found)[:40]!r}")
        raise _refuse(path, f"it is {what}, expected format {TRAJECTORY_FORMAT!r}")
    version = metadata.get("format_version")
    if version != str(TRAJECTORY_FORMAT_VERSION):
        raise _refuse(
            path,
            f"format version {str(version)[:20]!r} is not supported "
            f"(this boltzlab reads {TRAJECTORY_FORMAT_VERSION})",
        )
    try:
        tensors = safetensors_load(data)
    except Exception as error:  # the library's own checks; any failure means a bad file
        message = " ".join(str(error).split())[:200]
        raise _refuse(path, f"safetensors refused it ({message})") from None
    required = {"weights", "visible_bias", "hidden_bias", "updates"}
    missing = sorted(required - tensors.keys())
    extra = sorted(tensors.keys() - required - {"base_logits"})
    if missing:
        raise _refuse(path, f"tensors {missing} are missing")
    if extra:
        raise _refuse(path, f"unexpected tensors {extra[:5]}")
    n_points = metadata.get("n_points")
    if n_points != str(tensors["weights"].shape[0] if tensors["weights"].dim() == 3 else -1):
        raise _refuse(path, f"its n_points entry {str(n_points)[:20]!r} disagrees with the weights' shape")
    try:
        notes = json.loads(metadata.get("metadata", "{}"))
    except (json.JSONDecodeError, RecursionError):
        raise _refuse(path, "its metadata entry is not valid JSON") from None
    if not isinstance(notes, dict):
        raise _refuse(path, "its metadata entry is not a JSON object")
    return tensors, notes
