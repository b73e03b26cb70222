"""Checks of a tempered run (level balance, round trips, chain groups, the pilot's bound) and the
error bars that replace a degenerate one; each check fails on the input it exists for."""

import dataclasses
import math

import torch

from boltzlab.estimators import collect_tempered_samples
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.checks import (
    check_level_balance,
    check_pilot_bound,
    check_tempered_groups,
    check_tempered_round_trips,
    crossing_advice,
    group_standard_error,
    level_imbalance,
    tempered_failures,
)
from boltzlab.estimators.tempered.levels import stopping_statistic
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.tempered.samples import TripCounter
from boltzlab.estimators.verdict.checks import MAX_LEVEL_IMBALANCE, MIN_ROUND_TRIPS, PILOT_BOUND_NATS
from harness import random_rbm


def easy_samples(**options):
    model = random_rbm(7, 3, seed=4, base_rate=True)
    settings = {"n_chains": 16, "n_temperatures": 8, "n_sweeps": 400, "generator": 0, **options}
    return model, collect_tempered_samples(model, **settings)


def test_trip_counter_counts_passages_between_the_ends():
    counter = TripCounter(n_chains=3, n_levels=4, device=torch.device("cpu"))
    # chain 0: 0 → 3 → 0 → 3 (three passages); chain 1 stays at the top; chain 2 never
    # reaches an end.
    for levels in ([0, 3, 1], [1, 3, 2], [3, 3, 1], [2, 3, 2], [0, 3, 1], [3, 3, 2]):
        counter.update(torch.tensor(levels))
    assert counter.passages.tolist() == [3, 0, 0]


def test_crossing_advice_tells_trapped_chains_from_slow_ones():
    # The 784×500 PCD-1 MNIST RBM's rounds: the run grew 8-fold, the round trips did not.
    trapped = crossing_advice([1000, 2000, 4000, 8000], [0.25, 0.32, 0.30, 0.32], 15500)
    assert trapped is not None and "trapped" in trapped and "unlikely to help" in trapped and "AIS" in trapped
    # Round trips that keep pace with the length: a longer run is the answer. One round trip
    # per chain needs 20,000 sweeps; the rounds double from 4,000 to 8,000, 16,000 and 32,000,
    # which the cap must let run after the 7,500 spent: 7,500 + 56,000.
    slow = crossing_advice([1000, 2000, 4000], [0.05, 0.1, 0.2], 7500)
    assert slow is not None and "max_sweeps=63500" in slow and "trapped" not in slow
    # Growing slower than the run but close to the target is not called trapped.
    assert "trapped" not in (crossing_advice([1000, 8000], [0.3, 0.9], 9500) or "")
    assert "no chain crossed" in (crossing_advice([1000], [0.0], 1500) or "")
    assert crossing_advice([1000, 2000], [0.5, MIN_ROUND_TRIPS], 3500) is None
    assert crossing_advice([1000], [math.nan], 1500) is None


def test_level_imbalance_is_the_stopping_statistic_of_the_long_run():
    _, samples = easy_samples()
    long_run = samples.log_probability_sums[samples.n_initial_iterations :]
    expected = stopping_statistic(torch.logsumexp(long_run.flatten(0, 1), 0), samples.log_prior)
    assert level_imbalance(samples) == expected
    assert check_level_balance(samples) is None  # an easy model with adapted weights
    # Three times the top level's share: chains piled up where the weights did not expect.
    skewed = samples.log_probability_sums.clone()
    skewed[samples.n_initial_iterations :, :, -1] += math.log(3.0)
    message = check_level_balance(dataclasses.replace(samples, log_probability_sums=skewed))
    assert message is not None and f"> {MAX_LEVEL_IMBALANCE:g}" in message


def test_round_trips_are_counted_in_the_long_run_and_checked():
    _, samples = easy_samples()
    assert samples.round_trips.shape == (16,)
    assert torch.equal(samples.round_trips, samples.passages.double() / 2)
    assert float(samples.round_trips.mean()) >= MIN_ROUND_TRIPS
    assert check_tempered_round_trips(samples) is None
    stuck = dataclasses.replace(samples, passages=torch.zeros_like(samples.passages))
    message = check_tempered_round_trips(stuck)
    assert message is not None and "round trips" in message
    assert check_tempered_round_trips(dataclasses.replace(samples, passages=None)) is None


