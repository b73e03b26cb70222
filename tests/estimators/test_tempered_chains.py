"""The tempered budget's precision step: how many chains, how long the fresh ones burn in, and
the joined start of the wider round (estimators/tempered/budget.py, "More chains")."""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import collect_tempered_samples
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered.budget import (
    DEFAULT_MAX_CHAINS,
    burn_in_sweeps,
    chains_for_target,
    joined_start,
    max_chains_for,
    precision_stderr,
)
from harness import random_rbm
from tolerances import MAX_Z


def test_chains_follow_one_over_root_n_with_a_margin_at_least_doubling_and_capped():
    assert chains_for_target(100, 0.2, 0.1, 800) == 500  # 100 × 1.25 × 4
    assert chains_for_target(100, 0.11, 0.1, 800) == 200  # at least twice
    assert chains_for_target(100, 1.0, 0.1, 800) == 800  # capped
    assert chains_for_target(100, math.inf, 0.1, 800) == 800


def test_fresh_chains_burn_in_for_one_round_trip_at_most_the_round():
    assert burn_in_sweeps(4000, 8.0) == 500
    assert burn_in_sweeps(4000, 0.5) == 4000 and burn_in_sweeps(4000, float("nan")) == 4000


def test_the_chain_cap_is_the_callers_chains_unless_max_chains_is_given():
    assert max_chains_for({}, 100) == DEFAULT_MAX_CHAINS
    assert max_chains_for({"n_chains": 40}, 40) == 40
    options = {"n_chains": 40, "max_chains": 300}
    assert max_chains_for(options, 40) == 300 and "max_chains" not in options
    assert max_chains_for({"max_chains": 10}, 40) == 40  # never below the chains run
    with pytest.raises(ValidationError, match="max_chains"):
        max_chains_for({"max_chains": 0}, 40)


def test_ti_asks_for_chains_only_for_its_statistical_error():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    ti = bl.estimate_log_z(model, method="ti", n_chains=20, n_temperatures=10, n_sweeps=100, generator=0)
    assert precision_stderr(ti) == ti.info.statistical_stderr <= ti.stderr
    plain = LogZEstimate(log_z=0.0, stderr=0.3, method="rts")
    assert precision_stderr(plain) == 0.3


def test_the_joined_start_keeps_the_earlier_chains_first():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    earlier = collect_tempered_samples(model, n_chains=5, n_temperatures=6, n_sweeps=20, generator=0)
    fresh = collect_tempered_samples(model, n_chains=3, n_temperatures=6, n_sweeps=20, generator=1)
    start = joined_start(earlier.final_state, fresh.final_state)
    assert start.chains.n_chains == 8 and start.levels.tolist() == [
        *earlier.final_state.levels.tolist(),
        *fresh.final_state.levels.tolist(),
    ]
    assert torch.equal(start.chains.layers[0][:5], earlier.final_state.chains.layers[0])


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rts", "ts", "ti-rb"])
def test_a_wider_round_stays_right_on_an_enumerable_model(method):
    # Chains added from the base after their burn-in do not bias the estimate: it stays within
    # its (narrower) error bar of exact.
    model = random_rbm(8, 4, seed=2, scale=1.5, base_rate=True)
    exact = bl.exact_log_z(model)
    options = {"n_chains": 20, "max_chains": 200, "n_temperatures": 20, "n_sweeps": 200, "max_sweeps": 2000}
    result = bl.estimate_log_z(model, method=method, target_stderr=0.01, generator=3, **options)
    chains = [r.n_chains for r in result.info.budget.rounds]
    assert chains[0] == 20 and chains[-1] > 20
    assert abs(result.z_score(exact)) < MAX_Z and result.reliable, result.warnings
