"""Parallel tempering: exact invariance on the product space, exact β = 1 samples, bookkeeping.

The β = 1 marginal of PT is the model only if ``Π_k p_{β_k}`` is invariant under a whole
step: the swap round (acceptance on the summed-out densities, then the redraw of the hidden
layer of exchanged replicas) and a sweep of every replica. :func:`harness.check_scheme_exact`
checks that with the exact kernel on the product space of tiny RBMs, and that the sampler
draws from it; Monte Carlo on a bimodal RBM whose plain Gibbs chains are visibly stuck at the
same budget checks the β = 1 samples.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.tempering import ParallelTempering, ladders
from harness import (
    ExactKernel,
    Move,
    SchemeCase,
    apply_moves,
    assert_exact_samples,
    bimodal_rbm,
    check_scheme_exact,
    check_scheme_round_trip,
    potts_scheme_cases,
    random_rbm,
    run_scheme,
    scheme_cases,
    spin_scheme_cases,
    state_codes,
)
from tolerances import INVARIANCE_ATOL, MAX_Z

OPERATORS = ("gibbs", "flip", "mixture")

# Product spaces stay small: two levels of 32 states, three levels of 8 states.
CASES = [
    *scheme_cases(shapes=((3, 2), (2, 3), (2, 2, 1)), ladders=((0.3, 1.0),)),
    *scheme_cases(shapes=((2, 1), (1, 2), (1, 1, 1)), ladders=((0.0, 0.5, 1.0),)),
]


# ---------------------------------------------------------------------------- exact kernel
def swap_move(case: SchemeCase, lower: int, *, redraw: bool = True) -> Move:
    """Exact kernel of proposing the exchange of levels ``(lower, lower + 1)``.

    On the pair's states ``(a, b)`` (``a`` at the lower level): accept with
    ``min(1, f_lo(b) f_hi(a) / (f_lo(a) f_hi(b)))`` on the summed-out densities, exchange,
    and redraw the hidden layer at both slots' β (``redraw=False`` keeps the whole joint
    states, the biased variant).
    """
    n = case.n_states
    gain = case.marginal_log_f(lower + 1) - case.marginal_log_f(lower)  # log f_hi − log f_lo
    accept = (gain[:, None] - gain[None, :]).clamp_max(0.0).exp().reshape(-1)  # [a, b]
    exchange = torch.eye(n * n, dtype=torch.float64)[torch.arange(n * n).view(n, n).T.reshape(-1)]
    if redraw:
        exchange = exchange @ torch.kron(case.redraw(lower), case.redraw(lower + 1))
    matrix = torch.diag(1.0 - accept) + accept[:, None] * exchange
    return Move(matrix, (lower, lower + 1))


def product_target(case: SchemeCase) -> torch.Tensor:
    target = torch.ones(1, dtype=torch.float64)
    for level in range(case.n_levels):
        target = torch.kron(target, case.p(level))
    return target


def pt_exact(pairs: str, swap_every: int):
    def exact(operator, case: SchemeCase) -> ExactKernel:
        """The first four steps as the code runs them: a swap round is due before the sweep
        of every step after a multiple of ``swap_every`` sweeps; ``"alternating"`` rounds
        take the even pairs, then the odd ones, ``"all"`` every pair from the lowest."""
        n_levels = case.n_levels
        sweeps = tuple(Move(case.sweep(operator, level), (level,)) for level in range(n_levels))
        swaps = [swap_move(case, lower) for lower in range(n_levels - 1)]
        steps, n_rounds = [], 0
        for n_sweeps_done in range(4):
            round_moves: tuple[Move, ...] = ()
            if n_sweeps_done > 0 and n_sweeps_done % swap_every == 0:
                round_moves = tuple(swaps) if pairs == "all" else tuple(swaps[n_rounds % 2 :: 2])
                n_rounds += 1
            steps.append(round_moves + sweeps)
        return ExactKernel(
            sizes=(case.n_states,) * n_levels,
            target=product_target(case),
            steps=tuple(steps),
            reversible=tuple(swaps),
        )

    return exact


def place(state, case: SchemeCase, index: int):
    """Every system's level k at the k-th digit (base n_states, level 0 first) of ``index``."""
    codes = []
    for _ in range(case.n_levels):
        index, code = divmod(index, case.n_states)
        codes.append(code)
    n_systems = state.n_chains
    per_level = [case.states(code, n_systems) for code in reversed(codes)]
    layers = tuple(torch.cat(parts) for parts in zip(*per_level, strict=True))
    return dataclasses.replace(state, chains=bl.Chains(layers=layers, beta=state.chains.beta))