def test_pilot_bound_flags_only_estimates_far_below_the_pilot():
    assert check_pilot_bound(100.0, 0.1, None) is None
    assert check_pilot_bound(100.0, 0.1, 100.0 + PILOT_BOUND_NATS) is None  # within the margin
    message = check_pilot_bound(100.0, 0.1, 100.0 + PILOT_BOUND_NATS + 1.0)
    assert message is not None and "below the pilot" in message
    assert check_pilot_bound(100.0, 0.1, 90.0) is None  # above the pilot is never flagged


def fake_recompute(samples):
    """An 'estimate' equal to the mean chain index of the subset (via the passages field)."""
    return LogZEstimate(log_z=float(samples.passages.double().mean()), stderr=0.0, method="fake")


def test_group_standard_error_is_the_spread_of_groups_over_root_n():
    _, samples = easy_samples()
    indexed = dataclasses.replace(samples, passages=torch.arange(16))
    values = torch.tensor(
        [float(group.double().mean()) for group in torch.arange(16).tensor_split(4)], dtype=torch.float64
    )
    expected = float(values.std() / 2.0)
    assert math.isclose(group_standard_error(indexed, fake_recompute, n_groups=4), expected, rel_tol=1e-12)
    assert group_standard_error(dataclasses.replace(indexed, n_chains=1), fake_recompute) == math.inf


def test_groups_that_disagree_without_error_bars_are_flagged_by_their_spread():
    _, samples = easy_samples()
    indexed = dataclasses.replace(samples, passages=torch.arange(16))
    estimate = LogZEstimate(log_z=7.5, stderr=0.01, method="fake")
    message = check_tempered_groups(indexed, fake_recompute, estimate)
    assert message is not None and "spanning 12 nats" in message
    flat = dataclasses.replace(samples, passages=torch.zeros(16, dtype=torch.int64))
    assert check_tempered_groups(flat, fake_recompute, estimate) is None


def test_an_easy_run_passes_every_check():
    _, samples = easy_samples()
    estimate = rts_from_samples(samples)
    assert tempered_failures(samples, rts_from_samples, estimate) == []


def test_rts_and_ts_error_bars_survive_a_level_every_sample_underflows_at():
    # Strong weights, the linear ladder and Ẑ = 1 fixed: every chain sits at β = 1, where
    # q(β = 0 | x) is below e^-1000, so per-chain sums of q at level 0 are 0 in linear space
    # (App. B's delta method in linear space gave a standard error of exactly 0 here).
    model = random_rbm(100, 8, scale=100.0, seed=0)
    samples = collect_tempered_samples(
        model, n_chains=20, ladder=[0.0, 0.5, 1.0], n_sweeps=50, n_initial_iterations=0, generator=0
    )
    assert bool((samples.log_probability_sums[..., 0].exp() == 0).all()), "premise: level 0 underflows"
    for statistic in ("rb", "counts"):
        result = rts_from_samples(samples, statistic=statistic)
        assert math.isfinite(result.stderr) and result.stderr > 0, (statistic, result)
    # App. A's sandwich cannot see level 0 either; the chain groups give the error bar then.
    combined = rts_from_samples(samples, combine="all")
    assert math.isfinite(combined.stderr) and combined.stderr > 0
    assert combined.info.stderr_source in ("sandwich", "groups")


def test_ts_error_bar_counts_an_empty_level():
    model = random_rbm(100, 8, scale=100.0, seed=0)
    samples = collect_tempered_samples(
        model, n_chains=20, ladder=[0.0, 0.5, 1.0], n_sweeps=50, n_initial_iterations=0, generator=0
    )
    assert int(samples.level_counts[:, :, 0].sum()) == 0, "premise: nobody visits level 0"
    result = rts_from_samples(samples, statistic="counts")
    # ±2 s.e. must span the 0.1 pseudo-count to the 3 counts a 95% bound allows.
    assert 4 * result.stderr >= math.log(3.0 / 0.1) - 1e-12


def test_the_groups_error_bar_uses_groups_of_at_least_two_chains():
    # An error bar from chains needs two per group: three chains make one group (no spread,
    # inf), four make two. With 8 chains a TS chain-group check used to ask 2-chain groups for
    # the spread of 1-chain groups and raised instead of judging.
    model = random_rbm(7, 3, seed=4, base_rate=True)
    for n_chains, finite in ((3, False), (4, True)):
        samples = collect_tempered_samples(
            model, n_chains=n_chains, n_temperatures=8, n_sweeps=40, generator=0
        )
        assert math.isfinite(group_standard_error(samples, rts_from_samples)) == finite
