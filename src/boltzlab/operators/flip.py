"""The flip-the-state operator T (Brügge, Fischer & Igel 2013; docs/algorithms.md §2.2).

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

**Categorical (Potts) sites.** The same idea for ``q`` states is the Metropolised Gibbs step
(Liu 1996, *Peskun's theorem and a modified discrete-state Gibbs sampler*): from state ``a``
propose ``b ≠ a`` with probability ``p_b/(1 − p_a)``, accept with
``min(1, (1 − p_a)/(1 − p_b))``. In log space, with ``L_{−x} = log Σ_{c≠x} e^{l_c}``,

    K(a → b) = exp(l_b − max(L_{−a}, L_{−b}))   (b ≠ a),     K(a → a) = 1 − Σ_{b≠a} K(a → b),

computed from the site's logits ``l`` without forming ``1 − p`` (which cancels when ``p_a ≈ 1``;
of the two terms the larger, which is the one kept, is always the accurate one). For ``q = 2``
``L_{−a} = l_b`` and ``K(a → b) = min(1, e^{l_b − l_a})``: exactly the binary rule above. The
tie rule carries over as the case where ``a`` and ``b`` tie and hold all the mass (``l_a = l_b``
and ``L_{−a} = l_b``): ``K(a → b) = 1/2``. Both changes scale ``K(a → b)`` by a factor
symmetric in ``a`` and ``b``, so the kernel stays reversible.

Each single-unit kernel is a Metropolis rule, hence reversible with respect to the
conditional, so the target is invariant. T mixes faster than Gibbs when weights are large
and slower when they are near zero (SLEM ``(1−p*)/p*`` per unit at zero weights).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from boltzlab.operators.base import LayerwiseOperator, register
from boltzlab.rng import uniform_scale

__all__ = ["FlipOperator", "metropolised_gibbs"]


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

    def probability_on_(self, logits: Tensor, current: Tensor) -> Tensor:
        # With sign = 1 − 2·current (+1 for a unit that is off, −1 for one that is on),
        # P(flip away from the current value) = exp(min(sign·x, 0)) and
        # P(new = 1) = current + sign·P(flip).
        flip = logits.addcmul_(logits, current, value=-2.0)  # sign·x; zero exactly at ties
        tie = torch.eq(flip, 0.0, out=torch.empty_like(flip)) if self.tie_rule else None
        flip.clamp_max_(0.0).exp_()
        if tie is not None:
            flip.sub_(tie, alpha=0.5)  # P(flip) = 1 at a tie becomes 1/2
        return flip.addcmul_(flip, current, value=-2.0).add_(current)

    def threshold_(self, logits: Tensor, current: Tensor, scratch: Tensor) -> Tensor:
        # The sampling path of probability_on_ in as few passes as possible (a flip sweep
        # should cost at most 5% more than a Gibbs sweep): uniform_scale·(P(new=1) − 1/2)
        # equals uniform_scale·sign·(P(flip) − 1/2). exp(sign·x) is not clamped at 1: the
        # threshold then lies beyond ±uniform_scale/2, where the comparison saturates exactly
        # as it would at 1. Everything stays in place; the tie mask lives in the buffer that
        # the uniforms are drawn into next.
        flip = logits.addcmul_(logits, current, value=-2.0)  # sign·x; zero exactly at ties
        if self.tie_rule and _may_contain_zero(flip, scratch):
            tie = torch.eq(flip, 0.0, out=scratch)
            flip.exp_().sub_(tie, alpha=0.5)  # exp(0) = 1 at a tie becomes 1/2
        else:
            flip.exp_()
        return flip.sub_(0.5).addcmul_(flip, current, value=-2.0).mul_(uniform_scale(current.dtype))

    def threshold(self, logits: Tensor, current: Tensor) -> Tensor:
        # threshold_ without in-place updates, for the compiled kernel: the same formulas.
        sign = 1.0 - 2.0 * current
        signed = logits * sign  # sign·x; zero exactly at ties
        flip = torch.exp(signed)
        if self.tie_rule:
            flip = torch.where(signed == 0.0, 0.5, flip)
        return (flip - 0.5) * sign * uniform_scale(current.dtype)

    def categorical_probabilities(self, logits: Tensor, current: Tensor) -> Tensor:
        return metropolised_gibbs(logits, current, tie_rule=self.tie_rule)

    def __repr__(self) -> str:
        return "FlipOperator()" if self.tie_rule else "FlipOperator(tie_rule=False)"


def metropolised_gibbs(logits: Tensor, current: Tensor, *, tie_rule: bool = True) -> Tensor:
    """Rows of the Metropolised Gibbs kernel ``K(a → ·)`` of categorical sites (module docstring).

    Parameters
    ----------
    logits : Tensor, shape (n, L, q)
        Each site's unnormalised log-probabilities.
    current : Tensor, shape (n, L, q)
        One-hot current states ``a``.
    tie_rule : bool
        Halve ``K(a → b)`` where ``a`` and ``b`` tie and hold all the mass.

    Returns
    -------
    Tensor, shape (n, L, q), rows summing to one
    """
    # L_{−b} for every b from exclusive prefix and suffix log-sum-exps: exact for q = 2
    # (L_{−0} = l_1, L_{−1} = l_0), so the q = 2 kernel is the binary flip operator's.
    padding = torch.full_like(logits[..., :1], -math.inf)
    prefix = torch.cat([padding, torch.logcumsumexp(logits[..., :-1], -1)], -1)
    suffix = torch.cat([torch.logcumsumexp(logits.flip(-1)[..., :-1], -1).flip(-1), padding], -1)
    others = torch.logaddexp(prefix, suffix)  # L_{−b}
    is_current = current.bool()
    others_of_current = (others * current).sum(-1, keepdim=True)  # L_{−a}
    logit_current = (logits * current).sum(-1, keepdim=True)
    kernel = torch.exp(logits - torch.maximum(others, others_of_current))
    if tie_rule:
        tie = (logits == logit_current) & (others_of_current == logits) & ~is_current
        kernel = torch.where(tie, 0.5 * kernel, kernel)
    kernel = kernel.masked_fill(is_current, 0.0)
    stay = (1.0 - kernel.sum(-1, keepdim=True)).clamp_(min=0.0)
    return kernel + stay * current


def _may_contain_zero(values: Tensor, scratch: Tensor) -> bool:
    """False only if no element of ``values`` is exactly zero.

    On the CPU, ``Σ 1/x`` is finite exactly when no ``x`` is zero (barring overflow from
    subnormal values, which only makes the answer a conservative True); two cheap passes
    instead of building the tie mask, which most sweeps of a trained model do not need.
    On an accelerator the check would synchronise the device, so the mask is always built.
    """
    if values.device.type != "cpu":
        return True
    return not bool(torch.isfinite(torch.reciprocal(values, out=scratch).sum()))
