"""``save`` and ``load`` for the model classes, and the helpers their file kinds share.

A model file is safetensors with a JSON metadata header (see :mod:`boltzlab.io`). Each model
module registers its own kind with :func:`boltzlab.io.register_model_kind` and mixes in
:class:`ModelFile` to read and write it; io itself knows no model class.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from torch import Tensor, nn

from boltzlab.errors import ValidationError
from boltzlab.io import load_model, save_model

__all__ = ["ModelFile", "attribute_tensors", "bipartite_expected_shapes", "build_bipartite", "copy_buffers"]


class ModelFile:
    """Mixin: :meth:`save` to a model file and :meth:`load` one back, refusing another kind."""

    # The article of the class name in load's refusal ("not an RBM", "not a DBM").
    _article: ClassVar[str] = "a"

    def save(self, path: str | Path, *, metadata: dict[str, Any] | None = None) -> Path:
        """Write the model as safetensors with a JSON metadata header (its kind); returns the path."""
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
        model = load_model(path, device=device, dtype=dtype)
        if not isinstance(model, cls):
            raise ValidationError(f"{path} holds a {type(model).__name__}, not {cls._article} {cls.__name__}")
        return model


def attribute_tensors(*names: str) -> Callable[[Any], dict[str, Tensor]]:
    """A kind's ``tensors(model)``: the model's attributes ``names``, by name."""

    def tensors(model: Any) -> dict[str, Tensor]:
        return {name: getattr(model, name) for name in names}

    return tensors


def copy_buffers(
    model: nn.Module,
    tensors: dict[str, Tensor],
    names: tuple[str, ...],
    *,
    dtype: torch.dtype,
    device: torch.device,
) -> None:
    """Copy the buffers ``names`` from the file's tensors into ``model``.

    Copied, not rebuilt (log σ from σ, say), so the round trip is bit-exact.
    """
    with torch.no_grad():
        for name in names:
            getattr(model, name).copy_(tensors[name].to(device=device, dtype=dtype))


def build_bipartite(
    model_class: type[Any],
    tensors: dict[str, Tensor],
    buffers: tuple[str, ...],
    *,
    dtype: torch.dtype,
    device: torch.device,
) -> Any:
    """An RBM or Gaussian-binary RBM from its weights and biases, then its ``buffers`` copied in."""
    model = model_class(
        weights=tensors["weights"],
        visible_bias=tensors["visible_bias"],
        hidden_bias=tensors["hidden_bias"],
        dtype=dtype,
        device=device,
    )
    copy_buffers(model, tensors, buffers, dtype=dtype, device=device)
    return model


def bipartite_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of an RBM file, sized by its ``weights`` tensor (``ValueError`` if absent)."""
    weights = shapes.get("weights")
    if weights is None:
        raise ValueError("tensor 'weights' is missing")
    if len(weights) != 2 or min(weights) < 1:
        raise ValueError(
            f"tensor 'weights' has shape {weights}, expected (n_visible, n_hidden), both positive"
        )
    n_visible, n_hidden = weights
    return {
        "weights": (n_visible, n_hidden),
        "visible_bias": (n_visible,),
        "hidden_bias": (n_hidden,),
        "base_logits": (n_visible,),
    }
