"""HMC: an exact integrator (reversible, volume-preserving, second order) and a kernel that leaves
every tempered distribution invariant, at per-chain β, alone and inside tempering schemes.

Invariance is checked the direct way: chains start from exact samples of p_β, take a few HMC
steps, and must still be exact samples — compared with exact values (Gaussian) or with an
independent exact sample (mixture) by z-scores (|z| < MAX_Z) of several statistics.
"""

import itertools
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models import GaussianMixtureFamily
from boltzlab.operators.hmc import HMCInfo, HMCOperator, PhasePoint, gradient_log_f, leapfrog
from boltzlab.tempering import ladders
from tolerances import MAX_Z


def hamiltonian(model, point: PhasePoint, beta: torch.Tensor) -> torch.Tensor:
    return -model.log_f((point.position,), beta) + 0.5 * point.momentum.square().sum(1)


def start_point(model, n_chains: int, beta: torch.Tensor, seed: int) -> PhasePoint:
    generator = torch.Generator().manual_seed(seed)
    x = torch.cat([model.sample_exact(1, beta=float(b), generator=generator).layers[0] for b in beta])
    momentum = torch.randn(x.shape, generator=generator, dtype=x.dtype)
    return PhasePoint(position=x, momentum=momentum, gradient=gradient_log_f(model, x, beta))


def two_sample_z(first: torch.Tensor, second: torch.Tensor) -> float:
    first, second = first.to(torch.float64), second.to(torch.float64)
    error = math.sqrt(first.var() / first.numel() + second.var() / second.numel())
    return float((first.mean() - second.mean()) / error)


def test_leapfrog_is_reversible():
    # Forward L steps, flip the momentum, L steps again: back at the start (to 1e-10), with
    # every chain at its own β in one batch.
    model = GaussianMixtureFamily()
    beta = torch.linspace(0.0, 1.0, 13, dtype=torch.float64)
    start = start_point(model, 13, beta, seed=0)
    end = leapfrog(model, start, beta, step_size=0.3, n_steps=25)
    assert (end.position - start.position).abs().max() > 0.5  # it went somewhere
    flipped = PhasePoint(position=end.position, momentum=-end.momentum, gradient=end.gradient)
    back = leapfrog(model, flipped, beta, step_size=0.3, n_steps=25)
    assert (back.position - start.position).abs().max() < 1e-10
    assert (back.momentum + start.momentum).abs().max() < 1e-10


def test_leapfrog_preserves_volume():
    # The Jacobian of (x, p) -> (x', p') has determinant 1, so no Jacobian enters the accept.
    model = GaussianMixtureFamily(4, positions=(-1.5, 2.0), component_std=0.8)
    beta = torch.tensor([0.6], dtype=torch.float64)
    start = start_point(model, 1, beta, seed=1)

    def flow(phase: torch.Tensor) -> torch.Tensor:
        x, p = phase[None, :4], phase[None, 4:]
        point = PhasePoint(position=x, momentum=p, gradient=gradient_log_f(model, x, beta))
        end = leapfrog(model, point, beta, step_size=0.35, n_steps=12)
        return torch.cat([end.position[0], end.momentum[0]])

    jacobian = torch.autograd.functional.jacobian(flow, torch.cat([start.position[0], start.momentum[0]]))
    assert abs(float(torch.linalg.det(jacobian)) - 1.0) < 1e-10


def test_energy_error_is_second_order_in_the_step():
    # Leapfrog is a second-order integrator: at a fixed trajectory length, halving ε divides
    # the energy error by 4 asymptotically (an Euler step would give 2, a wrong gradient no
    # decrease at all, nor would a gradient taken at another chain's β). 4.0 ± 0.2 holds
    # from ε = 0.2 down on this family.
    model = GaussianMixtureFamily()
    beta = torch.linspace(0.0, 1.0, 200, dtype=torch.float64)
    start = start_point(model, 200, beta, seed=2)
    errors = []
    for step_size, n_steps in ((0.2, 8), (0.1, 16), (0.05, 32)):
        end = leapfrog(model, start, beta, step_size=step_size, n_steps=n_steps)
        errors.append(float((hamiltonian(model, end, beta) - hamiltonian(model, start, beta)).abs().mean()))
    for coarse, fine in itertools.pairwise(errors):
        assert 3.8 < coarse / fine < 4.2, errors


@pytest.mark.parametrize("beta", [1.0, 0.45])
def test_hmc_leaves_a_gaussian_invariant(beta):
    # One component: p_β = N(m_β u, λ_β⁻¹ I) exactly. Exact start, 3 steps with acceptance
    # well below 1 (so the Metropolis correction matters), then per-coordinate mean and
    # variance z-scores against the closed form.
    model = GaussianMixtureFamily(10, positions=(2.0,), weights=(1.0,), component_std=0.8, base_std=3.0)
    precision = beta / 0.64 + (1 - beta) / 9.0
    mean = (beta * 2.0 / (0.64 * precision)) * model.unit_direction
    variance = 1.0 / precision
    operator = HMCOperator(step_size=1.1 / math.sqrt(precision), n_leapfrog=5)
    generator = torch.Generator().manual_seed(10)
    chains = model.sample_exact(6000, beta=beta, generator=generator)
    rates = []
    for _ in range(3):
        chains, info = operator.step(model, chains, generator=generator)
        rates.append(info.acceptance_rate)
    assert min(rates) > 0.4 and max(rates) < 0.95, rates
    x = chains.layers[0]
    n = x.shape[0]
    mean_z = (x.mean(0) - mean) / math.sqrt(variance / n)
    variance_z = (x.var(0) - variance) / (variance * math.sqrt(2.0 / (n - 1)))
    assert mean_z.abs().max() < MAX_Z, mean_z
    assert variance_z.abs().max() < MAX_Z, variance_z


