"""The state of a batch of Markov chains over a layered binary model, and its checkpoint form.

``Chains`` is a frozen dataclass: a step returns a new one and never changes its input.
Axis 0 of every tensor is the chain axis. Layers hold 0/1 values in the model's dtype
(real values for a continuous family).

Checkpoints (docs/architecture.md, "Files") store chains as named tensors
``{prefix}.layer0, {prefix}.layer1, …`` and, when the β are not implied by something else
(a tempering scheme rebuilds them from its levels), ``{prefix}.beta``:
:func:`chains_to_tensors` and :func:`chains_from_tensors` are the one place that format lives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = ["Chains", "chains_from_tensors", "chains_to_tensors"]


@dataclass(frozen=True, slots=True)
class Chains:
    """States of ``n_chains`` chains and their inverse temperatures.

    Attributes
    ----------
    layers : tuple of Tensor
        One tensor per layer, shape ``(n_chains, n_units_of_layer)``, all of the same floating
        dtype and device: 0/1 values for binary models (an RBM: ``(v, h)``), real values for
        a continuous family (``(x,)``).
    beta : Tensor, shape (n_chains,)
        Inverse temperature of each chain on the model's tempered family (1 = the model,
        0 = its tractable base), same dtype and device as the layers.
    values_checked : bool, default False
        Whether the binary layers are known to hold only 0/1: an operator's output is, so the
        value check (one device synchronisation) runs once on chains a caller built, not on
        every step. Not part of equality.
    """

    layers: tuple[Tensor, ...]
    beta: Tensor
    values_checked: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Metadata checks only: cheap enough to run on every step.
        if not isinstance(self.layers, tuple) or not self.layers:
            raise TypeError("Chains.layers must be a non-empty tuple of tensors")
        first = self.layers[0]
        n_chains = first.shape[0] if first.dim() == 2 else -1
        for index, layer in enumerate(self.layers):
            if layer.dim() != 2 or layer.shape[0] != n_chains:
                raise ValueError(
                    f"Chains.layers[{index}] has shape {tuple(layer.shape)}; every layer must be "
                    f"(n_chains, n_units) with the same n_chains ({n_chains})"
                )
            if layer.dtype != first.dtype or layer.device != first.device:
                raise ValueError(
                    f"Chains.layers[{index}] is {layer.dtype} on {layer.device}; all layers must "
                    f"share dtype and device ({first.dtype} on {first.device})"
                )
        if self.beta.shape != (n_chains,):
            raise ValueError(
                f"Chains.beta has shape {tuple(self.beta.shape)}, expected ({n_chains},): one "
                "inverse temperature per chain"
            )

    @property
    def n_chains(self) -> int:
        return self.layers[0].shape[0]

    @property
    def visible(self) -> Tensor:
        """Layer 0, shape ``(n_chains, n_visible)``."""
        return self.layers[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.layers[0].dtype

    @property
    def device(self) -> torch.device:
        return self.layers[0].device

    def with_beta(self, beta: Tensor | float) -> Chains:
        """The same states at new inverse temperatures (a scalar or shape ``(n_chains,)``)."""
        beta_tensor = torch.as_tensor(beta, dtype=self.dtype, device=self.device)
        if beta_tensor.dim() == 0:
            beta_tensor = beta_tensor.expand(self.n_chains).clone()
        return replace(self, beta=beta_tensor)

    def select(self, index: Tensor | slice) -> Chains:
        """The chains picked by ``index`` along axis 0."""
        return Chains(
            layers=tuple(layer[index] for layer in self.layers),
            beta=self.beta[index],
            values_checked=self.values_checked,
        )

    @classmethod
    def concatenate(cls, parts: Sequence[Chains]) -> Chains:
        """The chains of ``parts`` one after another along axis 0 (same layers, dtype, device)."""
        if not parts:
            raise ValueError("Chains.concatenate needs at least one Chains")
        return cls(
            layers=tuple(torch.cat(layers) for layers in zip(*(part.layers for part in parts), strict=True)),
            beta=torch.cat([part.beta for part in parts]),
            values_checked=all(part.values_checked for part in parts),
        )

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> Chains:
        return Chains(
            layers=tuple(layer.to(device=device, dtype=dtype) for layer in self.layers),
            beta=self.beta.to(device=device, dtype=dtype),
            values_checked=self.values_checked,  # 0 and 1 are exact in every floating dtype
        )


def chains_to_tensors(chains: Chains, prefix: str = "chains", *, with_beta: bool = True) -> dict[str, Tensor]:
    """Named contiguous copies of ``chains`` for a checkpoint (module docstring).

    Parameters
    ----------
    chains : Chains
    prefix : str, default "chains"
        Keys are ``{prefix}.layer{i}`` and, with ``with_beta``, ``{prefix}.beta``.
    with_beta : bool, default True
        Leave β out when the reader rebuilds it (e.g. from a tempering scheme's levels).

    Returns
    -------
    dict of str to Tensor
        Copies, so a later step cannot change what is being written.
    """
    tensors = {
        f"{prefix}.layer{index}": layer.contiguous().clone() for index, layer in enumerate(chains.layers)
    }
    if with_beta:
        tensors[f"{prefix}.beta"] = chains.beta.contiguous().clone()
    return tensors


def chains_from_tensors(
    tensors: Mapping[str, Tensor],
    prefix: str = "chains",
    *,
    dtype: torch.dtype,
    device: torch.device | str,
    layer_sizes: Sequence[int] | None = None,
    beta: float | None = None,
) -> Chains:
    """Inverse of :func:`chains_to_tensors`, on ``device`` in ``dtype``.

    Parameters
    ----------
    tensors : mapping of str to Tensor
    prefix : str, default "chains"
    dtype, device
        Of the model the chains belong to.
    layer_sizes : sequence of int, optional
        The model's units per layer; when given, the number of layers and their widths are
        checked (a checkpoint of another model is refused by name, not by a shape error later).
    beta : float, optional
        Put every chain at this β instead of reading ``{prefix}.beta`` (for tensors written
        with ``with_beta=False``).

    Raises
    ------
    ValidationError
        When the tensors hold no chains under ``prefix``, or chains that do not fit.
    """
    layers = []
    while f"{prefix}.layer{len(layers)}" in tensors:
        layers.append(tensors[f"{prefix}.layer{len(layers)}"].to(device=device, dtype=dtype))
    if not layers or (beta is None and f"{prefix}.beta" not in tensors):
        raise ValidationError(f"the checkpoint has no chains under {prefix!r}")
    if layer_sizes is not None:
        if len(layers) != len(layer_sizes):
            raise ValidationError(
                f"the tensors hold {len(layers)} layers under {prefix!r}; the model has {len(layer_sizes)}"
            )
        for layer, size in zip(layers, layer_sizes, strict=True):
            if layer.dim() != 2 or layer.shape[1] != size:
                raise ValidationError(
                    f"a layer under {prefix!r} has shape {tuple(layer.shape)}; the model's layer has {size} units"
                )
    n_chains = layers[0].shape[0] if layers[0].dim() == 2 else 0
    if beta is None:
        beta_tensor = tensors[f"{prefix}.beta"].to(device=device, dtype=dtype)
    else:
        beta_tensor = torch.full((n_chains,), float(beta), dtype=dtype, device=device)
    try:
        return Chains(layers=tuple(layers), beta=beta_tensor)
    except (TypeError, ValueError) as error:
        raise ValidationError(f"inconsistent chains under {prefix!r}: {error}") from None
