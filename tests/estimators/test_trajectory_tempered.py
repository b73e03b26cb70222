"""RTS and MBAR on levels along a training trajectory (``trajectory-rts``, ``trajectory-mbar``).

The sampler's one step is checked exactly: on a 3×2 RBM, the transition matrix over (visible
state, level) built from the sampler's own conditionals leaves ``q(v, k) ∝ f_k(v)/Ẑ_k``
invariant, and its densities are the levels' hidden-summed densities with level 0
normalised. The estimators agree with enumeration within their error bars on hand-made
trajectories (those of test_trajectory_ais.py) and their error bars shrink with the budget.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from test_trajectory_ais import grown_path, models

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.tempered import budget as tempered_budget_module
from boltzlab.estimators.trajectory.tempered import (
    PathLevels,
    TrajectoryTemperedInfo,
    collect_trajectory_samples,
    pilot_level_log_z,
    trajectory_mbar,
    trajectory_rts,
)
from boltzlab.models.base import log_f_marginal
from harness import check_estimator_exact, random_rbm
from tolerances import INVARIANCE_ATOL, MAX_Z

POSITIONS = torch.tensor([0.0, 0.4, 1.0, 1.5, 2.0, 2.6, 3.0, 3.5, 4.0], dtype=torch.float64)


def all_states(n: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product((0.0, 1.0), repeat=n)), dtype=torch.float64)


def bernoulli_probability(logits: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """``P(states | logits)`` for every row of logits and every state: ``(rows, n_states)``."""
    p = torch.sigmoid(logits)[:, None, :]
    return torch.where(states[None, :, :] == 1.0, p, 1.0 - p).prod(2)


def small_levels() -> tuple[bl.RBM, PathLevels]:
    model = random_rbm(3, 2, scale=2.5, seed=7)
    return model, PathLevels(grown_path(model), POSITIONS)


# ---------------------------------------------------------------------------- exactness
def test_level_densities_are_the_hidden_summed_densities_with_level_0_normalised():
    _, levels = small_levels()
    v = all_states(3)
    log_f = levels.log_f_all(levels.point_terms(v))
    assert abs(float(torch.logsumexp(log_f[:, 0], 0))) < 1e-12
    for k, position in enumerate(POSITIONS.tolist()):
        at = levels.path.model_at(position)
        expected = log_f_marginal(at.marginal_terms((v, torch.zeros(8, 2, dtype=v.dtype))), 1.0)
        assert torch.allclose(log_f[:, k], expected - levels.anchor_log_z, atol=1e-12), k


def test_one_step_leaves_the_joint_over_states_and_levels_invariant():
    # T[(v, k) → (v', k')] = Σ_h p_k(h | v) p_k(v' | h) · q(k' | v'): the sampler's sweep at its
    # level, then its level draw. π(v, k) ∝ f_k(v)/Ẑ_k must satisfy π·T = π for any Ẑ.
    _, levels = small_levels()
    n_levels = levels.n_levels
    v, h = all_states(3), all_states(2)
    pre, linear = levels.point_terms(v)
    log_z_hat = torch.linspace(0.0, 2.0, n_levels, dtype=torch.float64)
    log_q = levels.log_f_all((pre, linear)) - log_z_hat[None, :]
    level_given_v = torch.softmax(log_q, 1)  # (8, K)
    blocks = []
    for k in range(n_levels):
        at = torch.full((8,), k, dtype=torch.int64)
        hidden = bernoulli_probability(levels.hidden_logits(pre, at), h)  # (8 v, 4 h)
        visible = bernoulli_probability(levels.visible_logits(h, at[:4]), v)  # (4 h, 8 v')
        blocks.append(hidden @ visible)  # (8 v, 8 v')
    kernel = torch.zeros(8 * n_levels, 8 * n_levels, dtype=torch.float64)
    for k in range(n_levels):
        for k_next in range(n_levels):
            kernel[k * 8 : (k + 1) * 8, k_next * 8 : (k_next + 1) * 8] = (
                blocks[k] * level_given_v[None, :, k_next]
            )
    assert torch.allclose(kernel.sum(1), torch.ones(8 * n_levels, dtype=torch.float64), atol=1e-12)
    joint = torch.softmax(log_q.T.reshape(-1), 0)  # level-major, as the kernel's rows
    assert float((joint @ kernel - joint).abs().max()) < INVARIANCE_ATOL


def test_the_level_pilot_lands_near_every_level_s_exact_log_z():
    _, levels = small_levels()
    exact = torch.tensor(
        [bl.exact_log_z(levels.path.model_at(float(t))) for t in POSITIONS], dtype=torch.float64
    )
    pilot, cost = pilot_level_log_z(
        levels, n_chains=4000, substeps=20, generator=torch.Generator().manual_seed(0)
    )
    assert pilot[0] == 0.0 and cost == 4000 * (20 * (len(POSITIONS) - 1) - 1)
    assert float((pilot - (exact - levels.anchor_log_z)).abs().max()) < 0.05


@pytest.mark.parametrize("estimator", [trajectory_rts, trajectory_mbar])
def test_agrees_with_enumeration_and_the_error_bar_shrinks_with_budget(estimator):
    check_estimator_exact(
        lambda model, budget, seed: estimator(
            model,
            trajectory=grown_path(model),
            n_chains=20 * budget,
            n_levels=12,
            n_sweeps=300,
            generator=seed,
        ),
        budgets=(1, 4),
        models=models(),
    )


@pytest.mark.slow
@pytest.mark.parametrize("method", ["trajectory-rts", "trajectory-mbar"])
def test_defaults_through_estimate_log_z_are_reliable_and_right(method):
    model = models()[0]
    exact = bl.exact_log_z(model)
    result = estimate_log_z(model, method=method, trajectory=grown_path(model), generator=3)
    assert result.method == method
    assert abs(result.log_z - exact) < MAX_Z * result.stderr, (result.log_z, exact, result.stderr)
    assert result.reliable, result.warnings
    info = result.info
    assert isinstance(info, TrajectoryTemperedInfo)
    assert info.path != "base" and info.budget.ladder == "trajectory" and info.budget.passed
    assert info.positions[0] == 0.0 and info.positions[-1] == len(info.updates) - 1
    assert result.cost_sweeps == info.samples.cost_sweeps > info.pilot_cost_sweeps > 0
    assert (info.neighbour_overlap is None) == (method == "trajectory-rts")


# ---------------------------------------------------------------------------- the budget
@pytest.mark.slow
def test_a_failing_check_grows_the_run_and_a_fixed_budget_is_kept(monkeypatch):
    model = models()[0]
    path = grown_path(model)
    # A check that always fails makes every round fail.
    monkeypatch.setattr(tempered_budget_module, "bound_failures", lambda estimate, bound: ("forced to fail",))
    grown = trajectory_rts(model, trajectory=path, n_levels=12, max_sweeps=3600, generator=1)
    budget = grown.info.budget
    assert [(r.n_chains, r.long_run_sweeps) for r in budget.rounds] == [(100, 1000), (100, 2000)]
    assert budget.stop_reason == "max_sweeps reached (3600)" and not budget.passed
    assert budget.rounds[-1].failures[-1] == "forced to fail"
    fixed = trajectory_rts(model, trajectory=path, n_levels=12, n_sweeps=200, generator=1)
    assert len(fixed.info.budget.rounds) == 1 and fixed.info.budget.stop_reason == "fixed budget"


@pytest.mark.slow
def test_a_target_standard_error_adds_chains():
    model = models()[0]
    path = grown_path(model)
    exact = bl.exact_log_z(model)
    wide = trajectory_mbar(
        model, trajectory=path, n_levels=12, n_chains=20, max_chains=200, target_stderr=1e-6, generator=1
    )
    budget = wide.info.budget
    assert [(r.n_chains, r.long_run_sweeps) for r in budget.rounds] == [(20, 1000), (200, 1000)]
    assert (
        budget.stop_reason == "max_chains reached (200)"
        and "above the target" in budget.rounds[0].failures[0]
    )
    assert wide.info.samples.n_chains == 200 and abs(wide.z_score(exact)) < MAX_Z
    # The chains given are the chains run: no target without max_chains.
    kept = trajectory_mbar(model, trajectory=path, n_levels=12, n_chains=20, target_stderr=1e-6, generator=1)
    assert kept.info.budget.target_stderr is None and len(kept.info.budget.rounds) == 1


def test_a_continued_round_starts_where_the_chains_ended():
    _, levels = small_levels()
    generator = torch.Generator().manual_seed(2)
    first = collect_trajectory_samples(
        levels, n_chains=10, n_sweeps=50, n_initial_iterations=0, generator=generator
    )
    state = first.final_state
    assert state.chains.layers[0].shape == (10, 3) and state.levels.shape == (10,)
    again = collect_trajectory_samples(
        levels, n_chains=10, n_sweeps=5, n_initial_iterations=0, start=state, generator=generator
    )
    assert again.n_sweeps == 5 and again.stage_log_z_hat.shape == (1, len(POSITIONS))
    with pytest.raises(ValidationError, match="start must hold"):
        collect_trajectory_samples(levels, n_chains=11, n_sweeps=5, start=state, generator=generator)


# ---------------------------------------------------------------------------- bookkeeping
def test_same_seed_same_result():
    model = models()[1]
    path = grown_path(model)
    first = trajectory_mbar(model, trajectory=path, n_levels=10, n_sweeps=200, generator=9)
    second = trajectory_mbar(model, trajectory=path, n_levels=10, n_sweeps=200, generator=9)
    assert first.log_z == second.log_z and first.stderr == second.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n_chains": 1}, "n_chains"),
        ({"n_levels": 1}, "n_levels"),
        ({"n_sweeps": 0}, "n_sweeps"),
        ({"pilot_chains": 1}, "pilot_chains"),
        ({"pilot_step_std": 0.0}, "pilot_step_std"),
        ({"level_pilot_substeps": 0}, "level_pilot_substeps"),
        ({"path": "nonsense"}, "path"),
        ({"target_stderr": -1.0}, "target_stderr"),
        ({"lower_bound": 3.0}, "unknown trajectory-rts option.s. lower_bound"),
    ],
)
def test_refuses_bad_options(options, message):
    model = models()[0]
    with pytest.raises(ValidationError, match=message):
        trajectory_rts(model, trajectory=grown_path(model), **options)


def test_refuses_a_missing_trajectory_a_dbm_and_bad_levels():
    model = models()[0]
    with pytest.raises(ValidationError, match="needs trajectory="):
        trajectory_rts(model)
    with pytest.raises(ValidationError, match="RBM"):
        trajectory_mbar(bl.DBM(layer_sizes=[5, 3, 2], generator=0), trajectory=grown_path(model))
    with pytest.raises(ValidationError, match="ascend strictly"):
        PathLevels(grown_path(model), torch.tensor([0.0, 2.0, 1.0, 4.0], dtype=torch.float64))


def test_registered_under_their_method_names():
    assert {"trajectory-rts", "trajectory-mbar"} <= set(bl.estimators.methods())
