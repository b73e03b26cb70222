"""Block Gibbs sampling, the reference operator G = G_h G_v (docs/algorithms.md §2.1).

Each unit is redrawn from its conditional: ``P(new = 1) = σ(x)`` whatever its current value;
a categorical (Potts) site from the softmax of its logits.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab.operators.base import LayerwiseOperator, register
from boltzlab.rng import uniform_scale

__all__ = ["GibbsOperator"]


@register("gibbs")
class GibbsOperator(LayerwiseOperator):
    """Heat-bath (Gibbs) update of every unit, layer group by layer group.

    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> g = bl.rng.make_generator(0)
    >>> chains = model.init_chains(13, generator=g).with_beta(1.0)
    >>> chains, info = bl.operators.get("gibbs").step(model, chains, generator=g)
    >>> chains.visible.shape
    torch.Size([13, 7])
    """

    name = "gibbs"

    def probability_on_(self, logits: Tensor, current: Tensor) -> Tensor:
        return logits.sigmoid_()

    def threshold(self, logits: Tensor, current: Tensor) -> Tensor:
        return (torch.sigmoid(logits) - 0.5) * uniform_scale(current.dtype)

    #: The categorical rule below is the softmax of the logits: sweeps draw from the logits
    #: directly (operators/categorical.py), which samples exactly this rule.
    categorical_is_softmax = True

    def categorical_probabilities(self, logits: Tensor, current: Tensor) -> Tensor:
        return torch.softmax(logits, -1)
