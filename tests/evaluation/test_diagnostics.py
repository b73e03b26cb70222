"""Mixing diagnostics: autocorrelation time, ESS, nearest templates and class changes.

Properties checked:

* On AR(1) processes, whose integrated autocorrelation time is exactly ``(1 + φ)/(1 − φ)``,
  both estimators (Sokal's window and the AR fit) recover τ within MAX_Z of their own standard
  errors — for a strongly correlated (φ = 0.9), a white (φ = 0) and an anticorrelated
  (φ = −0.5, τ = 1/3) process, single series and batches of chains.
* The reported standard errors match the seed-to-seed spread of the estimates (a χ² test on
  20 seeds) and the estimates are unbiased over those seeds (a z-test).
* The pooled autocovariance is the chain average of the direct (non-FFT) sum; a chain shorter
  than 50 τ is flagged and warned about; a constant series gives NaN.
* Nearest templates by Hamming distance, with ties reported as −1; class changes and steps to
  the first change on hand-made sequences, ties ignored.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.signal import lfilter

from boltzlab.errors import ValidationError
from boltzlab.evaluation import (
    TIED,
    ShortChainWarning,
    autocorrelation_function,
    autocovariance,
    class_templates,
    count_mode_changes,
    effective_sample_size,
    integrated_autocorrelation_time,
    nearest_template,
    steps_to_first_change,
)
from tolerances import FALSE_ALARM, MAX_Z


def ar1(phi: float, n_steps: int, n_chains: int, *, seed: int) -> np.ndarray:
    """Stationary AR(1) chains ``x_t = φ x_{t−1} + ε_t``, shape (n_steps, n_chains)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((n_steps, n_chains))
    # Start from the stationary distribution, variance 1/(1 − φ²), so no burn-in is needed.
    start = rng.standard_normal(n_chains) / math.sqrt(1.0 - phi**2)
    series, _ = lfilter([1.0], [1.0, -phi], noise, axis=0, zi=(phi * start)[None, :])
    return series


def exact_tau(phi: float) -> float:
    return (1.0 + phi) / (1.0 - phi)


@pytest.mark.parametrize("method", ["sokal", "ar"])
@pytest.mark.parametrize(("phi", "n_steps", "n_chains"), [(0.9, 6000, 7), (0.0, 20000, 1), (-0.5, 9000, 3)])
def test_ar1_tau_within_standard_errors(method: str, phi: float, n_steps: int, n_chains: int) -> None:
    series = ar1(phi, n_steps, n_chains, seed=11)
    x = series[:, 0] if n_chains == 1 else series
    # An oscillating series needs Sokal's wider window (c = 10): with c = 5 it stops at lag 5
    # and misses 2·0.5⁶/1.5 ≈ 0.02 of τ = 1/3, two standard errors here.
    c = 10.0 if phi < 0 else 5.0
    estimate = integrated_autocorrelation_time(x, method=method, c=c)
    assert estimate.n_steps == n_steps and estimate.n_chains == n_chains
    assert estimate.method == method and estimate.reliable
    assert estimate.stderr > 0
    z = (estimate.tau - exact_tau(phi)) / estimate.stderr
    assert abs(z) < MAX_Z, (estimate, exact_tau(phi))


@pytest.mark.parametrize("method", ["sokal", "ar"])
def test_standard_error_matches_seed_to_seed_spread(method: str) -> None:
    # 20 independent batches of an AR(1) process with τ = 19: the sample standard deviation
    # of the estimates against the mean reported standard error is a χ²_19 statistic.
    n_seeds, phi = 20, 0.9
    estimates = [
        integrated_autocorrelation_time(ar1(phi, 4000, 5, seed=100 + seed), method=method)
        for seed in range(n_seeds)
    ]
    taus = np.array([estimate.tau for estimate in estimates])
    stderr = float(np.mean([estimate.stderr for estimate in estimates]))
    spread = float(taus.std(ddof=1))
    chi2_low, chi2_high = stats.chi2.ppf([FALSE_ALARM / 2, 1 - FALSE_ALARM / 2], df=n_seeds - 1)
    assert math.sqrt(chi2_low / (n_seeds - 1)) < spread / stderr < math.sqrt(chi2_high / (n_seeds - 1))
    z = (taus.mean() - exact_tau(phi)) / (spread / math.sqrt(n_seeds))
    assert abs(z) < MAX_Z


