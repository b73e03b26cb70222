"""Simulated tempering with fixed weights (ALGORITHMS.md §2.3).

Exact invariance of the ST kernel on the joint (x, k) space of tiny RBMs, the sampled step
against that exact kernel, the stored β = 1 states (swap refresh exact, copy refresh biased),
Monte Carlo agreement with enumeration on a multimodal 14-unit RBM, diagnostics,
reproducibility, checkpoints and validation.

The exact kernels here are re-derived from the model's summed-out densities, not taken from
``simulated.py``; ``test_sampled_step_matches_exact_kernel`` ties the code to them.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import exact_log_z, joint_log_probabilities
from boltzlab.estimators.exact import joint_states
from boltzlab.evaluation import transition_matrix
from boltzlab.models.base import log_f_marginal, log_f_marginal_all
from boltzlab.models.rbm import all_binary_states
from boltzlab.tempering import SimulatedTempering, ladders
from boltzlab.tempering.simulated import SimulatedTemperingState, log_proposal_ratio, round_trips
from harness import check_scheme_round_trip, random_rbm

# ----------------------------------------------------------------------------- exact kernels


def state_codes(layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Joint-state index of each row: global unit u is bit u (visible units first)."""
    bits = torch.cat(layers, dim=1).to(torch.int64)
    return (bits * 2 ** torch.arange(bits.shape[1])).sum(1)


def exact_log_weights(model: bl.RBM, betas: torch.Tensor) -> torch.Tensor:
    """``log Z(β_k)`` at each level, by enumeration (float64)."""
    return torch.tensor([exact_log_z(model, float(beta)) for beta in betas], dtype=torch.float64)


def joint_target(model: bl.RBM, betas: torch.Tensor, log_weights: torch.Tensor) -> torch.Tensor:
    """``q(x, k) ∝ f_k(x)·exp(−w_k)`` over (level, joint state), level-major; shape (K·S,)."""
    layers = joint_states(model.layer_sizes)
    log_q = torch.stack([model.log_f(layers, float(beta)) for beta in betas]) - log_weights[:, None]
    return torch.softmax(log_q.flatten(), 0)


def level_move_matrix(
    model: bl.RBM, betas: torch.Tensor, log_weights: torch.Tensor, level_move: str
) -> torch.Tensor:
    """Exact matrix of the level move plus the hidden redraw of chains whose level changed.

    Index ``k·S + s``. Metropolis: propose k ± 1 (½ each, forced at the ends) and accept with
    the summed-out density ratio, the weights and the proposal ratio; Gibbs: k' ~ q(k' | v).
    A chain that changes level gets ``h' ~ p_{β_k'}(h | v)``.
    """
    layers = joint_states(model.layer_sizes)
    n_states, n_levels = layers[0].shape[0], betas.numel()
    n_visible, n_hidden = model.layer_sizes
    terms = model.marginal_terms(layers)
    log_f = log_f_marginal_all(terms, betas)
    visible_code = state_codes((layers[0],))
    hidden_states = all_binary_states(n_hidden)
    on = torch.sigmoid(betas[None, :, None] * terms.preactivation.to(torch.float64)[:, None, :])
    hidden_probability = (
        torch.where(hidden_states.bool()[None, None], on[:, :, None, :], 1 - on[:, :, None, :])
    ).prod(-1)  # (S, K, 2^J)
    matrix = torch.zeros(n_states * n_levels, n_states * n_levels, dtype=torch.float64)

    def move(row: int, state: int, level: int, probability: float) -> None:
        for hidden in range(2**n_hidden):
            column = level * n_states + int(visible_code[state]) + (hidden << n_visible)
            matrix[row, column] += probability * hidden_probability[state, level, hidden]

    for level in range(n_levels):
        for state in range(n_states):
            row = level * n_states + state
            if level_move == "metropolis":
                inner = 0 < level < n_levels - 1
                proposals = [level - 1, level + 1] if inner else [1 if level == 0 else n_levels - 2]
                forward = 0.5 if inner else 1.0
                for proposed in proposals:
                    backward = 0.5 if 0 < proposed < n_levels - 1 else 1.0
                    log_ratio = (
                        log_f[state, proposed]
                        - log_weights[proposed]
                        - log_f[state, level]
                        + log_weights[level]
                        + math.log(backward / forward)
                    )
                    accept = min(1.0, math.exp(float(log_ratio)))
                    move(row, state, proposed, forward * accept)
                    matrix[row, row] += forward * (1.0 - accept)
            else:
                probabilities = torch.softmax(log_f[state] - log_weights, 0)
                for proposed in range(n_levels):
                    if proposed == level:
                        matrix[row, row] += probabilities[proposed]
                    else:
                        move(row, state, proposed, float(probabilities[proposed]))
    return matrix


