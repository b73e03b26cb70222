"""Model files and checkpoints: safetensors (no pickle) with a JSON metadata header.

Loading a file never runs code: tensors come from the safetensors format (a JSON header of
names, dtypes, shapes and byte offsets, then raw little-endian data) and everything else from
string metadata parsed as JSON. Every header is checked here before the bytes reach the
safetensors library, and any failure becomes one :class:`~boltzlab.errors.ModelFileError`
line naming the file, the problem and the fix.

Every write goes to a temporary file in the same directory, is fsynced, and is renamed over
the target, so a killed run never leaves a half-written file (docs/architecture.md, "Files").

A model file holds the tensors its kind lists in :data:`MODEL_KINDS` and the metadata
``format="boltzlab-model"``, ``format_version``, ``kind``, ``shapes`` (JSON), ``dtype``,
``base_fitted`` and ``metadata`` (JSON: the model's own metadata, e.g. a training config).
A new model kind is one :func:`register_model_kind` call in the model's own module.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import Tensor, nn

from boltzlab.errors import ModelFileError, ValidationError

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "MODEL_KINDS",
    "Checkpoint",
    "ModelKind",
    "load_checkpoint",
    "load_model",
    "register_model_kind",
    "save_checkpoint",
    "save_model",
    "write_atomic",
]

CHECKPOINT_FORMAT = "boltzlab-checkpoint"
CHECKPOINT_VERSION = 1
MODEL_FORMAT = "boltzlab-model"
MODEL_FORMAT_VERSION = 1

# The safetensors library refuses headers above 100 MB; refusing them here first means a
# hostile length never makes us slice or parse a giant buffer.
_MAX_HEADER_BYTES = 100_000_000
_FLOAT_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# What to do about a damaged file, by the kind of file that was expected.
_REMEDY = {
    "model file": "re-save the model with RBM.save(path) or copy the file again",
    "checkpoint": "resume from another checkpoint or start the run again",
}
# What to do about a file of another format (a pickle, an .npz, a bare safetensors file).
_FOREIGN_REMEDY = {
    "model file": "to import weights, read them yourself in trusted code and call "
    "boltzlab.RBM(weights=..., visible_bias=..., hidden_bias=...).save(path)",
    "checkpoint": "resume from a checkpoint that boltzlab wrote (boltzlab.io.save_checkpoint)",
}
# Leading bytes of formats people mistake for model files; only consulted once the file has
# already failed to parse as safetensors, to say what it is instead.
_SIGNATURES = (
    (b"PK\x03\x04", "a zip archive (a NumPy .npz, or a torch.save file)"),
    (b"\x93NUMPY", "a NumPy .npy array"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
)


# ---------------------------------------------------------------------------- writing
def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); returns the path.

    The temporary file sits beside the target (``.<name>.<random>.tmp``) so the rename never
    crosses file systems; it is removed if anything fails, and the old file, if any, is then
    left untouched. The new file gets the usual permissions (``0o666`` less the umask).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            # os.open with mode 0o666 lets the umask decide, unlike mkstemp's private 0o600.
            handle = os.open(temporary, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
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


def _cpu_copies(tensors: Mapping[str, Tensor], what: str) -> dict[str, Tensor]:
    """Detached, contiguous CPU copies: never aliases of the caller's tensors or of each other."""
    payload = {}
    for name, tensor in tensors.items():
        if not isinstance(tensor, Tensor):
            raise ValidationError(f"{what}[{name!r}] must be a torch.Tensor, got {type(tensor).__name__}")
        payload[name] = tensor.detach().to("cpu", copy=True).contiguous()
    return payload


# ---------------------------------------------------------------------------- reading
class _Invalid(Exception):
    """A problem found inside a file; the public door adds the path and a fix."""


