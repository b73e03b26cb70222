"""Centred gradients: the update of a centred Boltzmann machine, for the parameters we store.

Montavon & Müller (2012, *Deep Boltzmann machines and the centering trick*, LNCS 7700) and
Melchior, Fischer & Wiskott (2016, *How to center deep Boltzmann machines*, JMLR 17(99), §3–4,
Algorithm 1) write the energy with every layer shifted by an offset ``μ^l``,

    E_c(h⁰, …, h^L) = −Σ_l (h^{l−1} − μ^{l−1})ᵀ W^l (h^l − μ^l) − Σ_l b_c^l·(h^l − μ^l),

which is the standard energy ``−Σ_l h^{l−1}ᵀ W^l h^l − Σ_l b^l·h^l`` (up to a constant) with
the same ``W`` and biases ``b^l = b_c^l − W^l ᵀμ^{l−1} − W^{l+1} μ^{l+1}``. The model stores and
saves the standard parameters, and its energy never changes; centring changes only the
*direction* of the update: the gradient step taken in the centred coordinates, mapped back.
For an RBM (layers ``v``, ``h``; offsets ``μ``, ``λ``) and ``G`` the plain gradient,

    D_W = G_W − μ G_cᵀ − G_b λᵀ,        D_b = G_b − D_W λ,        D_c = G_c − D_Wᵀ μ,

and for a DBM the same per matrix, each bias collecting one term per neighbouring matrix
(docs/training.md, "Centring"). ``D = T Tᵀ G`` with ``T`` the linear map from centred to
standard parameters, so ``D = 0`` exactly where ``G = 0``: the fixed points of training are
unchanged, only the path and its conditioning. The map is the chain rule, so it applies to
any objective's gradient (the pseudo-likelihood's too) and to the penalties, which the trainer
adds before centring (weight decay included: with centring it leaves ``torch.optim``).

**Offsets** (Melchior et al. 2016, §4, the "dd" variant they recommend): the visible offset is
the (weighted) data mean, fixed; each hidden offset starts at ½ and follows an exponential
running average of the data term's mean of that layer (``p(h|v)`` for an RBM, the mean-field
posterior for a DBM), ``λ ← (1 − ν)·λ + ν·⟨h⟩_batch``, with ``ν = 0.01``, updated before the
gradient is centred. Offsets are part of the training state and of every checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.errors import ValidationError
from boltzlab.models.dbm import DBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import RBM
from boltzlab.models.spin_rbm import SpinRBM

__all__ = [
    "DEFAULT_OFFSET_RATE",
    "INITIAL_HIDDEN_OFFSET",
    "Centering",
    "Offsets",
]

#: ν of the hidden offsets' running average (Melchior et al. 2016 use 0.01 for RBMs).
DEFAULT_OFFSET_RATE = 0.01
#: Where the hidden offsets start (Melchior et al.'s code, before any data term is seen).
INITIAL_HIDDEN_OFFSET = 0.5


@dataclass(frozen=True, slots=True)
class Offsets:
    """The centring offsets of every layer.

    Attributes
    ----------
    layers : tuple of Tensor
        ``layers[l]`` has shape ``(n_l,)``, the model's dtype and device; ``layers[0]`` is the
        visible offset μ, the rest the hidden offsets (λ for an RBM).
    """

    layers: tuple[Tensor, ...]


def _couplings(model: nn.Module) -> tuple[list[tuple[Tensor, int, int]], list[Tensor]]:
    """``[(W, lower, upper), …]`` and one bias per layer, in layer order, for the centred models."""
    if isinstance(model, RBM | SpinRBM | PottsRBM):
        return [(model.weights, 0, 1)], [model.visible_bias, model.hidden_bias]
    if isinstance(model, DBM):
        return [(weights, index, index + 1) for index, weights in enumerate(model.weights)], list(
            model.biases
        )
    raise ValidationError(
        f"centering is implemented for binary, spin and Potts RBMs and DBMs, not {type(model).__name__}"
    )


class Centering:
    """The centred update direction of a model and its offsets (module docstring).

    Parameters
    ----------
    model : RBM, SpinRBM, PottsRBM or DBM (SpinDBM and PottsDBM included)
    rate : float in (0, 1], default 0.01
        ν of the hidden offsets' running average.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> data = (torch.rand(20, 7, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    >>> centering = Centering(model)
    >>> offsets = centering.init(model, data)
    >>> [tuple(layer.shape) for layer in offsets.layers]
    [(7,), (3,)]
    """

    def __init__(self, model: nn.Module, *, rate: float = DEFAULT_OFFSET_RATE) -> None:
        _couplings(model)  # refuses a model it cannot centre
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0.0 < rate <= 1.0:
            raise ValidationError(f"the centring offset rate must be in (0, 1], got {rate!r}")
        self.rate = float(rate)

    def __repr__(self) -> str:
        return f"Centering(rate={self.rate})"

    def init(self, model: nn.Module, data: Tensor, sample_weights: Tensor | None = None) -> Offsets:
        """Visible offset = the (weighted) mean of ``data`` ``(n_examples, n_visible)``; hidden ones ½.

        ``data`` is held as the model holds it (0/1 rows for a spin model, as the trainer passes
        them); the mean is of what the energy reads: the spins ``2v − 1`` of a spin visible layer.
        """
        _, biases = _couplings(model)
        data64 = model.visible_values(data.to(torch.float64))
        if sample_weights is None:
            mean = data64.mean(0)
        else:
            weights = sample_weights.to(device=data.device, dtype=torch.float64)
            mean = (weights @ data64) / weights.sum()
        visible = mean.to(biases[0].dtype)
        hidden = tuple(torch.full_like(bias.detach(), INITIAL_HIDDEN_OFFSET) for bias in biases[1:])
        return Offsets(layers=(visible, *hidden))

    @staticmethod
    @torch.no_grad()
    def batch_means(positive: tuple[Tensor, ...]) -> list[Tensor]:
        """The data term's mean of every hidden layer, shapes ``(n_l,)`` (``positive[0]`` is the batch)."""
        return [layer.mean(0) for layer in positive[1:]]

    @torch.no_grad()
    def update(self, offsets: Offsets, means: list[Tensor]) -> Offsets:
        """``λ ← (1 − ν)·λ + ν·mean`` for every hidden layer; the visible offset stays. New tensors."""
        hidden = tuple(
            torch.lerp(old, mean.to(old.dtype), self.rate)
            for old, mean in zip(offsets.layers[1:], means, strict=True)
        )
        return Offsets(layers=(offsets.layers[0], *hidden))

    @staticmethod
    @torch.no_grad()
    def transform_gradient_(model: nn.Module, offsets: Offsets) -> None:
        """Replace the plain gradient in every ``.grad`` by the centred direction ``T Tᵀ G``.

        Works on either sign of gradient (the map is linear). Every weight matrix first (each
        reads only the plain bias gradients), then every bias (each reads only the new matrices).
        """
        couplings, biases = _couplings(model)
        mu = offsets.layers
        for weights, lower, upper in couplings:
            # D_W = G_W − μ_lower G_upperᵀ − G_lower μ_upperᵀ
            weights.grad.addr_(mu[lower], biases[upper].grad, alpha=-1.0)
            weights.grad.addr_(biases[lower].grad, mu[upper], alpha=-1.0)
        for weights, lower, upper in couplings:
            # D_b(lower) −= D_W μ_upper;  D_b(upper) −= D_Wᵀ μ_lower
            biases[lower].grad.sub_(weights.grad @ mu[upper])
            biases[upper].grad.sub_(weights.grad.t() @ mu[lower])

    @staticmethod
    def state_tensors(offsets: Offsets) -> dict[str, Tensor]:
        """``{"0": μ, "1": λ, …}`` for a checkpoint."""
        return {str(index): layer for index, layer in enumerate(offsets.layers)}

    @staticmethod
    def state_from_tensors(model: Any, tensors: dict[str, Tensor], *, source: str) -> Offsets:
        """The offsets saved by :meth:`state_tensors`, checked against the model's layer sizes."""
        _, biases = _couplings(model)
        if set(tensors) != {str(index) for index in range(len(biases))}:
            raise ValidationError(
                f"cannot resume from {source}: it holds centring offsets for {len(tensors)} layers, "
                f"the model has {len(biases)}"
            )
        layers = []
        for index, bias in enumerate(biases):
            layer = tensors[str(index)]
            if tuple(layer.shape) != tuple(bias.shape):
                raise ValidationError(
                    f"cannot resume from {source}: centring offset {index} has shape {tuple(layer.shape)}, "
                    f"the model's layer {tuple(bias.shape)}"
                )
            layers.append(layer.to(dtype=bias.dtype, device=bias.device))
        return Offsets(layers=tuple(layers))
