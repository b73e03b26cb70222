"""The generative check: sequence statistics and the fits of samples' statistics on the data's.

Properties checked: weighted single-site frequencies and connected correlations equal a hand
computation (including the order of the pairs ``i < j``); samples that *are* the data score
r = 1 and slope 1 for both statistics, also when the data is weighted and the samples repeat
each sequence as many times as its integer weight; samples drawn independently site by site
from the data's frequencies reproduce the frequencies but not the correlations (slope ≈ 0, every
sample correlation within its sampling noise of zero); ``generative_check`` on a Potts RBM
draws the samples it says it drew, scores a reference of as many alignment draws, is
reproducible from its seed and leaves its inputs alone; malformed inputs are refused by name.
Sizes are distinct (5 sites × 3 states, 7 × 4) so a transposition fails loudly.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.data.sequences import Alignment, get_alphabet
from boltzlab.errors import ValidationError
from boltzlab.evaluation.generative import (
    CheckSampling,
    compare_statistics,
    fit_line,
    generative_check,
    sequence_statistics,
)

QUICK = CheckSampling(sampler="plain", n_levels=None, n_chains=13, burn_in=5, n_sweeps=20, keep_every=4)


def _correlated(n: int, n_sites: int, n_states: int, seed: int) -> torch.Tensor:
    """Sequences whose site 1 copies site 0 and site 3 copies site 2 half of the time: strong
    correlations; symbol ``a`` is drawn with probability ∝ 2^a, so frequencies spread out."""
    generator = torch.Generator().manual_seed(seed)
    skew = 2.0 ** torch.arange(n_states, dtype=torch.float64)
    sequences = torch.multinomial(skew / skew.sum(), n * n_sites, replacement=True, generator=generator)
    sequences = sequences.view(n, n_sites)
    sequences[:, 1] = sequences[:, 0]
    copy = torch.rand(n, generator=generator) < 0.5
    sequences[copy, 3] = sequences[copy, 2]
    return sequences


def test_weighted_frequencies_and_correlations_match_a_hand_computation() -> None:
    # Three sequences of 3 sites over 2 states, weights 1, 1, 2 (normalised: 1/4, 1/4, 1/2).
    sequences = torch.tensor([[0, 1, 1], [1, 1, 0], [0, 0, 1]])
    statistics = sequence_statistics(sequences, 2, sample_weights=torch.tensor([1.0, 1.0, 2.0]))
    expected_f = torch.tensor([[0.75, 0.25], [0.5, 0.5], [0.25, 0.75]], dtype=torch.float64)
    torch.testing.assert_close(statistics.frequencies, expected_f)
    # Pair (0, 2) is the second pair; f_02(0, 1) = 1/4 + 1/2 (sequences 1 and 3), f_0(0) f_2(1) = 0.75·0.75.
    assert statistics.correlations.shape == (3, 2, 2)
    assert statistics.correlations[1, 0, 1].item() == pytest.approx(0.75 - 0.75 * 0.75)
    # Pair (1, 2): f_12(1, 1) = 1/4 (sequence 1 only); f_1(1) f_2(1) = 0.5·0.75.
    assert statistics.correlations[2, 1, 1].item() == pytest.approx(0.25 - 0.5 * 0.75)
    # Every block's rows and columns sum to zero (C is a difference of two distributions' products).
    torch.testing.assert_close(statistics.correlations.sum(1), torch.zeros(3, 2, dtype=torch.float64))
    assert statistics.n_sequences == 3 and statistics.effective_number == 4.0


def test_one_hot_indices_and_alignments_give_the_same_statistics() -> None:
    sequences = _correlated(40, 5, 3, seed=1)
    one_hot = torch.nn.functional.one_hot(sequences, 3).reshape(40, 15).float()
    alignment = Alignment(sequences, tuple(str(i) for i in range(40)), get_alphabet("custom:ABC"))
    reference = sequence_statistics(sequences, 3)
    for other in (one_hot, alignment):
        statistics = sequence_statistics(other, 3)
        torch.testing.assert_close(statistics.frequencies, reference.frequencies)
        torch.testing.assert_close(statistics.correlations, reference.correlations)


def test_samples_equal_to_the_data_score_r_one_and_slope_one() -> None:
    data = _correlated(60, 7, 4, seed=2)
    statistics = sequence_statistics(data, 4)
    check = compare_statistics(statistics, sequence_statistics(data.clone(), 4))
    for fit in (check.frequencies, check.correlations):
        assert fit.pearson == pytest.approx(1.0, abs=1e-12)
        assert fit.slope == pytest.approx(1.0, abs=1e-12)
        assert fit.intercept == pytest.approx(0.0, abs=1e-12)
    assert check.correlations.n_values == 7 * 6 // 2 * 16 and check.frequencies.n_values == 28


def test_weighted_data_and_repeated_samples_agree_exactly() -> None:
    """Integer weights are repetitions: the samples repeat each sequence weight times."""
    data = _correlated(30, 5, 3, seed=3)
    weights = torch.arange(1, 31, dtype=torch.float64) % 4 + 1
    samples = data.repeat_interleave(weights.long(), dim=0)
    check = compare_statistics(
        sequence_statistics(data, 3, sample_weights=weights), sequence_statistics(samples, 3)
    )
    assert check.frequencies.pearson == pytest.approx(1.0, abs=1e-12)
    assert check.correlations.slope == pytest.approx(1.0, abs=1e-12)
    # Unweighted statistics of the same data differ: the weights matter.
    unweighted = compare_statistics(sequence_statistics(data, 3), sequence_statistics(samples, 3))
    assert unweighted.correlations.pearson < 1.0 - 1e-6


def test_independent_site_samples_keep_frequencies_and_lose_correlations() -> None:
    data = _correlated(400, 5, 3, seed=4)
    statistics = sequence_statistics(data, 3)
    n_samples = 20_000
    generator = torch.Generator().manual_seed(5)
    columns = [
        torch.multinomial(statistics.frequencies[site], n_samples, replacement=True, generator=generator)
        for site in range(5)
    ]
    samples = torch.stack(columns, 1)
    check = compare_statistics(statistics, sequence_statistics(samples, 3))
    assert check.frequencies.pearson > 0.99 and check.frequencies.slope == pytest.approx(1.0, abs=0.05)
    # Each sample correlation is an average of n_samples bounded terms: within 5 standard errors
    # (|C| ≤ 1/4 per term, so s.e. ≤ 0.5/√n) of zero, and the data's are as large as 2/9.
    noise = 5 * 0.5 / math.sqrt(n_samples)
    assert float(check.samples.correlations.abs().max()) < noise
    assert float(statistics.correlations.abs().max()) > 0.2
    assert abs(check.correlations.slope) < 0.02


def test_fit_line_is_least_squares_and_pearson() -> None:
    x = torch.tensor([0.0, 1.0, 2.0, 3.0])
    fit = fit_line(x, 2 * x + 1)
    assert (fit.slope, fit.intercept, fit.pearson) == pytest.approx((2.0, 1.0, 1.0))
    constant = fit_line(x, torch.ones(4))
    assert constant.slope == 0.0 and math.isnan(constant.pearson)
    with pytest.raises(ValidationError, match="as many values"):
        fit_line(x, torch.ones(3))


def test_generative_check_draws_what_it_says_and_is_reproducible() -> None:
    data = _correlated(50, 5, 3, seed=6)
    model = bl.models.PottsRBM(n_sites=5, n_states=3, n_hidden=2, generator=0).set_base_rate(data)
    weights = torch.linspace(0.5, 1.5, 50, dtype=torch.float64)
    before = (data.clone(), weights.clone())
    check = generative_check(model, data, sample_weights=weights, sampling=QUICK, generator=7)
    again = generative_check(model, data, sample_weights=weights, sampling=QUICK, generator=7)
    assert torch.equal(data, before[0]) and torch.equal(weights, before[1])
    assert check.samples.n_sequences == QUICK.n_samples == 13 * 5
    assert check.sampling == QUICK.describe() and check.reliable and check.seconds > 0
    assert check.reference_correlations is not None and check.reference_frequencies is not None
    assert check.data.effective_number == pytest.approx(float(weights.sum()))
    assert (
        check.correlations == again.correlations
        and check.reference_correlations == again.reference_correlations
    )
    # The data's statistics are the weighted ones.
    torch.testing.assert_close(
        check.data.frequencies, sequence_statistics(data, 3, sample_weights=weights).frequencies
    )


def test_generative_check_with_pt_carries_its_verdict() -> None:
    data = _correlated(30, 5, 3, seed=8)
    model = bl.models.PottsRBM(n_sites=5, n_states=3, n_hidden=2, generator=1).set_base_rate(data)
    sampling = CheckSampling(n_levels=4, n_chains=8, burn_in=10, n_sweeps=40, keep_every=10)
    check = generative_check(model, data, sampling=sampling, generator=0, reference=False)
    assert check.samples.n_sequences == 32 and "pt sampler (4 levels" in check.sampling
    assert isinstance(check.reliable, bool) and check.reference_correlations is None


def test_given_samples_are_scored_as_given() -> None:
    data = _correlated(20, 5, 3, seed=9)
    model = bl.models.PottsRBM(n_sites=5, n_states=3, n_hidden=2, generator=0)
    check = generative_check(model, data, samples=data, reference=False)
    assert check.sampling == "given" and check.correlations.pearson == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sequence_statistics(torch.tensor([[0, 3]]), 3), "outside 0..2"),
        (lambda: sequence_statistics(torch.ones(2, 5), 3), "not whole sites"),
        (lambda: sequence_statistics(torch.full((2, 6), 0.5), 3), "one-hot"),
        (lambda: sequence_statistics(torch.tensor([[0, 1]]), 2, sample_weights=[-1.0]), "non-negative"),
        (lambda: CheckSampling(n_sweeps=10, keep_every=20), "no sample kept"),
        (lambda: CheckSampling(n_chains=0), "n_chains"),
    ],
    ids=["index out of range", "ragged one-hot", "not one-hot", "negative weight", "keep_every", "chains"],
)
def test_malformed_inputs_are_refused_by_name(call, message) -> None:
    with pytest.raises(ValidationError, match=message):
        call()


def test_statistics_of_data_and_samples_of_other_shapes_are_refused() -> None:
    with pytest.raises(ValidationError, match="differ in shape"):
        compare_statistics(
            sequence_statistics(torch.zeros(3, 4, dtype=torch.int64), 3),
            sequence_statistics(torch.zeros(3, 5, dtype=torch.int64), 3),
        )
