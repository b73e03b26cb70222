"""Tempered transitions: the exact kernel of one move is reversible, and the sampler draws from it.

The move's kernel is built by enumerating every path of a tiny RBM (16 joint states, up to
two heated levels): forward sweeps are ``transition_matrix``, reversed sweeps compose the
group matrices in reverse order, and the acceptance ``min(1, A)`` is applied path by path.
Then ``p·T = p`` and ``diag(p)·T`` is symmetric to 1e-10; Monte Carlo checks that the
sampler follows that kernel, and that its β = 1 samples on a bimodal RBM are exact.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.evaluation import group_transition_matrix, transition_matrix
from boltzlab.tempering import TemperedTransitions, ladders
from harness import check_scheme_round_trip, random_rbm

OPERATORS = ("gibbs", "flip", "mixture")


# ---------------------------------------------------------------------------- helpers
def state_codes(layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Index of each joint state in the order of ``joint_states`` (bit u = global unit u)."""
    bits = torch.cat(layers, dim=1).to(torch.int64)
    return (bits * 2 ** torch.arange(bits.shape[1], dtype=torch.int64)).sum(1)


def bimodal_rbm(
    n_visible: int, n_hidden: int, *, seed: int, tilt: float = 0.3
) -> tuple[bl.RBM, torch.Tensor]:
    """A two-mode RBM with weights in ±[2, 3] (inside U[−3, 3]) and its mode pattern.

    ``W_ij = s_i t_j m_ij`` with random signs and ``m ~ U[2, 3]``; ``b = −W·1/2 + tilt·s``,
    ``c = −Wᵀ·1/2``: symmetric under flipping every unit but for the tilt, so the modes
    "v ≈ s" and "v ≈ not s" carry unequal mass (about 0.81 / 0.19 for 5×4).
    """
    generator = torch.Generator().manual_seed(seed)
    s = torch.randint(0, 2, (n_visible,), generator=generator, dtype=torch.float64) * 2 - 1
    t = torch.randint(0, 2, (n_hidden,), generator=generator, dtype=torch.float64) * 2 - 1
    magnitude = 2.0 + torch.rand(n_visible, n_hidden, generator=generator, dtype=torch.float64)
    weights = s[:, None] * t[None, :] * magnitude
    model = bl.RBM(
        weights=weights,
        visible_bias=-weights.sum(1) / 2 + tilt * s,
        hidden_bias=-weights.sum(0) / 2,
        dtype=torch.float64,
    )
    return model, (s > 0).to(torch.float64)


def total_variation_bound(p: torch.Tensor, n_samples: int, *, failure_probability: float = 1e-4) -> float:
    """``E[TV]`` of ``n_samples`` exact draws (de Moivre's binomial mean absolute deviation,
    cell by cell) plus McDiarmid's deviation ``sqrt(log(1/δ) / 2n)``: one sample moves the TV
    by at most ``1/n``, so exact samples exceed this level with probability at most δ."""
    p = p.to(torch.float64).clamp(1e-300, 1.0)
    n = float(n_samples)
    m = torch.floor(n * p) + 1
    log_binomial = math.lgamma(n + 1) - torch.lgamma(m + 1) - torch.lgamma(n - m + 1)
    log_deviation = (
        math.log(2.0) + torch.log(m) + log_binomial + m * torch.log(p) + (n - m + 1) * torch.log1p(-p)
    )
    expected = 0.5 * float(torch.where(m <= n, log_deviation.exp(), torch.zeros_like(p)).sum()) / n
    return expected + math.sqrt(math.log(1.0 / failure_probability) / (2.0 * n))


