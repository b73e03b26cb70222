"""Gaussian-binary RBM: exact log Z against quadrature, conditionals against the joint density,
exact invariance of every operator's sweep (alone and inside parallel tempering), AIS against
the exact value, the training gradient against finite differences, training, model files.

Monte Carlo checks start chains from *exact* samples of p_β (h from the enumerated hidden
marginal, v from its Gaussian conditional), so one sweep of a correct operator leaves them
exactly distributed; every statistic is compared with its exact value in standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.io import load_model
from boltzlab.models import GaussianRBM, all_binary_states, log_f_marginal
from boltzlab.training.gaussian_objective import GaussianRBMObjective
from tolerances import MAX_Z


def random_gaussian_rbm(
    n_visible: int,
    n_hidden: int,
    *,
    scale: float = 1.5,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    fit_base: bool = True,
    learn_std: bool = False,
) -> GaussianRBM:
    """Weights uniform in [-scale, scale], N(0, 1) biases, σ in [0.5, 1.5] (distinct per unit)."""
    g = torch.Generator().manual_seed(seed)
    weights = (torch.rand(n_visible, n_hidden, generator=g, dtype=torch.float64) * 2 - 1) * scale
    model = GaussianRBM(
        weights=weights,
        visible_bias=torch.randn(n_visible, generator=g, dtype=torch.float64),
        hidden_bias=torch.randn(n_hidden, generator=g, dtype=torch.float64),
        std=0.5 + torch.rand(n_visible, generator=g, dtype=torch.float64),
        learn_std=learn_std,
        dtype=dtype,
    )
    if fit_base:
        model.set_base_from_data(torch.randn(50, n_visible, generator=g, dtype=torch.float64) * 2.0 + 0.5)
    return model


def exact_hidden_probabilities(model: GaussianRBM, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """All hidden states (2^J, J) and their exact probabilities under p_β (visible integrated out)."""
    states = all_binary_states(model.n_hidden, dtype=model.dtype)
    log_f = model.hidden_log_f(states, beta)
    return states, torch.softmax(log_f, 0)


def exact_samples(model: GaussianRBM, n: int, beta: float, generator: torch.Generator) -> bl.Chains:
    """``n`` independent exact samples of p_β(v, h), labelled with β."""
    states, probabilities = exact_hidden_probabilities(model, beta)
    index = torch.multinomial(probabilities, n, replacement=True, generator=generator)
    h = states[index]
    beta_t = torch.full((n,), beta, dtype=model.dtype)
    conditional = model.visible_conditional(h, beta_t)
    noise = torch.randn(conditional.mean.shape, generator=generator, dtype=model.dtype)
    return bl.Chains(layers=(conditional.mean + conditional.std * noise, h), beta=beta_t)


def exact_visible_moments(model: GaussianRBM, beta: float) -> dict[str, torch.Tensor]:
    """E[v], E[v²] and the variances of v and v² per unit under p_β (a Gaussian mixture over h)."""
    states, probabilities = exact_hidden_probabilities(model, beta)
    conditional = model.visible_conditional(states, beta)
    mean, variance = conditional.mean.to(torch.float64), conditional.std.to(torch.float64).square()
    p = probabilities.to(torch.float64)[:, None]
    first = (p * mean).sum(0)
    second = (p * (mean.square() + variance)).sum(0)
    fourth = (p * (mean**4 + 6 * mean.square() * variance + 3 * variance.square())).sum(0)
    return {
        "mean": first,
        "second": second,
        "variance": second - first.square(),
        "second_variance": fourth - second.square(),
    }


def assert_matches_exact(model: GaussianRBM, chains: bl.Chains, beta: float) -> None:
    """z-scores of v's first two moments and of every hidden state's frequency vs p_β."""
    n = chains.n_chains
    moments = exact_visible_moments(model, beta)
    v = chains.layers[0].to(torch.float64)
    z_mean = (v.mean(0) - moments["mean"]) / (moments["variance"] / n).sqrt()
    z_second = (v.square().mean(0) - moments["second"]) / (moments["second_variance"] / n).sqrt()
    states, probabilities = exact_hidden_probabilities(model, beta)
    codes = (chains.layers[1].to(torch.int64) * (1 << torch.arange(model.n_hidden))).sum(1)
    frequencies = torch.bincount(codes, minlength=states.shape[0]).to(torch.float64) / n
    p = probabilities.to(torch.float64)
    z_hidden = (frequencies - p) / (p * (1 - p) / n).sqrt()
    for name, z in (("E[v]", z_mean), ("E[v^2]", z_second), ("p(h)", z_hidden)):
        assert float(z.abs().max()) < MAX_Z, f"{name} at beta={beta}: z = {z.tolist()}"


# ------------------------------------------------------------------ exact log Z
@pytest.mark.parametrize("beta", [0.0, 0.3, 0.7, 1.0])
def test_exact_log_z_equals_quadrature_in_one_dimension(beta):
    """Σ_h ∫ dv by enumeration of h equals adaptive quadrature of the hidden-summed density."""
    model = random_gaussian_rbm(1, 3, scale=2.0, seed=1)

    def density(x: float) -> float:
        v = torch.tensor([[x]], dtype=torch.float64)
        return math.exp(float(-model.free_energy(v, beta)[0]))

    # Break points at the centres of the mixture components p_β(v | h), so quad sees every bump.
    centres = model.visible_conditional(all_binary_states(3), beta).mean[:, 0].tolist()
    value, error = integrate.quad(density, -60.0, 60.0, points=sorted(centres), limit=400)
    assert error < 1e-9 * value
    assert bl.exact_log_z(model, beta) == pytest.approx(math.log(value), abs=1e-8)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_exact_log_z_equals_dense_grid_in_two_dimensions(beta):
    """Trapezoid rule on a fine 2-D grid (geometrically convergent for this smooth, Gaussian-tailed
    integrand) agrees with the enumeration to far below any statistical tolerance."""
    model = random_gaussian_rbm(2, 3, scale=1.0, seed=2)
    axes = [torch.linspace(-25.0, 25.0, 1001, dtype=torch.float64) for _ in range(2)]
    grid = torch.cartesian_prod(*axes)
    log_f = -model.free_energy(grid, beta)
    spacing = float(axes[0][1] - axes[0][0])
    log_integral = float(torch.logsumexp(log_f, 0)) + 2 * math.log(spacing)
    edge = grid.abs().max(1).values >= 24.99
    assert float(log_f[edge].max()) < float(log_f.max()) - 40.0  # the grid holds all the mass
    assert bl.exact_log_z(model, beta) == pytest.approx(log_integral, abs=1e-7)


def test_base_is_normalised_and_chunks_do_not_matter():
    model = random_gaussian_rbm(4, 5, seed=3)
    assert bl.exact_log_z(model, 0.0) == pytest.approx(0.0, abs=1e-12)
    assert bl.exact_log_z(model, chunk_states=7) == pytest.approx(bl.exact_log_z(model), abs=1e-12)
    zero = GaussianRBM(n_visible=3, n_hidden=2, weight_std=0.0, std=torch.tensor([0.5, 1.0, 2.0]))
    # W = 0: Z = 2^J·Π_i √(2π)σ_i.
    expected = 2 * math.log(2) + sum(0.5 * math.log(2 * math.pi * s * s) for s in (0.5, 1.0, 2.0))
    assert bl.exact_log_z(zero) == pytest.approx(expected, abs=1e-5)


# ------------------------------------------------------------------ densities and conditionals
def test_hidden_summed_density_is_the_sum_of_the_joint():
    """logsumexp_h log f_β(v, h) = log f_β(v) from the MarginalTerms; log f_1 = −E."""
    model = random_gaussian_rbm(3, 4, seed=4)
    g = torch.Generator().manual_seed(0)
    v = torch.randn(7, 3, generator=g, dtype=torch.float64) * 2
    beta = torch.tensor([0.0, 0.2, 0.5, 0.5, 0.8, 1.0, 1.0], dtype=torch.float64)
    states = all_binary_states(4)
    joint = torch.stack(
        [model.log_f((v, state.expand(7, 4)), beta) for state in states],
        dim=1,
    )
    marginal = log_f_marginal(model.marginal_terms(v), beta)
    torch.testing.assert_close(torch.logsumexp(joint, 1), marginal, rtol=0, atol=1e-11)
    h = states[torch.randint(16, (7,), generator=g)]
    torch.testing.assert_close(model.log_f((v, h), 1.0), -model.energy((v, h)), rtol=0, atol=1e-12)


def test_hidden_log_f_integrates_the_joint_over_v():
    """hidden_log_f(h) = log ∫ f_β(v, h) dv, by quadrature in one dimension."""
    model = random_gaussian_rbm(1, 2, seed=5)
    for beta in (0.0, 0.6, 1.0):
        for state in all_binary_states(2):

            def joint(x: float, h=state, b=beta) -> float:
                v = torch.tensor([[x]], dtype=torch.float64)
                return math.exp(float(model.log_f((v, h[None, :]), b)[0]))

            value, _ = integrate.quad(joint, -60, 60, points=[0.0], limit=400)
            assert float(model.hidden_log_f(state[None, :], beta)[0]) == pytest.approx(
                math.log(value), abs=1e-8
            )


def test_hidden_logits_are_log_odds_of_the_joint():
    model = random_gaussian_rbm(3, 4, seed=6)
    g = torch.Generator().manual_seed(1)
    v = torch.randn(5, 3, generator=g, dtype=torch.float64)
    h = (torch.rand(5, 4, generator=g) < 0.5).to(torch.float64)
    beta = torch.tensor([0.0, 0.3, 0.6, 0.9, 1.0], dtype=torch.float64)
    logits = model.conditional_logits(1, (v, h), beta)
    for j in range(4):
        on, off = h.clone(), h.clone()
        on[:, j], off[:, j] = 1.0, 0.0
        difference = model.log_f((v, on), beta) - model.log_f((v, off), beta)
        torch.testing.assert_close(logits[:, j], difference, rtol=0, atol=1e-12)


def test_visible_conditional_is_the_joint_normalised_in_v():
    """log f_β(v, h) − log N(v; mean, std²) does not depend on v: the Gaussian is the conditional."""
    model = random_gaussian_rbm(3, 4, seed=7)
    g = torch.Generator().manual_seed(2)
    h = (torch.rand(6, 4, generator=g) < 0.5).to(torch.float64)
    beta = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0], dtype=torch.float64)
    conditional = model.visible_conditional(h, beta)
    differences = []
    for _ in range(5):
        v = torch.randn(6, 3, generator=g, dtype=torch.float64) * 3
        differences.append(model.log_f((v, h), beta) - conditional.log_density(v))
    spread = torch.stack(differences).std(0)
    assert float(spread.max()) < 1e-10
    # At β = 1 the textbook form: mean b + σ·Wh, std σ.
    at_target = model.visible_conditional(h, 1.0)
    torch.testing.assert_close(
        at_target.mean, model.visible_bias + model.std * (h @ model.weights.t()).detach()
    )
    torch.testing.assert_close(at_target.std, model.std.expand(6, 3))


def test_sample_conditional_draws_the_gaussian():
    model = random_gaussian_rbm(3, 2, seed=8)
    n = 40_000
    h = torch.tensor([[1.0, 0.0]], dtype=torch.float64).expand(n, 2).contiguous()
    beta = torch.full((n,), 0.35, dtype=torch.float64)
    v = model.sample_conditional(
        0, (torch.zeros(n, 3, dtype=torch.float64), h), beta, generator=torch.Generator().manual_seed(3)
    )
    conditional = model.visible_conditional(h[:1], 0.35)
    mean, std = conditional.mean[0], conditional.std[0]
    assert float(((v.mean(0) - mean) / (std / math.sqrt(n))).abs().max()) < MAX_Z
    # The sample variance of n Gaussians has standard error σ²·√(2/(n−1)).
    assert float(((v.var(0) - std**2) / (std**2 * math.sqrt(2 / (n - 1)))).abs().max()) < MAX_Z


def test_visible_layer_has_no_logits():
    model = random_gaussian_rbm(3, 2, seed=9)
    layers = (torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64))
    with pytest.raises(ValidationError, match="sample_conditional"):
        model.conditional_logits(0, layers, torch.ones(2, dtype=torch.float64))


# ------------------------------------------------------------------ sampling
def test_init_chains_are_exact_base_samples():
    model = random_gaussian_rbm(3, 4, seed=10)
    chains = model.init_chains(30_000, generator=torch.Generator().manual_seed(4))
    assert_matches_exact(model, chains, 0.0)
    assert chains.layers[0].dtype == torch.float64 and float(chains.beta.max()) == 0.0


@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_sweeps_leave_the_tempered_joint_invariant(operator):
    """Exact samples at two temperatures in one batch stay exact after two sweeps."""
    model = random_gaussian_rbm(2, 3, scale=2.0, seed=11)
    g = torch.Generator().manual_seed(5)
    n = 15_000
    hot, cold = exact_samples(model, n, 0.45, g), exact_samples(model, n, 1.0, g)
    chains = bl.Chains(
        layers=tuple(torch.cat(pair) for pair in zip(hot.layers, cold.layers, strict=True)),
        beta=torch.cat([hot.beta, cold.beta]),
    )
    start, copies = chains, tuple(layer.clone() for layer in chains.layers)
    op = bl.operators.get(operator)
    for _ in range(2):
        chains, _ = op.step(model, chains, generator=g)
    assert all(torch.equal(a, b) for a, b in zip(copies, start.layers, strict=True))
    assert chains.layers[0].dtype == torch.float64 and chains.layers[1].dtype == torch.float64
    assert_matches_exact(model, chains.select(slice(0, n)), 0.45)
    assert_matches_exact(model, chains.select(slice(n, 2 * n)), 1.0)


def test_step_does_not_modify_its_input_and_is_reproducible():
    model = random_gaussian_rbm(7, 3, seed=12, dtype=torch.float32)
    chains = model.init_chains(13, generator=0).with_beta(torch.linspace(0.2, 1.0, 13))
    copies = tuple(layer.clone() for layer in chains.layers)
    op = bl.operators.get("flip")
    first, _ = op.step(model, chains, generator=torch.Generator().manual_seed(6))
    second, _ = op.step(model, chains, generator=torch.Generator().manual_seed(6))
    assert all(torch.equal(a, b) for a, b in zip(copies, chains.layers, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(first.layers, second.layers, strict=True))
    assert first.layers[0].dtype == torch.float32 and tuple(first.layers[0].shape) == (13, 7)
    assert bool(((first.layers[1] == 0) | (first.layers[1] == 1)).all())


def test_parallel_tempering_samples_the_model():
    """The β = 1 chains of independent PT systems (gibbs, 5 levels) match the exact moments."""
    model = random_gaussian_rbm(2, 3, scale=2.5, seed=13)
    result = bl.sample(
        model,
        sampler="pt",
        operator="gibbs",
        n_chains=12_000,
        n_sweeps=30,
        n_levels=5,
        generator=7,
    )
    assert_matches_exact(model, result.chains, 1.0)


def test_plain_sampler_accepts_real_init_data():
    model = random_gaussian_rbm(3, 2, seed=14)
    data = torch.randn(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(20))
    result = bl.sample(model, n_chains=11, n_sweeps=2, init=data, generator=0)
    assert tuple(result.chains.layers[0].shape) == (11, 3)


# ------------------------------------------------------------------ estimators
@pytest.mark.parametrize("operator", ["gibbs", "flip"])
def test_ais_agrees_with_exact_log_z(operator):
    model = random_gaussian_rbm(9, 11, scale=0.4, seed=15, dtype=torch.float32)
    exact = bl.exact_log_z(model)
    estimate = bl.estimate_log_z(
        model,
        method="ais",
        n_chains=200,
        n_temperatures=800,
        schedule="linear",
        operator=operator,
        generator=8,
    )
    assert estimate.stderr < 0.2
    assert abs(estimate.log_z - exact) < MAX_Z * estimate.stderr, (estimate.log_z, exact, estimate.stderr)


def test_raise_agrees_with_the_exact_log_likelihood_of_real_data():
    """RAISE starts at real data (the trainer's data hook) and runs the reverse chain through the
    Gaussian conditional; each example's estimate is within MAX_Z standard errors of exact."""
    from boltzlab.estimators.annealing.raise_ import raise_log_likelihood

    model = random_gaussian_rbm(6, 7, scale=0.4, seed=3, dtype=torch.float32)
    data = exact_samples(model, 5, 1.0, torch.Generator().manual_seed(2)).layers[0]
    exact = -model.free_energy(data) - bl.exact_log_z(model)
    result = raise_log_likelihood(
        model, data, n_temperatures=500, n_chains=100, schedule="linear", generator=0
    )
    z = (result.log_likelihoods - exact) / result.stderrs
    assert float(result.stderrs.max()) < 0.1
    assert float(z.abs().max()) < MAX_Z, (result.log_likelihoods, exact, result.stderrs)


def test_log_likelihood_of_real_data_and_validation():
    model = random_gaussian_rbm(3, 4, seed=16)
    data = torch.randn(25, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(25))
    log_z = bl.exact_log_z(model)
    expected = float((-model.free_energy(data)).mean()) - log_z
    assert bl.log_likelihood(model, data, log_z) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValidationError, match="data contains NaN"):
        bl.log_likelihood(model, torch.full((2, 3), math.nan), log_z)
    with pytest.raises(ValidationError, match="data has 4 units"):
        bl.log_likelihood(model, torch.zeros(2, 4), log_z)
    with pytest.raises(ValidationError, match="binary"):  # a binary RBM still refuses real data
        bl.log_likelihood(bl.RBM(n_visible=3, n_hidden=2), data, 0.0)


