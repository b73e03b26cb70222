"""``save`` and ``load`` for the model classes, and each model's file kind.

A model file is safetensors with a JSON metadata header (see :mod:`boltzlab.io`). Each model
module registers its own kind with :func:`boltzlab.io.register_model_kind` (one call, e.g.
``register_model_kind(dbm_kind(DBM))``) and mixes in :class:`ModelFile` to read and write
it; io itself knows no model class. The kinds are built here, from the class they are given,
so what a file holds and how a model is rebuilt from it sit in one place for every model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from torch import Tensor, nn

from boltzlab.errors import ValidationError
from boltzlab.io import ModelKind, load_model, save_model

__all__ = ["ModelFile"]

# The parameters every two-layer model file holds, before its kind's own buffers.
_BIPARTITE_PARAMETERS = ("weights", "visible_bias", "hidden_bias")


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


def _attribute_tensors(*names: str) -> Callable[[Any], dict[str, Tensor]]:
    """A kind's ``tensors(model)``: the model's attributes ``names``, by name."""

    def tensors(model: Any) -> dict[str, Tensor]:
        return {name: getattr(model, name) for name in names}

    return tensors


def _copy_buffers(
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
            buffer = getattr(model, name)
            # A Potts file holds (L, q) where the model holds the flat (L·q,) buffer.
            buffer.copy_(tensors[name].reshape(buffer.shape).to(device=device, dtype=dtype))


def _build_bipartite(
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
    _copy_buffers(model, tensors, buffers, dtype=dtype, device=device)
    return model


def _bipartite_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
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


# ---------------------------------------------------------------------------- two-layer kinds
def _bipartite_kind(
    name: str,
    model_class: type[Any],
    buffers: tuple[str, ...],
    expected_shapes: Callable[[dict[str, tuple[int, ...]]], dict[str, tuple[int, ...]]],
    check: Callable[[dict[str, Tensor]], None] | None = None,
) -> ModelKind:
    """A two-layer kind: weights, biases and ``buffers``, rebuilt by :func:`_build_bipartite`.

    ``check(tensors)``, when given, refuses a file's tensors before the model is built.
    """

    def build(tensors: dict[str, Tensor], *, dtype: torch.dtype, device: torch.device) -> Any:
        if check is not None:
            check(tensors)
        return _build_bipartite(model_class, tensors, buffers, dtype=dtype, device=device)

    return ModelKind(
        name=name,
        model_class=model_class,
        tensors=_attribute_tensors(*_BIPARTITE_PARAMETERS, *buffers),
        expected_shapes=expected_shapes,
        build=build,
    )


def rbm_kind(model_class: type[Any]) -> ModelKind:
    """The ``"rbm"`` file kind: weights, biases and ``base_logits``, rebuilt as ``model_class``."""
    return _bipartite_kind("rbm", model_class, ("base_logits",), _bipartite_expected_shapes)


def spin_rbm_kind(model_class: type[Any]) -> ModelKind:
    """The ``"spin-rbm"`` file kind: an RBM file's tensors, holding the ±1 energy's parameters."""
    return _bipartite_kind("spin-rbm", model_class, ("base_logits",), _bipartite_expected_shapes)


def gaussian_rbm_kind(model_class: type[Any]) -> ModelKind:
    """The ``"gaussian-rbm"`` file kind: an RBM's tensors with ``log σ`` and the Gaussian base.

    ``base_logits`` gives way to ``log_std``, ``base_mean`` and ``base_std``, each of shape
    ``(n_visible,)``; a file whose ``base_std`` is not positive everywhere is refused.
    """
    buffers = ("log_std", "base_mean", "base_std")

    def expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
        expected = _bipartite_expected_shapes(shapes)
        del expected["base_logits"]
        expected.update(dict.fromkeys(buffers, expected["visible_bias"]))
        return expected

    def check_base_std(tensors: dict[str, Tensor]) -> None:
        if not bool((tensors["base_std"] > 0).all()):
            raise ValidationError("tensor 'base_std' must be positive in every unit")

    return _bipartite_kind("gaussian-rbm", model_class, buffers, expected_shapes, check_base_std)


def _potts_tensors(model: Any) -> dict[str, Tensor]:
    sites, states = model.n_sites, model.n_states
    return {
        "weights": model.weights.detach().reshape(sites, states, model.n_hidden),
        "visible_bias": model.visible_bias.detach().reshape(sites, states),
        "hidden_bias": model.hidden_bias,
        "base_logits": model.base_logits.reshape(sites, states),
    }


def _potts_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of a Potts RBM file, sized by ``weights`` of shape ``(L, q, J)``."""
    weights = shapes.get("weights")
    if weights is None:
        raise ValueError("tensor 'weights' is missing")
    if len(weights) != 3 or min(weights) < 1 or weights[1] < 2:
        raise ValueError(
            f"tensor 'weights' has shape {weights}, expected (n_sites, n_states, n_hidden) with n_states >= 2"
        )
    sites, states, hidden = weights
    return {
        "weights": (sites, states, hidden),
        "visible_bias": (sites, states),
        "hidden_bias": (hidden,),
        "base_logits": (sites, states),
    }


