"""Adapt, then freeze: ``bl.sample``'s default path for ``st``, ``ast`` and ``cast``.

The frozen kernel is the fixed-weight simulated-tempering kernel, exact by
``check_scheme_exact`` (tests/tempering/test_simulated.py, test_wang_landau.py, test_cast.py);
here the whole default path — pilot, placed ladder, adapted shared weights, frozen sampling —
is checked to sample the target exactly in the long run on tiny models, and the adaptation
to learn ``log Z(β_k)`` and to report what it did and cost.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.tempering import SimulatedTempering, ladders
from boltzlab.tempering.adaptation import (
    ADAPT_TOLERANCE,
    FIRST_STAGE,
    adapt_level_weights,
    adapt_then_freeze,
)
from boltzlab.tempering.cast import CASTState
from harness import check_adapted_sampler_exact, ladder_log_z, random_rbm, tiny_dbms


# ST's default path in the fast tier (and on a DBM below); AST and CAST take the same
# adapt-then-freeze path (5 s each) in the slow tier, their frozen kernels' exactness fast in
# test_wang_landau.py and test_cast.py.
@pytest.mark.parametrize(
    "sampler",
    ["st", pytest.param("ast", marks=pytest.mark.slow), pytest.param("cast", marks=pytest.mark.slow)],
)
def test_default_path_samples_the_target_exactly(sampler):
    check_adapted_sampler_exact(sampler)


def test_default_path_is_exact_on_a_dbm_with_a_state_dependent_operator():
    check_adapted_sampler_exact("st", models=tiny_dbms()[:1], operator="flip")


def test_the_exactness_check_can_fail():
    # One adaptation step and one sampling step from base samples: not the target yet.
    with pytest.raises(AssertionError, match="TV"):
        check_adapted_sampler_exact("st", models=tiny_dbms()[:1], n_sweeps=1, adapt_sweeps=1)


def test_stages_learn_log_z_with_weights_shared_by_all_chains():
    model = random_rbm(7, 3, scale=3.0, seed=4)
    ladder = ladders.uniform(6)
    scheme = SimulatedTempering("gibbs", ladder, level_move="gibbs")  # zero weights to start
    g = torch.Generator().manual_seed(0)
    state = scheme.init(model, 500, generator=g)
    state, record = adapt_level_weights(model, scheme, state, generator=g)
    exact = ladder_log_z(model, ladder.betas)
    # A balanced stage leaves every level within 20% of 1/K, the weights within ~0.2 nats.
    assert record["converged"] and record["stage_imbalance"][-1] < ADAPT_TOLERANCE
    assert (state.log_weights - (exact - exact[-1])).abs().max() < 0.25
    assert state.log_weights.shape == (6,) and state.log_weights[-1] == 0.0
    stages = record["stage_sweeps"]
    assert stages[0] == FIRST_STAGE and all(b == 2 * a for a, b in itertools.pairwise(stages))
    assert record["n_sweeps"] == sum(stages) == state.n_steps
    assert record["round_trips"].shape == (500,)


def test_the_budget_bounds_adaptation_and_is_reported():
    model = random_rbm(7, 3, scale=3.0, seed=4)
    result = bl.sample(model, sampler="st", n_chains=11, n_sweeps=20, generator=1, adapt_sweeps=60)
    adaptation = result.info.adaptation
    assert adaptation.stage_sweeps == (50, 10) and adaptation.n_sweeps == 60
    assert adaptation.cost_sweeps == adaptation.pilot_sweeps + 11 * 60
    assert adaptation.pilot_sweeps == 64 * 255  # pilot: 64 chains, 256 grid intervals
    assert result.info.n_sweeps == 20 and result.info.final_state.n_steps == 20
    assert adaptation.round_trips.shape == (11,)


def test_ladder_options_shape_the_adaptation():
    model = random_rbm(7, 3, scale=3.0, seed=4)
    placed = bl.sample(model, sampler="st", n_chains=9, n_sweeps=5, generator=2, n_levels=7, low=0.2)
    betas = placed.info.adaptation.ladder.betas
    assert betas.numel() == 7 and float(betas[0]) == pytest.approx(0.2) and float(betas[-1]) == 1.0
    assert placed.info.adaptation.thermodynamic_length > 0
    given = ladders.uniform(5)
    exact = ladder_log_z(model, given.betas)
    start = exact - exact[-1] + torch.tensor([0.5, -0.5, 0.3, 0.0, 0.0], dtype=torch.float64)
    from_weights = bl.sample(
        model, sampler="st", n_chains=9, n_sweeps=5, generator=2, ladder=given, log_weights=start, adapt=True
    )
    adaptation = from_weights.info.adaptation
    assert torch.equal(adaptation.ladder.betas, given.betas) and adaptation.pilot_sweeps == 0
    assert torch.equal(adaptation.initial_log_weights, start) and adaptation.thermodynamic_length is None
    frozen = from_weights.info.summary.log_weights
    assert torch.equal(frozen, adaptation.log_weights)  # frozen: the weights never moved


def test_frozen_schemes_and_their_starting_states():
    model = random_rbm(7, 3, scale=3.0, seed=4, dtype=torch.float32)
    operator = bl.operators.get("gibbs")
    cast = adapt_then_freeze("cast", operator, model, 6, generator=3, lag=7, exchange="copy")
    assert isinstance(cast.state, CASTState) and cast.scheme.lag == 7 and cast.scheme.exchange == "copy"
    assert cast.scheme.fast.gamma_at(10**6) == 0.0 and cast.scheme.fast.shared_weights
    # The slow chains start from the adapted β = 1 states (copies, not views).
    assert torch.equal(cast.state.slow.visible, cast.state.fast.last_target.visible)
    assert cast.state.slow.visible.data_ptr() != cast.state.fast.last_target.visible.data_ptr()
    st = adapt_then_freeze("st", operator, model, 6, generator=3, level_move="metropolis")
    assert st.scheme.level_move == "metropolis" and st.state.n_steps == 0
    assert int(st.state.visits.sum()) == 0
    assert torch.equal(st.scheme.log_weights, st.adaptation.log_weights)


def test_adapted_runs_are_reproducible_from_the_seed():
    model = random_rbm(7, 3, scale=3.0, seed=4, dtype=torch.float32)
    runs = [
        bl.sample(
            model, sampler="cast", operator="flip", n_chains=9, n_sweeps=12, generator=seed, keep_every=3
        )
        for seed in (5, 5, 6)
    ]
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert torch.equal(runs[0].info.adaptation.log_weights, runs[1].info.adaptation.log_weights)
    assert not torch.equal(runs[0].info.adaptation.log_weights, runs[2].info.adaptation.log_weights)


def test_bad_options_are_refused():
    model = random_rbm(4, 3, seed=1)
    operator = bl.operators.get("gibbs")
    with pytest.raises(ValidationError, match="not 'pt'"):
        adapt_then_freeze("pt", operator, model, 3, generator=0)
    with pytest.raises(ValidationError, match="lag"):
        adapt_then_freeze("st", operator, model, 3, generator=0, lag=5)
    with pytest.raises(ValidationError, match="ladder"):
        bl.sample(model, sampler="st", n_sweeps=2, adapt=True, log_weights=[0.0, 0.0])
    with pytest.raises(ValidationError, match="adapt_sweeps"):
        bl.sample(model, sampler="st", n_sweeps=2, adapt_sweeps=0)
    with pytest.raises(ValidationError, match="level_spacing"):
        bl.sample(model, sampler="st", n_sweeps=2, level_spacing=-1.0)
    with pytest.raises(ValidationError, match="no_such_option"):
        bl.sample(model, sampler="cast", n_sweeps=2, no_such_option=1)
    scheme = SimulatedTempering("gibbs", n_levels=3)
    state = scheme.init(model, 3, generator=torch.Generator())
    per_chain = dataclasses.replace(state, log_weights=state.log_weights.expand(3, -1))
    with pytest.raises(ValidationError, match="one per chain"):
        adapt_level_weights(model, scheme, per_chain, generator=torch.Generator())
