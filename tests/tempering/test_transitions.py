"""Tempered transitions: the exact kernel of one move is reversible, and the sampler draws from it.

The move's kernel is built by enumerating every path of a tiny RBM (up to two heated levels):
forward sweeps on the way up, reversed sweeps (the update groups in the opposite order) on
the way down, and the acceptance ``min(1, A)`` applied path by path.
:func:`harness.check_scheme_exact` then checks ``p·T = p`` and detailed balance to 1e-10 and
that the sampler follows the kernel; Monte Carlo checks that its β = 1 samples on a bimodal
RBM are exact.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.tempering import TemperedTransitions, ladders
from harness import (
    ExactKernel,
    Move,
    SchemeCase,
    assert_exact_samples,
    bimodal_rbm,
    check_scheme_exact,
    check_scheme_round_trip,
    potts_scheme_cases,
    random_rbm,
    run_scheme,
    scheme_cases,
    spin_scheme_cases,
)
from tolerances import MAX_Z

OPERATORS = ("gibbs", "flip", "mixture")
CASES = [
    *scheme_cases(ladders=((0.3, 1.0), (0.0, 0.5, 1.0))),
    *scheme_cases(shapes=((3, 2),), ladders=((0.2, 0.45, 1.0),)),  # uneven steps in β
    *scheme_cases(shapes=((2, 2, 1),), ladders=((0.0, 0.5, 1.0),)),
]


# ---------------------------------------------------------------------------- exact kernel
def tempered_transition_move(operator, case: SchemeCase, *, reverse_on_cooling: bool = True) -> torch.Tensor:
    """Exact kernel of one move, by enumerating every path ``x̂_0 … x̂_S = x̌_S … x̌_0``.

    ``case.betas`` is the ascending ladder, so Neal's level ``s`` is ladder index
    ``K − 1 − s``. Heating into ``x̂_s`` is a forward sweep at level ``s``; cooling from
    ``x̌_s`` a reversed sweep at level ``s``. ``log A`` adds ``log f_{s+1} − log f_s`` at
    ``x̂_s`` (s < S) and ``log f_{s−1} − log f_s`` at ``x̌_{s−1}``; the turning state ``x̂_S``
    carries no term, so it is summed out of the two sweeps around it. The remaining
    ``n_states^{2S−1}`` paths from one start are enumerated at a time.
    """
    n_levels, n_states = case.n_levels, case.n_states
    depth = n_levels - 1
    log_f = [case.log_f(n_levels - 1 - s) for s in range(n_levels)]  # Neal's f_s
    heat = [case.sweep(operator, n_levels - 1 - s) for s in range(1, depth + 1)]  # into x̂_s
    cool = [case.sweep(operator, n_levels - 1 - s, reverse=reverse_on_cooling) for s in range(depth, 0, -1)]
    moves = [*heat[:-1], heat[-1] @ cool[0], *cool[1:]]  # x̂_0 → … → x̂_{S−1} → x̌_{S−1} → … → x̌_0
    terms = [log_f[s + 1] - log_f[s] for s in range(depth)]  # at x̂_0 … x̂_{S−1}
    terms += [log_f[s - 1] - log_f[s] for s in range(depth, 0, -1)]  # at x̌_{S−1} … x̌_0
    kernel = torch.zeros(n_states, n_states, dtype=torch.float64)
    for start in range(n_states):
        probability = moves[0][start][None, :]  # (paths so far, current state)
        log_acceptance = terms[0][start] + terms[1][None, :]
        for move, term in zip(moves[1:], terms[2:], strict=True):
            probability = (probability[:, :, None] * move[None]).reshape(-1, n_states)
            log_acceptance = (log_acceptance[:, :, None] + term).reshape(-1, n_states)
        kernel[start] = (probability * log_acceptance.clamp_max(0.0).exp()).sum(0)
    return kernel + torch.diag(1.0 - kernel.sum(1))


def tt_exact(operator, case: SchemeCase) -> ExactKernel:
    move = Move(tempered_transition_move(operator, case), (0,))
    return ExactKernel(
        sizes=(case.n_states,), target=case.p(-1), steps=((move,), (move,)), reversible=(move,)
    )


def place(state, case: SchemeCase, index: int):
    layers = case.states(index, state.chains.n_chains)
    return dataclasses.replace(state, chains=bl.Chains(layers=layers, beta=state.chains.beta))


def locate(state, case: SchemeCase) -> torch.Tensor:
    return case.codes(state.chains.layers)


@pytest.mark.parametrize(
    "cases", [potts_scheme_cases(), spin_scheme_cases(ladders=((0.3, 1.0),))], ids=["potts", "spin"]
)
def test_potts_and_spin_models_one_move_is_reversible_and_the_sampler_follows_it(cases):
    check_scheme_exact(
        lambda operator, case: TemperedTransitions(operator, case.betas),
        tt_exact,
        place=place,
        locate=locate,
        cases=cases,
    )


def test_one_move_is_reversible_and_the_sampler_follows_it():
    # S = 1 and S = 2 heated levels, every operator: the kernel is stochastic, p·T = p and
    # diag(p)·T is symmetric (Neal's detailed balance); the sampler's moves follow its rows.
    check_scheme_exact(
        lambda operator, case: TemperedTransitions(operator, case.betas),
        tt_exact,
        place=place,
        locate=locate,
        cases=CASES,
    )


def test_cooling_with_forward_sweeps_is_not_exact():
    # The pairing matters, and the check above can tell: with forward sweeps on the way down
    # the kernel no longer leaves p invariant.
    case = CASES[1]
    p = case.p(-1)
    kernel = tempered_transition_move(bl.operators.get("gibbs"), case, reverse_on_cooling=False)
    assert (p @ kernel - p).abs().max().item() > 1e-4


# ---------------------------------------------------------------------------- Monte Carlo
# gibbs and flip with target sweeps in the fast tier; flip and mixture without (1.5 s each) in
# the slow tier, each operator exact in its own fast test.
@pytest.mark.parametrize(
    ("operator_name", "target_sweeps"),
    [
        ("gibbs", 0),
        pytest.param("flip", 0, marks=pytest.mark.slow),
        pytest.param("mixture", 0, marks=pytest.mark.slow),
        ("flip", 1),
    ],
)
def test_beta_one_samples_match_the_exact_distribution(operator_name, target_sweeps):
    # Independent chains on a bimodal 5x4 RBM: after burn-in the states are exact samples
    # (TV below its sample-size bound; favoured-mode mass within MAX_Z standard errors).
    model, pattern = bimodal_rbm(5, 4, seed=0)
    scheme = TemperedTransitions(bl.operators.get(operator_name), n_levels=6, target_sweeps=target_sweeps)
    state, infos = run_scheme(scheme, model, n_chains=10_000, n_steps=40, seed=2)
    assert_exact_samples(
        model, scheme.samples(state).layers, pattern=pattern, label=f"TT with {operator_name}"
    )
    summary = scheme.summarize(infos, state)
    assert 0.0 < summary.acceptance_rate < 1.0
    assert summary.sweeps_per_step == 10 + target_sweeps


def test_acceptance_falls_as_the_ladder_gets_coarser():
    # Same span [0, 1], fewer levels: bigger jumps in β, lower acceptance. Per-chain mean
    # acceptance probabilities are independent across chains, so their standard errors
    # give the z-score of each difference.
    model, _ = bimodal_rbm(5, 4, seed=0)
    n_chains = 2000
    means, errors = [], []
    for n_levels in (12, 6, 3):
        scheme = TemperedTransitions(bl.operators.get("gibbs"), n_levels=n_levels)
        _, infos = run_scheme(scheme, model, n_chains=n_chains, n_steps=8, seed=6)
        per_chain = torch.stack([info.log_acceptance for info in infos[3:]]).clamp_max(0.0).exp().mean(0)
        means.append(float(per_chain.mean()))
        errors.append(float(per_chain.std()) / math.sqrt(n_chains))
    for finer in range(2):
        z = (means[finer] - means[finer + 1]) / math.hypot(errors[finer], errors[finer + 1])
        assert z > MAX_Z, f"acceptance {means} should fall with coarser ladders (z = {z:.1f})"


def test_every_move_is_accepted_when_the_density_is_flat():
    # Zero parameters, uniform base: log f_β(x) does not depend on x, so log A = 0.
    model = bl.RBM(weights=torch.zeros(7, 3), dtype=torch.float32)
    scheme = TemperedTransitions(bl.operators.get("flip"), n_levels=5)
    state, infos = run_scheme(scheme, model, n_chains=13, n_steps=4, seed=0)
    summary = scheme.summarize(infos, state)
    assert summary.acceptance_rate == 1.0
    assert summary.mean_acceptance_probability == pytest.approx(1.0, abs=1e-12)
    assert state.accepted.tolist() == [4] * 13


# ---------------------------------------------------------------------------- contract
def test_step_contract_shapes_and_input_untouched():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = TemperedTransitions(bl.operators.get("mixture", alpha=0.5), ladders.geometric(4, low=0.1))
    state, _ = run_scheme(scheme, model, n_chains=13, n_steps=2, seed=0)
    before = scheme.state_tensors(state)
    new_state, info = scheme.step(model, state, generator=torch.Generator().manual_seed(9))
    for key, tensor in scheme.state_tensors(state).items():
        assert torch.equal(tensor, before[key]), f"step modified its input ({key})"
    samples = scheme.samples(new_state)
    assert samples.visible.shape == (13, 7) and samples.layers[1].shape == (13, 3)
    assert samples.dtype == torch.float32 and bool((samples.beta == 1).all())
    assert info.accepted.dtype == torch.bool and info.accepted.shape == (13,)
    assert info.log_acceptance.dtype == torch.float64 and info.log_acceptance.shape == (13,)
    assert torch.equal(new_state.accepted, state.accepted + info.accepted.to(torch.int64))
    rejected = ~info.accepted
    for old, new in zip(state.chains.layers, new_state.chains.layers, strict=True):
        assert torch.equal(old[rejected], new[rejected]), "a rejected move must keep the old state"


def test_same_seed_same_run_and_bl_sample_entry_point():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    results = [
        bl.sample(
            model,
            sampler="tt",
            operator="flip",
            n_chains=13,
            n_sweeps=6,
            n_levels=4,
            generator=3,
            keep_every=2,
        )
        for _ in range(2)
    ]
    for a, b in zip(results[0].chains.layers, results[1].chains.layers, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(results[0].samples, results[1].samples) and results[0].samples.shape == (3, 13, 7)
    assert results[0].info.summary.n_steps == 6
    other = bl.sample(model, sampler="tt", operator="flip", n_chains=13, n_sweeps=6, n_levels=4, generator=4)
    assert not torch.equal(other.chains.visible, results[0].chains.visible)


def test_checkpoint_round_trip_continues_bit_identically():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = TemperedTransitions(bl.operators.get("flip"), n_levels=4, target_sweeps=1)
    check_scheme_round_trip(scheme, model, seed=11, steps_before=3, steps_after=3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ladder": [0.6, 0.5, 1.0]}, "increasing"),
        ({"ladder": [0.2, 0.8]}, "end at beta = 1"),
        ({"ladder": [1.0]}, "at least two"),
        ({"n_levels": 1}, "n_levels"),
        ({"target_sweeps": -1}, "target_sweeps"),
    ],
)
def test_bad_options_are_refused_at_the_door(options, message):
    with pytest.raises(ValidationError, match=message):
        TemperedTransitions(bl.operators.get("gibbs"), **options)
    with pytest.raises(ValidationError, match="operator"):
        TemperedTransitions(None)


def test_batched_densities_equal_level_by_level_densities(monkeypatch):
    # Δ of the visited states is evaluated in batches bounded in memory; the smallest batch
    # (one state at a time) must give the same log A and the same move.
    from boltzlab.tempering import transitions

    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = TemperedTransitions(bl.operators.get("flip"), n_levels=6)
    state = scheme.init(model, 13, generator=torch.Generator().manual_seed(0))
    batched, batched_info = scheme.step(model, state, generator=torch.Generator().manual_seed(1))
    monkeypatch.setattr(transitions, "_DENSITY_BATCH_ELEMENTS", 1)
    single, single_info = scheme.step(model, state, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(single_info.log_acceptance, batched_info.log_acceptance, rtol=0, atol=1e-12)
    assert torch.equal(single_info.accepted, batched_info.accepted)
    for a, b in zip(single.chains.layers, batched.chains.layers, strict=True):
        assert torch.equal(a, b)