def test_pooled_autocovariance_is_chain_average_of_direct_sum() -> None:
    series = ar1(0.6, 37, 3, seed=5)
    max_lag = 9
    grand_mean = series.mean()
    direct = np.array(
        [
            np.mean([np.sum((c[: 37 - k] - grand_mean) * (c[k:] - grand_mean)) / 37 for c in series.T])
            for k in range(max_lag + 1)
        ]
    )
    np.testing.assert_allclose(autocovariance(series, max_lag=max_lag), direct, rtol=1e-10, atol=1e-12)
    # center="chain" subtracts each chain's own mean: the average of the one-chain results.
    per_chain = np.mean([autocovariance(c, max_lag=max_lag, center="chain") for c in series.T], axis=0)
    np.testing.assert_allclose(autocovariance(series, max_lag=max_lag, center="chain"), per_chain, rtol=1e-12)
    rho = autocorrelation_function(series, max_lag=max_lag)
    assert rho[0] == 1.0
    np.testing.assert_allclose(rho, direct / direct[0], rtol=1e-10)


def test_batch_of_one_equals_single_series_and_input_untouched() -> None:
    series = torch.as_tensor(ar1(0.5, 3000, 1, seed=3))
    before = series.clone()
    for method in ("sokal", "ar"):
        single = integrated_autocorrelation_time(series[:, 0], method=method)
        batch = integrated_autocorrelation_time(series, method=method)
        assert single == batch
    assert torch.equal(series, before)


def test_effective_sample_size_is_total_over_tau() -> None:
    series = ar1(0.8, 5000, 4, seed=9)
    estimate = integrated_autocorrelation_time(series)
    assert effective_sample_size(series) == pytest.approx(5000 * 4 / estimate.tau, rel=1e-12)
    assert estimate.effective_sample_size == pytest.approx(5000 * 4 / estimate.tau, rel=1e-12)
    # A batch of independent chains is worth more draws than one of them (τ itself is shared).
    assert effective_sample_size(series) > 2 * effective_sample_size(series[:, 0])


@pytest.mark.parametrize("method", ["sokal", "ar"])
def test_short_chain_is_flagged_not_refused(method: str) -> None:
    # τ = 199 but only 2,000 steps: fewer than 50 τ, so the estimate must say so.
    series = ar1(0.99, 2000, 2, seed=4)
    with pytest.warns(ShortChainWarning):
        estimate = integrated_autocorrelation_time(series, method=method)
    assert not estimate.reliable
    assert math.isfinite(estimate.tau) and estimate.tau > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = integrated_autocorrelation_time(series, method=method, warn=False)
    assert quiet == estimate


def test_constant_series_gives_nan() -> None:
    with pytest.warns(ShortChainWarning):
        estimate = integrated_autocorrelation_time(np.full((50, 2), 3.0))
    assert math.isnan(estimate.tau) and not estimate.reliable


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"x": np.zeros((4, 3, 2))}, "x must have shape"),
        ({"x": [1.0, 2.0]}, "at least 3 steps"),
        ({"x": [1.0, float("nan"), 2.0, 3.0]}, "NaN"),
        ({"x": np.arange(10.0), "method": "batch-means"}, "method"),
        ({"x": np.arange(10.0), "c": 0}, "c must be"),
        ({"x": np.arange(10.0), "method": "ar", "max_order": 10}, "max_order"),
        ({"x": np.arange(10.0), "center": "median"}, "center"),
    ],
)
def test_validation(arguments: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        integrated_autocorrelation_time(**arguments)


# ---------------------------------------------------------------------------- modes

TEMPLATES = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.float64)


