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

from boltzlab.io.atomic import write_atomic
from boltzlab.io.checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from boltzlab.io.model_files import (
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    MODEL_KINDS,
    ModelKind,
    load_model,
    register_model_kind,
    save_model,
)
from boltzlab.io.safetensors_file import serialize

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
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
    "serialize",
    "write_atomic",
]
