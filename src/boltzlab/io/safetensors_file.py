"""Reading and checking safetensors files before the safetensors library sees the bytes.

Loading a file never runs code: tensors come from the safetensors format (a JSON header of
names, dtypes, shapes and byte offsets, then raw little-endian data) and everything else from
string metadata parsed as JSON. Every header is checked here, and any failure becomes one
:class:`~boltzlab.errors.ModelFileError` line naming the file, the problem and the fix
(:func:`refuse`). Used by :mod:`boltzlab.io.checkpoints` and :mod:`boltzlab.io.model_files`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import Tensor

from boltzlab.errors import ModelFileError, ValidationError

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "FLOAT_DTYPES",
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "TRAJECTORY_FORMAT",
    "refuse",
    "serialize",
    "short",
]

# The boltzlab formats; check_format names the other one when a file is the wrong kind.
# (A training trajectory is written by boltzlab.models.trajectory, which imports this name.)
TRAJECTORY_FORMAT = "boltzlab-trajectory"
CHECKPOINT_FORMAT = "boltzlab-checkpoint"
CHECKPOINT_VERSION = 1
MODEL_FORMAT = "boltzlab-model"
MODEL_FORMAT_VERSION = 1

# The safetensors library refuses headers above 100 MB; refusing them here first means a
# hostile length never makes us slice or parse a giant buffer.
_MAX_HEADER_BYTES = 100_000_000
FLOAT_DTYPES = {
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


def serialize(tensors: Mapping[str, Tensor], metadata: Mapping[str, str]) -> bytes:
    """The safetensors bytes of ``tensors`` with string ``metadata``, the same bytes for the same input.

    The safetensors library writes ``__metadata__`` from a hash map whose order changes from
    process to process, so two identical runs gave files with different checksums. Here the
    header is rewritten with the metadata keys sorted (the tensors' entries keep the library's
    order, which is by name and offset), padded with spaces to a multiple of 8 bytes as the
    format asks; the data section, whose offsets are relative to its own start, is untouched.
    """
    blob = safetensors_save(dict(tensors), metadata=dict(metadata))
    length = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + length])
    ordered = {"__metadata__": dict(sorted(header.pop("__metadata__", {}).items())), **header}
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + blob[8 + length :]


def cpu_copies(tensors: Mapping[str, Tensor], what: str) -> dict[str, Tensor]:
    """Detached, contiguous CPU copies: never aliases of the caller's tensors or of each other."""
    payload = {}
    for name, tensor in tensors.items():
        if not isinstance(tensor, Tensor):
            raise ValidationError(f"{what}[{name!r}] must be a torch.Tensor, got {type(tensor).__name__}")
        payload[name] = tensor.detach().to("cpu", copy=True).contiguous()
    return payload


class _Invalid(Exception):
    """A problem found inside a file; the public door adds the path and a fix."""