def locate(state, case: SchemeCase) -> torch.Tensor:
    per_level = case.codes(state.chains.layers).view(case.n_levels, -1)
    index = torch.zeros(per_level.shape[1], dtype=torch.int64)
    for codes in per_level:
        index = index * case.n_states + codes
    return index


@pytest.mark.parametrize(("pairs", "swap_every"), [("alternating", 1), ("all", 1), ("alternating", 2)])
def test_exact_kernel_leaves_the_product_invariant_and_the_sampler_follows_it(pairs, swap_every):
    check_scheme_exact(
        lambda operator, case: ParallelTempering(operator, case.betas, pairs=pairs, swap_every=swap_every),
        pt_exact(pairs, swap_every),
        place=place,
        locate=locate,
        cases=CASES,
    )


@pytest.mark.parametrize(
    "cases",
    [potts_scheme_cases(ladders=((0.3, 1.0),)), spin_scheme_cases(ladders=((0.3, 1.0),))],
    ids=["potts", "spin"],
)
def test_potts_and_spin_models_exact_kernel_and_sampler(cases):
    # Categorical (Potts) and ±1 spin visible units: swaps on the summed-out densities and the
    # sweeps keep the product of the tempered distributions.
    check_scheme_exact(
        lambda operator, case: ParallelTempering(operator, case.betas),
        pt_exact("alternating", 1),
        place=place,
        locate=locate,
        cases=cases,
    )


def test_swapping_hidden_states_without_redraw_is_biased():
    # The check above has power: exchanging whole joint states (hidden layer included) with
    # the summed-out acceptance leaves the product invariant only if h is redrawn at its new β.
    for case in CASES[:3]:  # the two-level cases
        target = product_target(case)
        biased = swap_move(case, 0, redraw=False)
        sizes = (case.n_states,) * case.n_levels
        assert (apply_moves(target, [biased], sizes) - target).abs().max().item() > 1e-3
        exact = swap_move(case, 0)
        assert (apply_moves(target, [exact], sizes) - target).abs().max().item() < INVARIANCE_ATOL


# ---------------------------------------------------------------------------- Monte Carlo
# Gibbs in the fast tier; flip and mixture (2 s each) in the slow tier: the exact-kernel test
# above samples PT with gibbs and flip, and every operator has its own exact test.
@pytest.mark.parametrize(
    "operator_name", ["gibbs", *(pytest.param(name, marks=pytest.mark.slow) for name in OPERATORS[1:])]
)
def test_beta_one_samples_match_the_exact_distribution(operator_name):
    # Independent PT systems on a bimodal 5x4 RBM: the β = 1 replicas after burn-in are exact
    # samples (TV below its sample-size bound, favoured-mode mass within MAX_Z standard errors).
    model, pattern = bimodal_rbm(5, 4, seed=0)
    scheme = ParallelTempering(bl.operators.get(operator_name), n_levels=4)
    state, infos = run_scheme(scheme, model, n_chains=10_000, n_steps=80, seed=2)
    assert_exact_samples(
        model, scheme.samples(state).layers, pattern=pattern, label=f"PT with {operator_name}"
    )
    summary = scheme.summarize(infos, state)
    assert bool(((summary.swap_acceptance >= 0) & (summary.swap_acceptance <= 1)).all())
    assert summary.total_round_trips > 0


def test_plain_gibbs_fails_the_same_check_at_the_same_cost():
    # The check above can fail: plain Gibbs with as many sweeps per chain as PT spent on all
    # its levels (4 x 80) is still stuck near the half/half split of its starting states.
    model, pattern = bimodal_rbm(5, 4, seed=0)
    operator = bl.operators.get("gibbs")
    generator = torch.Generator().manual_seed(2)
    chains = model.init_chains(10_000, generator=generator).with_beta(1.0)
    for _ in range(4 * 80):
        chains, _ = operator.step(model, chains, generator=generator)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_exact_samples(model, chains.layers, pattern=pattern, label="plain Gibbs")


