"""Adaptive simulated tempering with Wang-Landau weights (docs/algorithms.md §2.4).

With γ = 0 and exact weights the scheme is fixed-weight ST, so its exact kernel on
``(k, x, y)`` is :func:`harness.simulated_tempering_kernel` and
:func:`harness.check_scheme_exact` ties its step to it. With γ > 0 the weights move every
step and no fixed law is invariant; what is checked instead: the update and its sign, convergence of the weights to exact log Z_k differences with a
decaying γ (tolerances from the spread of independent per-chain runs), flat histograms,
bit-for-bit equality with fixed-weight ST at γ = 0, the constant-γ sweep through the ladder,
reproducibility, checkpoints and validation.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.tempering import AdaptiveSimulatedTempering, SimulatedTempering, ladders
from boltzlab.tempering.wang_landau import decaying_gamma, wang_landau_update
from harness import (
    check_scheme_exact,
    check_scheme_round_trip,
    ladder_log_z,
    locate_simulated_tempering,
    place_simulated_tempering,
    random_rbm,
    simulated_tempering_kernel,
)
from tolerances import MAX_Z


def exact_relative_log_z(model: bl.RBM, ladder: ladders.Ladder) -> torch.Tensor:
    """``log Z(β_k) − log Z(1)`` by enumeration, at the ladder rounded to the model's dtype."""
    values = ladder_log_z(model, ladder.betas)
    return values - values[-1]


@pytest.mark.parametrize("shared_weights", [False, True])
def test_zero_gamma_with_exact_weights_follows_the_exact_st_kernel(shared_weights):
    check_scheme_exact(
        lambda operator, case: AdaptiveSimulatedTempering(
            operator, case.betas, gamma=0.0, log_weights=case.log_z(), shared_weights=shared_weights
        ),
        lambda operator, case: simulated_tempering_kernel(operator, case, case.log_z()),
        place=place_simulated_tempering,
        locate=locate_simulated_tempering,
    )


def test_update_raises_the_occupied_level_and_reanchors():
    log_weights = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 0.0]], dtype=torch.float64)
    eta = math.log1p(10.0)
    updated = wang_landau_update(log_weights, torch.tensor([1, 2]), eta, anchor=2)
    # Chain 0 occupies level 1: its weight grows (lowering q there, pushing the chain on).
    assert torch.allclose(updated[0], torch.tensor([1.0, 2.0 + eta, 0.0], dtype=torch.float64))
    # Chain 1 occupies the anchor: every other level drops by eta after re-anchoring.
    assert torch.allclose(updated[1], torch.tensor([0.5 - eta, -1.0 - eta, 0.0], dtype=torch.float64))
    assert torch.equal(log_weights[0], torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)), "input modified"
    shared = wang_landau_update(
        torch.zeros(3, dtype=torch.float64), torch.tensor([0, 0, 1, 2, 0]), 0.5, anchor=2
    )
    assert torch.allclose(shared, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64))


