"""The Gaussian-mixture family: normalised base, exact log Z(β), exact samples, gradients, protocol.

Monte Carlo checks use fixed seeds and z-scores (|z| < 4) from the samples' own standard
errors; deterministic ones compare with independent formulas or adaptive quadrature.
"""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from scipy.special import logsumexp

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models import GaussianMixtureFamily, log_f_marginal, log_f_marginal_all, path_derivative
from boltzlab.numerics import log_mean_exp, log_mean_exp_stderr
from tolerances import MAX_Z


def three_component_family(dtype=torch.float64) -> GaussianMixtureFamily:
    """7-D, three unequal components, a non-diagonal direction and an explicit log Z."""
    return GaussianMixtureFamily(
        7,
        positions=(-2.0, 1.0, 4.5),
        weights=(2.0, 5.0, 3.0),  # relative: normalised to (0.2, 0.5, 0.3)
        component_std=0.7,
        base_std=2.5,
        log_z=3.3,
        direction=(1.0, -2.0, 0.5, 0.0, 3.0, 1.0, -1.0),
        dtype=dtype,
    )


def unit(direction) -> torch.Tensor:
    direction = torch.as_tensor(direction, dtype=torch.float64)
    return direction / direction.norm()


def gaussian_log_density(x: torch.Tensor, mean: torch.Tensor, std: float) -> torch.Tensor:
    """log N(x; mean, std² I) written out, float64, shape (n,)."""
    d = x.shape[1]
    return -((x - mean) ** 2).sum(1) / (2 * std**2) - 0.5 * d * math.log(2 * math.pi * std**2)


def mean_z(values: torch.Tensor, expected: float) -> float:
    values = values.to(torch.float64)
    return float((values.mean() - expected) / (values.std() / math.sqrt(values.numel())))


def test_default_family_is_two_separated_ten_dimensional_gaussians():
    model = GaussianMixtureFamily()
    assert model.layer_sizes == (10,)
    assert model.update_groups == ((), (0,))
    assert model.dtype == torch.float64
    means = model.means
    assert means.shape == (2, 10)
    assert float((means[1] - means[0]).norm()) == pytest.approx(6.0 * model.component_std)
    assert torch.allclose(model.log_weights.exp(), torch.tensor([0.25, 0.75], dtype=torch.float64))
    assert model.exact_log_z(1.0) == pytest.approx(5 * math.log(2 * math.pi), abs=1e-12)