def mixture_statistics(model: GaussianMixtureFamily, x: torch.Tensor, beta: float) -> dict[str, torch.Tensor]:
    t = x @ model.unit_direction
    return {
        "t": t,
        "t^2": t.square(),
        "|x|^2": x.square().sum(1),
        "t<-1": (t < -1.0).double(),
        "t<0": (t < 0.0).double(),  # the light mode's share
        "t<1": (t < 1.0).double(),
        "log f_beta": model.log_f((x,), beta),
    }


@pytest.mark.parametrize("adapt", [False, True])
def test_hmc_leaves_the_tempered_mixture_invariant_at_per_chain_beta(adapt):
    # Three temperatures in one batch. Both modes are occupied in their exact proportions at
    # the start; HMC must keep every statistic's distribution (two-sample z against a second
    # exact sample), whether or not it crosses between modes.
    model = GaussianMixtureFamily()
    betas = (1.0, 0.55, 0.15)
    n_per_beta = 3000
    generator = torch.Generator().manual_seed(20 + adapt)
    start = [model.sample_exact(n_per_beta, beta=beta, generator=generator) for beta in betas]
    chains = bl.Chains(
        layers=(torch.cat([c.layers[0] for c in start]),), beta=torch.cat([c.beta for c in start])
    )
    operator = HMCOperator(step_size=0.6, n_leapfrog=6, adapt=adapt)
    for _ in range(3):
        chains, info = operator.step(model, chains, generator=generator)
    assert 0.5 < info.acceptance_rate < 0.99
    x = chains.layers[0].view(len(betas), n_per_beta, -1)
    for index, beta in enumerate(betas):
        reference = model.sample_exact(n_per_beta, beta=beta, generator=generator).layers[0]
        moved = mixture_statistics(model, x[index], beta)
        exact = mixture_statistics(model, reference, beta)
        for name in moved:
            z = two_sample_z(moved[name], exact[name])
            assert abs(z) < MAX_Z, f"β = {beta}, {name}: z = {z:.2f}"


def test_acceptance_is_sane_and_falls_with_the_step_size():
    model = GaussianMixtureFamily()
    generator = torch.Generator().manual_seed(30)
    chains = model.sample_exact(500, beta=0.8, generator=generator)
    rates = {}
    for step_size in (1e-3, 0.25, 0.9):
        _, info = HMCOperator(step_size, 8).step(model, chains, generator=generator)
        rates[step_size] = info.acceptance_rate
        assert isinstance(info, HMCInfo) and info.accepted.shape == (500,)
        assert torch.all(info.step_size == step_size)
    assert rates[1e-3] > 0.999  # energy error O(ε²): nearly exact
    assert rates[1e-3] > rates[0.25] > rates[0.9]
    default = bl.operators.get("hmc")
    for beta in (0.0, 0.5, 1.0):
        moved, info = default.step(model, chains.with_beta(beta), generator=generator)
        assert 0.85 < info.acceptance_rate < 1.0, (beta, info.acceptance_rate)
        # Accepted chains really move: the step decorrelates a coordinate across the line.
        corr = torch.corrcoef(torch.stack([chains.layers[0][:, 0], moved.layers[0][:, 0]]))[0, 1]
        assert corr < 0.9
        assert torch.allclose(info.flip_rate, info.accepted.double())


def test_step_is_reproducible_and_leaves_its_input_alone():
    model = GaussianMixtureFamily()
    chains = model.sample_exact(13, beta=0.5, generator=1)
    before = chains.layers[0].clone()
    operator = HMCOperator(0.4, 5)
    first, first_info = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
    second, second_info = operator.step(model, chains, generator=torch.Generator().manual_seed(3))
    other, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(4))
    assert torch.equal(chains.layers[0], before)
    assert torch.equal(first.layers[0], second.layers[0])
    assert torch.equal(first_info.log_acceptance_ratio, second_info.log_acceptance_ratio)
    assert not torch.equal(first.layers[0], other.layers[0])
    assert first.beta is chains.beta or torch.equal(first.beta, chains.beta)


def test_float32_chains_keep_their_dtype():
    model = GaussianMixtureFamily(dtype=torch.float32)
    generator = torch.Generator().manual_seed(5)
    chains = model.sample_exact(50, beta=0.9, generator=generator)
    moved, info = bl.operators.get("hmc").step(model, chains, generator=generator)
    assert moved.layers[0].dtype == torch.float32 and moved.beta.dtype == torch.float32
    assert info.log_acceptance_ratio.dtype == torch.float64
    assert info.acceptance_rate > 0.8


