"""The verdict on a tempered sampler's β = 1 samples (docs/trust.md, "Samplers").

``bl.sample`` with a tempered sampler returns ``SampleResult.reliable`` and ``.warnings``;
:func:`sampler_warnings` gives the reasons, each naming the diagnostic, its value and the
threshold. Three checks, each for a way the β = 1 samples keep the mode proportions of their
random starts:

* **reach** — the hottest level must be at β ≤ ``MAX_HOTTEST_BETA``: separated modes of a
  trained model meet only at high temperature (the CAST paper's 0.9–1 ladder never gets there);
* **travel** — chains must make ``MIN_ROUND_TRIPS`` round trips each between the ends of the
  ladder (simulated tempering with weights far from ``log Z_k`` sits at one end);
* **agreement** — independent groups of chains must agree on the β = 1 means of the visible
  units within what their own batch means allow (:mod:`boltzlab.tempering.agreement`): chains
  that did not mix between modes disagree even when they travelled a ladder too short to
  matter.

What they cannot see: a mode that *no* chain finds. Every group then agrees on the wrong
answer. On the Fashion-MNIST PCD-decay 784×20 RBM of the hard-model suite, parallel tempering
with defaults (10 levels, 100 chains × 1,000 sweeps) had visible means 0.18 off per unit on
average, passed all three checks, and would need chains started from data to be caught.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from boltzlab.tempering.agreement import GROUP_AGREEMENT_P_VALUE, GroupAgreement

__all__ = ["GROUP_AGREEMENT_P_VALUE", "MAX_HOTTEST_BETA", "MIN_ROUND_TRIPS", "sampler_warnings"]


#: Round trips per chain between the two ends of a ladder below which a tempered sampler's
#: β = 1 samples are not trusted: a chain that never went down to the hot end and back has
#: not crossed the barriers the ladder is there to cross.
MIN_ROUND_TRIPS = 1.0


#: A ladder whose hottest level is above this β does not reach temperatures where the modes of
#: a trained model mix (the CAST paper's 0.9–1 ladder is made for learning, not for sampling).
MAX_HOTTEST_BETA = 0.5


def sampler_warnings(
    summary: Any, ladder: Any = None, groups: GroupAgreement | None = None
) -> tuple[str, ...]:
    """Reasons not to trust a tempered run: its ladder's reach, its chains' round trips and
    the agreement of independent chain groups on the β = 1 means (docs/trust.md, "Samplers")."""
    reasons: list[str] = []
    betas = getattr(ladder, "betas", ladder)
    if isinstance(betas, Tensor) and betas.numel() > 1:
        hottest = float(betas.min())
        if hottest > MAX_HOTTEST_BETA:
            reasons.append(
                f"the ladder's hottest level is β = {hottest:.3g}, above {MAX_HOTTEST_BETA:g}: chains "
                "never reach temperatures where separated modes mix (pass a ladder that reaches β = 0)"
            )
    reasons.extend(_round_trip_warnings(getattr(summary, "fast", summary)))
    if groups is not None and not groups.agree:
        means = groups.group_means[:, groups.worst_unit]
        reasons.append(
            f"{groups.group_means.shape[0]} independent groups of chains disagree on the β = 1 mean "
            f"of visible unit {groups.worst_unit} ({float(means.min()):.3g} to {float(means.max()):.3g}; "
            f"F test on {groups.batch_means.shape[0]} batches, p = {groups.p_value:.2g} after "
            f"Bonferroni over {groups.n_tested} units, below {GROUP_AGREEMENT_P_VALUE:g}): the chains "
            "have not mixed between modes (run longer or use a ladder that reaches β = 0)"
        )
    return tuple(reasons)


def _round_trip_warnings(summary: Any) -> tuple[str, ...]:
    trips = getattr(summary, "round_trips", None)
    occupancy = getattr(summary, "occupancy", None)
    n_levels = int(occupancy.numel()) if isinstance(occupancy, Tensor) else None
    if not isinstance(trips, Tensor) or trips.numel() == 0 or n_levels == 1:
        return ()
    mean = float(trips.to(torch.float64).mean())
    if mean < MIN_ROUND_TRIPS:
        return (
            f"chains made {mean:.2f} round trips each between the ends of the ladder, below "
            f"{MIN_ROUND_TRIPS:g}: the β = 1 samples may keep the mode proportions of their starting "
            "states (run longer, use a ladder that reaches β = 0, or adapt the level weights first)",
        )
    return ()
