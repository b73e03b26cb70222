"""CAST (docs/algorithms.md §3.4): exact invariance of the coupled kernel, exchange semantics,
slow chains against enumeration, equal cost to two plain chains, reproducibility,
checkpoints and validation.

With γ = 0, exact weights and the swap refresh and exchange, a CAST step is exact on
``(k, x, y, s)`` — the fast chain's level and state, its stored β = 1 state and the slow
chain's state — for the target ``q(k, x)·p_1(y)·p_1(s)``: the fast chain's moves are
:func:`harness.simulated_tempering_kernel`'s, the slow chain is swept at β = 1, and every
``lag`` steps ``y ↔ s`` are exchanged. :func:`harness.check_scheme_exact` checks it.
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.tempering import CAST, ladders
from harness import (
    ExactKernel,
    Move,
    SchemeCase,
    apply_moves,
    assert_exact_samples,
    check_scheme_exact,
    check_scheme_round_trip,
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
from tolerances import INVARIANCE_ATOL

# (k, x, y, s) has K·S³ states: 3-unit models keep it below 2,000.
CASES = [
    *scheme_cases(shapes=((2, 1), (1, 2))),
    *scheme_cases(shapes=((1, 1, 1),), ladders=((0.0, 0.5, 1.0),)),
]


# ---------------------------------------------------------------------------- exact kernel
def exchange_move(case: SchemeCase, exchange: str) -> Move:
    """The lag exchange on (stored y, slow s): ``(y, s) → (s, y)`` ("swap") or ``(y, y)`` ("copy")."""
    n = case.n_states
    stored, slow = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    destination = slow * n + stored if exchange == "swap" else stored * n + stored
    matrix = torch.zeros(n * n, n * n, dtype=torch.float64)
    matrix[torch.arange(n * n), destination.reshape(-1)] = 1.0
    return Move(matrix, (2, 3))


def cast_exact(operator, case: SchemeCase) -> ExactKernel:
    """Two steps with ``lag = 2``: fast level move, sweep of fast and slow chains, store
    refresh; the second step ends with the exchange."""
    fast = simulated_tempering_kernel(operator, case, case.log_z())
    slow = Move(case.sweep(operator, case.n_levels - 1), (3,))
    exchange = exchange_move(case, "swap")
    plain = (*fast.steps[0], slow)
    p1 = case.p(-1)
    return ExactKernel(
        sizes=(*fast.sizes, case.n_states),
        target=torch.outer(fast.target, p1).reshape(-1),
        steps=(plain, (*plain, exchange)),
        reversible=(*fast.reversible, exchange),
    )


def place(state, case: SchemeCase, index: int):
    fast_index, slow_code = divmod(index, case.n_states)
    slow = bl.Chains(layers=case.states(slow_code, state.slow.n_chains), beta=state.slow.beta)
    return type(state)(
        slow=slow,
        fast=place_simulated_tempering(state.fast, case, fast_index),
        n_steps=state.n_steps,
        n_exchanges=state.n_exchanges,
    )


def locate(state, case: SchemeCase) -> torch.Tensor:
    return locate_simulated_tempering(state.fast, case) * case.n_states + case.codes(state.slow.layers)


def test_coupled_kernel_is_exact_and_the_sampler_follows_it():
    check_scheme_exact(
        lambda operator, case: CAST(operator, case.betas, lag=2, gamma=0.0, log_weights=case.log_z()),
        cast_exact,
        place=place,
        locate=locate,
        cases=CASES,
    )


@pytest.mark.parametrize(
    "cases",
    [potts_scheme_cases(ladders=((0.3, 1.0),))[:1], spin_scheme_cases(ladders=((0.3, 1.0),))[:1]],
    ids=["potts", "spin"],
)
def test_potts_and_spin_models_coupled_kernel_and_sampler(cases):
    check_scheme_exact(
        lambda operator, case: CAST(operator, case.betas, lag=2, gamma=0.0, log_weights=case.log_z()),
        cast_exact,
        place=place,
        locate=locate,
        cases=cases,
    )


def test_copy_exchange_keeps_the_slow_marginal_but_not_the_product():
    # Copying the stored state into the slow chain gives it an exact p_1 draw, but the slow
    # chain and the store are then one state, not two independent ones.
    case = CASES[3]
    kernel = cast_exact(bl.operators.get("flip"), case)
    copied = apply_moves(kernel.target, [exchange_move(case, "copy")], kernel.sizes).view(kernel.sizes)
    assert (copied.sum((0, 1, 2)) - case.p(-1)).abs().max().item() < INVARIANCE_ATOL
    assert (copied.reshape(-1) - kernel.target).abs().max().item() > 1e-3


def rows(chains: bl.Chains) -> list[tuple[float, ...]]:
    """The joint states of the chains as a sorted list (a multiset)."""
    return sorted(tuple(row.tolist()) for row in torch.cat(chains.layers, dim=1))


@pytest.mark.parametrize("exchange", ["swap", "copy"])
def test_exchange_semantics(exchange):
    """An exchanging step equals the non-exchanging step followed by the exchange (it draws no
    random numbers); "swap" preserves the multiset of slow and stored states, "copy" duplicates."""
    model = random_rbm(7, 3, seed=4, dtype=torch.float32)
    exchanging = CAST("flip", n_levels=4, low=0.5, lag=1, exchange=exchange)
    plain = CAST("flip", n_levels=4, low=0.5, lag=10**6, exchange=exchange)
    g = torch.Generator().manual_seed(0)
    state = exchanging.init(model, 13, generator=g)
    for _ in range(3):
        state, _ = plain.step(model, state, generator=g)
    seed = int(torch.randint(0, 2**31, (1,), generator=g))
    after, info = exchanging.step(model, state, generator=torch.Generator().manual_seed(seed))
    before, _ = plain.step(model, state, generator=torch.Generator().manual_seed(seed))
    assert info.exchanged and after.n_exchanges == state.n_exchanges + 1
    for a, b in zip(after.slow.layers, before.fast.last_target.layers, strict=True):
        assert torch.equal(a, b), "the slow chain takes the stored beta = 1 state"
    stored = before.slow if exchange == "swap" else before.fast.last_target
    for a, b in zip(after.fast.last_target.layers, stored.layers, strict=True):
        assert torch.equal(a, b)
    # The fast chains' own (x, k) and weights are untouched by the exchange.
    assert torch.equal(after.fast.levels, before.fast.levels)
    assert torch.equal(after.fast.log_weights, before.fast.log_weights)
    for a, b in zip(after.fast.chains.layers, before.fast.chains.layers, strict=True):
        assert torch.equal(a, b)
    if exchange == "swap":
        assert sorted(rows(after.slow) + rows(after.fast.last_target)) == sorted(
            rows(before.slow) + rows(before.fast.last_target)
        )
    assert bool((after.slow.beta == 1).all()) and bool((after.fast.last_target.beta == 1).all())


@pytest.mark.slow  # 4 s; CAST's coupled kernel and its sampler are checked exactly above (fast)
def test_slow_chains_match_exact_distribution():
    """γ = 0, exact weights, lag 2 on the multimodal 14-unit RBM: the slow chains' β = 1
    states match p (TV bound from the sample size, δ = FALSE_ALARM); independent chains, one
    snapshot each after burn-in."""
    model = multimodal_rbm()
    ladder = ladders.uniform(6)
    log_weights = ladder_log_z(model, ladder.betas)
    n_chains = 5000
    result = bl.sample(
        model,
        sampler="cast",
        operator="flip",
        n_chains=n_chains,
        n_sweeps=1,
        burn_in=500,
        generator=77,
        ladder=ladder,
        log_weights=log_weights,
        gamma=0.0,
        lag=2,
    )
    assert_exact_samples(model, (result.chains.visible,), label="slow chains")
    final = result.info.final_state
    assert final.n_exchanges == 250
    assert_exact_samples(model, (final.fast.last_target.visible,), label="stored beta = 1 states")


class CountingOperator:
    """Wraps an operator and records the batch size of every sweep."""

    def __init__(self, operator):
        self.inner = operator
        self.name = operator.name
        self.batch_sizes: list[int] = []

    def step(self, model, chains, **options):
        self.batch_sizes.append(chains.n_chains)
        return self.inner.step(model, chains, **options)

    def probability_on(self, logits, current):
        return self.inner.probability_on(logits, current)


def test_one_sweep_and_one_marginal_pass_per_step():
    """Equal cost to two plain chains: one operator sweep over the 2n chains and one
    marginal_terms pass per step (a plain sweep also makes two matrix products)."""
    model = random_rbm(7, 3, seed=4, dtype=torch.float32)
    calls = []
    original = model.marginal_terms

    def counting_marginal_terms(layers):
        calls.append(layers[0].shape[0])
        return original(layers)

    model.marginal_terms = counting_marginal_terms
    operator = CountingOperator(bl.operators.get("flip"))
    scheme = CAST(operator, n_levels=5)
    g = torch.Generator().manual_seed(1)
    state = scheme.init(model, 13, generator=g)
    for _ in range(4):
        state, _ = scheme.step(model, state, generator=g)
    assert operator.batch_sizes == [26] * 4
    assert calls == [26] * 4


def test_defaults_summary_and_step_contract():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = CAST("gibbs")
    assert scheme.lag == 50 and scheme.exchange == "swap" and scheme.fast.gamma_at(123) == 10.0
    assert scheme.ladder.size == 20 and float(scheme.ladder.betas[0]) == pytest.approx(0.9)
    # adapt=False: the scheme with the paper's defaults, as the CAST trainer runs it (bl.sample
    # adapts, then freezes, by default: tests/tempering/test_adaptation.py).
    result = bl.sample(
        model,
        sampler="cast",
        operator="flip",
        n_chains=13,
        n_sweeps=120,
        generator=3,
        keep_every=30,
        adapt=False,
    )
    summary = result.info.summary
    assert result.info.adaptation is None
    assert result.samples.shape == (4, 13, 7) and result.chains.n_chains == 13
    assert summary.n_exchanges == 2 and summary.lag == 50
    assert summary.occupancy.shape == (20,) and abs(float(summary.occupancy.sum()) - 1) < 1e-12
    assert summary.fast.trajectories.shape == (120, 13)
    assert 0.0 < summary.acceptance_rate <= 1.0
    state = result.info.final_state
    snapshot = {key: value.clone() for key, value in scheme.state_tensors(state).items()}
    g = torch.Generator().manual_seed(0)
    new, _ = scheme.step(model, state, generator=g)
    for key, value in scheme.state_tensors(state).items():
        assert torch.equal(value, snapshot[key]), f"step modified {key}"
    assert new.n_steps == state.n_steps + 1 and bool((new.slow.beta == 1).all())


def test_cast_reproducible_and_round_trip():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    runs = [
        bl.sample(
            model,
            sampler="cast",
            operator="flip",
            n_chains=13,
            n_sweeps=25,
            generator=seed,
            keep_every=5,
            lag=4,
        )
        for seed in (6, 6, 7)
    ]
    assert torch.equal(runs[0].samples, runs[1].samples)
    assert not torch.equal(runs[0].samples, runs[2].samples)
    for exchange, shared in (("swap", False), ("copy", True)):
        scheme = CAST("flip", n_levels=6, lag=3, exchange=exchange, shared_weights=shared)
        state, restored = check_scheme_round_trip(scheme, model, seed=12, steps_before=5, steps_after=8)
        assert restored.n_exchanges == state.n_exchanges == 4


def test_validation_errors():
    for options in ({"lag": 0}, {"lag": 2.5}, {"exchange": "trade"}, {"gamma": -1.0}, {"n_levels": 1}):
        with pytest.raises(ValidationError):
            CAST("gibbs", **options)
    model = random_rbm(4, 3, seed=1)
    scheme = CAST("gibbs", n_levels=3)
    tensors = scheme.state_tensors(scheme.init(model, 3, generator=torch.Generator()))
    with pytest.raises(ValidationError):
        scheme.state_from_tensors(
            model, {key: value for key, value in tensors.items() if key != "n_exchanges"}
        )
    mismatched = dict(tensors)
    mismatched["slow.layer0"] = tensors["slow.layer0"][:2]
    mismatched["slow.layer1"] = tensors["slow.layer1"][:2]
    with pytest.raises(ValidationError):
        scheme.state_from_tensors(model, mismatched)
    with pytest.raises(ValidationError):
        bl.sample(model, sampler="cast", n_chains=3, n_sweeps=2, lag=-1)
