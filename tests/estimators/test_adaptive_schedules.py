"""VAROPT, GMS13 and deceleration (docs/algorithms.md §5.3–5.4): the closed-form optimum on an
analytic Gaussian family, the pilot's g against enumeration, VAROPT's variance advantage under
perfect transitions, the deceleration invariants, and AIS runs with the new schedules."""

import dataclasses
import math

import numpy as np
import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import (
    ScheduleInfo,
    ais,
    decelerated,
    gms13,
    joint_log_probabilities,
    joint_states,
    varopt,
)
from boltzlab.estimators.annealing.adaptive_schedules import resolve_schedule, schedule_from_g, smooth_g
from boltzlab.estimators.annealing.schedules import linear, sm08
from boltzlab.models.base import log_f_marginal, path_derivative
from boltzlab.models.rbm import all_binary_states
from harness import random_rbm

# ---------------------------------------------------------------- the Gaussian family
# f_β(x) = N(x; 0, 1)^{1−β}·N(x; μ, σ²)^β: p_β is Gaussian with precision (1 − β) + β/σ², and
# ∂_β log f_β = q(x) = A x² + B x + const with A = (1 − 1/σ²)/2, B = μ/σ², so
# g(β) = Var_{p_β}[q] = 2A²v² + v(2Am + B)² for p_β = N(m, v). log f_β is linear in β, so
# under perfect transitions Var[log w] = Σ_k Δβ_k²·g(β_{k−1}) exactly.
MU, SIGMA = 3.0, 0.5
A_COEF, B_COEF = 0.5 * (1.0 - 1.0 / SIGMA**2), MU / SIGMA**2