@pytest.mark.slow
def test_weights_converge_to_exact_log_z_with_decaying_gamma():
    """Per-chain WL weights on a 3x3 RBM, 5 levels, γ_t = K/(K + t) (the 1/t gain of 1/t-WL).

    Each chain is an independent WL run, so the spread over chains is the run-to-run spread:
    the mean error must be within MAX_Z standard errors of 0 at every level, the spread must
    shrink as γ_t decays, and the levels must be visited equally often (MAX_Z standard errors).
    """
    model = random_rbm(3, 3, scale=3.0, seed=1)
    ladder = ladders.uniform(5)
    exact = exact_relative_log_z(model, ladder)
    n_chains, n_steps = 48, 4000
    scheme = AdaptiveSimulatedTempering("flip", ladder, gamma=1.0, gamma_decay=float(ladder.size))
    g = torch.Generator().manual_seed(11)
    state = scheme.init(model, n_chains, generator=g)
    spread_early = None
    occupancy = torch.zeros(n_chains, ladder.size, dtype=torch.float64)
    for step in range(n_steps):
        state, info = scheme.step(model, state, generator=g)
        if step + 1 == n_steps // 4:
            spread_early = (state.log_weights - exact).std(0)
        if step >= n_steps // 2:
            occupancy[torch.arange(n_chains), info.levels] += 1
    error = state.log_weights - exact
    spread = error.std(0)[:-1]
    z = error.mean(0)[:-1] / (spread / math.sqrt(n_chains))
    assert z.abs().max().item() < MAX_Z, f"mean errors {error.mean(0).tolist()} (z = {z.tolist()})"
    assert bool((spread < spread_early[:-1]).all()), f"spread {spread.tolist()} did not shrink"
    assert torch.allclose(scheme.relative_log_z(state), state.log_weights.mean(0))
    fractions = occupancy / occupancy.sum(1, keepdim=True)
    z_flat = (fractions.mean(0) - 1 / ladder.size) / (fractions.std(0) / math.sqrt(n_chains))
    assert z_flat.abs().max().item() < MAX_Z, f"histogram {fractions.mean(0).tolist()} is not flat"

    # One shared weight vector, 16 chains adapting it: at least as accurate as one chain.
    shared = AdaptiveSimulatedTempering(
        "flip", ladder, gamma=1.0, gamma_decay=float(ladder.size), shared_weights=True
    )
    state = shared.init(model, 16, generator=g)
    for _ in range(n_steps):
        state, _ = shared.step(model, state, generator=g)
    assert state.log_weights.shape == (ladder.size,)
    assert bool(((state.log_weights - exact).abs()[:-1] < MAX_Z * spread).all()), state.log_weights - exact


@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
def test_zero_gamma_with_exact_weights_equals_fixed_st_bit_for_bit(level_move):
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    ladder = ladders.uniform(4, low=0.2)
    exact = exact_relative_log_z(model, ladder) + 5.0  # an offset: only differences matter
    fixed = SimulatedTempering("flip", ladder, log_weights=exact, level_move=level_move)
    adaptive = AdaptiveSimulatedTempering("flip", ladder, gamma=0.0, log_weights=exact, level_move=level_move)
    g_fixed, g_adaptive = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    state_fixed = fixed.init(model, 13, generator=g_fixed)
    state_adaptive = adaptive.init(model, 13, generator=g_adaptive)
    for _ in range(40):
        state_fixed, _ = fixed.step(model, state_fixed, generator=g_fixed)
        state_adaptive, _ = adaptive.step(model, state_adaptive, generator=g_adaptive)
    assert torch.equal(state_fixed.levels, state_adaptive.levels)
    for a, b in zip(
        state_fixed.chains.layers + state_fixed.last_target.layers,
        state_adaptive.chains.layers + state_adaptive.last_target.layers,
        strict=True,
    ):
        assert torch.equal(a, b)
    assert torch.equal(state_adaptive.log_weights, state_fixed.log_weights.expand(13, -1))
    assert len({int(level) for level in state_fixed.levels}) > 1, "the chains should have moved"


def test_constant_gamma_sweeps_chains_through_the_ladder():
    """γ = 10 (the paper's value), zero initial weights, chains started at β = 1: the WL force
    drives every chain to the bottom and back (with the sign reversed they would stick). Giving
    γ runs the scheme as configured (bl.sample's default would adapt, then freeze)."""
    model = random_rbm(7, 3, scale=3.0, seed=4)
    result = bl.sample(
        model,
        sampler="ast",
        operator="gibbs",
        n_chains=13,
        n_sweeps=300,
        generator=1,
        n_levels=6,
        low=0.0,
        gamma=10.0,
    )
    assert result.info.adaptation is None
    summary = result.info.summary
    assert bool((summary.round_trips >= 1).all()), summary.round_trips
    assert bool((summary.occupancy > 0.1).all()), summary.occupancy
    assert summary.log_weights.shape == (13, 6)
    # Defaults: the paper's constant γ = 10 and 20 levels from 0.9 to 1.
    default = AdaptiveSimulatedTempering("gibbs")
    assert default.gamma_at(0) == 10.0 and default.gamma_at(10**6) == 10.0
    assert default.n_levels == 20
    assert torch.allclose(default.ladder.betas, torch.linspace(0.9, 1.0, 20, dtype=torch.float64))


