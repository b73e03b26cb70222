"""Simulated tempering with fixed weights (docs/algorithms.md §2.3).

The exact kernel of a step on ``(k, x, y)`` — level, joint state and stored β = 1 state —
built by enumeration (:func:`harness.simulated_tempering_kernel`, not from ``simulated.py``)
leaves ``q(x, k)·p_1(y)`` invariant for any weights and both level moves, and the sampled
step follows it (:func:`harness.check_scheme_exact`) — which also ties the Metropolis level
move's end-level proposal ratio (2 or ½) to the code. Beyond that: the copy refresh's
return-time bias, the refresh of chains at the top only, Monte Carlo agreement with
enumeration on a multimodal 14-unit RBM, diagnostics, reproducibility, checkpoints and
validation.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.tempering import SimulatedTempering, ladders
from harness import (
    SchemeCase,
    apply_moves,
    assert_exact_samples,
    check_scheme_exact,
    check_scheme_round_trip,
    exact_distribution,
    ladder_log_z,
    locate_simulated_tempering,
    multimodal_rbm,
    place_simulated_tempering,
    potts_scheme_cases,
    random_rbm,
    scheme_cases,
    simulated_tempering_kernel,
    spin_scheme_cases,
)
from tolerances import INVARIANCE_ATOL, MAX_Z

# ----------------------------------------------------------------------------- exact kernel


def log_weights_for(case: SchemeCase, weights: str) -> torch.Tensor:
    """Exact ``log Z(β_k)`` (uniform occupancy) or arbitrary weights (q is invariant for any)."""
    if weights == "exact":
        return case.log_z()
    return torch.tensor([0.7, -1.3, 0.0][-case.n_levels :], dtype=torch.float64)


@pytest.mark.parametrize("weights", ["exact", "arbitrary"])
@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
def test_exact_kernel_leaves_the_joint_target_invariant_and_the_sampler_follows_it(level_move, weights):
    check_scheme_exact(
        lambda operator, case: SimulatedTempering(
            operator, case.betas, log_weights=log_weights_for(case, weights), level_move=level_move
        ),
        lambda operator, case: simulated_tempering_kernel(
            operator, case, log_weights_for(case, weights), level_move=level_move
        ),
        place=place_simulated_tempering,
        locate=locate_simulated_tempering,
    )


@pytest.mark.parametrize(
    "cases", [potts_scheme_cases(), spin_scheme_cases(ladders=((0.0, 0.5, 1.0),))], ids=["potts", "spin"]
)
@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
def test_potts_and_spin_models_exact_kernel_and_sampler(level_move, cases):
    # Categorical (Potts) and ±1 spin visible units: the same joint target, kernel and sampled rows.
    check_scheme_exact(
        lambda operator, case: SimulatedTempering(
            operator, case.betas, log_weights=case.log_z(), level_move=level_move
        ),
        lambda operator, case: simulated_tempering_kernel(
            operator, case, case.log_z(), level_move=level_move
        ),
        place=place_simulated_tempering,
        locate=locate_simulated_tempering,
        cases=cases,
    )


def test_exact_weights_give_uniform_occupancy():
    # With w_k = log Z(β_k) every level carries mass 1/K under q(x, k) ∝ f_k(x)·exp(−w_k).
    for case in scheme_cases():
        kernel = simulated_tempering_kernel(bl.operators.get("gibbs"), case, case.log_z())
        occupancy = kernel.target.view(kernel.sizes).sum((1, 2))
        assert torch.allclose(occupancy, torch.full_like(occupancy, 1 / case.n_levels), atol=1e-12)


def test_copy_refresh_is_biased():
    """The paper's copy refresh keeps q(x, k) but not p_1 for the stored state.

    Its stored state has density ∝ p_1(x)·E[return time to β = 1 | x] (Kac), which differs
    from p_1 whenever a sweep does not mix completely. The stationary law of the copy kernel
    on ((k, x), y) is found by power iteration from q ⊗ p_1 (which the swap refresh keeps).
    """
    case = scheme_cases(shapes=((3, 2),), ladders=((0.0, 0.5, 1.0),))[0]
    operator = bl.operators.get("gibbs")
    copy = simulated_tempering_kernel(operator, case, case.log_z(), target_refresh="copy")
    level_move, sweep, refresh = copy.steps[0]
    n_levels, n_states = case.n_levels, case.n_states
    top = slice((n_levels - 1) * n_states, n_levels * n_states)

    def copy_step(distribution: torch.Tensor) -> torch.Tensor:
        """One step with the copy refresh written out: at the top, y ← x."""
        moved = apply_moves(distribution, [level_move, sweep], copy.sizes).view(n_levels * n_states, n_states)
        moved[top] = torch.diag(moved[top].sum(1))
        return moved.reshape(-1)

    target = copy.target
    assert torch.allclose(copy_step(target), apply_moves(target, [level_move, sweep, refresh], copy.sizes))
    distribution = target
    for _ in range(3000):
        distribution = copy_step(distribution)
    assert (copy_step(distribution) - distribution).abs().max().item() < 1e-13, "not converged"
    joint = distribution.view(n_levels * n_states, n_states)
    q = target.view(n_levels * n_states, n_states).sum(1)
    assert (joint.sum(1) - q).abs().max().item() < INVARIANCE_ATOL, "the (x, k) marginal is still q"
    bias = 0.5 * (joint.sum(0) - case.p(-1)).abs().sum().item()
    assert bias > 0.05, f"expected a visible return-time bias, got TV {bias}"


def test_after_sweep_refreshes_only_chains_at_the_top():
    model = random_rbm(4, 3, seed=3)
    ladder = ladders.uniform(3)
    g = torch.Generator().manual_seed(0)
    for mode in ("swap", "copy"):
        scheme = SimulatedTempering("gibbs", ladder, target_refresh=mode)
        state = scheme.init(model, 5, generator=g)
        levels = torch.tensor([2, 0, 2, 1, 0])
        state = dataclasses.replace(
            state, chains=state.chains.with_beta(ladder.betas[levels]), levels=levels, n_steps=3
        )
        swept = model.init_chains(5, generator=g).with_beta(ladder.betas[levels])
        new = scheme.after_sweep(state, swept)
        top = levels == 2
        for old_stored, new_stored, new_chain, swept_layer in zip(
            state.last_target.layers, new.last_target.layers, new.chains.layers, swept.layers, strict=True
        ):
            assert torch.equal(new_stored[top], swept_layer[top])
            assert torch.equal(new_stored[~top], old_stored[~top])
            expected_chain = old_stored[top] if mode == "swap" else swept_layer[top]
            assert torch.equal(new_chain[top], expected_chain)
            assert torch.equal(new_chain[~top], swept_layer[~top])
        assert torch.equal(new.visits, torch.tensor([2, 1, 2]))
        assert new.n_steps == 4


# ----------------------------------------------------------------------------- Monte Carlo


def local_maxima(p: torch.Tensor, n_units: int) -> int:
    codes = torch.arange(p.numel())
    neighbours = codes[:, None] ^ (1 << torch.arange(n_units))[None, :]
    return int((p[:, None] > p[neighbours]).all(1).sum())


# flip with Metropolis level moves in the fast tier; Gibbs level moves (5 s) in the slow tier,
# their kernel checked exactly in the fast tier above.
@pytest.mark.parametrize(
    ("operator_name", "level_move"),
    [("flip", "metropolis"), pytest.param("gibbs", "gibbs", marks=pytest.mark.slow)],
)
def test_st_samples_match_exact_distribution(operator_name, level_move):
    """ST with exact weights on a multimodal 14-unit RBM: β = 1 samples match p, occupancy uniform.

    Independent chains, one snapshot each after burn-in, so the samples are iid draws from
    the chain's law at that time; a TV bound from the sample size and multinomial z-scores
    for the level counts.
    """
    model = multimodal_rbm()
    assert local_maxima(exact_distribution(model, 1), model.n_visible) >= 3
    ladder = ladders.uniform(6)
    n_chains = 6000
    result = bl.sample(
        model,
        sampler="st",
        operator=operator_name,
        n_chains=n_chains,
        n_sweeps=1,
        burn_in=600,
        generator=2024,
        ladder=ladder,
        log_weights=ladder_log_z(model, ladder.betas),
        level_move=level_move,
    )
    assert result.chains.n_chains == n_chains and bool((result.chains.beta == 1).all())
    assert_exact_samples(model, (result.chains.visible,), label="stored beta = 1 states")
    final = result.info.final_state
    at_top = final.chains.select(final.levels == ladder.size - 1)
    assert_exact_samples(model, (at_top.visible,), label="chains at the top level")
    counts = torch.bincount(final.levels, minlength=ladder.size).to(torch.float64)
    share = 1 / ladder.size
    z = (counts - n_chains * share) / math.sqrt(n_chains * share * (1 - share))
    assert z.abs().max().item() < MAX_Z, f"occupancy {counts.tolist()} is not uniform"


# ----------------------------------------------------------------------------- contract


def test_step_keeps_shapes_and_does_not_modify_its_input():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = SimulatedTempering("flip", ladders.geometric(5, low=0.1))
    g = torch.Generator().manual_seed(1)
    state = scheme.init(model, 13, generator=g)
    for _ in range(5):
        state, _ = scheme.step(model, state, generator=g)
    snapshot = {key: value.clone() for key, value in scheme.state_tensors(state).items()}
    new, info = scheme.step(model, state, generator=g)
    for key, value in scheme.state_tensors(state).items():
        assert torch.equal(value, snapshot[key]), f"step modified {key}"
    assert new.levels.shape == (13,) and new.levels.dtype == torch.int64
    assert info.accepted.dtype == torch.bool and info.levels.shape == (13,)
    assert all(layer.dtype == torch.float32 for layer in new.chains.layers)
    assert torch.equal(new.chains.beta, scheme.level_betas(model)[0][new.levels])
    assert new.n_steps == state.n_steps + 1 and int(new.visits.sum()) == 13 * new.n_steps
    samples = scheme.samples(new)
    assert samples.visible.shape == (13, 7) and bool((samples.beta == 1).all())


def count_round_trips(levels: list[int], n_levels: int) -> int:
    """Bottom → top → bottom journeys: a one-way trip ends at the end level opposite to the
    last end visited, and two one-way trips make a round trip."""
    last_end, one_way = None, 0
    for level in levels:
        end = "bottom" if level == 0 else "top" if level == n_levels - 1 else None
        if end is not None:
            one_way += last_end is not None and end != last_end
            last_end = end
    return one_way // 2


def test_round_trips_and_summary():
    # chain 0: 0 -> 2 -> 0 -> 2 (three one-way trips, one round trip); chain 1: 2 -> 0 -> 2 -> 0.
    assert count_round_trips([0, 1, 2, 1, 0, 1, 2, 1], 3) == 1
    assert count_round_trips([2, 2, 1, 0, 1, 2, 2, 0], 3) == 1
    model = random_rbm(7, 3, seed=4)
    result = bl.sample(
        model,
        sampler="st",
        operator="gibbs",
        n_chains=11,
        n_sweeps=200,
        generator=0,
        n_levels=4,
        log_weights=ladder_log_z(model, ladders.uniform(4).betas),  # uniform occupancy
    )
    summary = result.info.summary
    assert summary.trajectories.shape == (200, 11)
    assert summary.occupancy.shape == (4,) and abs(float(summary.occupancy.sum()) - 1) < 1e-12
    assert int(summary.visits.sum()) == 200 * 11
    assert summary.pair_acceptance.shape == (3,) and 0.0 <= summary.acceptance_rate <= 1.0
    # Chains start at the top level; the summary counts trips from there.
    expected = [count_round_trips([3, *summary.trajectories[:, chain].tolist()], 4) for chain in range(11)]
    assert summary.round_trips.tolist() == expected and sum(expected) > 0
    gibbs = bl.sample(
        model, sampler="st", n_chains=11, n_sweeps=5, generator=0, n_levels=4, level_move="gibbs"
    )
    assert bool(torch.isnan(gibbs.info.summary.pair_acceptance).all())


def test_st_reproducible_from_seed():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32)
    runs = [
        bl.sample(
            model, sampler="st", operator="flip", n_chains=13, n_sweeps=30, generator=seed, keep_every=5
        )
        for seed in (3, 3, 4)
    ]
    assert runs[0].samples.shape == (6, 13, 7)
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert torch.equal(runs[0].info.summary.trajectories, runs[1].info.summary.trajectories)
    assert not torch.equal(runs[0].info.summary.trajectories, runs[2].info.summary.trajectories)


@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
def test_state_round_trip_continues_bit_identically(level_move):
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = SimulatedTempering(
        "flip", n_levels=5, log_weights=[3.0, 2.0, 1.5, 0.5, 0.0], level_move=level_move
    )
    state, restored = check_scheme_round_trip(scheme, model, seed=9, steps_before=7, steps_after=11)
    assert torch.equal(state.chains.beta, restored.chains.beta)


def test_validation_errors():
    model = random_rbm(4, 3, seed=1)
    bad_options = [
        ({"level_move": "heatbath"}, "level_move"),
        ({"target_refresh": "move"}, "target_refresh"),
        ({"ladder": [1.0, 0.5]}, "end at beta = 1"),
        ({"ladder": [1.0]}, "at least two"),
        ({"ladder": ladders.uniform(4), "n_levels": 5}, "n_levels"),
        ({"n_levels": 0}, "n_levels"),
        ({"n_levels": 4, "log_weights": [0.0, 1.0]}, "log_weights"),
        ({"n_levels": 2, "log_weights": [math.inf, 0.0]}, "log_weights"),
        ({"ladder": "hot"}, "ladder"),
    ]
    for options, name in bad_options:
        with pytest.raises(ValidationError, match=name):
            SimulatedTempering("gibbs", **options)
    with pytest.raises(ValidationError, match="operator"):
        SimulatedTempering(object())
    scheme = SimulatedTempering("gibbs", n_levels=4)
    with pytest.raises(ValidationError, match="n_chains"):
        scheme.init(model, 0, generator=torch.Generator())
    state = scheme.init(model, 3, generator=torch.Generator())
    tensors = scheme.state_tensors(state)
    with pytest.raises(ValidationError, match="5 levels"):
        SimulatedTempering("gibbs", n_levels=5).state_from_tensors(model, tensors)
    with pytest.raises(ValidationError, match="levels"):
        scheme.state_from_tensors(model, {key: value for key, value in tensors.items() if key != "levels"})
    with pytest.raises(ValidationError, match="5 units"):
        scheme.state_from_tensors(random_rbm(5, 3, seed=1), tensors)
    with pytest.raises(ValidationError, match="no_such_option"):
        bl.sample(model, sampler="st", n_chains=3, n_sweeps=2, no_such_option=1)


def test_shared_helpers_live_once_in_base():
    # select_terms (used by ST, CAST, PT and the estimators) and check_choice are one function
    # each, in tempering.base; simulated uses that one rather than a copy.
    from boltzlab.tempering import base, simulated

    assert simulated.select_terms is base.select_terms and simulated.check_choice is base.check_choice
    model = random_rbm(7, 3, seed=4)
    chains = model.init_chains(5, generator=torch.Generator().manual_seed(0))
    terms = model.marginal_terms(chains.layers)
    picked = base.select_terms(terms, torch.tensor([4, 1]))
    assert torch.equal(picked.preactivation, terms.preactivation[[4, 1]])
    assert torch.equal(picked.base, terms.base[[4, 1]]) and torch.equal(picked.linear, terms.linear[[4, 1]])
    assert base.check_choice("GIBBS", ("metropolis", "gibbs"), "level_move") == "gibbs"
    with pytest.raises(ValidationError, match="level_move must be one of 'metropolis', 'gibbs'"):
        base.check_choice(3, ("metropolis", "gibbs"), "level_move")
