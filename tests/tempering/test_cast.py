"""CAST (ALGORITHMS.md §3.4): exchange semantics, exact invariance of the coupled kernel,
slow chains against enumeration, equal cost to two plain chains, reproducibility,
checkpoints and validation."""

from __future__ import annotations

import pytest
import torch

# Shared exact-kernel and statistics helpers; pytest puts this directory on sys.path.
from test_simulated import (
    exact_log_weights,
    joint_target,
    multimodal_rbm,
    st_kernel,
    total_variation,
    tv_threshold,
    visible_probabilities,
)

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import transition_matrix
from boltzlab.tempering import CAST, ladders
from harness import check_scheme_round_trip, random_rbm


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


def test_coupled_kernel_is_exactly_invariant():
    """Exact law over (slow x_s, fast (k, x), stored y) of a 2x2 RBM with K = 3, γ = 0, exact
    weights: p_1 ⊗ q ⊗ p_1 is invariant under a step and under the swap exchange; the copy
    exchange keeps the slow marginal exact but not the product."""
    model = random_rbm(2, 2, scale=3.0, seed=5)
    operator = bl.operators.get("flip")
    betas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    log_weights = exact_log_weights(model, betas)
    fast = st_kernel(model, operator, betas, log_weights, "metropolis")  # (K·S, K·S)
    slow = transition_matrix(model, operator, beta=1.0)  # (S, S)
    p1 = joint_log_probabilities(model, 1.0).exp()
    q = joint_target(model, betas, log_weights)
    n_states = p1.numel()
    product = p1[:, None, None] * q[None, :, None] * p1[None, None, :]

    stepped = torch.einsum("abc,ad,be->dec", product, slow, fast)
    top = slice(2 * n_states, 3 * n_states)
    refreshed = stepped.clone()
    refreshed[:, top, :] = stepped[:, top, :].transpose(1, 2)  # swap refresh at the top level
    assert (refreshed - product).abs().max().item() < 1e-12

    swapped = product.transpose(0, 2)
    assert (swapped - product).abs().max().item() < 1e-15
    copied = torch.diag_embed(product.sum(0)).permute(2, 0, 1)  # slow <- stored, stored kept
    assert (copied.sum((1, 2)) - p1).abs().max().item() < 1e-12
    assert (copied - product).abs().max().item() > 1e-3


def test_slow_chains_match_exact_distribution():
    """γ = 0, exact weights, lag 2 on the multimodal 14-unit RBM: the slow chains' β = 1
    states match p (TV bound from the sample size, δ = 1e-4); independent chains, one
    snapshot each after burn-in."""
    model = multimodal_rbm()
    p = visible_probabilities(model)
    ladder = ladders.uniform(6)
    log_weights = exact_log_weights(model, ladder.betas.to(model.dtype).to(torch.float64))
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
    distance = total_variation(result.chains.visible, p)
    assert distance < tv_threshold(p, n_chains), f"TV {distance:.4f} >= {tv_threshold(p, n_chains):.4f}"
    final = result.info.final_state
    assert final.n_exchanges == 250
    assert total_variation(final.fast.last_target.visible, p) < tv_threshold(p, n_chains)


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
    result = bl.sample(
        model, sampler="cast", operator="flip", n_chains=13, n_sweeps=120, generator=3, keep_every=30
    )
    summary = result.info.summary
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