def short(value: Any) -> str:
    """``repr(value)`` cut to 60 characters, so a hostile header cannot flood a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def refuse(path: Path, what: str, problem: str, fix: str | None = None) -> ModelFileError:
    return ModelFileError(
        f"{path} is not a valid {what}: {problem}; {fix or _REMEDY.get(what, 'check the file')}"
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are read differently by different JSON parsers (ours versus the Rust one
    # inside safetensors), so a header with them could show us one tensor and load another.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Invalid(f"the header names {short(key)} twice")
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
            raise _Invalid(f"tensor {short(name)} lacks dtype, shape or data_offsets")
        shape, offsets = entry["shape"], entry["data_offsets"]
        if (
            not isinstance(entry["dtype"], str)
            or not isinstance(shape, list)
            or not all(map(_is_index, shape))
        ):
            raise _Invalid(f"tensor {short(name)} has a malformed dtype or shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_index, offsets))):
            raise _Invalid(f"tensor {short(name)} has malformed data_offsets")
        start, end = offsets
        if start > end:
            raise _Invalid(f"tensor {short(name)} ends (byte {end}) before it starts (byte {start})")
        if end > data_length:
            raise _Invalid(
                f"tensor {short(name)} claims bytes {start}..{end} but the data section has "
                f"{data_length} bytes (truncated?)"
            )
        spans.append((start, end, name))
    spans.sort()
    for (_, previous_end, previous), (start, _, name) in pairwise(spans):
        if start < previous_end:
            raise _Invalid(f"tensors {short(previous)} and {short(name)} overlap")
    covered = sum(end - start for start, end, _ in spans)
    if covered != data_length:
        # Checked here, from the header and the file size, before the data are read.
        raise _Invalid(
            f"the tensors account for {covered} bytes but the data section has {data_length} "
            "(padded, or not one file)"
        )


def _parse_header(
    path: Path, what: str, prefix: bytes, head: bytes, header_length: int, size: int
) -> dict[str, Any]:
    """The JSON header of a safetensors file of ``size`` bytes, checked against that size.

    ``prefix``: its first 8 bytes; ``head``: the ``header_length`` bytes after them (or the
    first few, when the length is implausible, to recognise a foreign format).
    """
    if len(prefix) < 8:
        raise refuse(path, what, f"it has only {len(prefix)} bytes (empty or truncated)")
    if header_length > _MAX_HEADER_BYTES or header_length > size - 8 or head[:1] != b"{":
        foreign = _foreign_format(prefix + head)
        if foreign is not None:
            raise refuse(
                path,
                what,
                f"it is {foreign}, not safetensors",
                f"boltzlab never unpickles (that could run code); {_FOREIGN_REMEDY.get(what, 'check the path')}",
            )
        if header_length > _MAX_HEADER_BYTES:
            problem = f"its header claims {header_length} bytes, over the {_MAX_HEADER_BYTES}-byte limit"
        elif header_length > size - 8:
            problem = f"its header claims {header_length} bytes but the file has {size} (truncated, or not safetensors)"
        else:
            problem = "its header does not start with '{' (not a safetensors file)"
        raise refuse(path, what, problem)
    try:
        header = _strict_json(head)
        if not isinstance(header, dict):
            raise _Invalid("the header is not a JSON object")
        _check_layout(header, size - 8 - header_length)
    except _Invalid as problem:
        raise refuse(path, what, f"corrupt safetensors header: {problem}") from None
    return header


def read_safetensors(path: Path, what: str) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Tensors and string metadata of the safetensors file ``path``, refusing anything else.

    ``what`` names the expected file ("model file", "checkpoint") in messages. Never raises
    anything but :class:`ModelFileError` for a bad file.
    """
    path = Path(path)
    if not path.exists():
        if path.is_symlink():  # exists() follows links: a dangling or looping one is not "missing"
            raise ModelFileError(
                f"{what} {path} is a symbolic link whose target is missing or that loops back on itself; "
                "point it at the file, or give the file's own path"
            )
        raise ModelFileError(f"{what} {path} does not exist; check the path")
    if not path.is_file():
        raise ModelFileError(f"{what} {path} is a directory or special file, not a file; check the path")
    # The header is read and checked against the file's size first: only a file whose header
    # accounts for every byte is read whole (a 1 GiB sparse file used to be read before it was
    # refused as "not fully covered").
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            prefix = stream.read(8)
            header_length = int.from_bytes(prefix, "little") if len(prefix) == 8 else 0
            plausible = len(prefix) == 8 and header_length <= min(_MAX_HEADER_BYTES, size - 8)
            head = stream.read(header_length) if plausible else stream.read(8)
            header = _parse_header(path, what, prefix, head, header_length, size)
            data = prefix + head + stream.read()
    except OSError as error:
        raise ModelFileError(
            f"{what} {path} cannot be read ({error.strerror}); check its permissions"
        ) from None
    if len(data) != size:
        raise refuse(path, what, f"it changed while it was read ({size} bytes, then {len(data)})")
    try:
        tensors = safetensors_load(data)
    except Exception as error:  # the library's own checks; any failure means a bad file
        message = " ".join(str(error).split())[:200]
        raise refuse(path, what, f"safetensors refused it ({message})") from None
    return tensors, dict(header.get("__metadata__") or {})


def check_format(path: Path, header: dict[str, str], *, what: str, expected: str, version: int) -> None:
    """Refuse files of another format (naming the right loader) or another format version."""
    found = header.get("format")
    if found != expected:
        if found == MODEL_FORMAT:
            fix = "load it with boltzlab.RBM.load(path) (or boltzlab.io.load_model)"
            raise ModelFileError(f"{path} is a boltzlab model file, not a {what}; {fix}")
        if found == CHECKPOINT_FORMAT:
            fix = "resume from it with the trainer (boltzlab.io.load_checkpoint), or use the run's model.safetensors"
            raise ModelFileError(f"{path} is a boltzlab checkpoint, not a {what}; {fix}")
        if found == TRAJECTORY_FORMAT:
            # Not "re-save the model": nothing is wrong with it, it is another kind of file.
            fix = (
                "load it with boltzlab.models.trajectory.Trajectory.load(path), "
                "or use the run's model.safetensors"
            )
            raise ModelFileError(f"{path} is a boltzlab training trajectory, not a {what}; {fix}")
        if found is None:
            problem = "a safetensors file without boltzlab's 'format' metadata"
            fix = _FOREIGN_REMEDY.get(what)
        else:
            problem, fix = f"format {short(found)}, expected {expected!r}", None
        raise refuse(path, what, problem, fix)
    text = header.get("format_version")
    if text is None or not (text.isascii() and text.isdigit()):
        raise refuse(path, what, f"format_version {short(text)} is not a whole number")
    if int(text) > version:
        raise ModelFileError(
            f"{path} uses {what} format version {int(text)} but this boltzlab reads version {version}; "
            "upgrade boltzlab (pip install -U boltzlab)"
        )
    if int(text) != version:
        raise refuse(
            path, what, f"format version {int(text)} is not supported (this boltzlab reads {version})"
        )


def json_entry(path: Path, what: str, header: dict[str, str], key: str, kind: type) -> Any:
    """Header entry ``key`` parsed as JSON of Python type ``kind``."""
    try:
        value = _strict_json(header[key])
    except _Invalid as problem:
        raise refuse(path, what, f"its {key!r} entry is not valid JSON ({problem})") from None
    if not isinstance(value, kind):
        raise refuse(
            path, what, f"its {key!r} entry is a JSON {type(value).__name__}, expected a {kind.__name__}"
        )
    return value


def torch_dtype(name: str) -> torch.dtype:
    if name not in FLOAT_DTYPES:
        raise ModelFileError(f"unsupported dtype {name!r} (expected one of {', '.join(FLOAT_DTYPES)})")
    return FLOAT_DTYPES[name]
