"""Do independent groups of chains agree on the β = 1 means? The sampler verdict's second check.

Round trips (docs/trust.md, "Samplers") say whether chains travelled the ladder; they cannot
say whether the β = 1 samples have the right proportions. Chains that do not mix between
modes keep those of their starts, and *different chains keep different ones*: split the
chains into ``N_GROUPS`` disjoint groups and the groups' β = 1 means of a statistic disagree
by more than each group's own time series allows. The check is a one-way analysis of
variance of batch means (the batch-means method of Monte Carlo standard errors, per group):

* the run's ``T`` sweeps are cut into ``N_BATCHES`` consecutive batches; ``y[b, g]`` is the mean
  of the statistic over batch ``b`` and the chains of group ``g``;
* if the groups sample one distribution and a batch is long against the autocorrelation time,
  the ``y[b, g]`` are independent draws around one mean, and
  ``F = [B·Σ_g (ȳ_g − ȳ)²/(G − 1)] / [Σ_{g,b} (y[b, g] − ȳ_g)²/(G(B − 1))]``
  follows the F distribution with ``(G − 1, G(B − 1))`` degrees of freedom;
* chains stuck in modes give groups whose means differ (different shares of stuck chains)
  while each group's batches barely move: ``F`` is huge.

The statistics are the β = 1 means of every visible unit (layer 0), which need no extra
matrix product; the smallest p-value, Bonferroni-corrected over the units that vary, must be
at least ``GROUP_AGREEMENT_P_VALUE``. Batches shorter than the chains' autocorrelation time
make honest groups look different (the batch means understate the error), so a short run of
a slowly mixing sampler is flagged: that is the intended reading ("run longer").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy import stats
from torch import Tensor

__all__ = [
    "GROUP_AGREEMENT_P_VALUE",
    "N_BATCHES",
    "N_GROUPS",
    "GroupAgreement",
    "accumulate_group_means_",
    "chain_groups",
    "group_agreement",
]

#: Disjoint groups of chains compared (as for the tempered estimators, docs/trust.md).
N_GROUPS = 4
#: Consecutive batches per group; the F test has ``(G − 1, G(B − 1)) = (3, 16)`` degrees of freedom.
N_BATCHES = 5
#: Smallest accepted Bonferroni-corrected p-value (the estimators' group threshold).
GROUP_AGREEMENT_P_VALUE = 1e-3


@dataclass(frozen=True)
class GroupAgreement:
    """Agreement of chain groups on the β = 1 means of the visible units.

    Attributes
    ----------
    group_means : Tensor, shape (G, V), float64
        Each group's β = 1 mean of every visible unit over the run.
    batch_means : Tensor, shape (B, G, V), float64
        The same per batch of consecutive sweeps.
    p_value : float
        Smallest p-value of the per-unit F tests times the number of units tested
        (Bonferroni), capped at 1; 1 when no unit varies.
    worst_unit : int
        The unit with the smallest p-value (−1 when none was tested).
    n_tested : int
        Units whose batch means vary at all.
    """

    group_means: Tensor
    batch_means: Tensor
    p_value: float
    worst_unit: int
    n_tested: int

    @property
    def agree(self) -> bool:
        """``p_value ≥ GROUP_AGREEMENT_P_VALUE``."""
        return self.p_value >= GROUP_AGREEMENT_P_VALUE


def chain_groups(n_chains: int, n_groups: int = N_GROUPS, *, device: torch.device | str = "cpu") -> Tensor:
    """Group index of every chain: ``n_groups`` contiguous blocks of (almost) equal size; int64 (n,)."""
    return torch.arange(n_chains, device=device) * n_groups // n_chains


def accumulate_group_means_(
    sums: Tensor, batch: int, visible: Tensor, groups: Tensor, *, sizes: Tensor | None = None
) -> None:
    """Add each group's mean of ``visible`` (n, V) to ``sums[batch]`` (shape (B, G, V)), in place.

    ``sizes`` (G,) are the groups' sizes when ``visible`` holds only some of their chains (one
    process's share: the processes' sums then add up to the means); default from ``groups``.
    """
    n_groups = sums.shape[1]
    counts = torch.bincount(groups, minlength=n_groups) if sizes is None else sizes
    counts = counts.to(torch.float64).clamp_min(1.0)
    totals = torch.zeros(n_groups, visible.shape[1], dtype=torch.float64, device=visible.device)
    totals.index_add_(0, groups, visible.to(torch.float64))
    sums[batch] += totals / counts[:, None]


def group_agreement(batch_means: Tensor) -> GroupAgreement:
    """The F tests of the module docstring on ``batch_means`` of shape (B, G, V)."""
    n_batches, n_groups, _ = batch_means.shape
    y = batch_means.to(torch.float64).cpu()
    group_means = y.mean(0)
    grand = group_means.mean(0)
    between = n_batches * ((group_means - grand) ** 2).sum(0) / (n_groups - 1)
    within = ((y - group_means) ** 2).sum((0, 1)) / (n_groups * (n_batches - 1))
    # Round-off of a constant unit must not count as variation.
    scale = y.abs().amax((0, 1)).clamp_min(1.0)
    varies = (between > 1e-24 * scale**2) | (within > 1e-24 * scale**2)
    n_tested = int(varies.sum())
    if n_tested == 0:
        return GroupAgreement(group_means, y, 1.0, -1, 0)
    ratio = torch.where(within > 0, between / within.clamp_min(1e-300), torch.full_like(between, math.inf))
    p = torch.ones_like(ratio)
    tested = varies.nonzero().squeeze(1)
    p[tested] = torch.from_numpy(
        stats.f.sf(ratio[tested].numpy(), n_groups - 1, n_groups * (n_batches - 1))
    ).to(torch.float64)
    worst = int(p.argmin())
    return GroupAgreement(group_means, y, min(1.0, float(p[worst]) * n_tested), worst, n_tested)