def potts_rbm_kind(model_class: type[Any]) -> ModelKind:
    """The ``"potts-rbm"`` file kind: weights ``(L, q, J)``, fields and profile ``(L, q)``.

    Held with their site and state axes, so a file says its own ``L`` and ``q``; the model's
    flattened ``(L·q, …)`` tensors are views of the same numbers.
    """

    return ModelKind(
        name="potts-rbm",
        model_class=model_class,
        tensors=_potts_tensors,
        expected_shapes=_potts_expected_shapes,
        build=functools.partial(_build_bipartite, model_class, buffers=("base_logits",)),
    )


# ---------------------------------------------------------------------------- the DBM kind
def _dbm_tensors(model: Any) -> dict[str, Tensor]:
    tensors = {f"weights.{index}": matrix for index, matrix in enumerate(model.weights)}
    tensors.update({f"biases.{index}": vector for index, vector in enumerate(model.biases)})
    tensors["base_logits"] = model.base_logits
    return tensors


def _dbm_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of a DBM file, ``weights.0, weights.1, …``, ``biases.0, …``, ``base_logits``.

    The number of layers is read from the file: ``weights.0, weights.1, …`` up to the first
    gap (a later stray ``weights.k`` is then reported as unexpected by the caller).
    ``ValueError`` when fewer than two weight matrices are found or one is malformed.
    """
    n_weights = 0
    while f"weights.{n_weights}" in shapes:
        shape = shapes[f"weights.{n_weights}"]
        if len(shape) != 2 or min(shape) < 1:
            raise ValueError(
                f"tensor 'weights.{n_weights}' has shape {shape}, expected "
                f"(n_{n_weights}, n_{n_weights + 1}), both positive"
            )
        n_weights += 1
    if n_weights < 2:
        raise ValueError(
            f"a DBM needs tensors 'weights.0' and 'weights.1' (L >= 2 hidden layers), found {n_weights}"
        )
    sizes = [shapes["weights.0"][0], *(shapes[f"weights.{index}"][1] for index in range(n_weights))]
    expected = {f"weights.{index}": (sizes[index], sizes[index + 1]) for index in range(n_weights)}
    expected.update({f"biases.{index}": (size,) for index, size in enumerate(sizes)})
    expected["base_logits"] = (sizes[0],)
    return expected


def _build_dbm(
    model_class: type[Any], tensors: dict[str, Tensor], *, dtype: torch.dtype, device: torch.device
) -> Any:
    """A DBM (or Potts DBM) from its weight matrices and biases, then ``base_logits`` copied in."""
    n_weights = sum(name.startswith("weights.") for name in tensors)
    model = model_class(
        weights=[tensors[f"weights.{index}"] for index in range(n_weights)],
        biases=[tensors[f"biases.{index}"] for index in range(n_weights + 1)],
        dtype=dtype,
        device=device,
    )
    _copy_buffers(model, tensors, ("base_logits",), dtype=dtype, device=device)
    return model


def dbm_kind(model_class: type[Any], *, name: str = "dbm") -> ModelKind:
    """The ``"dbm"`` file kind: one tensor per weight matrix and bias vector, and ``base_logits``.

    ``name="spin-dbm"`` gives the same tensors for a DBM with ±1 visible units (its first
    matrix and visible bias are the spin energy's).
    """
    return ModelKind(
        name=name,
        model_class=model_class,
        tensors=_dbm_tensors,
        expected_shapes=_dbm_expected_shapes,
        build=functools.partial(_build_dbm, model_class),
    )


def _potts_dbm_tensors(model: Any) -> dict[str, Tensor]:
    tensors = _dbm_tensors(model)
    sites, states = model.n_sites, model.n_states
    tensors["weights.0"] = tensors["weights.0"].detach().reshape(sites, states, -1)
    tensors["biases.0"] = tensors["biases.0"].detach().reshape(sites, states)
    tensors["base_logits"] = tensors["base_logits"].reshape(sites, states)
    return tensors


def _potts_dbm_expected_shapes(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """A DBM file's names and shapes with the visible tensors of shape ``(L, q, …)``."""
    first = shapes.get("weights.0")
    if first is None or len(first) != 3 or min(first) < 1 or first[1] < 2:
        raise ValueError(
            f"tensor 'weights.0' has shape {first}, expected (n_sites, n_states, n_1) with n_states >= 2"
        )
    sites, states, _ = first
    flat = dict(shapes)
    flat["weights.0"] = (sites * states, first[2])
    expected = _dbm_expected_shapes(flat)
    expected["weights.0"] = first
    expected["biases.0"] = (sites, states)
    expected["base_logits"] = (sites, states)
    return expected


def potts_dbm_kind(model_class: type[Any]) -> ModelKind:
    """The ``"potts-dbm"`` file kind: a DBM's tensors, the visible ones with their site and state axes."""

    return ModelKind(
        name="potts-dbm",
        model_class=model_class,
        tensors=_potts_dbm_tensors,
        expected_shapes=_potts_dbm_expected_shapes,
        build=functools.partial(_build_dbm, model_class),
    )
