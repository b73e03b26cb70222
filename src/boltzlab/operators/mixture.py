"""The per-unit α-mixture ``T_i^α = α·T_i + (1 − α)·G_i`` (Brügge et al. 2013, §3.2).

``P(new = 1) = α·P_T(new = 1) + (1 − α)·σ(x)`` for every unit. Both parts are reversible
with respect to the unit's conditional, so the mixture is too. It is a mixture *per unit*,
not a random choice between whole Gibbs and flip sweeps (that is also valid, but a different
operator); a categorical (Potts) site mixes the two kernels' rows the same way. The paper proposes it for the early phase of training, where weights are small
and Gibbs mixes better.
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab.operators.base import LayerwiseOperator, register
from boltzlab.operators.flip import FlipOperator, metropolised_gibbs
from boltzlab.rng import uniform_scale
from boltzlab.validation import check_probability

__all__ = ["MixtureOperator"]


@register("mixture")
class MixtureOperator(LayerwiseOperator):
    """α-mixture of flip-the-state (weight ``alpha``) and Gibbs (weight ``1 − alpha``).

    Parameters
    ----------
    alpha : float in [0, 1], default 0.5
        0 gives Gibbs, 1 gives flip-the-state.
    """

    name = "mixture"

    def __init__(self, alpha: float = 0.5) -> None:
        self.alpha = check_probability(alpha, "alpha")
        self._flip = FlipOperator()

    def probability_on_(self, logits: Tensor, current: Tensor) -> Tensor:
        gibbs = torch.sigmoid(logits)
        return (
            self._flip.probability_on_(logits, current).mul_(self.alpha).add_(gibbs, alpha=1.0 - self.alpha)
        )

    def threshold(self, logits: Tensor, current: Tensor) -> Tensor:
        # probability_on_ without in-place updates, for the compiled kernel: the same formulas.
        sign = 1.0 - 2.0 * current
        signed = logits * sign  # sign·x; zero exactly at ties
        flip = torch.where(signed == 0.0, 0.5, torch.exp(torch.clamp(signed, max=0.0)))
        probability = self.alpha * (current + sign * flip) + (1.0 - self.alpha) * torch.sigmoid(logits)
        return (probability - 0.5) * uniform_scale(current.dtype)

    def categorical_probabilities(self, logits: Tensor, current: Tensor) -> Tensor:
        # Per site, as for binary units: α·(Metropolised Gibbs) + (1 − α)·(Gibbs).
        flip = metropolised_gibbs(logits, current, tie_rule=self._flip.tie_rule)
        return flip.mul_(self.alpha).add_(torch.softmax(logits, -1), alpha=1.0 - self.alpha)

    def __repr__(self) -> str:
        return f"MixtureOperator(alpha={self.alpha})"
