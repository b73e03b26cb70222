"""The DBM's densities, tempered family and exact oracles, checked against brute force.

Tiny DBMs are enumerated over every joint state; distinct layer sizes (3-3-2, 2-3-2-2 with
three hidden layers, 3-2-4) make a transposed weight or a swapped layer fail loudly. The
generic machinery (operators, AIS, RTS, parallel tempering) runs on them unchanged.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.models import all_binary_states, log_f_marginal
from harness import check_estimator_exact, check_operator_exact, random_dbm, tiny_dbms

SHAPES = [(3, 3, 2), (2, 3, 2, 2)]


def state_codes(layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Index of each joint state in the order of ``joint_states`` (bit u = global unit u)."""
    bits = torch.cat(layers, dim=1).to(torch.int64)
    return (bits * 2 ** torch.arange(bits.shape[1], dtype=torch.int64)).sum(1)


def even_codes(model: bl.DBM, layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return state_codes(tuple(layers[index] for index in model.update_groups[1]))


# ---------------------------------------------------------------------------- densities
def test_energy_is_the_formula_written_unit_by_unit():
    model = random_dbm((2, 3, 2, 2), seed=4)
    weights = [matrix.detach() for matrix in model.weights]
    biases = [vector.detach() for vector in model.biases]
    layers = joint_states(model.layer_sizes)
    for state in (0, 77, 300, 511):
        h = [layer[state] for layer in layers]
        energy = 0.0
        for l, matrix in enumerate(weights):
            for i in range(matrix.shape[0]):
                for j in range(matrix.shape[1]):
                    energy -= float(h[l][i] * matrix[i, j] * h[l + 1][j])
        energy -= sum(float(h[l] @ biases[l]) for l in range(len(h)))
        assert float(model.energy(tuple(layer[state : state + 1] for layer in layers))[0]) == pytest.approx(
            energy, abs=1e-12
        )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("beta", [1.0, 0.4, 0.0])
def test_exact_log_z_matches_brute_force_over_every_joint_state(shape, beta):
    # Enumerating the even layers (odd summed out) or the odd layers (even summed out), in
    # chunks or not, gives logsumexp of the joint log f_β over all 2^N states.
    model = random_dbm(shape, scale=2.0, seed=sum(shape), base_rate=True)
    brute = float(torch.logsumexp(model.log_f(joint_states(model.layer_sizes), beta), 0))
    assert bl.exact_log_z(model, beta) == pytest.approx(brute, abs=1e-12)
    for enumerated in ("even", "odd"):
        for chunk_states in (None, 2):
            chunks = list(model.enumerate_log_f(beta, chunk_states=chunk_states, enumerated=enumerated))
            assert float(torch.logsumexp(torch.cat(chunks), 0)) == pytest.approx(brute, abs=1e-12)
    if beta == 0.0:
        assert abs(brute) < 1e-12, "the base must be normalised: log Z(0) = 0"


def test_base_is_normalised_for_both_bases_and_float32():
    model = random_dbm((3, 3, 2), seed=5, base_rate=True, dtype=torch.float32)
    assert abs(bl.exact_log_z(model, 0.0)) < 1e-12
    model.set_uniform_base()
    assert not model.base_fitted and abs(bl.exact_log_z(model, 0.0)) < 1e-12


@pytest.mark.parametrize("shape", SHAPES)
def test_odd_summed_density_is_the_marginal_of_the_joint(shape):
    # log_f_marginal(marginal_terms(x), β) = log Σ_odd f_β(x, odd) for every even state x,
    # at scalar and at per-state β; free_energy takes all layers or only the even ones.
    model = random_dbm(shape, scale=2.5, seed=7, base_rate=True)
    layers = joint_states(model.layer_sizes)
    codes = even_codes(model, layers)
    n_even = 2 ** sum(model.layer_sizes[i] for i in model.update_groups[1])
    first = torch.full((n_even,), -1, dtype=torch.int64)
    first.scatter_reduce_(0, codes, torch.arange(codes.numel()), reduce="amin", include_self=False)
    even_states = tuple(layer[first] for layer in layers)
    only_even = tuple(even_states[i] for i in model.update_groups[1])
    per_state_beta = torch.rand(n_even, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for beta in (1.0, 0.4, 0.0, per_state_beta):
        joint_beta = beta if isinstance(beta, float) else beta[codes]
        joint = model.log_f(layers, joint_beta)
        expected = torch.full((n_even,), -math.inf, dtype=torch.float64)
        expected = expected.scatter_reduce(0, codes, joint, reduce="max")
        expected = (
            expected
            + torch.zeros(n_even, dtype=torch.float64)
            .index_add_(0, codes, (joint - expected[codes]).exp())
            .log()
        )
        summed = log_f_marginal(model.marginal_terms(even_states), beta)
        assert torch.allclose(summed, expected, atol=1e-12)
        assert torch.allclose(model.free_energy(only_even, beta), -expected, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 2, 2), (3, 2, 4), (3, 3, 2)])
