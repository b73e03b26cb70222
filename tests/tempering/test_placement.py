"""Ladder placement: the pilot measures ``g(β)`` and ``log Z(β)``; levels sit at equal thermodynamic length.

The pilot is checked against enumeration on a tiny RBM (``log Z`` by AIS, whose relative
weight variance there is about 1e-3 with 4,000 chains, so its error is far below the
tolerance); the placement against hand-made pilots whose ``g`` is known, where the ladder
has a closed form.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models.base import log_f_marginal, path_derivative
from boltzlab.tempering.placement import (
    FLOOR,
    MAX_LEVELS,
    MIN_LEVELS,
    LadderPilot,
    pilot_anneal,
    pilot_log_weights,
    place_ladder,
    smoothed_speed,
)
from harness import random_rbm


def exact_g(model: bl.RBM, beta: float) -> float:
    """``Var_{p_β}[s_β]`` over the visible states (hidden summed out), by enumeration."""
    visible = bl.estimators.joint_states((model.n_visible,))[0].to(model.dtype)
    terms = model.marginal_terms((visible, torch.zeros(visible.shape[0], model.n_hidden, dtype=model.dtype)))
    p = torch.softmax(log_f_marginal(terms, beta), 0)
    s = path_derivative(terms, beta)
    mean = (p * s).sum()
    return float((p * (s - mean) ** 2).sum())


def test_pilot_measures_log_z_and_g_against_enumeration():
    model = random_rbm(5, 3, scale=2.0, seed=6, base_rate=True)
    pilot = pilot_anneal(model, bl.operators.get("gibbs"), n_chains=4000, n_temperatures=64, generator=0)
    assert pilot.grid.shape == pilot.log_z.shape == pilot.g_hat.shape == (65,)
    assert pilot.cost_sweeps == 4000 * 63
    for index in (16, 40, 64):
        beta = float(pilot.grid[index])
        exact = bl.exact_log_z(model, beta) - bl.exact_log_z(model, 0.0)
        assert abs(float(pilot.log_z[index]) - exact) < 0.05
        assert float(pilot.g_hat[index]) == pytest.approx(exact_g(model, beta), rel=0.15)


def hand_made_pilot(g: torch.Tensor) -> LadderPilot:
    grid = torch.linspace(0.0, 1.0, g.numel(), dtype=torch.float64)
    return LadderPilot(
        grid=grid, log_z=-2.0 * grid, g_hat=g, log_ess=torch.zeros_like(grid), n_chains=0, cost_sweeps=0
    )


def test_constant_g_gives_a_uniform_ladder_and_the_level_count_follows_the_length():
    pilot = hand_made_pilot(torch.full((201,), 36.0, dtype=torch.float64))  # Λ = 6
    placed = place_ladder(pilot)
    assert placed.thermodynamic_length == pytest.approx(6.0)
    assert placed.ladder.size == 7  # ⌈6 / 1⌉ + 1
    assert torch.allclose(placed.ladder.betas, torch.linspace(0, 1, 7, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(placed.initial_log_weights, 2.0 * (1.0 - placed.ladder.betas), atol=1e-12)
    assert place_ladder(pilot, spacing=0.5).ladder.size == 13
    assert place_ladder(pilot, n_levels=3).ladder.size == 3
    tiny = hand_made_pilot(torch.full((201,), 1e-4, dtype=torch.float64))
    assert place_ladder(tiny).ladder.size == MIN_LEVELS
    huge = hand_made_pilot(torch.full((201,), 1e6, dtype=torch.float64))
    assert place_ladder(huge).ladder.size == MAX_LEVELS


def test_levels_crowd_where_the_energy_variance_peaks():
    grid = torch.linspace(0.0, 1.0, 401, dtype=torch.float64)
    g = 1.0 + 4e4 * torch.exp(-0.5 * ((grid - 0.4) / 0.03) ** 2)
    placed = place_ladder(hand_made_pilot(g), low=0.1)
    betas = placed.ladder.betas
    assert float(betas[0]) == pytest.approx(0.1) and float(betas[-1]) == 1.0
    assert bool((betas.diff() > 0).all())
    gaps = betas.diff()
    near_peak = gaps[(betas[:-1] > 0.35) & (betas[:-1] < 0.45)]
    assert float(near_peak.max()) < 0.2 * float(gaps.max())


def test_speed_is_smoothed_and_floored():
    g = torch.zeros(201, dtype=torch.float64)
    g[100] = 1e4
    g[50] = math.nan
    speed = smoothed_speed(hand_made_pilot(g))
    assert bool(torch.isfinite(speed).all()) and float(speed.min()) == pytest.approx(
        FLOOR * float(speed.max())
    )
    assert int(speed.argmax()) == 100
    assert torch.equal(smoothed_speed(hand_made_pilot(torch.zeros(11, dtype=torch.float64))), torch.ones(11))


def test_pilot_weights_interpolate_relative_to_the_target():
    pilot = hand_made_pilot(torch.ones(11, dtype=torch.float64))
    weights = pilot_log_weights(pilot, torch.tensor([0.0, 0.25, 1.0], dtype=torch.float64))
    assert torch.allclose(weights, torch.tensor([2.0, 1.5, 0.0], dtype=torch.float64))


def test_bad_arguments():
    pilot = hand_made_pilot(torch.ones(11, dtype=torch.float64))
    for options, message in (
        ({"low": 1.0}, "low"),
        ({"low": -0.5}, "low"),
        ({"spacing": 0.0}, "level_spacing"),
        ({"n_levels": 1}, "n_levels"),
        ({"n_levels": 2.5}, "n_levels"),
    ):
        with pytest.raises(ValidationError, match=message):
            place_ladder(pilot, **options)
    model = random_rbm(4, 3, seed=1)
    with pytest.raises(ValidationError, match="pilot_chains"):
        pilot_anneal(model, bl.operators.get("gibbs"), n_chains=0)
