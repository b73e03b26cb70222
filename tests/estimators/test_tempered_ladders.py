"""The tempered estimators' default ladder: the pilot measures log Z(β) and the variance of the
path derivative, and the ladder puts its levels at equal thermodynamic length."""

import math

import numpy as np
import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.adaptive_schedules import smooth_g
from boltzlab.estimators.tempered.ladders import adaptive_ladder, pilot_anneal
from boltzlab.models import path_derivative
from harness import random_rbm
from tolerances import MAX_Z


def exact_log_z_levels(model: bl.RBM, betas: torch.Tensor) -> torch.Tensor:
    return torch.tensor([bl.exact_log_z(model, float(beta)) for beta in betas], dtype=torch.float64)


def test_pilot_tracks_log_z_along_its_grid_and_leaves_the_model_alone():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    parameters = {name: value.clone() for name, value in model.state_dict().items()}
    pilot = pilot_anneal(model, n_chains=300, n_temperatures=60, generator=0)
    assert pilot.grid.shape == pilot.log_z.shape == pilot.g_hat.shape == pilot.log_ess.shape == (61,)
    assert float(pilot.grid[0]) == 0.0 and float(pilot.grid[-1]) == 1.0
    assert pilot.cost_sweeps == 300 * 59 and pilot.n_chains == 300
    assert float(pilot.log_z[0]) == 0.0  # the base is normalised: every weight starts at 0
    assert bool((pilot.g_hat >= 0).all()) and bool((pilot.log_ess <= math.log(300) + 1e-9).all())
    # The running AIS estimate at every grid point is an estimate of log Z(β) there: compare
    # at a few points with enumeration, in units of AIS's own delta-method error (the
    # weights' spread over √n), which a 7×3 model keeps small.
    exact = exact_log_z_levels(model, pilot.grid[::15])
    error = (pilot.log_z[::15] - exact).abs()
    spread = torch.exp(-pilot.log_ess[::15]).sqrt().clamp_min(1e-3)  # ≈ √(1/ESS)
    assert bool((error < MAX_Z * spread).all()), f"{error} vs {spread}"
    for name, value in model.state_dict().items():
        assert torch.equal(value, parameters[name])


def test_pilot_variance_matches_enumeration_at_the_ends():
    # At β = 0 the pilot's chains are exact base samples with equal weights: ĝ(0) is the plain
    # sample variance of s_0, whose exact value enumeration gives.
    model = random_rbm(6, 3, seed=2, base_rate=True)
    pilot = pilot_anneal(model, n_chains=4000, n_temperatures=10, generator=1)
    states = bl.estimators.joint_states(model.layer_sizes)
    terms = model.marginal_terms(states)
    probabilities = bl.estimators.joint_log_probabilities(model, 0.0).exp()
    s = path_derivative(terms, torch.tensor(0.0, dtype=torch.float64))
    mean = (probabilities * s).sum()
    exact_g = float((probabilities * (s - mean) ** 2).sum())
    # Relative error of a sample variance from n draws is about √(2/n) for light tails; allow 4×.
    assert abs(float(pilot.g_hat[0]) - exact_g) < MAX_Z * math.sqrt(2 / 4000) * exact_g * 2


def test_ladder_has_equal_thermodynamic_steps_and_starts_near_the_truth():
    model = random_rbm(8, 4, scale=3.0, seed=3, base_rate=True)
    placed = adaptive_ladder(model, 25, generator=0, pilot_chains=400, pilot_temperatures=200)
    betas = placed.ladder.betas
    assert betas.shape == (25,) and float(betas[0]) == 0.0 and float(betas[-1]) == 1.0
    assert bool((betas[1:] > betas[:-1]).all())
    # Steps of the smoothed √g between consecutive levels are equal (that is the placement),
    # so levels crowd where the measured variance is large.
    pilot = placed.pilot
    curve = smooth_g(pilot.grid, pilot.g_hat, width=0.015, floor=0.05).numpy()
    grid = pilot.grid.numpy()
    arc = np.concatenate([[0.0], np.cumsum(0.5 * (np.sqrt(curve[1:]) + np.sqrt(curve[:-1])) * np.diff(grid))])
    steps = np.diff(np.interp(betas.numpy(), grid, arc))
    assert np.allclose(steps, steps.mean(), rtol=1e-6)
    assert placed.thermodynamic_length == pytest.approx(arc[-1], rel=1e-9)
    assert placed.cost_sweeps == pilot.cost_sweeps == 400 * 199
    # The starting weights are the pilot's log Z at the levels: within a few of its own errors.
    exact = exact_log_z_levels(model, betas)
    assert float(placed.initial_log_z[0]) == 0.0
    assert float((placed.initial_log_z - exact).abs().max()) < 0.1


def test_refuses_a_ladder_of_one_level():
    with pytest.raises(ValidationError, match="at least 2"):
        adaptive_ladder(random_rbm(4, 2, seed=0), 1, generator=0)
