"""``save`` and ``load`` for the model classes, through :mod:`boltzlab.io`'s model files.

A model file is safetensors with a JSON metadata header (see :mod:`boltzlab.io`); a class
listed in :data:`boltzlab.io.MODEL_KINDS` mixes in :class:`ModelFile` to read and write
its own kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Self

import torch

from boltzlab.errors import ValidationError

__all__ = ["ModelFile"]


class ModelFile:
    """Mixin: :meth:`save` to a model file and :meth:`load` one back, refusing another kind."""

    # The article of the class name in load's refusal ("not an RBM", "not a DBM").
    _article: ClassVar[str] = "a"

    def save(self, path: str | Path, *, metadata: dict[str, Any] | None = None) -> Path:
        """Write the model as safetensors with a JSON metadata header (its kind); returns the path."""
        from boltzlab.io import save_model

        return save_model(self, path, metadata=metadata)  # type: ignore[arg-type]

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
    ) -> Self:
        """Read a model of this class written by :meth:`save`, validating shapes, dtypes and finiteness."""
        from boltzlab.io import load_model

        model = load_model(path, device=device, dtype=dtype)
        if not isinstance(model, cls):
            raise ValidationError(f"{path} holds a {type(model).__name__}, not {cls._article} {cls.__name__}")
        return model