def sweep_matrix(model: bl.RBM, operator, betas: torch.Tensor) -> torch.Tensor:
    """Block-diagonal matrix of one operator sweep at each level's β."""
    n_states, n_levels = 2 ** sum(model.layer_sizes), betas.numel()
    matrix = torch.zeros(n_states * n_levels, n_states * n_levels, dtype=torch.float64)
    for level in range(n_levels):
        block = slice(level * n_states, (level + 1) * n_states)
        matrix[block, block] = transition_matrix(model, operator, beta=float(betas[level]))
    return matrix


def st_kernel(model, operator, betas, log_weights, level_move) -> torch.Tensor:
    """One ST step on (x, k): the level move, then the sweep (the order ``step`` uses)."""
    return level_move_matrix(model, betas, log_weights, level_move) @ sweep_matrix(model, operator, betas)


def refresh(distribution: torch.Tensor, n_states: int, mode: str) -> torch.Tensor:
    """Apply the β = 1 store refresh to a distribution over ((k, x), y), shape (K·S, S)."""
    out = distribution.clone()
    top = slice(out.shape[0] - n_states, out.shape[0])
    block = distribution[top]
    out[top] = block.T if mode == "swap" else torch.diag(block.sum(1))
    return out


EXACT_MODELS = {
    "3x2": lambda: random_rbm(3, 2, scale=3.0, seed=1),
    "2x3-base-rate": lambda: random_rbm(2, 3, scale=3.0, seed=2, base_rate=True),
}


# ----------------------------------------------------------------------------- statistics


def tv_threshold(p: torch.Tensor, n: int, *, delta: float = 1e-4) -> float:
    """A bound that the TV distance of ``n`` iid samples from ``p`` exceeds with probability < δ.

    ``E[TV] ≤ ½ Σ_x sqrt(p(1 − p)/n)`` (Jensen, cell by cell), and one sample moves TV by at
    most 1/n, so McDiarmid gives ``P(TV > E[TV] + ε) ≤ exp(−2nε²)``.
    """
    expected = 0.5 * torch.sqrt(p * (1 - p) / n).sum().item()
    return expected + math.sqrt(math.log(1 / delta) / (2 * n))


def total_variation(visible: torch.Tensor, p: torch.Tensor) -> float:
    counts = torch.bincount(state_codes((visible,)), minlength=p.numel()).to(torch.float64)
    return 0.5 * (counts / visible.shape[0] - p).abs().sum().item()


def visible_probabilities(model: bl.RBM) -> torch.Tensor:
    states = all_binary_states(model.n_visible, dtype=model.dtype)
    return torch.softmax(log_f_marginal(model.marginal_terms(states), 1.0), 0).to(torch.float64)


def multimodal_rbm() -> bl.RBM:
    """8 visible x 6 hidden, weights U[-3, 3]: p(v) has three local maxima (single flips)."""
    return random_rbm(8, 6, scale=3.0, seed=7, dtype=torch.float32)


def local_maxima(p: torch.Tensor, n_units: int) -> int:
    codes = torch.arange(p.numel())
    neighbours = codes[:, None] ^ (1 << torch.arange(n_units))[None, :]
    return int((p[:, None] > p[neighbours]).all(1).sum())


# ----------------------------------------------------------------------------- tests