def test_target_density_is_the_stated_mixture():
    # f(x) = Z · Σ_c w_c N(x; a_c u, σ² I), written independently of the model's algebra.
    model = three_component_family()
    x = torch.randn(13, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    u = unit((1.0, -2.0, 0.5, 0.0, 3.0, 1.0, -1.0))
    weights = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    components = torch.stack(
        [gaussian_log_density(x, a * u, 0.7) for a in (-2.0, 1.0, 4.5)], dim=1
    ) + torch.log(weights)
    expected = 3.3 + torch.logsumexp(components, 1)
    assert torch.allclose(-model.energy((x,)), expected, atol=1e-12)
    assert torch.allclose(model.log_f((x,), 1.0), expected, atol=1e-12)


def test_log_f_at_zero_is_the_normalised_base():
    # Closed form: log f_0 = log N(0, s² I); and by Monte Carlo, E_q[f_0/q] = 1 for a wider q.
    model = three_component_family()
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(20_000, 7, generator=generator, dtype=torch.float64) * 3.5
    assert torch.allclose(model.log_f((x,), 0.0), gaussian_log_density(x, torch.zeros(7), 2.5), atol=1e-12)
    log_weights = model.log_f((x,), 0.0) - gaussian_log_density(x, torch.zeros(7), 3.5)
    z = float(log_mean_exp(log_weights)) / log_mean_exp_stderr(log_weights)
    assert abs(z) < MAX_Z
    assert model.exact_log_z(0.0) == 0.0
    assert bl.exact_log_z(model, 0.0) == 0.0


def importance_log_z(model: GaussianMixtureFamily, beta: float, n: int, seed: int) -> tuple[float, float]:
    """log Z(β) by importance sampling in all d dimensions, from an equal-weight mixture of
    Gaussians 1.3 times wider than p_β's bumps, centred on them: (estimate, stderr)."""
    generator = torch.Generator().manual_seed(seed)
    u = model.unit_direction
    precision = beta / model.component_std**2 + (1 - beta) / model.base_std**2
    centres = beta * model.positions.to(torch.float64) / (model.component_std**2 * precision)
    std = 1.3 / math.sqrt(precision)
    picks = torch.randint(0, centres.numel(), (n,), generator=generator)
    x = centres[picks, None] * u + std * torch.randn(
        n, model.dimension, generator=generator, dtype=torch.float64
    )
    log_q = torch.logsumexp(
        torch.stack([gaussian_log_density(x, c * u, std) for c in centres], dim=1), 1
    ) - math.log(centres.numel())
    log_weights = model.log_f((x,), beta) - log_q
    return float(log_mean_exp(log_weights)), log_mean_exp_stderr(log_weights)


@pytest.mark.parametrize("beta", [1.0, 0.8, 0.35])
@pytest.mark.parametrize("make", [GaussianMixtureFamily, three_component_family])
def test_exact_log_z_agrees_with_importance_sampling(make, beta):
    model = make()
    estimate, stderr = importance_log_z(model, beta, 40_000, seed=int(beta * 100))
    exact = model.exact_log_z(beta)
    assert abs(estimate - exact) / stderr < MAX_Z, f"IS {estimate:.4f} ± {stderr:.4f} vs exact {exact:.4f}"
    assert stderr < 0.02  # the check has power: a 0.1-nat error would be 5 standard errors


def test_exact_log_z_agrees_with_adaptive_quadrature():
    # log Z(β) = Gaussian integral over the d − 1 coordinates across the line times an
    # adaptive (scipy QUADPACK) integral along it, to near float64 precision.
    model = three_component_family()
    a, log_w, sigma, s, d = np.array([-2.0, 1.0, 4.5]), np.log([0.2, 0.5, 0.3]), 0.7, 2.5, 7
    for beta in (0.02, 0.3, 0.77, 0.999):
        precision = beta / sigma**2 + (1 - beta) / s**2

        def along(t, beta=beta):
            log_target = (
                3.3
                + logsumexp(log_w - (t - a) ** 2 / (2 * sigma**2))
                - 0.5 * math.log(2 * math.pi * sigma**2)
            )
            log_base = -(t**2) / (2 * s**2) - 0.5 * math.log(2 * math.pi * s**2)
            return math.exp(beta * log_target + (1 - beta) * log_base)

        integral, _ = quad(along, -40, 40, points=[-2.0, 0.0, 1.0, 4.5], limit=400, epsabs=0, epsrel=1e-13)
        across = (d - 1) * (
            -beta * 0.5 * math.log(2 * math.pi * sigma**2)
            - (1 - beta) * 0.5 * math.log(2 * math.pi * s**2)
            + 0.5 * math.log(2 * math.pi / precision)
        )
        assert model.exact_log_z(beta) == pytest.approx(math.log(integral) + across, abs=1e-10)
        assert bl.exact_log_z(model, beta) == model.exact_log_z(beta)
    assert model.exact_log_z(1.0) == 3.3
    assert bl.estimate_log_z(model, method="exact").log_z == 3.3


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_exact_samples_match_the_density_along_and_across_the_line(beta):
    # Moments of t = x·u by adaptive quadrature of the 1-D density, and E‖y‖² = (d − 1)/λ_β.
    model = three_component_family()
    chains = model.sample_exact(30_000, beta=beta, generator=7)
    assert chains.layers[0].shape == (30_000, 7) and torch.all(chains.beta == beta)
    x = chains.layers[0]
    u = unit((1.0, -2.0, 0.5, 0.0, 3.0, 1.0, -1.0))
    t = x @ u
    across = (x - t[:, None] * u).square().sum(1)
    a, log_w, sigma, s = np.array([-2.0, 1.0, 4.5]), np.log([0.2, 0.5, 0.3]), 0.7, 2.5

    def density(t_value, power=0):
        log_value = beta * logsumexp(log_w - (t_value - a) ** 2 / (2 * sigma**2)) - (
            1 - beta
        ) * t_value**2 / (2 * s**2)
        return t_value**power * math.exp(log_value)

    def expectation(power):
        return quad(density, -40, 40, args=(power,), limit=400)[0] / quad(density, -40, 40, limit=400)[0]

    precision = beta / sigma**2 + (1 - beta) / s**2
    assert abs(mean_z(t, expectation(1))) < MAX_Z
    assert abs(mean_z(t**2, expectation(2))) < MAX_Z
    assert abs(mean_z(across, 6 / precision)) < MAX_Z
    for threshold in (-1.0, 2.5):
        below = (
            quad(lambda v: density(v), -40, threshold, limit=400)[0] / quad(density, -40, 40, limit=400)[0]
        )
        assert abs(mean_z((t < threshold).double(), below)) < MAX_Z


def test_derivative_of_exact_log_z_is_the_mean_path_derivative():
    # d log Z/dβ = E_β[∂_β log f_β] ties exact_log_z, sample_exact and path_derivative together.
    model = GaussianMixtureFamily()
    for beta in (0.25, 0.6):
        h = 1e-5
        derivative = (model.exact_log_z(beta + h) - model.exact_log_z(beta - h)) / (2 * h)
        chains = model.sample_exact(20_000, beta=beta, generator=int(beta * 100))
        s = path_derivative(model.marginal_terms(chains.layers), beta)
        assert abs(mean_z(s, derivative)) < MAX_Z


def test_summed_out_protocol_reproduces_log_f_with_nothing_summed():
    model = three_component_family()
    x = model.sample_exact(13, beta=0.5, generator=3).layers[0]
    beta = torch.linspace(0.0, 1.0, 13, dtype=torch.float64)
    terms = model.marginal_terms((x,))
    assert terms.preactivation.shape == (13, 0)
    assert torch.allclose(log_f_marginal(terms, beta), model.log_f((x,), beta), atol=1e-12)
    betas = torch.tensor([0.0, 0.3, 1.0], dtype=torch.float64)
    expected = torch.stack([model.log_f((x,), float(b)) for b in betas], dim=1)
    assert torch.allclose(log_f_marginal_all(terms, betas), expected, atol=1e-12)
    # log f_β is linear in β: its derivative is log f − log p1 at every β.
    assert torch.allclose(
        path_derivative(terms, 0.2), model.log_f((x,), 1.0) - model.log_f((x,), 0.0), atol=1e-12
    )


def test_gradient_matches_autograd_at_per_chain_beta():
    model = three_component_family()
    x = model.sample_exact(13, beta=0.3, generator=4).layers[0].clone().requires_grad_(True)
    beta = torch.linspace(0.0, 1.0, 13, dtype=torch.float64)
    (expected,) = torch.autograd.grad(model.log_f((x,), beta).sum(), x)
    (gradient,) = model.log_f_gradient((x.detach(),), beta)
    assert gradient.shape == (13, 7)
    assert torch.allclose(gradient, expected, atol=1e-12)
    (scalar,) = model.log_f_gradient((x.detach(),), 0.3)
    (vector,) = model.log_f_gradient((x.detach(),), torch.full((13,), 0.3, dtype=torch.float64))
    assert torch.equal(scalar, vector)


def test_init_chains_are_exact_base_samples_and_reproducible():
    model = GaussianMixtureFamily()
    chains = model.init_chains(20_000, generator=5)
    assert torch.all(chains.beta == 0.0) and chains.layers[0].dtype == torch.float64
    x = chains.layers[0]
    assert abs(mean_z(x[:, 3], 0.0)) < MAX_Z
    assert abs(mean_z(x.square().sum(1), 10 * 9.0)) < MAX_Z
    again = model.init_chains(20_000, generator=5)
    assert torch.equal(again.layers[0], x)
    assert not torch.equal(model.init_chains(20_000, generator=6).layers[0], x)
    assert torch.equal(
        model.sample_exact(11, beta=0.6, generator=2).layers[0],
        model.sample_exact(11, beta=0.6, generator=2).layers[0],
    )


def test_float32_model_refers_to_the_same_distribution():
    # Parameters are stored in float32 but used in float64, so exact log Z and densities
    # agree with a float64 model up to the rounding of the stored parameters.
    model64 = three_component_family()
    model32 = three_component_family(torch.float32)
    assert model32.dtype == torch.float32
    chains = model32.init_chains(13, generator=0)
    assert chains.layers[0].dtype == torch.float32 and chains.beta.dtype == torch.float32
    x = chains.layers[0]
    assert model32.log_f((x,), 0.5).dtype == torch.float64
    assert torch.allclose(model32.log_f((x,), 0.5), model64.log_f((x,), 0.5), atol=1e-5)
    assert model32.exact_log_z(0.5) == pytest.approx(model64.exact_log_z(0.5), abs=1e-5)
    assert model64.to(torch.float32).dtype == torch.float32  # a module: .to() moves the buffers


def test_layerwise_operators_refuse_the_continuous_model_readably():
    model = GaussianMixtureFamily()
    chains = model.init_chains(3, generator=0).with_beta(1.0)
    with pytest.raises(ValidationError, match="hmc"):
        bl.operators.get("gibbs").step(model, chains, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"positions": (0.0, 1.0), "weights": (1.0,)}, "one per component"),
        ({"weights": (0.5, -0.5)}, "positive"),
        ({"component_std": 0.0}, "component_std"),
        ({"base_std": float("nan")}, "base_std"),
        ({"direction": (1.0, 2.0)}, "direction"),
        ({"direction": (0.0,) * 10}, "zero vector"),
        ({"positions": ()}, "positions"),
        ({"dtype": torch.int64}, "dtype"),
    ],
)
def test_bad_parameters_are_refused_by_name(options, message):
    with pytest.raises(ValidationError, match=message):
        GaussianMixtureFamily(**options)


def test_bad_beta_is_refused():
    model = GaussianMixtureFamily()
    with pytest.raises(ValidationError, match="beta"):
        model.exact_log_z(1.5)
    with pytest.raises(ValidationError, match="beta"):
        model.sample_exact(3, beta=-0.1)