@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_free_energy_of_v_alone_sums_every_hidden_layer_exactly(shape, beta):
    # (2,3,2,2) and (3,3,2) enumerate the even hidden layers, (3,2,4) the odd ones.
    model = random_dbm(shape, scale=2.0, seed=11, base_rate=True)
    layers = joint_states(model.layer_sizes)
    joint = model.log_f(layers, beta)
    visible_codes = state_codes(layers[:1])
    expected = torch.stack(
        [torch.logsumexp(joint[visible_codes == code], 0) for code in range(2 ** model.layer_sizes[0])]
    )
    visible = all_binary_states(model.layer_sizes[0])
    assert torch.allclose(-model.free_energy(visible, beta), expected, atol=1e-12)
    # log p(v) sums to one over v at β = 1.
    if beta == 1.0:
        log_p = -model.free_energy(visible) - bl.exact_log_z(model)
        assert float(torch.logsumexp(log_p, 0)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_conditional_logits_are_the_log_odds_of_the_joint_at_per_chain_beta(shape):
    # logit_j(x) = log f_β(x with unit j on) − log f_β(x with unit j off), for every joint
    # state, every layer and unit, with a different β per state in one batch.
    model = random_dbm(shape, scale=2.5, seed=13, base_rate=True)
    layers = joint_states(model.layer_sizes)
    n_states = layers[0].shape[0]
    beta = torch.rand(n_states, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    beta[:5] = 1.0  # the β = 1 fast path and the tempered path in one batch
    for index, size in enumerate(model.layer_sizes):
        logits = model.conditional_logits(index, layers, beta)
        assert logits.shape == (n_states, size)
        for unit in range(size):
            on, off = list(layers), list(layers)
            on[index], off[index] = layers[index].clone(), layers[index].clone()
            on[index][:, unit], off[index][:, unit] = 1.0, 0.0
            expected = model.log_f(tuple(on), beta) - model.log_f(tuple(off), beta)
            assert torch.allclose(logits[:, unit], expected, atol=1e-12)
    at_one = model.conditional_logits(0, layers, torch.ones(n_states, dtype=torch.float64))
    assert torch.allclose(at_one, model.conditional_logits(0, layers, torch.full_like(beta, 1.0 - 1e-300)))


def test_structure_and_dtype_follow_the_constructor():
    model = bl.DBM(layer_sizes=[7, 5, 3, 2], generator=0)
    assert model.layer_sizes == (7, 5, 3, 2) and model.n_hidden_layers == 3
    assert model.update_groups == ((1, 3), (0, 2))
    assert model.dtype == torch.float32 and model.device == torch.device("cpu")
    assert [tuple(w.shape) for w in model.weights] == [(7, 5), (5, 3), (3, 2)]
    assert all(float(b.detach().abs().sum()) == 0.0 for b in model.biases)
    assert set(model.state_dict()) == {
        "weights.0",
        "weights.1",
        "weights.2",
        "biases.0",
        "biases.1",
        "biases.2",
        "biases.3",
        "base_logits",
    }
    same = bl.DBM(layer_sizes=[7, 5, 3, 2], generator=0)
    assert all(torch.equal(a, b) for a, b in zip(model.weights, same.weights, strict=True))
    double = model.to(torch.float64)
    assert double.dtype == torch.float64 and double.base_logits.dtype == torch.float64


def test_parameters_train_with_torch_optim():
    model = random_dbm((3, 3, 2), seed=1, dtype=torch.float32)
    before = [p.detach().clone() for p in model.parameters()]
    assert len(before) == 5  # 2 weight matrices, 3 bias vectors
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    v = torch.ones(13, 3)
    loss = -(model.weights[0].sum() + model.biases[2].sum() + (v @ model.weights[0]).sum())
    loss.backward()
    optimizer.step()
    after = list(model.parameters())
    assert not torch.equal(before[0], after[0]) and not torch.equal(before[4], after[4])
    assert torch.equal(before[1], after[1])  # weights[1] had no gradient


def test_init_chains_are_exact_base_samples():
    model = random_dbm((4, 3, 2), seed=3, base_rate=True, dtype=torch.float32)
    n = 20_000
    chains = model.init_chains(n, generator=torch.Generator().manual_seed(0))
    assert [tuple(layer.shape) for layer in chains.layers] == [(n, 4), (n, 3), (n, 2)]
    assert all(layer.dtype == torch.float32 for layer in chains.layers)
    assert torch.equal(chains.beta, torch.zeros(n))
    expected = [torch.sigmoid(model.base_logits.double()), torch.full((3,), 0.5), torch.full((2,), 0.5)]
    for layer, p in zip(chains.layers, expected, strict=True):
        z = (layer.double().mean(0) - p.double()) / torch.sqrt(p.double() * (1 - p.double()) / n)
        assert float(z.abs().max()) < 4.0
    again = model.init_chains(n, generator=torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(chains.layers, again.layers, strict=True))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer_sizes": [5, 3]}, r"layer_sizes must list at least 3 layers"),
        ({"layer_sizes": [5, 0, 2]}, r"layer_sizes\[1\] must be a positive integer"),
        ({}, r"give layer_sizes="),
        ({"weights": [torch.zeros(3, 2)]}, r"weights must be a list of at least 2 matrices"),
        ({"weights": torch.zeros(2, 3, 2)}, r"weights must be a list of at least 2 matrices"),
        (
            {"weights": [torch.zeros(3, 2), torch.zeros(3, 2)]},
            r"weights\[1\] has shape \(3, 2\) but weights\[0\]",
        ),
        ({"weights": [torch.zeros(3, 2), torch.zeros(2)]}, r"weights\[1\] must be a real 2-D tensor"),
        (
            {"layer_sizes": [3, 2, 4], "weights": [torch.zeros(3, 2), torch.zeros(2, 5)]},
            r"layer_sizes=\[3, 2, 4\] but the weights give \[3, 2, 5\]",
        ),
        (
            {"weights": [torch.zeros(3, 2), torch.zeros(2, 5)], "biases": [torch.zeros(3), torch.zeros(2)]},
            r"biases must be a list of 3 vectors",
        ),
        (
            {"layer_sizes": [3, 2, 4], "biases": [torch.zeros(3), torch.zeros(4), torch.zeros(4)]},
            r"biases\[1\] must have shape \(2,\)",
        ),
        (
            {"weights": [torch.zeros(3, 2), torch.full((2, 5), math.nan)]},
            r"weights\[1\] contains NaN or infinite values",
        ),
        (
            {
                "layer_sizes": [3, 2, 4],
                "biases": [torch.zeros(3), torch.zeros(2), torch.full((4,), math.inf)],
            },
            r"biases\[2\] contains NaN",
        ),
        ({"layer_sizes": [3, 2, 4], "dtype": torch.int64}, r"dtype must be a floating dtype"),
    ],
)
def test_constructor_refuses_bad_arguments_naming_them(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        bl.DBM(**kwargs)


def test_public_methods_refuse_misused_inputs():
    model = random_dbm((3, 3, 2), seed=1)
    v = torch.ones(4, 3)
    with pytest.raises(ValidationError, match=r"even layers .* free_energy\(v\)"):
        model.marginal_terms(v)
    with pytest.raises(ValidationError, match=r"layers 0\.\.2, got index 3"):
        model.conditional_logits(3, (v, None, None), torch.ones(4))
    with pytest.raises(ValidationError, match=r"enumerated must be"):
        next(model.enumerate_log_f(1.0, enumerated="visible"))
    with pytest.raises(ValidationError, match=r"binary"):
        model.free_energy(torch.full((2, 3), 0.5))
    big = bl.DBM(layer_sizes=[3, 30, 30], generator=0)
    with pytest.raises(ValidationError, match=r"at most 24"):
        big.free_energy(torch.ones(2, 3))
    with pytest.raises(ValidationError, match=r"smoothing"):
        model.set_base_rate(torch.ones(2, 3), smoothing=0.0)


# ---------------------------------------------------------------------------- generic machinery
@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_operators_leave_the_exact_dbm_distribution_invariant(operator):
    # Exact sweep matrices (odd layers, then even) at β = 1, 0.6, 0 keep p_β invariant, and
    # the batched sampler draws from them.
    check_operator_exact(bl.operators.get(operator), models=tiny_dbms())


@pytest.mark.parametrize("method", ["ais", pytest.param("rts", marks=pytest.mark.slow)])
def test_estimators_agree_with_enumeration_within_their_error_bars(method):
    options = (
        {"n_chains": 100, "n_temperatures": 100}
        if method == "ais"
        else {"n_chains": 20, "n_temperatures": 20}
    )

    def estimate(model, budget, seed):
        sweeps = {"n_sweeps": 200 * budget} if method == "rts" else {"n_chains": 100 * budget}
        return bl.estimate_log_z(
            model, method=method, operator="flip", generator=seed, **{**options, **sweeps}
        )

    check_estimator_exact(estimate, models=tiny_dbms(torch.float32)[:2])


def test_parallel_tempering_samples_match_the_exact_joint_distribution():
    # Independent chains of PT with flip-the-state (state-dependent, so the odd layers h¹
    # and h³ must be redrawn after every swap) on a strongly coupled 2-3-2-2 DBM: the
    # joint states at β = 1 pass Pearson's χ² test against enumeration.
    model = random_dbm((2, 3, 2, 2), scale=3.0, seed=21, dtype=torch.float32)
    p = joint_log_probabilities(model).exp()
    scheme = bl.sampling.make_scheme("pt", "flip", n_levels=4)
    generator = torch.Generator().manual_seed(3)
    n_chains = 4000
    state = scheme.init(model, n_chains, generator=generator)
    for _ in range(60):
        state, _ = scheme.step(model, state, generator=generator)
    samples = scheme.samples(state)
    assert torch.all(samples.beta == 1)
    counts = torch.bincount(state_codes(samples.layers), minlength=p.numel()).to(torch.float64)
    expected = p * n_chains
    assert float(counts[expected == 0].sum()) == 0.0
    large = expected >= 5
    observed_bins = torch.cat([counts[large], counts[~large].sum().reshape(1)])
    expected_bins = torch.cat([expected[large], expected[~large].sum().reshape(1)])
    chi_square = float(((observed_bins - expected_bins) ** 2 / expected_bins).sum())
    degrees = observed_bins.numel() - 1
    assert chi_square < stats.chi2.ppf(1 - 1e-4, degrees), (
        f"χ² = {chi_square:.1f} on {degrees} degrees of freedom"
    )
