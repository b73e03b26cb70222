"""Parallel tempering: exact invariance on the product space, exact β = 1 samples, bookkeeping.

The β = 1 marginal of PT is the model only if ``Π_k p_{β_k}`` is invariant under a whole
step (the swap round, with its summed-out acceptance and the redraw of the hidden layer,
and a sweep of every replica). That is checked twice: with exact matrices on the product space
of tiny RBMs (and the sampler is checked to draw from those matrices), and by Monte Carlo on
a bimodal RBM whose plain Gibbs chains are visibly stuck at the same budget.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.evaluation import transition_matrix
from boltzlab.tempering import ParallelTempering, ladders
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

    ``W_ij = s_i t_j m_ij`` with random signs ``s, t`` and ``m ~ U[2, 3]``; the biases
    ``b = −W·1/2 + tilt·s``, ``c = −Wᵀ·1/2`` make the energy symmetric under flipping every
    unit except for the tilt, so the modes "v ≈ s" and "v ≈ not s" carry unequal mass
    (about 0.81 / 0.19 for 5×4) while a Gibbs chain started from the uniform base keeps
    roughly half its chains in each.
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


def expected_total_variation(p: torch.Tensor, n_samples: int) -> float:
    """``E[TV(p̂, p)]`` of ``n_samples`` independent draws from ``p``, exactly.

    ``TV = ½ Σ_x |p̂_x − p_x|`` and each count is binomial, whose mean absolute deviation
    has de Moivre's closed form ``E|X − np| = 2 m C(n, m) p^m (1 − p)^{n−m+1}``, m = ⌊np⌋ + 1.
    """
    p = p.to(torch.float64).clamp(1e-300, 1.0)
    n = float(n_samples)
    m = torch.floor(n * p) + 1
    log_binomial = math.lgamma(n + 1) - torch.lgamma(m + 1) - torch.lgamma(n - m + 1)
    log_deviation = (
        math.log(2.0) + torch.log(m) + log_binomial + m * torch.log(p) + (n - m + 1) * torch.log1p(-p)
    )
    return 0.5 * float(torch.where(m <= n, log_deviation.exp(), torch.zeros_like(p)).sum()) / n


def total_variation_bound(p: torch.Tensor, n_samples: int, *, failure_probability: float = 1e-4) -> float:
    """A level below which the TV of ``n_samples`` exact draws stays with prob. ≥ 1 − failure.

    One sample moves the empirical TV by at most ``1/n``, so McDiarmid's inequality gives
    ``P(TV > E[TV] + t) ≤ exp(−2 n t²)``.
    """
    slack = math.sqrt(math.log(1.0 / failure_probability) / (2.0 * n_samples))
    return expected_total_variation(p, n_samples) + slack


def assert_matches_exact(model: bl.RBM, chains: bl.Chains, pattern: torch.Tensor, label: str) -> float:
    """Independent β = 1 samples match the exact joint distribution; returns their TV."""
    p = joint_log_probabilities(model).exp()
    n = chains.n_chains
    counts = torch.bincount(state_codes(chains.layers), minlength=p.numel()).to(torch.float64)
    tv = 0.5 * float((counts / n - p).abs().sum())
    bound = total_variation_bound(p, n)
    assert tv < bound, f"{label}: TV {tv:.4f} from the exact distribution exceeds {bound:.4f}"
    # The mass of the favoured mode, the quantity a tempering bug would get wrong first.
    visible = joint_states(model.layer_sizes)[0]
    in_mode = (visible == pattern).to(torch.float64).mean(1) > 0.5
    exact = float(p[in_mode].sum())
    sampled = float((chains.visible == pattern).to(torch.float64).mean(1).gt(0.5).to(torch.float64).mean())
    z = (sampled - exact) / math.sqrt(exact * (1 - exact) / n)
    assert abs(z) < 4.0, f"{label}: mode mass {sampled:.4f} vs exact {exact:.4f} (z = {z:.1f})"
    return tv


def run(scheme, model, *, n_chains: int, n_steps: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    state = scheme.init(model, n_chains, generator=generator)
    infos = []
    for _ in range(n_steps):
        state, info = scheme.step(model, state, generator=generator)
        infos.append(info)
    return state, infos


# ---------------------------------------------------------------------------- exact kernels
def product_index(codes: list[int], n_states: int) -> int:
    """Index in the product space of a tuple of per-level codes (level 0 most significant)."""
    index = 0
    for code in codes:
        index = index * n_states + code
    return index


def swap_kernel(model: bl.RBM, betas: list[float], lower: int) -> torch.Tensor:
    """Exact kernel of proposing the exchange of levels ``(lower, lower+1)``.

    Built from enumeration alone: visible marginals ``p_k(v) = Σ_h p_k(v, h)`` for the
    acceptance, and on acceptance fresh hidden states from ``p_k(h | v)`` at both slots.
    """
    n_visible, n_hidden = model.layer_sizes
    n_states = 2 ** (n_visible + n_hidden)
    n_levels = len(betas)
    joint = [joint_log_probabilities(model, beta).exp().view(2**n_hidden, 2**n_visible) for beta in betas]
    marginal = [table.sum(0) for table in joint]  # (2^D,) per level, state code = v + 2^D·h
    conditional = [table / table.sum(0, keepdim=True) for table in joint]  # p(h | v), (2^J, 2^D)
    size = n_states**n_levels
    kernel = torch.zeros(size, size, dtype=torch.float64)
    for index in range(size):
        codes, rest = [], index
        for _ in range(n_levels):
            codes.append(rest % n_states)
            rest //= n_states
        codes.reverse()
        a, b = codes[lower], codes[lower + 1]
        va, vb = a % 2**n_visible, b % 2**n_visible
        ratio = (marginal[lower][vb] * marginal[lower + 1][va]) / (
            marginal[lower][va] * marginal[lower + 1][vb]
        )
        accept = float(min(1.0, ratio))
        kernel[index, index] += 1.0 - accept
        for h_low in range(2**n_hidden):
            for h_high in range(2**n_hidden):
                new = list(codes)
                new[lower] = vb + 2**n_visible * h_low
                new[lower + 1] = va + 2**n_visible * h_high
                weight = accept * conditional[lower][h_low, vb] * conditional[lower + 1][h_high, va]
                kernel[index, product_index(new, n_states)] += weight
    return kernel


def sweep_kernel(model: bl.RBM, operator, betas: list[float]) -> torch.Tensor:
    kernel = None
    for beta in betas:
        matrix = transition_matrix(model, operator, beta=beta)
        kernel = matrix if kernel is None else torch.kron(kernel, matrix)
    return kernel


def product_distribution(model: bl.RBM, betas: list[float]) -> torch.Tensor:
    p = None
    for beta in betas:
        level = joint_log_probabilities(model, beta).exp()
        p = level if p is None else torch.kron(p, level)
    return p


def step_kernels(model, operator, betas, pairs: str) -> list[torch.Tensor]:
    """Exact kernels of the first three PT steps (swap_every = 1), as the code runs them.

    Step 1 is a sweep; each later step is the swap round due after the previous sweep
    (round 0, then round 1), then a sweep. "A @ B" means first A, then B.
    """
    sweep = sweep_kernel(model, operator, betas)
    swaps = [swap_kernel(model, betas, lower) for lower in range(len(betas) - 1)]
    identity = torch.eye(sweep.shape[0], dtype=torch.float64)
    if pairs == "all":
        round_kernel = identity
        for swap in swaps:  # sequentially, lowest pair first
            round_kernel = round_kernel @ swap
        return [sweep, round_kernel @ sweep, round_kernel @ sweep]
    even, odd = identity, identity
    for lower, swap in enumerate(swaps):
        if lower % 2 == 0:
            even = even @ swap
        else:
            odd = odd @ swap
    return [sweep, even @ sweep, odd @ sweep]


CASES = [
    # (n_visible, n_hidden, betas, pairs): 2 levels of 16 states; 3 levels of 8 states.
    (2, 2, [0.4, 1.0], "alternating"),
    (2, 1, [0.0, 0.5, 1.0], "alternating"),
    (2, 1, [0.0, 0.5, 1.0], "all"),
]


@pytest.mark.parametrize("operator_name", OPERATORS)
def test_product_of_tempered_distributions_is_invariant(operator_name):
    # Π_k p_{β_k} is invariant under each step's exact kernel (swap round with the
    # summed-out acceptance and the hidden redraw, then a sweep), to 1e-10 in float64; each
    # swap move alone satisfies detailed balance.
    operator = bl.operators.get(operator_name)
    for seed, (n_visible, n_hidden, betas, pairs) in enumerate(CASES):
        model = random_rbm(n_visible, n_hidden, scale=3.0, seed=10 + seed, base_rate=True)
        pi = product_distribution(model, betas)
        for swap in (swap_kernel(model, betas, lower) for lower in range(len(betas) - 1)):
            flow = pi[:, None] * swap
            assert (flow - flow.T).abs().max().item() < 1e-12, "a swap move must satisfy detailed balance"
        for kernel in step_kernels(model, operator, betas, pairs):
            assert torch.allclose(kernel.sum(1), torch.ones_like(pi), atol=1e-12)
            residual = (pi @ kernel - pi).abs().max().item()
            assert residual < 1e-10, f"{operator_name}, {pairs}, betas={betas}: |πK − π| = {residual}"


def test_swapping_hidden_states_without_redraw_is_biased():
    # The check above has power: exchanging whole joint states (hidden layer included) with
    # the summed-out acceptance leaves π invariant only if h is redrawn at its new β.
    model = random_rbm(2, 2, scale=3.0, seed=10, base_rate=True)
    betas = [0.4, 1.0]
    pi = product_distribution(model, betas)
    n_states = 16
    joint = [joint_log_probabilities(model, beta).exp().view(4, 4) for beta in betas]
    marginal = [table.sum(0) for table in joint]
    kernel = torch.zeros(256, 256, dtype=torch.float64)
    for a in range(n_states):
        for b in range(n_states):
            va, vb = a % 4, b % 4
            ratio = (marginal[0][vb] * marginal[1][va]) / (marginal[0][va] * marginal[1][vb])
            accept = float(min(1.0, ratio))
            kernel[a * n_states + b, b * n_states + a] += accept
            kernel[a * n_states + b, a * n_states + b] += 1.0 - accept
    assert (pi @ kernel - pi).abs().max().item() > 1e-3


@pytest.mark.parametrize("operator_name", ["gibbs", "flip"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_sampler_draws_from_the_exact_step_kernel(operator_name, case):
    # From one fixed product state, many independent systems land after one, two and three
    # steps (sweep; even round + sweep reusing the round's marginal terms; odd round +
    # sweep) on each product state with the probability of the exact kernel's row
    # (binomial z < 5).
    n_visible, n_hidden, betas, pairs = CASES[case]
    model = random_rbm(n_visible, n_hidden, scale=3.0, seed=10 + case, base_rate=True)
    operator = bl.operators.get(operator_name)
    first, second, third = step_kernels(model, operator, betas, pairs)
    scheme = ParallelTempering(operator, betas, pairs=pairs)
    n_systems, n_states = 40_000, 2 ** (n_visible + n_hidden)
    start_codes = [5, 10 % n_states, 7][: len(betas)]
    units = torch.tensor(
        [[(code >> u) & 1 for u in range(n_visible + n_hidden)] for code in start_codes], dtype=torch.float64
    )
    units = units.repeat_interleave(n_systems, 0)  # level-major
    state = scheme.init(model, n_systems, generator=torch.Generator().manual_seed(0))
    chains = bl.Chains(layers=(units[:, :n_visible], units[:, n_visible:]), beta=state.chains.beta)
    state = dataclasses.replace(state, chains=chains)
    generator = torch.Generator().manual_seed(1)
    start = product_index(start_codes, n_states)
    for kernel in (first, first @ second, first @ second @ third):
        state, _ = scheme.step(model, state, generator=generator)
        per_level = state_codes(state.chains.layers).view(len(betas), n_systems)
        index = torch.zeros(n_systems, dtype=torch.int64)
        for level in range(len(betas)):
            index = index * n_states + per_level[level]
        counts = torch.bincount(index, minlength=kernel.shape[0]).to(torch.float64)
        row = kernel[start]
        expected = row * n_systems
        z = (counts - expected) / torch.sqrt(expected * (1 - row)).clamp_min(1.0)
        assert z.abs().max().item() < 5.0, (
            f"sampled steps disagree with the exact kernel: max z = {z.abs().max()}"
        )
        assert counts[row == 0].sum() == 0, "the sampler reached a state the exact kernel forbids"


# ---------------------------------------------------------------------------- Monte Carlo
@pytest.mark.parametrize("operator_name", OPERATORS)
def test_beta_one_samples_match_the_exact_distribution(operator_name):
    # Independent PT systems on a bimodal 5x4 RBM: the β = 1 replicas after burn-in are exact
    # samples (TV below its sample-size bound, favoured-mode mass within 4 standard errors).
    model, pattern = bimodal_rbm(5, 4, seed=0)
    scheme = ParallelTempering(bl.operators.get(operator_name), n_levels=4)
    state, infos = run(scheme, model, n_chains=10_000, n_steps=80, seed=2)
    assert_matches_exact(model, scheme.samples(state), pattern, f"PT with {operator_name}")
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
        assert_matches_exact(model, chains, pattern, "plain Gibbs")


def test_swap_acceptance_matches_its_exact_expectation():
    # At equilibrium the acceptance of pair (k, k+1) is E[min(1, r)] under p_{β_k} ⊗ p_{β_{k+1}},
    # computable by enumeration; one swap round of many independent systems estimates it
    # (an even round: pairs (0, 1) and (2, 3), disjoint, so their states are independent).
    model, _ = bimodal_rbm(5, 4, seed=0)
    betas = [0.0, 0.3, 0.55, 0.8, 1.0]
    scheme = ParallelTempering(bl.operators.get("gibbs"), betas)
    n_systems = 8000
    state, _ = run(scheme, model, n_chains=n_systems, n_steps=61, seed=3)
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
        assert abs(z) < 4.0, f"pair {lower}: acceptance {observed:.4f} vs exact {expected:.4f} (z = {z:.1f})"


def test_every_swap_is_accepted_when_the_density_is_flat():
    # Zero parameters and a uniform base: log f_β(x) does not depend on x, so log A = 0.
    model = bl.RBM(weights=torch.zeros(7, 3), dtype=torch.float32)
    for pairs in ("alternating", "all"):
        scheme = ParallelTempering(bl.operators.get("flip"), n_levels=5, pairs=pairs)
        state, infos = run(scheme, model, n_chains=13, n_steps=6, seed=0)
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
    state, infos = run(scheme, model, n_chains=5, n_steps=10, seed=0)
    assert state.round_trips.tolist() == [4 + 4] * 5
    assert scheme.summarize(infos, state).total_round_trips == 8 * 5


def test_step_contract_shapes_and_input_untouched():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    scheme = ParallelTempering(bl.operators.get("mixture", alpha=0.5), n_levels=5)
    state, _ = run(scheme, model, n_chains=13, n_steps=3, seed=0)
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
        ParallelTempering("gibbs")
    model = random_rbm(3, 2, seed=0, dtype=torch.float32)
    with pytest.raises(ValidationError, match="pt"):
        bl.sample(model, sampler="pt", n_chains=3, n_sweeps=2, temperatures=4)