def test_proposal_ratio_is_two_or_half_at_the_ends():
    levels = torch.tensor([0, 1, 1, 2, 3, 2])
    proposed = torch.tensor([1, 0, 2, 3, 2, 1])
    expected = torch.tensor([-1.0, 1.0, 0.0, 1.0, -1.0, 0.0], dtype=torch.float64) * math.log(2.0)
    assert torch.allclose(log_proposal_ratio(levels, proposed, 4), expected, atol=0, rtol=1e-15)
    # Two levels: both are ends, the proposal is symmetric.
    two = log_proposal_ratio(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    assert torch.equal(two, torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("model_name", sorted(EXACT_MODELS))
@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
@pytest.mark.parametrize("operator_name", ["gibbs", "flip"])
def test_st_kernel_leaves_joint_target_invariant(model_name, level_move, operator_name):
    model = EXACT_MODELS[model_name]()
    operator = bl.operators.get(operator_name)
    betas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    exact = exact_log_weights(model, betas)
    # Exact log Z_k (uniform occupancy) and arbitrary weights: q(x, k) is invariant for any w.
    for log_weights in (exact, torch.tensor([0.7, -1.3, 0.0], dtype=torch.float64)):
        kernel = st_kernel(model, operator, betas, log_weights, level_move)
        assert torch.allclose(kernel.sum(1), torch.ones(kernel.shape[0], dtype=torch.float64), atol=1e-12)
        q = joint_target(model, betas, log_weights)
        residual = (q @ kernel - q).abs().max().item()
        assert residual < 1e-10, f"|qM - q| = {residual}"
    # With the exact weights every level is equally likely.
    q = joint_target(model, betas, exact).reshape(3, -1).sum(1)
    assert torch.allclose(q, torch.full((3,), 1 / 3, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("level_move", ["metropolis", "gibbs"])
def test_sampled_step_matches_exact_kernel(level_move):
    """One ``step`` from a fixed (x, k), many chains: counts match the exact row (z < 5)."""
    model = random_rbm(3, 2, scale=3.0, seed=1)
    operator = bl.operators.get("flip")
    ladder = ladders.explicit([0.0, 0.5, 1.0])
    log_weights = exact_log_weights(model, ladder.betas)
    kernel = st_kernel(model, operator, ladder.betas, log_weights, level_move)
    # Copy refresh: a chain at the top keeps its swept state, so the row of (x, k) is observed
    # directly (the refresh itself is checked in test_after_sweep_refreshes_only_chains_at_the_top).
    scheme = SimulatedTempering(
        operator, ladder, log_weights=log_weights, level_move=level_move, target_refresh="copy"
    )
    n_chains, n_states = 40_000, 32
    for start_level, start_state in ((0, 5), (1, 22), (2, 9)):
        layers = tuple(
            layer[start_state : start_state + 1].expand(n_chains, -1).clone()
            for layer in joint_states(model.layer_sizes)
        )
        levels = torch.full((n_chains,), start_level, dtype=torch.int64)
        state = SimulatedTemperingState(
            chains=bl.Chains(layers=layers, beta=ladder.betas[levels]),
            levels=levels,
            log_weights=log_weights - log_weights[-1],
            last_target=bl.Chains(layers=layers, beta=torch.ones(n_chains, dtype=torch.float64)),
            visits=torch.zeros(3, dtype=torch.int64),
            n_steps=0,
        )
        new, _ = scheme.step(model, state, generator=torch.Generator().manual_seed(start_state))
        cells = new.levels * n_states + state_codes(new.chains.layers)
        counts = torch.bincount(cells, minlength=3 * n_states).to(torch.float64)
        row = kernel[start_level * n_states + start_state]
        expected = row * n_chains
        z = (counts - expected) / torch.sqrt(expected * (1 - row)).clamp_min(1.0)
        assert z.abs().max().item() < 5.0, f"start ({start_level}, {start_state}): max z {z.abs().max():.2f}"
        assert counts[row == 0].sum() == 0, "the sampler reached a state the kernel forbids"


def test_swap_refresh_is_exact_and_copy_refresh_is_biased():
    """On ((x, k), y): the swap refresh keeps q(x, k)·p_1(y) invariant; the paper's copy does not.

    The copy refresh's stored state has density ∝ p_1(x)·E[return time to β = 1 | x] (Kac),
    which differs from p_1 whenever a sweep does not mix completely.
    """
    model = random_rbm(3, 2, scale=3.0, seed=1)
    betas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    log_weights = exact_log_weights(model, betas)
    kernel = st_kernel(model, bl.operators.get("gibbs"), betas, log_weights, "metropolis")
    q = joint_target(model, betas, log_weights)
    p1 = joint_log_probabilities(model, 1.0).exp()
    product = torch.outer(q, p1)
    swapped = refresh(kernel.T @ product, 32, "swap")
    assert (swapped - product).abs().max().item() < 1e-12
    distribution = product
    for _ in range(3000):  # power iteration to the copy refresh's stationary law
        distribution = refresh(kernel.T @ distribution, 32, "copy")
    assert (distribution.sum(1) - q).abs().max().item() < 1e-10, "the (x, k) marginal is still q"
    bias = 0.5 * (distribution.sum(0) - p1).abs().sum().item()
    assert bias > 0.05, f"expected a visible return-time bias, got TV {bias}"


def test_after_sweep_refreshes_only_chains_at_the_top():
    model = random_rbm(4, 3, seed=3)
    ladder = ladders.uniform(3)
    g = torch.Generator().manual_seed(0)
    for mode in ("swap", "copy"):
        scheme = SimulatedTempering("gibbs", ladder, target_refresh=mode)
        state = scheme.init(model, 5, generator=g)
        levels = torch.tensor([2, 0, 2, 1, 0])
        state = SimulatedTemperingState(
            chains=bl.Chains(layers=state.chains.layers, beta=ladder.betas[levels]),
            levels=levels,
            log_weights=state.log_weights,
            last_target=state.last_target,
            visits=state.visits,
            n_steps=3,
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


@pytest.mark.parametrize(("operator_name", "level_move"), [("flip", "metropolis"), ("gibbs", "gibbs")])
def test_st_samples_match_exact_distribution(operator_name, level_move):
    """ST with exact weights on a multimodal 14-unit RBM: β = 1 samples match p, occupancy uniform.

    Independent chains, one snapshot each after burn-in, so the samples are iid draws from
    the chain's law at that time; a TV bound from the sample size (δ = 1e-4) and multinomial
    z-scores for the level counts.
    """
    model = multimodal_rbm()
    p = visible_probabilities(model)
    assert local_maxima(p, model.n_visible) >= 3
    ladder = ladders.uniform(6)
    log_weights = exact_log_weights(model, ladder.betas.to(model.dtype).to(torch.float64))
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
        log_weights=log_weights,
        level_move=level_move,
    )
    distance = total_variation(result.chains.visible, p)
    assert result.chains.n_chains == n_chains and bool((result.chains.beta == 1).all())
    assert distance < tv_threshold(p, n_chains), f"TV {distance:.4f} >= {tv_threshold(p, n_chains):.4f}"
    final = result.info.final_state
    at_top = final.chains.select(final.levels == ladder.size - 1)
    assert total_variation(at_top.visible, p) < tv_threshold(p, at_top.n_chains)
    counts = torch.bincount(final.levels, minlength=ladder.size).to(torch.float64)
    share = 1 / ladder.size
    z = (counts - n_chains * share) / math.sqrt(n_chains * share * (1 - share))
    assert z.abs().max().item() < 4.0, f"occupancy {counts.tolist()} is not uniform"


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


def test_round_trips_and_summary():
    trajectories = torch.tensor([[0, 2], [1, 2], [2, 1], [1, 0], [0, 1], [1, 2], [2, 2], [1, 0]])
    # chain 0: 0 -> 2 -> 0 -> 2 (three one-way trips, one round trip); chain 1: 2 -> 0 -> 2 -> 0.
    assert torch.equal(round_trips(trajectories, 3), torch.tensor([1, 1]))
    model = random_rbm(7, 3, seed=4)
    result = bl.sample(
        model, sampler="st", operator="gibbs", n_chains=11, n_sweeps=40, generator=0, n_levels=4
    )
    summary = result.info.summary
    assert summary.trajectories.shape == (40, 11)
    assert summary.occupancy.shape == (4,) and abs(float(summary.occupancy.sum()) - 1) < 1e-12
    assert int(summary.visits.sum()) == 40 * 11
    assert summary.pair_acceptance.shape == (3,) and 0.0 <= summary.acceptance_rate <= 1.0
    assert summary.round_trips.shape == (11,)
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
        {"level_move": "heatbath"},
        {"target_refresh": "move"},
        {"ladder": [1.0, 0.5]},
        {"ladder": [1.0]},
        {"ladder": ladders.uniform(4), "n_levels": 5},
        {"n_levels": 0},
        {"n_levels": 4, "log_weights": [0.0, 1.0]},
        {"n_levels": 2, "log_weights": [math.inf, 0.0]},
        {"ladder": "hot"},
    ]
    for options in bad_options:
        with pytest.raises(ValidationError):
            SimulatedTempering("gibbs", **options)
    with pytest.raises(ValidationError):
        SimulatedTempering(object())
    scheme = SimulatedTempering("gibbs", n_levels=4)
    with pytest.raises(ValidationError):
        scheme.init(model, 0, generator=torch.Generator())
    state = scheme.init(model, 3, generator=torch.Generator())
    tensors = scheme.state_tensors(state)
    with pytest.raises(ValidationError):
        SimulatedTempering("gibbs", n_levels=5).state_from_tensors(model, tensors)
    with pytest.raises(ValidationError):
        scheme.state_from_tensors(model, {key: value for key, value in tensors.items() if key != "levels"})
    with pytest.raises(ValidationError):
        scheme.state_from_tensors(random_rbm(5, 3, seed=1), tensors)
    with pytest.raises(ValidationError):
        bl.sample(model, sampler="st", n_chains=3, n_sweeps=2, no_such_option=1)
