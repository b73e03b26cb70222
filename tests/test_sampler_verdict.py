"""Tempered samplers sample the target by default, and say when they cannot (docs/trust.md).

On the bimodal 10×4 RBM of the harness (95% / 5% mode masses behind a barrier) and on the
same RBM with a smaller tilt (69% / 31%, the model of issue 11), ``pt``, ``tt``, ``st``,
``ast`` and ``cast`` with their defaults put the first mode's mass within ``MAX_Z`` standard
errors of exact (the spread of the independent chains' time averages) and are reliable;
``st``/``ast``/``cast`` get there by adapting level weights on a placed ladder from β = 0 and
freezing them. Configurations that cannot cross the barrier — the CAST paper's 0.9–1 ladder,
zero weights, a ladder too short to matter — are marked unreliable, each by the check that
sees it.
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.sampling import MIN_ROUND_TRIPS, sampler_warnings, wants_adaptation
from boltzlab.tempering import ladders
from boltzlab.tempering.agreement import GroupAgreement
from harness import bimodal_rbm, exact_mode_mass, mode_mass
from tolerances import MAX_Z

# tilt 0.3: 95% / 5% (the harness default); tilt 0.08: 69% / 31%.
TILTS = (0.3, 0.08)


@pytest.fixture(scope="module")
def bimodal():
    model, _ = bimodal_rbm(10, 4, seed=0)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("tilt", TILTS)
@pytest.mark.parametrize("sampler", ["pt", "tt", "st", "ast", "cast"])
def test_defaults_get_the_mode_masses_right_and_are_reliable(sampler, tilt):
    model, pattern = bimodal_rbm(10, 4, seed=0, tilt=tilt)
    result = bl.sample(model, sampler=sampler, n_chains=20, n_sweeps=1000, generator=0, keep_every=1)
    assert result.reliable, result.warnings
    mass, stderr = mode_mass(result.samples, pattern)
    exact = exact_mode_mass(model, pattern)
    assert abs(mass - exact) < MAX_Z * stderr, f"{sampler}: {mass:.3f} ± {stderr:.3f} vs exact {exact:.3f}"
    assert result.info.groups is not None and result.info.groups.agree
    if sampler in ("st", "ast", "cast"):
        adaptation = result.info.adaptation
        assert adaptation.converged and float(adaptation.ladder.betas[0]) == 0.0
        assert adaptation.cost_sweeps == adaptation.pilot_sweeps + 20 * adaptation.n_sweeps > 0
        assert result.info.n_sweeps == 1000  # the caller's sweeps are the sampling sweeps
        summary = getattr(result.info.summary, "fast", result.info.summary)
        assert float(summary.round_trips.to(torch.float64).mean()) >= MIN_ROUND_TRIPS


def test_ast_adapted_and_frozen_is_st_bit_for_bit(bimodal):
    # Frozen adaptive ST is ST with fixed weights (γ = 0): same seed, same samples.
    runs = [
        bl.sample(bimodal, sampler=name, n_chains=8, n_sweeps=30, generator=4, keep_every=1)
        for name in ("st", "ast")
    ]
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert torch.equal(runs[0].info.adaptation.log_weights, runs[1].info.adaptation.log_weights)
    assert runs[1].info.summary.log_weights.shape == (runs[1].info.adaptation.ladder.size,)


@pytest.mark.parametrize(
    ("sampler", "options", "reason"),
    [
        # The CAST paper's ladder, adapting for ever: never reaches hot temperatures.
        ("ast", {"ladder": ladders.uniform(20, low=0.9), "adapt": False}, "hottest level"),
        # Adapted and frozen, but still on the 0.9–1 ladder.
        ("cast", {"ladder": ladders.uniform(20, low=0.9)}, "hottest level"),
        # Zero weights: the chains never leave β = 1.
        ("st", {"adapt": False}, "round trips"),
    ],
)
def test_bad_configurations_are_flagged(bimodal, sampler, options, reason):
    result = bl.sample(bimodal, sampler=sampler, n_chains=20, n_sweeps=200, generator=0, **options)
    assert not result.reliable
    assert any(reason in warning for warning in result.warnings), result.warnings


def test_chain_groups_catch_stuck_chains_that_travel_a_short_ladder(bimodal):
    # Two levels at 0.9 and 1: replicas swap all the time (many round trips) but never mix
    # the modes, so the groups keep the split of their starts.
    result = bl.sample(bimodal, sampler="pt", ladder=[0.9, 1.0], n_chains=20, n_sweeps=200, generator=0)
    assert float(result.info.summary.round_trips.to(torch.float64).mean()) >= MIN_ROUND_TRIPS
    assert not result.info.groups.agree
    assert any("groups of chains disagree" in warning for warning in result.warnings)


def test_plain_sampler_has_no_verdict_to_give(bimodal):
    result = bl.sample(bimodal, n_chains=5, n_sweeps=3, generator=0)
    assert result.reliable and result.warnings == ()


def test_few_chains_or_sweeps_skip_the_group_check(bimodal):
    few_chains = bl.sample(bimodal, sampler="pt", n_chains=7, n_sweeps=40, generator=0)
    few_sweeps = bl.sample(bimodal, sampler="pt", n_chains=20, n_sweeps=9, generator=0)
    assert few_chains.info.groups is None and few_sweeps.info.groups is None


class _Summary:
    def __init__(self, trips):
        self.round_trips = torch.tensor(trips)
        self.occupancy = torch.full((4,), 0.25)


def test_thresholds():
    assert sampler_warnings(_Summary([1, 2, 1])) == ()
    (message,) = sampler_warnings(_Summary([0, 1, 0]))
    assert f"below {MIN_ROUND_TRIPS:g}" in message
    (message,) = sampler_warnings(_Summary([3, 3]), ladder=torch.tensor([0.8, 0.9, 1.0]))
    assert "hottest level is β = 0.8" in message
    means = torch.zeros(5, 4, 3, dtype=torch.float64)
    disagree = GroupAgreement(means.mean(0), means, p_value=1e-4, worst_unit=2, n_tested=3)
    (message,) = sampler_warnings(_Summary([3, 3]), groups=disagree)
    assert "visible unit 2" in message and "below 0.001" in message
    agree = GroupAgreement(means.mean(0), means, p_value=1e-3, worst_unit=2, n_tested=3)
    assert sampler_warnings(_Summary([3, 3]), groups=agree) == ()


def test_when_adaptation_is_on():
    assert wants_adaptation("st", {}) and wants_adaptation("cast", {"lag": 5})
    assert not wants_adaptation("pt", {})
    # Given weights or a γ schedule, the scheme runs as configured (as the trainers run it).
    assert not wants_adaptation("st", {"log_weights": [0.0, 0.0]})
    assert not wants_adaptation("ast", {"gamma": 10.0})
    options = {"adapt": False, "n_levels": 4}
    assert not wants_adaptation("ast", options) and options == {"n_levels": 4}
    with pytest.raises(ValidationError, match="adapt=True is for"):
        wants_adaptation("pt", {"adapt": True})
    with pytest.raises(ValidationError, match="gamma configure adapting for ever"):
        wants_adaptation("ast", {"adapt": True, "gamma": 10.0})
    with pytest.raises(ValidationError, match="True or False"):
        wants_adaptation("st", {"adapt": "yes"})