def run(scheme, model, *, n_chains: int, n_steps: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    state = scheme.init(model, n_chains, generator=generator)
    infos = []
    for _ in range(n_steps):
        state, info = scheme.step(model, state, generator=generator)
        infos.append(info)
    return state, infos


# ---------------------------------------------------------------------------- exact kernel
def reversed_sweep_matrix(model, operator, beta: float) -> torch.Tensor:
    """``Ť``: the groups of one sweep in reverse order (for an RBM visible, then hidden)."""
    matrix = None
    for group in reversed(model.update_groups):
        step = group_transition_matrix(model, operator, group, beta=beta)
        matrix = step if matrix is None else matrix @ step
    return matrix


def tempered_transition_kernel(
    model, operator, betas: list[float], *, reverse_on_cooling: bool = True
) -> torch.Tensor:
    """Exact kernel of one move, by enumerating every path ``x̂_0 … x̂_S = x̌_S … x̌_0``.

    ``betas`` is the ascending ladder; Neal's level ``s`` is ``betas[K − 1 − s]``. The path
    tensor has one axis per state on the path: ``x̂_0, x̂_1, …, x̂_S, x̌_{S−1}, …, x̌_0``.
    """
    n_levels = len(betas)
    depth = n_levels - 1  # S
    neal = [betas[n_levels - 1 - s] for s in range(n_levels)]
    layers = joint_states(model.layer_sizes)
    log_f = [model.log_f(layers, beta) for beta in neal]
    n_axes = 2 * depth + 1
    n_states = log_f[0].numel()

    def on_axis(vector, axis):
        shape = [1] * n_axes
        shape[axis] = n_states
        return vector.view(shape)

    def on_axes(matrix, axis):
        shape = [1] * n_axes
        shape[axis], shape[axis + 1] = n_states, n_states
        return matrix.view(shape)

    probability = torch.ones([1] * n_axes, dtype=torch.float64)
    log_acceptance = torch.zeros([1] * n_axes, dtype=torch.float64)
    for s in range(1, depth + 1):  # heating: x̂_{s−1} (axis s−1) → x̂_s (axis s)
        probability = probability * on_axes(transition_matrix(model, operator, beta=neal[s]), s - 1)
        log_acceptance = log_acceptance + on_axis(log_f[s] - log_f[s - 1], s - 1)
    for s in range(depth, 0, -1):  # cooling: x̌_s (axis 2S − s) → x̌_{s−1} (axis 2S − s + 1)
        axis = 2 * depth - s
        cool = reversed_sweep_matrix(model, operator, neal[s]) if reverse_on_cooling else None
        if cool is None:
            cool = transition_matrix(model, operator, beta=neal[s])
        probability = probability * on_axes(cool, axis)
        log_acceptance = log_acceptance + on_axis(log_f[s - 1] - log_f[s], axis + 1)
    accepted = probability * log_acceptance.clamp_max(0.0).exp()
    kernel = accepted.reshape(n_states, -1, n_states).sum(1)
    return kernel + torch.diag(1.0 - kernel.sum(1))


LADDERS = ([0.3, 1.0], [0.0, 0.5, 1.0], [0.2, 0.45, 1.0])


@pytest.mark.parametrize("operator_name", OPERATORS)
def test_one_move_is_reversible_with_respect_to_the_target(operator_name):
    # For every ladder (S = 1 and S = 2), the enumerated kernel is stochastic, p·T = p to
    # 1e-10, and diag(p)·T is symmetric (Neal's detailed balance), in float64.
    operator = bl.operators.get(operator_name)
    for index, betas in enumerate(LADDERS):
        model = random_rbm(2, 2, scale=3.0, seed=20 + index, base_rate=True)
        p = joint_log_probabilities(model).exp()
        kernel = tempered_transition_kernel(model, operator, betas)
        assert bool((kernel >= -1e-15).all())
        assert torch.allclose(kernel.sum(1), torch.ones_like(p), atol=1e-12)
        residual = (p @ kernel - p).abs().max().item()
        assert residual < 1e-10, f"{operator_name}, betas={betas}: |pT − p| = {residual}"
        flow = p[:, None] * kernel
        assert (flow - flow.T).abs().max().item() < 1e-10


def test_cooling_with_forward_sweeps_is_not_exact():
    # The pairing matters, and the check above can tell: with forward sweeps on the way down
    # the kernel no longer leaves p invariant.
    model = random_rbm(2, 2, scale=3.0, seed=21, base_rate=True)
    p = joint_log_probabilities(model).exp()
    kernel = tempered_transition_kernel(
        model, bl.operators.get("gibbs"), [0.0, 0.5, 1.0], reverse_on_cooling=False
    )
    assert (p @ kernel - p).abs().max().item() > 1e-4


@pytest.mark.parametrize("operator_name", ["gibbs", "flip"])
@pytest.mark.parametrize("ladder_index", range(len(LADDERS)))
def test_sampler_draws_from_the_exact_kernel(operator_name, ladder_index):
    # From one fixed state, one move of many independent chains lands on each state with the
    # probability of the exact kernel's row (binomial z < 5; forbidden states never reached).
    betas = LADDERS[ladder_index]
    model = random_rbm(2, 2, scale=3.0, seed=20 + ladder_index, base_rate=True)
    operator = bl.operators.get(operator_name)
    kernel = tempered_transition_kernel(model, operator, betas)
    scheme = TemperedTransitions(operator, betas)
    n_chains, start = 40_000, 9
    units = torch.tensor([[(start >> u) & 1 for u in range(4)]], dtype=torch.float64).expand(n_chains, 4)
    state = scheme.init(model, n_chains, generator=torch.Generator().manual_seed(0))
    state = dataclasses.replace(
        state, chains=bl.Chains(layers=(units[:, :2].clone(), units[:, 2:].clone()), beta=state.chains.beta)
    )
    moved, info = scheme.step(model, state, generator=torch.Generator().manual_seed(1))
    counts = torch.bincount(state_codes(moved.chains.layers), minlength=16).to(torch.float64)
    row = kernel[start]
    expected = row * n_chains
    z = (counts - expected) / torch.sqrt(expected * (1 - row)).clamp_min(1.0)
    assert z.abs().max().item() < 5.0, (
        f"sampled move disagrees with the exact kernel: max z = {z.abs().max()}"
    )
    assert counts[row == 0].sum() == 0, "the sampler reached a state the exact kernel forbids"
    assert info.accepted.shape == (n_chains,) and info.log_acceptance.dtype == torch.float64


# ---------------------------------------------------------------------------- Monte Carlo
@pytest.mark.parametrize(
    ("operator_name", "target_sweeps"), [("gibbs", 0), ("flip", 0), ("mixture", 0), ("flip", 1)]
)
def test_beta_one_samples_match_the_exact_distribution(operator_name, target_sweeps):
    # Independent chains on a bimodal 5x4 RBM: after burn-in the states are exact samples
    # (TV below its sample-size bound; favoured-mode mass within 4 standard errors).
    model, pattern = bimodal_rbm(5, 4, seed=0)
    scheme = TemperedTransitions(bl.operators.get(operator_name), n_levels=6, target_sweeps=target_sweeps)
    n_chains = 10_000
    state, infos = run(scheme, model, n_chains=n_chains, n_steps=40, seed=2)
    chains = scheme.samples(state)
    p = joint_log_probabilities(model).exp()
    counts = torch.bincount(state_codes(chains.layers), minlength=p.numel()).to(torch.float64)
    tv = 0.5 * float((counts / n_chains - p).abs().sum())
    bound = total_variation_bound(p, n_chains)
    assert tv < bound, f"TT with {operator_name}: TV {tv:.4f} exceeds {bound:.4f}"
    in_mode = (joint_states(model.layer_sizes)[0] == pattern).to(torch.float64).mean(1) > 0.5
    exact = float(p[in_mode].sum())
    sampled = float(((chains.visible == pattern).to(torch.float64).mean(1) > 0.5).to(torch.float64).mean())
    z = (sampled - exact) / math.sqrt(exact * (1 - exact) / n_chains)
    assert abs(z) < 4.0, f"mode mass {sampled:.4f} vs exact {exact:.4f} (z = {z:.1f})"
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
        _, infos = run(scheme, model, n_chains=n_chains, n_steps=8, seed=6)
        per_chain = torch.stack([info.log_acceptance for info in infos[3:]]).clamp_max(0.0).exp().mean(0)
        means.append(float(per_chain.mean()))
        errors.append(float(per_chain.std()) / math.sqrt(n_chains))
    for finer in range(2):
        z = (means[finer] - means[finer + 1]) / math.hypot(errors[finer], errors[finer + 1])
        assert z > 4.0, f"acceptance {means} should fall with coarser ladders (z = {z:.1f})"


def test_every_move_is_accepted_when_the_density_is_flat():
    # Zero parameters, uniform base: log f_β(x) does not depend on x, so log A = 0.
    model = bl.RBM(weights=torch.zeros(7, 3), dtype=torch.float32)
    scheme = TemperedTransitions(bl.operators.get("flip"), n_levels=5)
    state, infos = run(scheme, model, n_chains=13, n_steps=4, seed=0)
    summary = scheme.summarize(infos, state)
    assert summary.acceptance_rate == 1.0
    assert summary.mean_acceptance_probability == pytest.approx(1.0, abs=1e-12)
    assert state.accepted.tolist() == [4] * 13


# ---------------------------------------------------------------------------- contract
def test_step_contract_shapes_and_input_untouched():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = TemperedTransitions(bl.operators.get("mixture", alpha=0.5), ladders.geometric(4, low=0.1))
    state, _ = run(scheme, model, n_chains=13, n_steps=2, seed=0)
    before = scheme.state_tensors(state)
    new_state, info = scheme.step(model, state, generator=torch.Generator().manual_seed(9))
    for key, tensor in scheme.state_tensors(state).items():
        assert torch.equal(tensor, before[key]), f"step modified its input ({key})"
    samples = scheme.samples(new_state)
    assert samples.visible.shape == (13, 7) and samples.layers[1].shape == (13, 3)
    assert samples.dtype == torch.float32 and bool((samples.beta == 1).all())
    assert info.accepted.dtype == torch.bool and info.accepted.shape == (13,)
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