def test_class_templates_threshold_and_means() -> None:
    data = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 1], [0, 1, 1]], dtype=torch.float32)
    labels = torch.tensor([0, 0, 0, 1, 1])
    expected_means = torch.tensor([[1.0, 2 / 3, 1 / 3], [0.0, 0.5, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(class_templates(data, labels, threshold=None), expected_means)
    # Thresholded at 1/2 strictly: a pixel on in exactly half the examples stays off.
    expected = torch.tensor([[1, 1, 0], [0, 0, 1]], dtype=torch.float64)
    assert torch.equal(class_templates(data, labels), expected)
    with pytest.raises(ValidationError, match=r"class\(es\) \[1\]"):
        class_templates(data[:3], torch.tensor([0, 2, 2]))
    with pytest.raises(ValidationError, match="labels must have shape"):
        class_templates(data, labels[:4])
    with pytest.raises(ValidationError, match="integer"):
        class_templates(data, labels.float())


def test_nearest_template_hamming_with_ties() -> None:
    states = torch.tensor(
        [
            [0, 0, 0, 1, 0],  # distances 1, 4, 3 -> template 0
            [1, 1, 1, 1, 0],  # distances 4, 1, 2 -> template 1
            [1, 0, 0, 0, 0],  # distances 1, 4, 1 -> tie between 0 and 2
            [1, 1, 0, 1, 0],  # distances 3, 2, 1 -> template 2
            [1, 1, 1, 0, 0],  # distances 3, 2, 1 -> template 2
            [1, 1, 1, 0, 1],  # distances 4, 1, 2 -> template 1
        ],
        dtype=torch.float32,
    )
    assignment = nearest_template(states, TEMPLATES)
    assert assignment.dtype == torch.int64
    assert assignment.tolist() == [0, 1, TIED, 2, 2, 1]
    # Any leading shape: (n_steps, n_chains, n_visible) -> (n_steps, n_chains).
    stacked = nearest_template(states.reshape(2, 3, 5), TEMPLATES)
    assert stacked.shape == (2, 3) and stacked.flatten().tolist() == assignment.tolist()
    with pytest.raises(ValidationError, match="states must have shape"):
        nearest_template(states[:, :4], TEMPLATES)


def test_nearest_template_euclidean_for_mean_templates() -> None:
    means = torch.tensor([[0.9, 0.8, 0.1], [0.2, 0.6, 0.7]], dtype=torch.float64)
    states = torch.tensor([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=torch.float64)
    # Squared distances: [0.06, 1.29], [1.66, 0.29], [1.46, 1.09].
    assert nearest_template(states, means).tolist() == [0, 1, 1]


def test_count_mode_changes_ignores_ties() -> None:
    sequence = [0, 0, 1, 1, TIED, 1, 2, TIED, TIED, 0]  # 0→1, 1→2, 2→0 across the ties
    assert int(count_mode_changes(sequence)) == 3
    assert int(count_mode_changes([TIED, TIED, 2, 2, 3])) == 1
    assert int(count_mode_changes([3, TIED, 3])) == 0
    assert int(count_mode_changes([TIED, TIED])) == 0
    assert int(count_mode_changes([4])) == 0
    batch = torch.tensor([[0, 5, TIED], [1, 5, 2], [TIED, 5, 2], [0, 6, 1]])
    assert count_mode_changes(batch).tolist() == [2, 1, 1]
    with pytest.raises(ValidationError, match="class indices"):
        count_mode_changes([0, -2, 1])
    with pytest.raises(ValidationError, match="integer"):
        count_mode_changes([0.0, 1.0])


def test_steps_to_first_change() -> None:
    assert int(steps_to_first_change([3, 3, TIED, 5])) == 3
    assert int(steps_to_first_change([TIED, 2, 2, 2])) == -1  # censored: never changed
    assert int(steps_to_first_change([TIED, TIED, 4, TIED, 1])) == 4
    assert int(steps_to_first_change([TIED, TIED])) == -1
    assert int(steps_to_first_change([1, 1, 2], initial=1)) == 2
    assert int(steps_to_first_change([2, 2, 2], initial=1)) == 0  # started outside its class
    batch = torch.tensor([[0, 7], [0, TIED], [1, 7], [1, 8]])
    assert steps_to_first_change(batch).tolist() == [2, 3]
    assert steps_to_first_change(batch, initial=[1, 7]).tolist() == [0, 3]
    with pytest.raises(ValidationError, match="one per chain"):
        steps_to_first_change(batch, initial=[1, 2, 3])