def _short(value: Any) -> str:
    """``repr(value)`` cut to 60 characters, so a hostile header cannot flood a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _refuse(path: Path, what: str, problem: str, fix: str | None = None) -> ModelFileError:
    return ModelFileError(
        f"{path} is not a valid {what}: {problem}; {fix or _REMEDY.get(what, 'check the file')}"
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are read differently by different JSON parsers (ours versus the Rust one
    # inside safetensors), so a header with them could show us one tensor and load another.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Invalid(f"the header names {_short(key)} twice")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise _Invalid(f"{name} is not valid JSON")


def _strict_json(text: str | bytes) -> Any:
    """``json.loads`` refusing duplicate keys and NaN/Infinity; raises :class:`_Invalid`."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constants)
    except json.JSONDecodeError as error:
        raise _Invalid(f"{error.msg} at character {error.pos}") from None
    except UnicodeDecodeError:
        raise _Invalid("it is not UTF-8 text") from None
    except RecursionError:
        raise _Invalid("it is nested too deeply") from None


def _foreign_format(data: bytes) -> str | None:
    """What a file that is not safetensors looks like, if it is a format we recognise."""
    for signature, description in _SIGNATURES:
        if data.startswith(signature):
            return description
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return "a Python pickle (e.g. torch.save with the legacy format)"
    return None


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_layout(header: dict[str, Any], data_length: int) -> None:
    """Tensor entries well formed, inside the data section, and not overlapping."""
    metadata = header.get("__metadata__", {})
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(value, str) for value in metadata.values())
    ):
        raise _Invalid("the header's __metadata__ is not a table of strings")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise _Invalid(f"tensor {_short(name)} lacks dtype, shape or data_offsets")
        shape, offsets = entry["shape"], entry["data_offsets"]
        if (
            not isinstance(entry["dtype"], str)
            or not isinstance(shape, list)
            or not all(map(_is_index, shape))
        ):
            raise _Invalid(f"tensor {_short(name)} has a malformed dtype or shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_index, offsets))):
            raise _Invalid(f"tensor {_short(name)} has malformed data_offsets")
        start, end = offsets
        if start > end:
            raise _Invalid(f"tensor {_short(name)} ends (byte {end}) before it starts (byte {start})")
        if end > data_length:
            raise _Invalid(
                f"tensor {_short(name)} claims bytes {start}..{end} but the data section has "
                f"{data_length} bytes (truncated?)"
            )
        spans.append((start, end, name))
    spans.sort()
    for (_, previous_end, previous), (start, _, name) in pairwise(spans):
        if start < previous_end:
            raise _Invalid(f"tensors {_short(previous)} and {_short(name)} overlap")


def _read_safetensors(path: Path, what: str) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Tensors and string metadata of the safetensors file ``path``, refusing anything else.

    ``what`` names the expected file ("model file", "checkpoint") in messages. Never raises
    anything but :class:`ModelFileError` for a bad file.
    """
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{what} {path} does not exist; check the path")
    if not path.is_file():
        raise ModelFileError(f"{what} {path} is a directory or special file, not a file; check the path")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ModelFileError(
            f"{what} {path} cannot be read ({error.strerror}); check its permissions"
        ) from None
    if len(data) < 8:
        raise _refuse(path, what, f"it has only {len(data)} bytes (empty or truncated)")
    header_length = int.from_bytes(data[:8], "little")
    if header_length > _MAX_HEADER_BYTES or header_length > len(data) - 8 or data[8:9] != b"{":
        foreign = _foreign_format(data)
        if foreign is not None:
            raise _refuse(
                path,
                what,
                f"it is {foreign}, not safetensors",
                f"boltzlab never unpickles (that could run code); {_FOREIGN_REMEDY.get(what, 'check the path')}",
            )
        if header_length > _MAX_HEADER_BYTES:
            problem = f"its header claims {header_length} bytes, over the {_MAX_HEADER_BYTES}-byte limit"
        elif header_length > len(data) - 8:
            problem = f"its header claims {header_length} bytes but the file has {len(data)} (truncated, or not safetensors)"
        else:
            problem = "its header does not start with '{' (not a safetensors file)"
        raise _refuse(path, what, problem)
    try:
        header = _strict_json(data[8 : 8 + header_length])
        if not isinstance(header, dict):
            raise _Invalid("the header is not a JSON object")
        _check_layout(header, len(data) - 8 - header_length)
    except _Invalid as problem:
        raise _refuse(path, what, f"corrupt safetensors header: {problem}") from None
    try:
        tensors = safetensors_load(data)
    except Exception as error:  # the library's own checks; any failure means a bad file
        message = " ".join(str(error).split())[:200]
        raise _refuse(path, what, f"safetensors refused it ({message})") from None
    return tensors, dict(header.get("__metadata__") or {})


def _check_format(path: Path, header: dict[str, str], *, what: str, expected: str, version: int) -> None:
    """Refuse files of another format (naming the right loader) or another format version."""
    found = header.get("format")
    if found != expected:
        if found == MODEL_FORMAT:
            fix = "load it with boltzlab.RBM.load(path) (or boltzlab.io.load_model)"
            raise ModelFileError(f"{path} is a boltzlab model file, not a {what}; {fix}")
        if found == CHECKPOINT_FORMAT:
            fix = "resume from it with the trainer (boltzlab.io.load_checkpoint), or use the run's model.safetensors"
            raise ModelFileError(f"{path} is a boltzlab checkpoint, not a {what}; {fix}")
        if found is None:
            problem = "a safetensors file without boltzlab's 'format' metadata"
            fix = _FOREIGN_REMEDY.get(what)
        else:
            problem, fix = f"format {_short(found)}, expected {expected!r}", None
        raise _refuse(path, what, problem, fix)
    text = header.get("format_version")
    if text is None or not (text.isascii() and text.isdigit()):
        raise _refuse(path, what, f"format_version {_short(text)} is not a whole number")
    if int(text) > version:
        raise ModelFileError(
            f"{path} uses {what} format version {int(text)} but this boltzlab reads version {version}; "
            "upgrade boltzlab (pip install -U boltzlab)"
        )
    if int(text) != version:
        raise _refuse(
            path, what, f"format version {int(text)} is not supported (this boltzlab reads {version})"
        )


def _json_entry(path: Path, what: str, header: dict[str, str], key: str, kind: type) -> Any:
    """Header entry ``key`` parsed as JSON of Python type ``kind``."""
    try:
        value = _strict_json(header[key])
    except _Invalid as problem:
        raise _refuse(path, what, f"its {key!r} entry is not valid JSON ({problem})") from None
    if not isinstance(value, kind):
        raise _refuse(
            path, what, f"its {key!r} entry is a JSON {type(value).__name__}, expected a {kind.__name__}"
        )
    return value


# ---------------------------------------------------------------------------- checkpoints
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
    data = safetensors_save(
        _cpu_copies(tensors, "tensors"),
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
    tensors, header = _read_safetensors(path, "checkpoint")
    _check_format(path, header, what="checkpoint", expected=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION)
    metadata = _json_entry(path, "checkpoint", {"metadata": "{}", **header}, "metadata", dict)
    return Checkpoint(tensors=tensors, metadata=metadata)


def _ensure_torch_dtype(name: str) -> torch.dtype:
    if name not in _FLOAT_DTYPES:
        raise ModelFileError(f"unsupported dtype {name!r} (expected one of {', '.join(_FLOAT_DTYPES)})")
    return _FLOAT_DTYPES[name]


# ---------------------------------------------------------------------------- model kinds
@dataclass(frozen=True, slots=True)
class ModelKind:
    """How one kind of model goes to and from a model file.

    Attributes
    ----------
    name : str
        The ``kind`` written in the file, e.g. ``"rbm"``.
    model_class : type
        The class :func:`save_model` recognises (``isinstance``).
    tensors : callable
        ``tensors(model) -> dict[str, Tensor]``: every tensor the file holds, by name.
    expected_shapes : callable
        ``expected_shapes(shapes) -> dict[str, tuple[int, ...]]``: from the shapes found in a
        file, the full set of names and shapes that kind needs; raises ``ValueError`` with the
        problem when the shapes that fix the sizes are absent or malformed.
    build : callable
        ``build(tensors, *, dtype, device) -> model``, tensors already validated.
    """

    name: str
    model_class: type
    tensors: Callable[[Any], dict[str, Tensor]]
    expected_shapes: Callable[[dict[str, tuple[int, ...]]], dict[str, tuple[int, ...]]]
    build: Callable[..., Any]


# Filled by each model module when it is imported (``import boltzlab`` imports them all),
# so a new model kind is one call in its own module and io never imports a model.
MODEL_KINDS: dict[str, ModelKind] = {}


def register_model_kind(kind: ModelKind) -> ModelKind:
    """File ``kind`` so :func:`save_model` writes its models and :func:`load_model` reads them.

    Called by each model module at import time, e.g. ``models/rbm.py`` registers ``"rbm"``.
    Registering a name twice replaces the entry (a reloaded module keeps working).
    """
    MODEL_KINDS[kind.name] = kind
    return kind


# ---------------------------------------------------------------------------- model files
def save_model(model: nn.Module, path: str | Path, *, metadata: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` as a safetensors model file, atomically; returns the path.

    Parameters
    ----------
    model : RBM (or another kind in :data:`MODEL_KINDS`)
        Saved in its own dtype; tensors are copied to the CPU, the model is not modified.
    path : str or Path
        Conventionally ``*.safetensors``; parent directories are created.
    metadata : mapping, optional
        Merged over ``model.metadata`` (e.g. a training config) and stored as JSON: tuples
        come back as lists and non-string keys as strings.

    Returns
    -------
    Path

    Raises
    ------
    ValidationError
        An unknown model kind, non-finite parameters, or metadata that is not JSON-serialisable;
        nothing is written then.
    """
    kind = next((kind for kind in MODEL_KINDS.values() if isinstance(model, kind.model_class)), None)
    if kind is None:
        known = ", ".join(kind.model_class.__name__ for kind in MODEL_KINDS.values())
        raise ValidationError(
            f"cannot save a {type(model).__name__}: model files hold {known}; pass one of those"
        )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    merged = {**getattr(model, "metadata", {}), **(metadata or {})}
    try:
        metadata_text = json.dumps(merged, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            f"model metadata is not JSON-serialisable ({error}); keep only str, int, float, bool, None, "
            "lists and dicts there"
        ) from None
    tensors = _cpu_copies(kind.tensors(model), "model tensors")
    dtypes = {tensor.dtype for tensor in tensors.values()}
    if len(dtypes) != 1:
        raise ValidationError(
            f"model tensors mix dtypes {sorted(map(str, dtypes))}; convert with model.to(dtype)"
        )
    for name, tensor in tensors.items():
        if not bool(torch.isfinite(tensor).all()):
            raise ValidationError(
                f"model {name} contains NaN or infinite values (training diverged?), so nothing was "
                "written; retrain with a smaller learning rate, or keep the raw tensors with save_checkpoint"
            )
    header = {
        "format": MODEL_FORMAT,
        "format_version": str(MODEL_FORMAT_VERSION),
        "kind": kind.name,
        "shapes": json.dumps({name: list(tensor.shape) for name, tensor in tensors.items()}, sort_keys=True),
        "dtype": str(dtypes.pop()).removeprefix("torch."),
        "base_fitted": "true" if getattr(model, "base_fitted", False) else "false",
        "metadata": metadata_text,
    }
    return write_atomic(path, safetensors_save(tensors, metadata=header))


def _check_model_tensors(
    path: Path,
    kind: ModelKind,
    tensors: dict[str, Tensor],
    declared: dict[str, Any],
    file_dtype: torch.dtype,
) -> None:
    """Names, shapes (against each other and the ``shapes`` entry), dtypes and finiteness."""
    what = "model file"
    shapes = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
    try:
        expected = kind.expected_shapes(shapes)
    except ValueError as error:
        raise _refuse(path, what, f"{error} (kind {kind.name!r})") from None
    missing = sorted(expected.keys() - shapes.keys())
    extra = sorted(shapes.keys() - expected.keys())
    if missing:
        needed = ", ".join(sorted(expected))
        raise _refuse(path, what, f"tensors {missing} are missing (kind {kind.name!r} needs {needed})")
    if extra:
        raise _refuse(path, what, f"unexpected tensors {_short(extra)} for kind {kind.name!r}")
    found = ", ".join(f"{name} {shape}" for name, shape in sorted(shapes.items()))
    for name, shape in expected.items():
        if shapes[name] != shape:
            problem = f"tensor {name!r} should have shape {shape} given the others (found {found[:200]})"
            raise _refuse(path, what, problem)
    for name, value in declared.items():
        if name not in shapes or not isinstance(value, list) or tuple(value) != shapes[name]:
            raise _refuse(
                path,
                what,
                f"its 'shapes' entry records {_short(name)} as {_short(value)}, unlike the tensors",
            )
    if declared.keys() != shapes.keys():
        raise _refuse(path, what, f"its 'shapes' entry omits {sorted(shapes.keys() - declared.keys())}")
    for name, tensor in tensors.items():
        if tensor.dtype != file_dtype:
            raise _refuse(
                path,
                what,
                f"tensor {name!r} has dtype {str(tensor.dtype).removeprefix('torch.')}, "
                f"but the file declares {str(file_dtype).removeprefix('torch.')}",
                "model files hold one floating dtype (float32, float64, float16 or bfloat16); "
                "convert the parameters and re-save with RBM.save(path)",
            )
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise _refuse(
                path,
                what,
                f"tensor {name!r} has {bad} NaN or infinite values",
                "the model diverged or the file is damaged; load an earlier checkpoint or retrain",
            )


def load_model(
    path: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> nn.Module:
    """Read a model file written by :func:`save_model`, validating everything first.

    Parameters
    ----------
    path : str or Path
    device : str or torch.device, default "cpu"
    dtype : torch.dtype, optional
        Convert the parameters to this floating dtype; default: the dtype in the file.

    Returns
    -------
    nn.Module
        A model of the file's kind (an :class:`~boltzlab.models.rbm.RBM` for ``kind="rbm"``,
        a :class:`~boltzlab.models.dbm.DBM` for ``kind="dbm"``),
        with its ``base_fitted`` flag and ``metadata`` restored; bit-identical parameters
        when ``dtype`` is the file's dtype.

    Raises
    ------
    ModelFileError
        Missing, empty, truncated, foreign (pickle, .npz), corrupt or hostile files; other
        boltzlab files; newer format versions; unknown kinds; missing or extra tensors;
        inconsistent shapes; non-floating dtypes; NaN or infinite values; bad metadata. The
        message names the file, the problem and the fix.
    ValidationError
        A bad ``device`` or ``dtype`` argument.
    """
    if dtype is not None and dtype not in _FLOAT_DTYPES.values():
        raise ValidationError(f"dtype must be one of torch.{', torch.'.join(_FLOAT_DTYPES)}, got {dtype}")
    try:
        device = torch.device(device)
        torch.empty(0, device=device)  # fail here, not halfway through building the model
    except (RuntimeError, TypeError, AssertionError) as error:
        raise ValidationError(
            f"device must name an available torch device such as 'cpu', got {device!r} ({error})"
        ) from None
    path = Path(path)
    what = "model file"
    tensors, header = _read_safetensors(path, what)
    _check_format(path, header, what=what, expected=MODEL_FORMAT, version=MODEL_FORMAT_VERSION)
    missing_keys = [
        key for key in ("kind", "shapes", "dtype", "base_fitted", "metadata") if key not in header
    ]
    if missing_keys:
        raise _refuse(path, what, f"its metadata lacks {', '.join(map(repr, missing_keys))}")
    kind = MODEL_KINDS.get(header["kind"])
    if kind is None:
        raise ModelFileError(
            f"{path} holds a model of kind {_short(header['kind'])}, which this boltzlab does not know "
            f"(known: {', '.join(MODEL_KINDS)}); upgrade boltzlab"
        )
    try:
        file_dtype = _ensure_torch_dtype(header["dtype"])
    except ModelFileError as error:
        raise _refuse(path, what, f"its metadata declares {error}") from None
    if header["base_fitted"] not in ("true", "false"):
        raise _refuse(
            path, what, f"base_fitted is {_short(header['base_fitted'])}, expected 'true' or 'false'"
        )
    declared = _json_entry(path, what, header, "shapes", dict)
    metadata = _json_entry(path, what, header, "metadata", dict)

    _check_model_tensors(path, kind, tensors, declared, file_dtype)
    target = file_dtype if dtype is None else dtype
    converted = {name: tensor.to(target) for name, tensor in tensors.items()}
    for name, tensor in converted.items():
        if not bool(torch.isfinite(tensor).all()):
            raise ModelFileError(
                f"{path}: tensor {name!r} overflows {str(target).removeprefix('torch.')}; "
                f"load it with dtype=torch.{header['dtype']}"
            )
    try:
        model = kind.build(converted, dtype=target, device=device)
    except ValidationError as error:
        raise _refuse(path, what, str(error)) from None
    model.base_fitted = header["base_fitted"] == "true"
    model.metadata = metadata
    return model
