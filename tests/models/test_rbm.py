"""The RBM's densities, tempered family and exact oracles, checked against brute force."""

import math

import pytest
import torch
import torch.nn.functional as F

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.models import all_binary_states, log_f_marginal, path_derivative
from harness import random_rbm


def brute_log_z(model: bl.RBM, beta: float) -> float:
    layers = joint_states(model.layer_sizes)
    return float(torch.logsumexp(model.to(torch.float64).log_f(layers, beta), 0))


@pytest.mark.parametrize("shape", [(5, 3), (3, 6), (4, 4)])
@pytest.mark.parametrize("beta", [1.0, 0.37, 0.0])
def test_exact_log_z_matches_brute_force_in_both_directions(shape, beta):
    # J <= D enumerates h, J > D enumerates v; chunking must not change the sum.
    model = random_rbm(*shape, scale=2.0, seed=sum(shape), base_rate=True)
    expected = brute_log_z(model, beta)
    assert bl.exact_log_z(model, beta) == pytest.approx(expected, abs=1e-12)
    assert bl.exact_log_z(model, beta, chunk_states=2) == pytest.approx(expected, abs=1e-12)


def test_base_is_normalised():
    # log Z(0) = 0 for the base-rate and the uniform base alike: estimators add no log Z_0.
    model = random_rbm(6, 4, seed=3, base_rate=True)
    assert abs(bl.exact_log_z(model, 0.0)) < 1e-12
    model.set_uniform_base()
    assert abs(bl.exact_log_z(model, 0.0)) < 1e-12


def test_hidden_summed_density_is_the_marginal_of_the_joint():
    # log f_β(v) = log Σ_h f_β(v, h), with softplus(β a) (not β·softplus(a)).
    model = random_rbm(4, 3, scale=3.0, seed=5, base_rate=True)
    visible = all_binary_states(4)
    hidden = all_binary_states(3)
    for beta in (1.0, 0.4, 0.0):
        joint = torch.stack([model.log_f((visible, h.expand(len(visible), -1)), beta) for h in hidden], dim=1)
        expected = torch.logsumexp(joint, 1)
        summed = log_f_marginal(model.marginal_terms(visible), beta)
        assert torch.allclose(summed, expected, atol=1e-12)
        assert torch.allclose(model.free_energy(visible, beta), -expected, atol=1e-12)


def test_free_energy_at_one_is_the_textbook_formula():
    model = random_rbm(7, 3, seed=2, base_rate=True)
    v = all_binary_states(7)[:13]
    textbook = -(v @ model.visible_bias) - F.softplus(model.hidden_bias + v @ model.weights).sum(1)
    assert torch.allclose(model.free_energy(v), textbook.detach(), atol=1e-12)


def test_tempered_model_is_an_rbm_with_scaled_parameters():
    # At β the conditionals are those of RBM(βW, βb + (1−β)b^A, βc) (docs/algorithms.md §1.3).
    model = random_rbm(7, 3, seed=8, base_rate=True)
    beta = 0.3
    scaled = bl.RBM(
        weights=beta * model.weights.detach(),
        visible_bias=beta * model.visible_bias.detach() + (1 - beta) * model.base_logits,
        hidden_bias=beta * model.hidden_bias.detach(),
        dtype=torch.float64,
    )
    layers = tuple(joint_states((7, 3)))
    betas = torch.full((layers[0].shape[0],), beta, dtype=torch.float64)
    ones = torch.ones_like(betas)
    for index in (0, 1):
        assert torch.allclose(
            model.conditional_logits(index, layers, betas), scaled.conditional_logits(index, layers, ones)
        )


def test_conditional_logits_give_the_exact_conditionals():
    # p(h_j = 1 | v) from the joint equals σ(logit) at per-chain β (mixed βs in one batch).
    model = random_rbm(3, 2, scale=2.5, seed=9, base_rate=True)
    layers = joint_states((3, 2))
    n = layers[0].shape[0]
    beta = torch.linspace(0, 1, n, dtype=torch.float64)
    log_f = model.log_f(layers, beta)
    for layer_index, size in ((1, 2), (0, 3)):
        logits = model.conditional_logits(layer_index, layers, beta)
        for unit in range(size):
            flipped = [layer.clone() for layer in layers]
            flipped[layer_index][:, unit] = 1 - flipped[layer_index][:, unit]
            other = model.log_f(tuple(flipped), beta)
            on = torch.where(layers[layer_index][:, unit] == 1, log_f, other)
            off = torch.where(layers[layer_index][:, unit] == 1, other, log_f)
            assert torch.allclose(logits[:, unit], on - off, atol=1e-12)


def test_path_derivative_is_d_dbeta_of_log_f():
    model = random_rbm(5, 4, seed=11, base_rate=True)
    terms = model.marginal_terms(all_binary_states(5))
    eps = 1e-6
    for beta in (0.1, 0.6, 0.95):
        numeric = (log_f_marginal(terms, beta + eps) - log_f_marginal(terms, beta - eps)) / (2 * eps)
        assert torch.allclose(path_derivative(terms, beta), numeric, atol=1e-6)


