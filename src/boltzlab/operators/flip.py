"""The flip-the-state operator T (Brügge, Fischer & Igel 2013; ALGORITHMS.md §2.2).

A Metropolized single-unit update that maximises the probability of changing state: a unit
in its less probable state moves to the more probable one with probability 1; a unit in the
more probable state flips with probability ``p(other)/p(current) = e^{−|x|}``. At a tie
(``x == 0`` exactly) it uses the Gibbs probabilities ½, ½ — the rule that keeps the fixed
scan ``T = T_h T_v`` ergodic (the paper's proof; without it, e.g. a zero-weight RBM started
with both layers off flips everything every sweep and never reaches half of its states).

As a state-dependent activation::

    P(new = 1) = min(e^x, 1)          if current = 0
               = max(1 − e^{−x}, 0)   if current = 1
               = 1/2                  if x == 0 (tie rule)

Each single-unit kernel is a Metropolis rule, hence reversible with respect to the
conditional, so the target is invariant. T mixes faster than Gibbs when weights are large
and slower when they are near zero (SLEM ``(1−p*)/p*`` per unit at zero weights).
"""

from __future__ import annotations

import torch
from torch import Tensor

from boltzlab.operators.base import LayerwiseOperator, register

__all__ = ["FlipOperator"]


@register("flip")
class FlipOperator(LayerwiseOperator):
    """Flip-the-state operator.

    Parameters
    ----------
    tie_rule : bool, default True
        Use Gibbs probabilities at exact ties (``x == 0``). Turning it off gives the plain
        Metropolized flip, which is not ergodic on tied states; it exists to demonstrate that.
    """

    name = "flip"

    def __init__(self, *, tie_rule: bool = True) -> None:
        self.tie_rule = bool(tie_rule)

    def probability_on(self, logits: Tensor, current: Tensor) -> Tensor:
        # sign = 1 − 2·current is +1 for a unit that is off, −1 for a unit that is on, so
        # exp(min(sign·x, 0)) is the probability of flipping away from the current value and
        # P(new = 1) = current + sign·P(flip). Everything stays in the layer's float dtype:
        # bool intermediates cost several times more on the CPU.
        sign = torch.rsub(current, 1.0, alpha=2.0)
        flip = torch.mul(logits, sign).clamp_max_(0.0).exp_()
        if self.tie_rule:
            tie = torch.eq(logits, 0.0, out=torch.empty_like(logits))
            flip.sub_(tie, alpha=0.5)  # P(flip) = 1 at a tie becomes 1/2
        return torch.addcmul(current, sign, flip)

    def __repr__(self) -> str:
        return "FlipOperator()" if self.tie_rule else "FlipOperator(tie_rule=False)"
