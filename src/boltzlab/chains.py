"""The state of a batch of Markov chains over a layered binary model.

``Chains`` is a frozen dataclass: a step returns a new one and never changes its input.
Axis 0 of every tensor is the chain axis. Layers hold 0/1 values in the model's dtype
(real values for a continuous family).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

__all__ = ["Chains"]


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
    """

    layers: tuple[Tensor, ...]
    beta: Tensor

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
        return Chains(layers=tuple(layer[index] for layer in self.layers), beta=self.beta[index])

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> Chains:
        return Chains(
            layers=tuple(layer.to(device=device, dtype=dtype) for layer in self.layers),
            beta=self.beta.to(device=device, dtype=dtype),
        )