def test_init_chains_are_exact_base_samples():
    model = random_rbm(7, 3, seed=12, base_rate=True, dtype=torch.float32)
    n = 200_000
    chains = model.init_chains(n, generator=torch.Generator().manual_seed(0))
    p_visible = torch.sigmoid(model.base_logits.double())
    stderr = torch.sqrt(p_visible * (1 - p_visible) / n)
    assert ((chains.visible.double().mean(0) - p_visible).abs() / stderr).max() < 4.5
    assert (((chains.layers[1].double().mean(0) - 0.5).abs()) / math.sqrt(0.25 / n)).max() < 4.5
    assert chains.visible.dtype == torch.float32 and torch.all(chains.beta == 0)


def test_set_base_rate_smooths_marginals_into_the_open_interval():
    model = bl.RBM(4, 2, generator=0)
    data = torch.tensor([[1, 0, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0]])
    model.set_base_rate(data, smoothing=0.1)
    p = torch.sigmoid(model.base_logits.double())
    expected = 0.9 * data.double().mean(0) + 0.05
    assert torch.allclose(p, expected, atol=1e-6) and model.base_fitted
    assert torch.equal(data, torch.tensor([[1, 0, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0]]))  # not mutated


def test_log_likelihood_matches_enumeration():
    model = random_rbm(4, 3, scale=2.0, seed=13)
    log_p_joint = joint_log_probabilities(model)
    # marginal over h of the joint, for every visible state (v is the low 4 bits)
    log_p_visible = torch.logsumexp(log_p_joint.view(2**3, 2**4), 0)
    data = all_binary_states(4)[[0, 3, 3, 9, 15]]
    codes = torch.tensor([0, 3, 3, 9, 15])
    expected = float(log_p_visible[codes].mean())
    assert bl.log_likelihood(model, data, bl.exact_log_z(model)) == pytest.approx(expected, abs=1e-10)


def test_constructor_and_inputs_are_validated():
    with pytest.raises(ValidationError, match="n_visible"):
        bl.RBM(0, 3)
    with pytest.raises(ValidationError, match="shape"):
        bl.RBM(weights=torch.zeros(3))
    with pytest.raises(ValidationError, match="NaN"):
        bl.RBM(weights=torch.full((2, 2), float("nan")))
    with pytest.raises(ValidationError, match="visible_bias"):
        bl.RBM(weights=torch.zeros(3, 2), visible_bias=torch.zeros(2))
    model = bl.RBM(3, 2, generator=0)
    with pytest.raises(ValidationError, match="binary"):
        model.set_base_rate(torch.tensor([[0.5, 1.0, 0.0]]))
    with pytest.raises(ValidationError, match="expects 3"):
        bl.log_likelihood(model, torch.zeros(4, 5), 0.0)


def test_same_seed_same_weights_and_float64_option():
    a = bl.RBM(7, 3, generator=1)
    b = bl.RBM(7, 3, generator=1)
    assert torch.equal(a.weights, b.weights)
    assert not torch.equal(a.weights, bl.RBM(7, 3, generator=2).weights)
    assert bl.RBM(7, 3, generator=1, dtype=torch.float64).weights.dtype == torch.float64


@pytest.mark.slow
def test_exact_log_z_of_a_784_by_20_rbm_is_finite_and_float64_inside(two_threads):

    model = bl.RBM(784, 20, generator=0, weight_std=0.3)
    value = bl.exact_log_z(model)
    assert math.isfinite(value)
    # Same value from the float64 copy of the model: enumeration is float64 internally.
    assert bl.exact_log_z(model.to(torch.float64)) == pytest.approx(value, abs=1e-9)


@pytest.mark.slow
def test_exact_log_z_enumerates_2_to_the_24_states_in_bounded_memory(two_threads):
    import resource

    model = bl.RBM(24, 26, generator=0, weight_std=0.5)  # enumerates the 24 visible units
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    value = bl.exact_log_z(model)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert math.isfinite(value)
    assert grown_mb < 400, f"peak memory grew by {grown_mb:.0f} MB; 2^24 x 26 float64 would be 3.5 GB"
    # Brute-force cross-check of the same code path on a model small enough to enumerate jointly.
    small = bl.RBM(5, 6, generator=0, weight_std=0.5)
    assert bl.exact_log_z(small) == pytest.approx(brute_log_z(small, 1.0), abs=1e-10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_model_samples_and_enumerates():
    model = random_rbm(7, 3, seed=1, base_rate=True).to("cuda")
    generator = bl.rng.make_generator(0, "cuda")
    chains = model.init_chains(13, generator=generator).with_beta(1.0)
    chains, _ = bl.operators.get("flip").step(model, chains, generator=generator)
    assert chains.visible.device.type == "cuda"
    assert bl.exact_log_z(model) == pytest.approx(bl.exact_log_z(model.cpu()), abs=1e-9)