def test_swap_acceptance_matches_its_exact_expectation():
    # At equilibrium the acceptance of pair (k, k+1) is E[min(1, r)] under p_{β_k} ⊗ p_{β_{k+1}},
    # computable by enumeration; one swap round of many independent systems estimates it
    # (an even round: pairs (0, 1) and (2, 3), disjoint, so their states are independent).
    model, _ = bimodal_rbm(5, 4, seed=0)
    betas = [0.0, 0.3, 0.55, 0.8, 1.0]
    scheme = ParallelTempering(bl.operators.get("gibbs"), betas)
    n_systems = 8000
    state, _ = run_scheme(scheme, model, n_chains=n_systems, n_steps=61, seed=3)
    assert state.n_rounds % 2 == 0  # the next step's round has the even pairs
    _, info = scheme.step(model, state, generator=torch.Generator().manual_seed(4))
    assert info.swap_attempted.tolist() == [True, False, True, False]
    visible_codes = state_codes((joint_states(model.layer_sizes)[0],))
    marginals = [
        torch.zeros(32, dtype=torch.float64).index_add_(
            0, visible_codes, joint_log_probabilities(model, beta).exp()
        )
        for beta in betas
    ]
    for lower in (0, 2):
        lo, hi = marginals[lower], marginals[lower + 1]
        ratio = (lo[None, :] * hi[:, None]) / (lo[:, None] * hi[None, :])  # [v at β_k, v at β_{k+1}]
        expected = float((lo[:, None] * hi[None, :] * ratio.clamp_max(1.0)).sum())
        observed = float(info.swap_accepted[lower].to(torch.float64).mean())
        z = (observed - expected) / math.sqrt(expected * (1 - expected) / n_systems)
        assert abs(z) < MAX_Z, (
            f"pair {lower}: acceptance {observed:.4f} vs exact {expected:.4f} (z = {z:.1f})"
        )


def test_every_swap_is_accepted_when_the_density_is_flat():
    # Zero parameters and a uniform base: log f_β(x) does not depend on x, so log A = 0.
    model = bl.RBM(weights=torch.zeros(7, 3), dtype=torch.float32)
    for pairs in ("alternating", "all"):
        scheme = ParallelTempering(bl.operators.get("flip"), n_levels=5, pairs=pairs)
        state, infos = run_scheme(scheme, model, n_chains=13, n_steps=6, seed=0)
        summary = scheme.summarize(infos, state)
        assert torch.equal(summary.swap_acceptance, torch.ones(4, dtype=torch.float64))
        # Six steps hold five rounds (none before the first sweep): even pairs in three.
        expected = [5 * 13] * 4 if pairs == "all" else [3 * 13, 2 * 13, 3 * 13, 2 * 13]
        assert summary.swap_attempts.tolist() == expected


# ---------------------------------------------------------------------------- bookkeeping
def test_round_trips_count_bottom_top_bottom_journeys():
    # Replay each replica's level from the state's replica map and count bottom → top →
    # bottom journeys independently of the scheme's labels.
    model, _ = bimodal_rbm(5, 4, seed=0)
    for pairs, swap_every in (("alternating", 1), ("all", 2)):
        scheme = ParallelTempering(bl.operators.get("flip"), n_levels=4, pairs=pairs, swap_every=swap_every)
        generator = torch.Generator().manual_seed(5)
        state = scheme.init(model, 7, generator=generator)
        positions = []  # level of every replica after every step: (K, n) each
        for _ in range(120):
            state, _ = scheme.step(model, state, generator=generator)
            positions.append(torch.argsort(state.replica, dim=0))
        n_levels = scheme.n_levels
        expected = torch.zeros(7, dtype=torch.int64)
        for system in range(7):
            for replica in range(n_levels):
                levels = [0 if replica == 0 else -1] + [int(p[replica, system]) for p in positions]
                touched_bottom, touched_top = False, False
                for level in levels:
                    if level == 0:
                        if touched_top:
                            expected[system] += 1
                        touched_bottom, touched_top = True, False
                    elif level == n_levels - 1 and touched_bottom:
                        touched_top = True
        assert torch.equal(state.round_trips, expected), (pairs, state.round_trips, expected)
        assert int(expected.sum()) > 0