def test_gamma_schedules():
    schedule = decaying_gamma(2.0, 50.0)
    assert schedule(0) == 2.0 and schedule(50) == 1.0
    model = random_rbm(4, 3, seed=2)
    ladder = ladders.uniform(3)
    by_callable = AdaptiveSimulatedTempering("flip", ladder, gamma=schedule)
    by_decay = AdaptiveSimulatedTempering("flip", ladder, gamma=2.0, gamma_decay=50.0)
    states = []
    for scheme in (by_callable, by_decay):
        g = torch.Generator().manual_seed(3)
        state = scheme.init(model, 7, generator=g)
        for _ in range(25):
            state, _ = scheme.step(model, state, generator=g)
        states.append(state)
    assert torch.equal(states[0].log_weights, states[1].log_weights)
    assert torch.equal(states[0].levels, states[1].levels)
    # One constant-γ step: the occupied level of each chain gains exactly log(1 + γ).
    scheme = AdaptiveSimulatedTempering("flip", ladder, gamma=10.0)
    g = torch.Generator().manual_seed(4)
    state = scheme.init(model, 7, generator=g)
    new, info = scheme.step(model, state, generator=g)
    expected = torch.zeros(7, 3, dtype=torch.float64)
    expected[torch.arange(7), info.levels] += math.log(11.0)
    expected -= expected[:, 2:3].clone()
    assert torch.allclose(new.log_weights, expected, rtol=0, atol=1e-15)


def test_ast_reproducible_and_round_trip():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    runs = [
        bl.sample(
            model,
            sampler="ast",
            operator="flip",
            n_chains=13,
            n_sweeps=20,
            generator=seed,
            keep_every=4,
            n_levels=5,
        )
        for seed in (8, 8, 9)
    ]
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert torch.equal(runs[0].info.summary.log_weights, runs[1].info.summary.log_weights)
    assert not torch.equal(runs[0].info.summary.log_weights, runs[2].info.summary.log_weights)
    for shared in (False, True):
        scheme = AdaptiveSimulatedTempering("flip", n_levels=5, shared_weights=shared, level_move="gibbs")
        state, restored = check_scheme_round_trip(scheme, model, seed=2, steps_before=6, steps_after=9)
        assert restored.n_steps == state.n_steps == 15


def test_validation_errors():
    bad_options = [
        {"gamma": -1.0},
        {"gamma": math.nan},
        {"gamma": "fast"},
        {"gamma": decaying_gamma(1.0, 10.0), "gamma_decay": 10.0},
        {"gamma_decay": 0.0},
        {"gamma_decay": -5.0},
        {"shared_weights": "yes"},
        {"low": 1.0},
        {"low": -0.1},
        {"n_levels": 1},
    ]
    for options in bad_options:
        with pytest.raises(ValidationError):
            AdaptiveSimulatedTempering("gibbs", **options)
    model = random_rbm(4, 3, seed=1)
    per_chain = AdaptiveSimulatedTempering("gibbs", n_levels=3)
    tensors = per_chain.state_tensors(per_chain.init(model, 3, generator=torch.Generator()))
    with pytest.raises(ValidationError):
        AdaptiveSimulatedTempering("gibbs", n_levels=3, shared_weights=True).state_from_tensors(
            model, tensors
        )
    scheme = AdaptiveSimulatedTempering("gibbs", n_levels=3, gamma=lambda t: 1.0 - t)
    g = torch.Generator().manual_seed(0)
    state = scheme.init(model, 3, generator=g)
    state, _ = scheme.step(model, state, generator=g)
    state, _ = scheme.step(model, state, generator=g)
    with pytest.raises(ValidationError):
        scheme.step(model, state, generator=g)
    with pytest.raises(ValidationError):
        bl.sample(model, sampler="ast", n_chains=3, n_sweeps=2, gamma=-2.0)