# ------------------------------------------------------------------ training
def _finite_difference(function, tensor: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
    gradient = torch.empty_like(tensor, dtype=torch.float64)
    flat = tensor.data.view(-1)
    for k in range(flat.numel()):
        saved = float(flat[k])
        flat[k] = saved + epsilon
        up = function()
        flat[k] = saved - epsilon
        down = function()
        flat[k] = saved
        gradient.view(-1)[k] = (up - down) / (2 * epsilon)
    return gradient


PARAMETERS = ("weights", "visible_bias", "hidden_bias", "log_std")


def test_data_term_is_the_gradient_of_the_free_energy():
    """⟨−∂E/∂θ⟩ with h ~ p(h|v) equals ∂/∂θ of the mean hidden-summed log f(v), for every θ."""
    model = random_gaussian_rbm(3, 2, seed=17, learn_std=True)
    data = torch.randn(9, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    objective = GaussianRBMObjective()
    statistics = objective.statistics(model, objective.positive(model, data))
    for name in PARAMETERS:
        numeric = _finite_difference(lambda: float((-model.free_energy(data)).mean()), getattr(model, name))
        torch.testing.assert_close(getattr(statistics, name), numeric, rtol=1e-6, atol=1e-7)


def test_model_term_is_the_gradient_of_log_z():
    """⟨−∂E/∂θ⟩ over exact model samples (Rao-Blackwellised h) matches ∂ log Z/∂θ in z-scores."""
    model = random_gaussian_rbm(3, 2, seed=18, learn_std=True)
    samples = exact_samples(model, 40_000, 1.0, torch.Generator().manual_seed(10))
    objective = GaussianRBMObjective()
    negative = objective.negative(model, samples)
    batches = [
        objective.statistics(model, (v, h))
        for v, h in zip(negative[0].split(200), negative[1].split(200), strict=True)
    ]
    for name in PARAMETERS:
        numeric = _finite_difference(lambda: bl.exact_log_z(model), getattr(model, name))
        values = torch.stack([getattr(batch, name) for batch in batches])
        z = (values.mean(0) - numeric) / (values.std(0) / math.sqrt(len(batches)))
        assert float(z.abs().max()) < MAX_Z, (name, z)


@pytest.mark.parametrize("learn_std", [False, True])
def test_write_gradient_is_model_minus_data(learn_std):
    model = random_gaussian_rbm(4, 3, seed=19, learn_std=learn_std)
    g = torch.Generator().manual_seed(11)
    objective = bl.training.objective_for(model)
    positive = objective.positive(model, torch.randn(6, 4, generator=g, dtype=torch.float64))
    negative = objective.negative(model, exact_samples(model, 9, 1.0, g))
    objective.write_gradient_(model, positive, negative)
    data_term, model_term = objective.statistics(model, positive), objective.statistics(model, negative)
    for name in PARAMETERS:
        grad = getattr(model, name).grad
        if name == "log_std" and not learn_std:
            assert grad is None
            continue
        torch.testing.assert_close(
            grad, getattr(model_term, name) - getattr(data_term, name), rtol=0, atol=1e-12
        )


def _two_cluster_data(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    sign = torch.where(torch.rand(n, 1, generator=g) < 0.35, -1.0, 1.0)
    centre = torch.tensor([1.4, -1.0, 0.8, 0.0], dtype=torch.float64)
    return sign * centre + 0.45 * torch.randn(n, 4, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("algorithm", ["cd", "pcd"])
def test_training_increases_the_exact_log_likelihood(algorithm):
    """CD-1 / PCD on a two-cluster real dataset: the per-example exact log-likelihood gain is
    positive by many standard errors (paired over examples), and the tracker sees the same."""
    data = _two_cluster_data(400, seed=12)
    model = GaussianRBM(n_visible=4, n_hidden=3, generator=13, dtype=torch.float64, weight_std=0.1)
    model.set_base_from_data(data)
    before = -model.free_energy(data) - bl.exact_log_z(model)
    result = bl.train(
        model,
        data,
        algorithm=algorithm,
        n_chains=50,
        batch_size=40,
        n_updates=400,
        learning_rate=0.05,
        momentum=0.5,
        log_every=400,
        track_exact_every=400,
        generator=14,
    )
    after = -model.free_energy(data) - bl.exact_log_z(model)
    gain = after - before
    assert float(gain.mean()) > MAX_Z * float(gain.std() / math.sqrt(len(gain)))
    first, last = result.history[0], result.history[-1]
    assert first.train_log_likelihood == pytest.approx(float(before.mean()), abs=1e-9)
    assert last.train_log_likelihood == pytest.approx(float(after.mean()), abs=1e-9)
    assert math.isfinite(last.reconstruction_error)


# ------------------------------------------------------------------ representation and files
def test_hidden_activities_and_chains_from():
    model = random_gaussian_rbm(5, 4, seed=20)
    data = torch.randn(8, 5, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    probability = model.hidden_activities(data)
    expected = torch.sigmoid(model.conditional_logits(1, (data, None), torch.ones(8, dtype=torch.float64)))
    torch.testing.assert_close(probability, expected, rtol=0, atol=1e-15)
    assert torch.equal(model.hidden_activities(data, mode="threshold"), (probability > 0.5).to(torch.float64))
    sampled = model.hidden_activities(data, mode="sample", generator=16)
    assert torch.equal(sampled, model.hidden_activities(data, mode="sample", generator=16))
    assert bool(((sampled == 0) | (sampled == 1)).all())
    chains = model.chains_from(data, generator=17)
    assert torch.equal(chains.layers[0], data) and float(chains.beta.min()) == 1.0
    with pytest.raises(ValidationError, match="mode"):
        model.hidden_activities(data, mode="mean")


@pytest.mark.parametrize("learn_std", [False, True])
def test_save_load_round_trip_is_bit_exact(tmp_path, learn_std):
    model = random_gaussian_rbm(6, 3, seed=21, dtype=torch.float32, learn_std=learn_std)
    path = model.save(tmp_path / "gbrbm.safetensors", metadata={"note": "test"})
    loaded = GaussianRBM.load(path)
    assert isinstance(load_model(path), GaussianRBM)
    for name in ("weights", "visible_bias", "hidden_bias", "log_std", "base_mean", "base_std"):
        assert torch.equal(getattr(loaded, name), getattr(model, name).detach()), name
    assert loaded.base_fitted and loaded.metadata["note"] == "test" and not loaded.learn_std
    assert bl.exact_log_z(loaded) == bl.exact_log_z(model)
    with pytest.raises(ValidationError, match="not a GaussianRBM"):
        GaussianRBM.load(bl.RBM(n_visible=3, n_hidden=2).save(tmp_path / "rbm.safetensors"))


def test_constructor_validates():
    with pytest.raises(ValidationError, match="std must be positive"):
        GaussianRBM(n_visible=3, n_hidden=2, std=torch.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(ValidationError, match="std must be a number or have shape"):
        GaussianRBM(n_visible=3, n_hidden=2, std=torch.ones(4))
    with pytest.raises(ValidationError, match="n_hidden <= 30"):
        next(GaussianRBM(n_visible=2, n_hidden=31).enumerate_log_f())
    assert np.isfinite(bl.exact_log_z(GaussianRBM(n_visible=2, n_hidden=2)))
