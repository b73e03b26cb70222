"""Model files: the tensors a model kind lists, and its shapes, dtype and metadata.

A model file holds the tensors its kind lists in :data:`MODEL_KINDS` and the metadata
``format="boltzlab-model"``, ``format_version``, ``kind``, ``shapes`` (JSON), ``dtype``,
``base_fitted`` and ``metadata`` (JSON: the model's own metadata, e.g. a training config).
A model that keeps witness rows (``model.witness_bits``: data rows packed eight units to a
byte, docs/trust.md) also holds them as the uint8 tensor ``"witness"``; files without it load
as models without a witness. A new model kind is one :func:`register_model_kind` call in the
model's own module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.io.atomic import write_atomic
from boltzlab.io.safetensors_file import (
    FLOAT_DTYPES,
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    check_format,
    cpu_copies,
    json_entry,
    read_safetensors,
    refuse,
    serialize,
    short,
    torch_dtype,
)
from boltzlab.validation import check_device

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "MODEL_KINDS",
    "ModelKind",
    "load_model",
    "register_model_kind",
    "save_model",
]


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


# The optional tensor of a model's witness rows, the one tensor not in the model's float dtype.
_WITNESS_TENSOR = "witness"

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
    # The most specific kind: a Potts DBM is a DBM too, and must be saved as itself.
    kinds = [kind for kind in MODEL_KINDS.values() if isinstance(model, kind.model_class)]
    kind = next((k for k in kinds if all(issubclass(k.model_class, o.model_class) for o in kinds)), None)
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
    tensors = cpu_copies(kind.tensors(model), "model tensors")
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
    witness = getattr(model, "witness_bits", None)
    if witness is not None:
        tensors[_WITNESS_TENSOR] = cpu_copies({_WITNESS_TENSOR: witness}, "witness rows")[_WITNESS_TENSOR]
    header = {
        "format": MODEL_FORMAT,
        "format_version": str(MODEL_FORMAT_VERSION),
        "kind": kind.name,
        "shapes": json.dumps({name: list(tensor.shape) for name, tensor in tensors.items()}, sort_keys=True),
        "dtype": str(dtypes.pop()).removeprefix("torch."),
        "base_fitted": "true" if getattr(model, "base_fitted", False) else "false",
        "metadata": metadata_text,
    }
    return write_atomic(path, serialize(tensors, header))


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
        raise refuse(path, what, f"{error} (kind {kind.name!r})") from None
    missing = sorted(expected.keys() - shapes.keys())
    extra = sorted(shapes.keys() - expected.keys())
    if missing:
        needed = ", ".join(sorted(expected))
        raise refuse(path, what, f"tensors {missing} are missing (kind {kind.name!r} needs {needed})")
    if extra:
        raise refuse(path, what, f"unexpected tensors {short(extra)} for kind {kind.name!r}")
    found = ", ".join(f"{name} {shape}" for name, shape in sorted(shapes.items()))
    for name, shape in expected.items():
        if shapes[name] != shape:
            problem = f"tensor {name!r} should have shape {shape} given the others (found {found[:200]})"
            raise refuse(path, what, problem)
    for name, value in declared.items():
        if name not in shapes or not isinstance(value, list) or tuple(value) != shapes[name]:
            raise refuse(
                path,
                what,
                f"its 'shapes' entry records {short(name)} as {short(value)}, unlike the tensors",
            )
    if declared.keys() != shapes.keys():
        raise refuse(path, what, f"its 'shapes' entry omits {sorted(shapes.keys() - declared.keys())}")
    for name, tensor in tensors.items():
        if tensor.dtype != file_dtype:
            raise refuse(
                path,
                what,
                f"tensor {name!r} has dtype {str(tensor.dtype).removeprefix('torch.')}, "
                f"but the file declares {str(file_dtype).removeprefix('torch.')}",
                "model files hold one floating dtype (float32, float64, float16 or bfloat16); "
                "convert the parameters and re-save with RBM.save(path)",
            )
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise refuse(
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
    if dtype is not None and dtype not in FLOAT_DTYPES.values():
        raise ValidationError(f"dtype must be one of torch.{', torch.'.join(FLOAT_DTYPES)}, got {dtype}")
    device = check_device(device)  # one line saying what the machine has, not torch's message
    try:
        torch.empty(0, device=device)  # fail here, not halfway through building the model
    except (RuntimeError, TypeError, AssertionError) as error:
        raise ValidationError(
            f"device must name an available torch device such as 'cpu', got {device!r} ({error})"
        ) from None
    path = Path(path)
    what = "model file"
    tensors, header = read_safetensors(path, what)
    check_format(path, header, what=what, expected=MODEL_FORMAT, version=MODEL_FORMAT_VERSION)
    missing_keys = [
        key for key in ("kind", "shapes", "dtype", "base_fitted", "metadata") if key not in header
    ]
    if missing_keys:
        raise refuse(path, what, f"its metadata lacks {', '.join(map(repr, missing_keys))}")
    kind = MODEL_KINDS.get(header["kind"])
    if kind is None:
        raise ModelFileError(
            f"{path} holds a model of kind {short(header['kind'])}, which this boltzlab does not know "
            f"(known: {', '.join(MODEL_KINDS)}); upgrade boltzlab"
        )
    try:
        file_dtype = torch_dtype(header["dtype"])
    except ModelFileError as error:
        raise refuse(path, what, f"its metadata declares {error}") from None
    if header["base_fitted"] not in ("true", "false"):
        raise refuse(path, what, f"base_fitted is {short(header['base_fitted'])}, expected 'true' or 'false'")
    declared = json_entry(path, what, header, "shapes", dict)
    metadata = json_entry(path, what, header, "metadata", dict)

    witness = _take_witness(path, tensors, declared)
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
        raise refuse(path, what, str(error)) from None
    model.base_fitted = header["base_fitted"] == "true"
    model.metadata = metadata
    if witness is not None:
        if not hasattr(model, "set_witness_bits"):
            raise refuse(
                path, what, f"unexpected tensor {_WITNESS_TENSOR!r}: a {kind.name} keeps no witness rows"
            )
        try:
            model.set_witness_bits(witness)
        except ValidationError as error:
            raise refuse(path, what, str(error)) from None
    return model


def _take_witness(path: Path, tensors: dict[str, Tensor], declared: dict[str, Any]) -> Tensor | None:
    """Remove the witness rows from ``tensors`` and ``declared`` (checked against each other)."""
    if _WITNESS_TENSOR not in tensors:
        return None
    witness = tensors.pop(_WITNESS_TENSOR)
    recorded = declared.pop(_WITNESS_TENSOR, None)
    if not isinstance(recorded, list) or tuple(recorded) != tuple(witness.shape):
        raise refuse(
            path,
            "model file",
            f"its 'shapes' entry records {_WITNESS_TENSOR!r} as {short(recorded)}, unlike the tensor",
        )
    return witness