def test_two_level_round_trips_when_every_swap_is_accepted():
    # Flat density, two levels, pairs="all": the replicas exchange in every round (rounds
    # 1..9 in ten steps). Replica 0 starts at the bottom and completes trips in rounds
    # 2, 4, 6, 8; replica 1 first reaches the bottom in round 1, then completes 3, 5, 7, 9.
    model = bl.RBM(weights=torch.zeros(3, 2), dtype=torch.float32)
    scheme = ParallelTempering(bl.operators.get("gibbs"), [0.5, 1.0], pairs="all")
    state, infos = run_scheme(scheme, model, n_chains=5, n_steps=10, seed=0)
    assert state.round_trips.tolist() == [4 + 4] * 5
    assert scheme.summarize(infos, state).total_round_trips == 8 * 5


def test_step_contract_shapes_and_input_untouched():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = ParallelTempering(bl.operators.get("mixture", alpha=0.5), n_levels=5)
    state, _ = run_scheme(scheme, model, n_chains=13, n_steps=3, seed=0)
    before = scheme.state_tensors(state)
    new_state, info = scheme.step(model, state, generator=torch.Generator().manual_seed(9))
    for key, tensor in scheme.state_tensors(state).items():
        assert torch.equal(tensor, before[key]), f"step modified its input ({key})"
    samples = scheme.samples(new_state)
    assert samples.visible.shape == (13, 7) and samples.layers[1].shape == (13, 3)
    assert samples.dtype == torch.float32 and bool((samples.beta == 1).all())
    assert new_state.chains.n_chains == 5 * 13
    assert torch.equal(new_state.chains.beta.view(5, 13)[:, 0], ladders.uniform(5).betas.float())
    assert info.swap_accepted.shape == (4, 13) and info.swap_attempted.shape == (4,)
    assert info.flip_rate.shape == (5,) and info.round_trips.shape == (13,)
    assert torch.equal(torch.sort(new_state.replica, 0).values, torch.arange(5)[:, None].expand(5, 13))


# ---------------------------------------------------------------------------- reproducibility
def test_same_seed_same_run_and_bl_sample_entry_point():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    results = [
        bl.sample(
            model,
            sampler="pt",
            operator="flip",
            n_chains=13,
            n_sweeps=9,
            ladder=[0.2, 0.6, 1.0],
            generator=7,
            keep_every=3,
        )
        for _ in range(2)
    ]
    for a, b in zip(results[0].chains.layers, results[1].chains.layers, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(results[0].samples, results[1].samples) and results[0].samples.shape == (3, 13, 7)
    summary = results[0].info.summary
    assert summary.swap_acceptance.shape == (2,) and summary.round_trips.shape == (13,)
    other = bl.sample(
        model, sampler="pt", operator="flip", n_chains=13, n_sweeps=9, ladder=[0.2, 0.6, 1.0], generator=8
    )
    assert not torch.equal(other.chains.visible, results[0].chains.visible)


@pytest.mark.parametrize("swap_every", [1, 2])
def test_checkpoint_round_trip_continues_bit_identically(swap_every):
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = ParallelTempering(bl.operators.get("flip"), n_levels=4, swap_every=swap_every, pairs="all")
    state, _ = check_scheme_round_trip(scheme, model, seed=11, steps_before=3, steps_after=4)
    with pytest.raises(ValidationError, match="ladder"):
        ParallelTempering(bl.operators.get("flip"), [0.1, 0.2, 0.3, 1.0]).state_from_tensors(
            model, scheme.state_tensors(state)
        )


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ladder": [0.6, 0.5, 1.0]}, "increasing"),
        ({"ladder": [0.2, 0.8]}, "end at beta = 1"),
        ({"ladder": [1.0]}, "at least two"),
        ({"ladder": "hot"}, "ladder"),
        ({"n_levels": 1}, "n_levels"),
        ({"pairs": "random"}, "pairs"),
        ({"swap_every": 0}, "swap_every"),
    ],
)
def test_bad_options_are_refused_at_the_door(options, message):
    with pytest.raises(ValidationError, match=message):
        ParallelTempering(bl.operators.get("gibbs"), **options)


def test_bad_operator_and_unknown_option_are_refused():
    with pytest.raises(ValidationError, match="operator"):
        ParallelTempering(3)
    assert ParallelTempering("gibbs").operator.name == "gibbs"  # a name is resolved, not refused
    model = random_rbm(3, 2, seed=0, dtype=torch.float32)
    with pytest.raises(ValidationError, match="pt"):
        bl.sample(model, sampler="pt", n_chains=3, n_sweeps=2, temperatures=4)