class AutogradOnly:
    """The model without its closed-form gradient, so HMC falls back to autograd."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        if name == "log_f_gradient":
            raise AttributeError(name)
        return getattr(self._model, name)


def test_autograd_fallback_follows_the_same_trajectory():
    model = GaussianMixtureFamily()
    chains = model.sample_exact(13, beta=0.7, generator=6)
    operator = HMCOperator(0.4, 6)
    closed, _ = operator.step(model, chains, generator=torch.Generator().manual_seed(1))
    automatic, _ = operator.step(AutogradOnly(model), chains, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(closed.layers[0], automatic.layers[0], atol=1e-12)


def test_adapt_scales_the_step_with_the_length_scale():
    model = GaussianMixtureFamily()
    beta = torch.tensor([1.0, 0.5, 0.0], dtype=torch.float64)
    sizes = HMCOperator(0.3, 4, adapt=True).step_sizes(model, beta)
    expected = 0.3 * model.length_scale(beta) / model.length_scale(1.0)
    assert torch.allclose(sizes, expected)
    assert sizes[0] == pytest.approx(0.3) and sizes[2] == pytest.approx(0.3 * model.base_std)
    with pytest.raises(ValidationError, match="length_scale"):
        HMCOperator(0.3, 4, adapt=True).step_sizes(object(), beta)


@pytest.mark.parametrize("sampler", ["pt", "st"])
def test_hmc_inside_tempering_schemes_samples_the_target(sampler):
    # The schemes' level moves use the summed-out densities (nothing summed out here) and
    # their redraw of summed-out layers must be a no-op: the β = 1 states of independent
    # systems are then exact samples, mode weights 1/4 : 3/4 included.
    model = GaussianMixtureFamily()
    ladder = ladders.uniform(8)
    options = {"ladder": ladder}
    if sampler == "st":
        log_z = torch.tensor([model.exact_log_z(float(b)) for b in ladder.betas])
        options["log_weights"] = log_z - log_z[-1]  # uniform occupancy
    result = bl.sample(
        model,
        sampler=sampler,
        operator="hmc",
        n_chains=200,
        n_sweeps=150,
        burn_in=100,
        generator=8,
        **options,
    )
    assert result.info.operator == "hmc"
    reference = model.sample_exact(4000, beta=1.0, generator=9).layers[0]
    sampled = mixture_statistics(model, result.chains.layers[0], 1.0)
    exact = mixture_statistics(model, reference, 1.0)
    for name in sampled:
        z = two_sample_z(sampled[name], exact[name])
        assert abs(z) < MAX_Z, f"{sampler}, {name}: z = {z:.2f}"


@pytest.mark.parametrize(
    ("parameters", "name"),
    [
        ({"step_size": 0.0}, "step_size"),
        ({"step_size": float("inf")}, "step_size"),
        ({"n_leapfrog": 0}, "n_leapfrog"),
        ({"mass": -1.0}, "mass"),
        ({"mass": torch.ones(2, 2)}, "mass"),
        ({"adapt": "yes"}, "adapt"),
    ],
)
def test_bad_parameters_are_refused_by_name(parameters, name):
    with pytest.raises(ValidationError, match=name):
        bl.operators.get("hmc", **parameters)


def test_hmc_refuses_models_with_summed_out_layers():
    rbm = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    chains = rbm.init_chains(13, generator=0).with_beta(1.0)
    with pytest.raises(ValidationError, match="continuous"):
        HMCOperator().step(rbm, chains, generator=torch.Generator().manual_seed(0))


def test_mass_of_the_wrong_length_is_refused():
    model = GaussianMixtureFamily(3, positions=(0.5,), weights=(1.0,))
    chains = model.init_chains(5, generator=0).with_beta(1.0)
    with pytest.raises(ValidationError, match="mass"):
        HMCOperator(mass=torch.ones(4)).step(model, chains, generator=torch.Generator().manual_seed(0))


def test_mass_vector_is_used_per_coordinate():
    # With M = diag(m), momenta have variance m: a heavier coordinate moves less per step,
    # and invariance still holds (the Gaussian of the invariance test, one step).
    model = GaussianMixtureFamily(3, positions=(0.5,), weights=(1.0,), component_std=1.0, base_std=2.0)
    mass = torch.tensor([1.0, 25.0, 1.0], dtype=torch.float64)
    generator = torch.Generator().manual_seed(9)
    chains = model.sample_exact(4000, beta=1.0, generator=generator)
    moved, _ = HMCOperator(0.3, 4, mass=mass).step(model, chains, generator=generator)
    jump = (moved.layers[0] - chains.layers[0]).square().mean(0)
    assert jump[1] < jump[0] / 4 and jump[1] < jump[2] / 4
    x = moved.layers[0]
    mean = 0.5 * model.unit_direction
    assert ((x.mean(0) - mean) / math.sqrt(1.0 / x.shape[0])).abs().max() < MAX_Z
