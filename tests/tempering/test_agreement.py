"""The chain-group check of the sampler verdict: an F test of batch means across groups.

Under the null (groups sampling one distribution, independent batch means) the p-value of
one unit is uniform, so the test's false-alarm rate is checked on many synthetic draws; a
shift between groups of a few batch standard deviations must be caught.
"""

from __future__ import annotations

import torch

from boltzlab.tempering.agreement import (
    GROUP_AGREEMENT_P_VALUE,
    N_BATCHES,
    N_GROUPS,
    accumulate_group_means_,
    chain_groups,
    group_agreement,
)


def test_chain_groups_are_balanced_contiguous_blocks():
    groups = chain_groups(10)
    assert groups.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    assert torch.bincount(chain_groups(101), minlength=N_GROUPS).tolist() == [26, 25, 25, 25]


def test_accumulated_group_means():
    visible = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    sums = torch.zeros(2, 2, 2, dtype=torch.float64)
    groups = torch.tensor([0, 0, 1, 1])
    accumulate_group_means_(sums, 1, visible, groups)
    accumulate_group_means_(sums, 1, visible, groups)
    assert sums[0].abs().sum() == 0
    assert torch.equal(sums[1], torch.tensor([[1.0, 0.0], [2.0, 1.0]], dtype=torch.float64))


def test_honest_groups_pass_at_the_stated_rate():
    g = torch.Generator().manual_seed(0)
    p_values = torch.tensor(
        [
            group_agreement(torch.randn(N_BATCHES, N_GROUPS, 1, generator=g, dtype=torch.float64)).p_value
            for _ in range(2000)
        ]
    )
    # p is uniform for one unit: about 10% below 0.1, none far below 1e-3 in 2,000 draws.
    assert 0.07 < float((p_values < 0.1).to(torch.float64).mean()) < 0.13
    assert float((p_values < GROUP_AGREEMENT_P_VALUE).to(torch.float64).mean()) < 0.005


def test_a_shifted_group_is_caught_and_named():
    g = torch.Generator().manual_seed(1)
    means = torch.randn(N_BATCHES, N_GROUPS, 6, generator=g, dtype=torch.float64) * 0.01 + 0.5
    assert group_agreement(means).agree
    means[:, 2, 4] += 0.05  # five batch standard deviations
    result = group_agreement(means)
    assert not result.agree and result.worst_unit == 4 and result.n_tested == 6
    assert result.group_means.shape == (N_GROUPS, 6)


def test_constant_units_are_not_tested_and_frozen_disagreement_fails():
    means = torch.zeros(N_BATCHES, N_GROUPS, 3, dtype=torch.float64)
    assert group_agreement(means).p_value == 1.0 and group_agreement(means).n_tested == 0
    means[:, 0, 1] = 1.0  # each group constant over its batches, one group elsewhere
    result = group_agreement(means)
    assert result.p_value == 0.0 and result.worst_unit == 1 and result.n_tested == 1