def gaussian_moments(beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    variance = 1.0 / ((1.0 - beta) + beta / SIGMA**2)
    return beta * MU / SIGMA**2 * variance, variance


def gaussian_g(beta: torch.Tensor) -> torch.Tensor:
    mean, variance = gaussian_moments(beta)
    return 2 * A_COEF**2 * variance**2 + variance * (2 * A_COEF * mean + B_COEF) ** 2


FINE = torch.linspace(0.0, 1.0, 20_001, dtype=torch.float64)


def gaussian_lambda() -> float:
    root = gaussian_g(FINE).sqrt()
    return float(((root[1:] + root[:-1]) / 2 * FINE.diff()).sum())


def test_closed_form_schedule_moves_at_constant_speed_on_the_gaussian_family():
    # The Beltrami integral φ'²g(φ) = const means Δβ_k²·g(β at mid-step) is the same for every
    # k, up to the midpoint rule's O(1/K²) error; the exact g varies 60-fold along the path.
    deviations = []
    for n_temperatures in (68, 136):
        betas = schedule_from_g(FINE, gaussian_g(FINE), n_temperatures)
        assert betas[0] == 0.0 and betas[-1] == 1.0 and bool((betas.diff() > 0).all())
        cost = betas.diff() ** 2 * gaussian_g((betas[1:] + betas[:-1]) / 2)
        deviations.append(float(cost.max() / cost.min() - 1.0))
    assert deviations[0] < 1e-3, deviations
    assert deviations[1] < deviations[0] / 3, f"not second order in 1/K: {deviations}"


def test_predicted_variance_matches_a_perfect_transition_simulation_on_the_gaussian_family():
    # Perfect transitions: each x_{k−1} is an independent exact draw from p_{β_{k−1}}. The
    # simulated Var[log w] must match Σ Δβ²g(β_{k−1}) within its standard error, and that sum
    # tends to the functional's minimum Λ(1)²/K at rate 1/K (≈ 0.25 at K = 68).
    n_temperatures, n_runs = 68, 40_000
    betas = schedule_from_g(FINE, gaussian_g(FINE), n_temperatures)
    predicted = float((betas.diff() ** 2 * gaussian_g(betas[:-1])).sum())
    info = ScheduleInfo(name="test", betas=betas, curve_grid=FINE, g_curve=gaussian_g(FINE))
    assert info.predicted_variance == pytest.approx(predicted, rel=1e-6)

    generator = torch.Generator().manual_seed(0)
    mean, variance = gaussian_moments(betas[:-1])
    x = mean[:, None] + variance.sqrt()[:, None] * torch.randn(
        n_temperatures, n_runs, generator=generator, dtype=torch.float64
    )
    log_weights = (betas.diff()[:, None] * (A_COEF * x * x + B_COEF * x)).sum(0)
    centred = log_weights - log_weights.mean()
    simulated = float(centred.pow(2).mean())
    stderr = math.sqrt(float((centred.pow(4).mean() - simulated**2) / n_runs))
    assert abs(simulated - predicted) < 4 * stderr, f"{simulated:.4f} vs {predicted:.4f} ± {stderr:.4f}"

    limit = gaussian_lambda() ** 2
    errors = []
    for k in (n_temperatures, 2 * n_temperatures):
        schedule = schedule_from_g(FINE, gaussian_g(FINE), k)
        errors.append(float((schedule.diff() ** 2 * gaussian_g(schedule[:-1])).sum()) * k / limit - 1)
    assert abs(errors[1]) < 0.6 * abs(errors[0]), f"K·Var[log w] → Λ(1)² at rate 1/K: {errors}"
    assert limit / n_temperatures == pytest.approx(0.25, abs=0.01)
    # Cauchy–Schwarz: the optimum beats the linear schedule's ∫g.
    linear_cost = float(gaussian_g(FINE).mean())
    assert limit < linear_cost


# ---------------------------------------------------------------- tiny RBMs, exactly
def exact_g(model: bl.RBM, betas: torch.Tensor, statistic: str = "marginal") -> torch.Tensor:
    """g(β) by enumeration: Var_{p_β(v)}[s_β(v)] over every visible state, or for
    ``"joint"`` Var_{p_β(v,h)}[Δ(v,h)] over every joint state, Δ = log f_1 − log f_0."""
    if statistic == "joint":
        layers = joint_states(model.layer_sizes)
        derivative = model.log_f(layers, 1.0) - model.log_f(layers, 0.0)
        log_probabilities = [joint_log_probabilities(model, beta) for beta in betas.tolist()]
        derivatives = [derivative] * betas.numel()
    else:
        terms = model.marginal_terms(all_binary_states(model.n_visible, dtype=model.dtype))
        log_probabilities = [log_f_marginal(terms, beta) for beta in betas.tolist()]
        derivatives = [path_derivative(terms, beta) for beta in betas.tolist()]
    values = []
    for log_probability, values_of_s in zip(log_probabilities, derivatives, strict=True):
        probability = torch.softmax(log_probability, 0)
        values.append(float((probability * (values_of_s - (probability * values_of_s).sum()) ** 2).sum()))
    return torch.tensor(values, dtype=torch.float64)


def perfect_transition_log_weights(
    model: bl.RBM, betas: torch.Tensor, n_runs: int, seed: int
) -> torch.Tensor:
    """AIS log-weights when every x_{k−1} is an independent exact draw from p_{β_{k−1}}(v)."""
    terms = model.marginal_terms(all_binary_states(model.n_visible, dtype=model.dtype))
    table = torch.stack([log_f_marginal(terms, beta) for beta in betas.tolist()])  # (K + 1, 2^D)
    generator = torch.Generator().manual_seed(seed)
    log_weights = torch.zeros(n_runs, dtype=torch.float64)
    for k in range(1, betas.numel()):
        states = torch.multinomial(
            torch.softmax(table[k - 1], 0), n_runs, replacement=True, generator=generator
        )
        log_weights += table[k, states] - table[k - 1, states]
    return log_weights


def peaked_rbm() -> bl.RBM:
    """6×3 RBM with strong alternating visible biases and a uniform base: g falls 700-fold
    from β = 0 to β = 1, where the optimal schedule differs most from linear."""
    generator = torch.Generator().manual_seed(0)
    weights = torch.rand(6, 3, generator=generator, dtype=torch.float64) * 2 - 1
    visible_bias = torch.tensor([8.0, -8.0, 8.0, -8.0, 8.0, -8.0], dtype=torch.float64)
    return bl.RBM(weights=weights, visible_bias=visible_bias, dtype=torch.float64)


@pytest.mark.parametrize("statistic", ["marginal", "joint"])
def test_pilot_estimate_of_g_matches_enumeration(statistic):
    # The on-the-fly weights make the pilot's chains a weighted sample of p_β at every β of
    # its grid, so ĝ is unbiased up to O(1/M); the reported standard errors must cover it.
    model = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    info = varopt(model, 20, pilot_chains=20_000, pilot_temperatures=50, statistic=statistic, generator=0)
    exact = exact_g(model, info.knots, statistic)
    z_scores = (info.g_hat - exact) / info.g_stderr
    assert z_scores.abs().max() < 4, f"max |z| = {float(z_scores.abs().max()):.2f}"
    assert info.statistic == statistic and info.knots.shape == (51,)
    assert info.pilot_log_ess.shape == (51,) and float(info.pilot_log_ess[0]) == pytest.approx(
        math.log(20_000)
    )
    assert bool((info.pilot_log_ess <= math.log(20_000) + 1e-9).all())
    assert info.cost_sweeps == 20_000 * 49


def test_joint_statistic_adds_the_hidden_noise():
    model = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    grid = linear(10)
    assert bool((exact_g(model, grid, "joint") > exact_g(model, grid, "marginal")).all())


def test_varopt_has_lower_log_weight_variance_than_linear_under_perfect_transitions():
    # At equal K = 20, with every transition an exact draw from p_β, VAROPT's schedule (from
    # a pilot) must give a smaller Var[log w] than the linear schedule, both in exact
    # arithmetic (Σ_k Var_{p_{β_{k−1}}}[increment]) and in simulation; the pilot's prediction
    # Σ Δβ² ĝ must agree with the exact variance.
    model = peaked_rbm()
    n_temperatures, n_runs = 20, 20_000
    info = varopt(model, n_temperatures, pilot_chains=2_000, pilot_temperatures=200, generator=0)
    variances, stderrs = {}, {}
    for name, betas in (("linear", linear(n_temperatures)), ("varopt", info.betas)):
        log_weights = perfect_transition_log_weights(model, betas, n_runs, seed=1)
        centred = log_weights - log_weights.mean()
        variances[name] = float(centred.pow(2).mean())
        stderrs[name] = math.sqrt(float((centred.pow(4).mean() - variances[name] ** 2) / n_runs))
        exact = float(
            sum(
                (betas[k] - betas[k - 1]) ** 2 * g
                for k, g in enumerate(exact_g(model, betas[:-1]).tolist(), start=1)
            )
        )
        if name == "varopt":
            # Eq. 7 is first order in Δβ; at K = 20 its error is well under the 2 % used here.
            assert info.predicted_variance == pytest.approx(exact, rel=0.02)
        assert variances[name] > 0
    gap = variances["linear"] - variances["varopt"]
    assert gap > 4 * math.hypot(stderrs["linear"], stderrs["varopt"]), (variances, stderrs)
    assert variances["varopt"] < 0.75 * variances["linear"], variances


# ---------------------------------------------------------------- GMS13
def test_gms13_knot_variances_match_the_joint_fisher_speed():
    model = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    info = gms13(model, 30, knot_chains=400, knot_sweeps=300, burn_in=50, generator=0)
    exact = exact_g(model, info.knots, "joint")
    z_scores = (info.g_hat - exact) / info.g_stderr
    assert z_scores.abs().max() < 4, f"max |z| = {float(z_scores.abs().max()):.2f}"
    assert info.name == "gms13" and info.statistic == "joint" and info.knots.shape == (10,)
    assert info.cost_sweeps == 10 * 400 * 300 and info.pilot_log_ess is None
    betas = info.betas
    assert betas.shape == (31,) and betas[0] == 0.0 and betas[-1] == 1.0 and bool((betas.diff() > 0).all())
    # The schedule equalises ∫√g between consecutive βs of the interpolated curve.
    root = np.sqrt(info.g_curve.numpy())
    arc = np.concatenate([[0.0], np.cumsum((root[1:] + root[:-1]) / 2 * np.diff(info.curve_grid.numpy()))])
    steps = np.diff(np.interp(betas.numpy(), info.curve_grid.numpy(), arc))
    assert np.allclose(steps, arc[-1] / 30, rtol=1e-9)


# ---------------------------------------------------------------- deceleration
def random_schedules():
    generator = torch.Generator().manual_seed(0)
    cases = []
    for n_temperatures in (5, 40, 300):
        for shape in ("front", "back", "random"):
            steps = torch.rand(n_temperatures, generator=generator, dtype=torch.float64) + 1e-3
            ramp = torch.linspace(3.0, -3.0, n_temperatures, dtype=torch.float64).exp()
            steps = steps * (ramp if shape == "front" else ramp.flip(0) if shape == "back" else 1.0)
            betas = torch.cat([torch.zeros(1, dtype=torch.float64), steps.cumsum(0) / steps.sum()])
            betas[-1] = 1.0
            cases.append(pytest.param(betas, shape, id=f"{shape}-{n_temperatures}"))
    return cases


@pytest.mark.parametrize(("betas", "shape"), random_schedules())
def test_deceleration_invariants(betas, shape):
    n_temperatures = betas.numel() - 1
    before = betas.clone()
    for delta in (1.0 / n_temperatures, 1.5 / n_temperatures, 4.0 / n_temperatures):
        out = decelerated(betas, delta)
        steps = out.diff()
        assert out.shape == betas.shape and out.dtype == torch.float64
        assert out[0] == 0.0 and out[-1] == 1.0
        assert bool((steps >= 0).all()), "monotone"
        # Up to the rounding of a cumulative sum of K float64 values (K·ε).
        rounding = n_temperatures * 2 * np.finfo(np.float64).eps
        assert float(steps.max()) <= delta + rounding, f"max step {float(steps.max())} > {delta}"
        if shape == "front":
            # Large steps first (VAROPT's shape): the forward pass alone suffices and leaves
            # everything before the first clipped step unchanged.
            over = (betas.diff() > delta * (1 + 1e-12)).nonzero()
            first = int(over[0]) if over.numel() else n_temperatures
            assert torch.equal(out[: first + 1], betas[: first + 1])
    assert torch.equal(betas, before), "the input was modified"


def test_deceleration_sends_excess_at_the_end_back_to_the_steps_with_room():
    # The last step has no later step to take its excess: it goes to the earlier steps in
    # proportion to their room below δ.
    assert np.allclose(decelerated([0.0, 0.1, 1.0], 0.5).numpy(), [0.0, 0.5, 1.0], rtol=0, atol=1e-15)
    out = decelerated([0.0, 0.1, 0.2, 1.0], 0.4)  # room 0.3, 0.3; excess 0.4
    assert np.allclose(out.numpy(), [0.0, 0.3, 0.6, 1.0], rtol=0, atol=1e-15)


def test_deceleration_is_the_identity_when_no_step_exceeds_delta():
    betas = sm08(300)
    assert torch.equal(decelerated(betas, float(betas.diff().max())), betas)
    assert torch.equal(decelerated(linear(7), 1.0 / 7), linear(7))


def test_deceleration_stretches_later_steps_proportionally():
    # Steps [0.5, 0.25, 0.15, 0.1] with δ = 0.3: 0.2 is clipped from the first and the three
    # later steps are scaled by (0.5 + 0.2)/0.5 = 1.4 → [0.35, 0.21, 0.14]; then 0.05 is
    # clipped from 0.35 and the last two are scaled by (0.35 + 0.05)/0.35.
    out = decelerated([0.0, 0.5, 0.75, 0.9, 1.0], 0.3)
    scale = 0.4 / 0.35
    expected = np.cumsum([0.0, 0.3, 0.3, 0.21 * scale, 0.14 * scale])
    assert np.allclose(out.numpy(), expected, rtol=0, atol=1e-12)


def test_deceleration_refuses_too_few_steps():
    with pytest.raises(ValidationError, match="n_temperatures >= 10"):
        decelerated(linear(9), 0.1)
    with pytest.raises(ValidationError, match="decelerate must be in"):
        decelerated(linear(9), 0.0)


# ---------------------------------------------------------------- smoothing and inversion
def test_smoothing_keeps_a_smooth_curve_fills_gaps_and_floors_zeros():
    grid = linear(1000)
    smooth = 1.0 + grid**2
    noisy = smooth.clone()
    noisy[500] = float("nan")
    noisy[:3] = 0.0
    out = smooth_g(grid, noisy, width=0.015, floor=0.2)
    assert bool(torch.isfinite(out).all())
    assert float(out.sqrt().min()) >= 0.2 * float(out.sqrt().max()) * (1 - 1e-12)
    # Away from the gaps a quadratic is reproduced up to the kernel's O(width²) blur.
    assert torch.allclose(out[100:400], smooth[100:400], rtol=2e-3)
    assert torch.equal(smooth_g(grid, torch.zeros_like(grid)), torch.ones_like(grid))
    with pytest.raises(ValidationError, match="uniformly spaced"):
        smooth_g(grid**2, smooth)


def test_constant_g_gives_the_linear_schedule():
    assert torch.allclose(schedule_from_g(linear(10), torch.full((11,), 3.0), 20), linear(20), atol=1e-15)
    with pytest.raises(ValidationError, match="positive"):
        schedule_from_g(linear(10), torch.zeros(11), 20)


# ---------------------------------------------------------------- through AIS
def test_ais_with_decelerated_varopt_agrees_with_enumeration():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    result = ais(
        model,
        n_chains=200,
        n_temperatures=1_000,
        schedule="varopt",
        decelerate=0.006,
        schedule_options={"pilot_chains": 100, "pilot_temperatures": 200},
        generator=0,
    )
    assert abs(result.z_score(exact)) < 4, f"{result} vs exact {exact:.4f}"
    info = result.info
    assert info.log_ess_trace.shape == (1_000,) and info.ess > 1
    schedule_info = info.schedule_info
    assert schedule_info.name == "varopt" and schedule_info.decelerate == 0.006
    assert torch.equal(info.schedule, schedule_info.betas)
    assert float(info.schedule.diff().max()) <= 0.006 * (1 + 1e-12)
    assert schedule_info.pilot_log_ess.shape == (201,)
    assert result.cost_sweeps == 200 * 999 + 100 * 199 + 200 * 249  # full run, pilot, schedule check
    with pytest.raises(dataclasses.FrozenInstanceError):
        schedule_info.name = "x"  # type: ignore[misc]


def test_ais_with_gms13_agrees_with_enumeration():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(
        model,
        method="ais",
        n_chains=200,
        n_temperatures=500,
        schedule="gms13",
        schedule_options={"knot_chains": 50, "knot_sweeps": 100, "burn_in": 20},
        generator=1,
    )
    assert abs(result.z_score(exact)) < 4, f"{result} vs exact {exact:.4f}"
    assert result.info.schedule_info.name == "gms13"


def test_static_schedules_keep_their_results_and_can_be_decelerated():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    plain = ais(model, n_chains=13, n_temperatures=50, schedule="linear", generator=3)
    assert plain.info.schedule_info.name == "linear" and plain.info.schedule_info.cost_sweeps == 0
    capped = ais(model, n_chains=13, schedule=sm08(100), decelerate=0.02, generator=3)
    assert torch.equal(capped.info.schedule, decelerated(sm08(100), 0.02))
    assert capped.info.schedule_info.name == "explicit"


def test_same_seed_same_schedule():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    first = varopt(model, 40, pilot_chains=13, pilot_temperatures=30, generator=5)
    again = varopt(
        model, 40, pilot_chains=13, pilot_temperatures=30, generator=torch.Generator().manual_seed(5)
    )
    assert torch.equal(first.betas, again.betas) and torch.equal(first.g_hat, again.g_hat)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "varopt", "schedule_options": {"pilot_size": 3}}, "unknown option.*pilot_size"),
        ({"schedule": "linear", "schedule_options": {"pilot_chains": 3}}, "apply only to the adaptive"),
        ({"schedule": "varopt", "schedule_options": {"statistic": "both"}}, "statistic must be"),
        ({"schedule": "gms13", "schedule_options": {"burn_in": 600}}, "burn_in must be"),
        ({"schedule": "varopt", "schedule_options": {"floor": 0.0}}, "floor must be in"),
        ({"schedule": "varopt", "schedule_options": {"smoothing": -1.0}}, "smoothing width must be"),
        ({"schedule": "varopt", "n_temperatures": 100, "decelerate": 0.006}, "n_temperatures >= 167"),
        ({"schedule": "cosine"}, "unknown schedule 'cosine'.*varopt"),
    ],
)
def test_refuses_bad_schedule_options_at_the_door(options, message):
    model = random_rbm(7, 3, seed=4, base_rate=True)
    with pytest.raises(ValidationError, match=message):
        ais(model, generator=0, **options)


def test_resolve_schedule_accepts_names_in_any_case():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    assert torch.equal(resolve_schedule(model, "Linear", 4).betas, linear(4))
    info = resolve_schedule(
        model, "VAROPT", 8, options={"pilot_chains": 13, "pilot_temperatures": 10}, generator=0
    )
    assert info.name == "varopt" and info.n_temperatures == 8
