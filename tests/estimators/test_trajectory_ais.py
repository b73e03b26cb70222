"""Trajectory AIS is unbiased in Z, agrees with enumeration within its error bar, and refuses
mismatched trajectories.

Paths are hand-made trajectories of four snapshots whose parameters grow from small to the
model's (tiny float64 RBMs: 5×3 and 3×4), so every answer is checked against
``bl.exact_log_z``. Tolerances are in the estimator's own standard errors (tolerances.MAX_Z).
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.trajectory.ais import (
    PathCandidate,
    TrajectoryAISInfo,
    candidate_cuts,
    pilot_check,
    trajectory_ais,
)
from boltzlab.estimators.trajectory.path import base_path, cut_path, plan_positions
from boltzlab.models.trajectory import Trajectory
from harness import check_estimator_exact, random_rbm, with_exact_witness
from tolerances import MAX_Z

SCALES = (0.15, 0.4, 0.7, 1.0)


def grown_path(
    model: bl.RBM, scales: tuple[float, ...] = SCALES, *, updates: tuple[int, ...] | None = None
) -> Trajectory:
    """Snapshots ``s·θ`` of the model's parameters, plus a bias drift so that the segments
    are not all the same straight line: a small, hand-made stand-in for a training run."""
    weights = model.weights.detach()
    visible = model.visible_bias.detach()
    hidden = model.hidden_bias.detach()
    drift = torch.linspace(-0.5, 0.5, visible.numel(), dtype=visible.dtype)
    return Trajectory.from_snapshots(
        [scale * weights for scale in scales],
        [scale * visible + (1.0 - scale) * drift for scale in scales],
        [scale * hidden for scale in scales],
        updates=list(updates or range(len(scales))),
    )


def models() -> list[bl.RBM]:
    """Two small RBMs, each keeping exact samples of its own as witness rows (so that a right,
    checked estimate is "reliable" rather than "unchecked")."""
    return [
        with_exact_witness(random_rbm(5, 3, scale=3.0, seed=11)),
        with_exact_witness(random_rbm(3, 4, scale=2.5, seed=12)),
    ]


def ratio_mean_and_stderr(result: bl.LogZEstimate, exact: float) -> tuple[float, float]:
    """Mean of the per-chain estimates ``Z_0·w_i / Z`` and its standard error."""
    ratios = torch.exp(result.info.anchor_log_z + result.info.log_weights - exact)
    return float(ratios.mean()), float(ratios.std() / math.sqrt(ratios.numel()))


# ---------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_unbiased_in_z_with_few_steps(operator):
    # Every chain's Z_0·w_i is an unbiased estimate of Z for any grid, however coarse: with one
    # increment per segment the mean over many chains is Z within its standard error. Flip and
    # the mixture read the hidden state, which must be redrawn from p_t(h | v) before their
    # sweep: without the redraw, the 2x5 case (two big jumps) gives E[Ẑ]/Z = 1.10 for flip
    # and 1.04 for the mixture (± 0.003).
    cases = [(model, SCALES) for model in models()] + [(random_rbm(2, 5, scale=4.0, seed=3), (0.5, 1.0))]
    for model, scales in cases:
        exact = bl.exact_log_z(model)
        result = trajectory_ais(
            model,
            trajectory=grown_path(model, scales),
            n_chains=100_000,
            n_steps_per_segment=1,
            operator=operator,
            generator=3,
            record_ess=False,
        )
        ratio, stderr = ratio_mean_and_stderr(result, exact)
        assert stderr < 0.01, stderr
        assert abs(ratio - 1.0) < MAX_Z * stderr, f"{operator}: E[Ẑ]/Z = {ratio:.4f} ± {stderr:.4f}"


@pytest.mark.slow
def test_unbiased_over_independent_runs_with_the_adaptive_grid():
    # The pilot picks the grid, the main run is independent of it: the average of Ẑ/Z over
    # independent runs of the default mode (pilot + equal-length grid) is 1.
    model = models()[0]
    exact = bl.exact_log_z(model)
    path = grown_path(model)
    ratios = torch.tensor(
        [
            math.exp(
                trajectory_ais(model, trajectory=path, n_chains=64, n_steps=8, generator=seed).log_z - exact
            )
            for seed in range(300)
        ],
        dtype=torch.float64,
    )
    mean, stderr = float(ratios.mean()), float(ratios.std() / math.sqrt(ratios.numel()))
    assert abs(mean - 1.0) < MAX_Z * stderr, f"E[Ẑ]/Z = {mean:.4f} ± {stderr:.4f}"


def test_agrees_with_enumeration_and_the_error_bar_shrinks_with_budget():
    check_estimator_exact(
        lambda model, budget, seed: trajectory_ais(
            model, trajectory=grown_path(model), n_chains=200 * budget, n_steps=40 * budget, generator=seed
        ),
        budgets=(1, 4),
        models=models(),
    )


@pytest.mark.slow
def test_default_budget_lands_within_its_error_bar_through_estimate_log_z():
    for model in models():
        exact = bl.exact_log_z(model)
        result = bl.estimate_log_z(model, method="trajectory-ais", trajectory=grown_path(model), generator=5)
        assert result.method == "trajectory-ais" and result.bound == "lower"
        assert abs(result.log_z - exact) < MAX_Z * result.stderr, (result.log_z, exact, result.stderr)
        assert result.reliable, result.warnings


def test_float32_model_agrees_with_enumeration():
    model = random_rbm(5, 3, scale=3.0, seed=11, dtype=torch.float32)
    result = trajectory_ais(model, trajectory=grown_path(model), n_chains=400, n_steps=200, generator=2)
    exact = bl.exact_log_z(model)
    assert abs(result.log_z - exact) < MAX_Z * result.stderr, (result.log_z, exact, result.stderr)


# ---------------------------------------------------------------------------- bookkeeping
def test_info_grid_and_cost():
    model = models()[1]
    result = trajectory_ais(
        model, trajectory=grown_path(model), n_chains=37, n_steps_per_segment=3, n_sweeps=2, generator=0
    )
    info = result.info
    assert isinstance(info, TrajectoryAISInfo)
    n_points = 5  # anchor + four snapshots; the last is the model itself
    assert not info.appended_model
    assert info.updates.tolist() == [-1, 0, 1, 2, 3]
    assert info.steps_per_segment.tolist() == [3] * (n_points - 1)
    assert info.n_distributions == info.positions.numel() == 3 * (n_points - 1) + 1
    assert info.positions[0] == 0.0 and info.positions[-1] == n_points - 1
    assert bool((info.positions[1:] > info.positions[:-1]).all())
    for point in range(n_points):
        assert point in info.positions.tolist()
    n_increments = info.n_distributions - 1
    assert result.cost_sweeps == 37 * (n_increments - 1) * 2 and info.pilot_cost_sweeps == 0
    assert info.log_weights.shape == (37,) and info.log_weights.dtype == torch.float64
    assert info.log_ess_trace.shape == (n_increments,)
    assert 1.0 <= info.ess <= 37.0
    path = grown_path(model)
    softplus = torch.nn.functional.softplus
    assert info.anchor_log_z == pytest.approx(
        float(softplus(path.visible_bias[0]).sum() + softplus(path.hidden_bias[0]).sum()), abs=1e-12
    )


def test_pilot_cost_is_counted_and_points_follow_the_length():
    model = models()[0]
    result = trajectory_ais(model, trajectory=grown_path(model), n_chains=50, n_steps=100, generator=1)
    info = result.info
    assert info.pilot_cost_sweeps > 0
    n_increments = info.n_distributions - 1
    coarse = info.schedule_check
    assert coarse.n_full_steps == n_increments and coarse.cost_sweeps == 50 * (coarse.n_steps - 1)
    assert result.cost_sweeps == 50 * (n_increments - 1) + info.pilot_cost_sweeps + coarse.cost_sweeps
    lengths, steps = info.segment_lengths, info.steps_per_segment.to(torch.float64)
    assert bool((steps >= 1).all())
    # Steps are allocated in proportion to the measured length (rounding aside).
    expected = torch.clamp(torch.round(100 * lengths / lengths.sum()), min=1)
    assert torch.equal(steps, expected)


def test_plan_positions_places_points_at_equal_length():
    # Segment 0 measured as two halves of lengths 3 and 1; segment 1 of length 4 in one piece.
    pilot = [(0.0, 0.5, 3.0), (0.5, 1.0, 1.0), (1.0, 2.0, 4.0)]
    grid, steps, lengths = plan_positions(pilot, 3, 4)
    assert lengths.tolist() == [4.0, 4.0]
    assert steps.tolist() == [2, 2]
    # Half of segment 0's length (2 of 4) is reached two thirds into its first half.
    assert grid.tolist() == pytest.approx([0.0, 1 / 3, 1.0, 1.5, 2.0])


@pytest.mark.slow
def test_same_seed_same_result_and_inputs_untouched(tmp_path):
    model = models()[0]
    path = grown_path(model)
    before = [tensor.clone() for tensor in (path.weights, path.visible_bias, model.weights.detach())]
    first = trajectory_ais(model, trajectory=path, n_chains=30, generator=7)
    second = trajectory_ais(model, trajectory=path, n_chains=30, generator=7)
    assert first.log_z == second.log_z and torch.equal(first.info.log_weights, second.info.log_weights)
    for old, new in zip(before, (path.weights, path.visible_bias, model.weights.detach()), strict=True):
        assert torch.equal(old, new)
    # A run directory holding trajectory.safetensors gives the very same estimate.
    path.save(tmp_path)
    from_file = trajectory_ais(model, trajectory=tmp_path, n_chains=30, generator=7)
    assert from_file.log_z == first.log_z


def test_model_appended_when_the_trajectory_stops_short():
    model = models()[0]
    short = grown_path(model, SCALES[:3])
    result = trajectory_ais(
        model, trajectory=short, n_chains=400, n_steps=150, path="trajectory", generator=4
    )
    assert result.info.appended_model
    assert result.info.updates.tolist() == [-1, 0, 1, 2, 3]
    exact = bl.exact_log_z(model)
    assert abs(result.log_z - exact) < MAX_Z * result.stderr


def test_a_float32_trajectory_serves_a_float64_model():
    model = models()[1]
    path = grown_path(model).to(dtype=torch.float32)
    result = trajectory_ais(model, trajectory=path, n_chains=300, n_steps=120, generator=8)
    assert result.info.appended_model  # the float32 copy of the last point is not the float64 model
    assert abs(result.log_z - bl.exact_log_z(model)) < MAX_Z * result.stderr


# ---------------------------------------------------------------------------- refusals
def test_refuses_missing_or_mismatched_trajectories(tmp_path):
    model = models()[0]
    with pytest.raises(ValidationError, match="needs trajectory="):
        trajectory_ais(model)
    other = random_rbm(4, 3, seed=1)
    with pytest.raises(ValidationError, match="holds a 4x3 RBM but model is 5x3"):
        trajectory_ais(model, trajectory=grown_path(other))
    with pytest.raises(ValidationError, match="must be a Trajectory"):
        trajectory_ais(model, trajectory=[1, 2, 3])
    with pytest.raises(ModelFileError, match=r"holds no trajectory\.safetensors"):
        trajectory_ais(model, trajectory=tmp_path)
    with pytest.raises(ModelFileError, match="does not exist"):
        trajectory_ais(model, trajectory=tmp_path / "nothing.safetensors")
    dbm = bl.DBM(layer_sizes=[5, 3, 2], generator=0)
    with pytest.raises(ValidationError, match="RBM"):
        trajectory_ais(dbm, trajectory=grown_path(model))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"n_chains": 0}, "n_chains"),
        ({"n_steps": 10, "n_steps_per_segment": 2}, "not both"),
        ({"n_steps_per_segment": 0}, "n_steps_per_segment"),
        ({"pilot_chains": 1}, "pilot_chains"),
        ({"pilot_step_std": -1.0}, "pilot_step_std"),
        ({"path": "nonsense"}, "path"),
        ({"path": -1}, "path"),
        ({"n_candidates": 0}, "n_candidates"),
        ({"n_sweeps": 0}, "n_sweeps"),
        ({"operator": "nonsense"}, "nonsense"),
    ],
)
def test_refuses_bad_options(options, message):
    model = models()[0]
    with pytest.raises(ValidationError, match=message):
        trajectory_ais(model, trajectory=grown_path(model), **options)


@pytest.mark.slow
def test_registered_under_its_method_name():
    assert "trajectory-ais" in bl.estimators.methods()
    model = models()[0]
    through_registry = estimate_log_z(
        model,
        method="trajectory-ais",
        trajectory=grown_path(model),
        n_chains=20,
        generator=4,
        lower_bound_sweeps=0,
    )
    direct = trajectory_ais(model, trajectory=grown_path(model), n_chains=20, generator=4)
    assert through_registry.log_z == direct.log_z


@pytest.mark.slow
def test_accepts_snapshots_as_models_model_files_or_a_folder_of_them(tmp_path):
    # The forms benchmarks and users hold: RBMs in training order, their files, or a folder of
    # ``update-XXXXXXXX.safetensors`` files (update indices from the names). Same seed, same path,
    # same estimate as the Trajectory built from the same snapshots.
    model = models()[0]
    snapshots = [
        bl.RBM(
            weights=scale * model.weights.detach(),
            hidden_bias=model.hidden_bias.detach(),
            dtype=torch.float64,
        )
        for scale in (0.2, 0.6)
    ]
    reference = trajectory_ais(
        model,
        trajectory=Trajectory.from_models(snapshots, updates=[5, 50]),
        n_chains=40,
        path="trajectory",
        generator=9,
    )
    paths = [
        snapshot.save(tmp_path / f"update-{update:08d}.safetensors")
        for snapshot, update in zip(snapshots, (5, 50), strict=True)
    ]
    model.save(tmp_path / "model.safetensors")  # a run's final model beside them is not a snapshot
    for form in (snapshots, paths, tmp_path):
        result = trajectory_ais(model, trajectory=form, n_chains=40, path="trajectory", generator=9)
        assert result.log_z == reference.log_z, form
    from_folder = trajectory_ais(model, trajectory=tmp_path, n_chains=40, path="trajectory", generator=9)
    assert from_folder.info.updates.tolist() == [
        -1,
        5,
        50,
        51,
    ]


# ---------------------------------------------------------------------------- which path
@pytest.mark.parametrize("path", ["base", 1, 2, "trajectory"])
def test_every_path_is_unbiased_in_z(path):
    # Whatever path is chosen (the base-rate jump, a cut followed by a jump, every point), each
    # chain's Z_0·w_i is unbiased for Z, even with one increment per segment.
    model = random_rbm(5, 3, scale=3.0, seed=11)
    model.set_base_rate((torch.rand(40, 5, generator=torch.Generator().manual_seed(2)) < 0.3).double())
    exact = bl.exact_log_z(model)
    result = trajectory_ais(
        model,
        trajectory=grown_path(model),
        n_chains=100_000,
        n_steps_per_segment=2,
        path=path,
        generator=6,
        record_ess=False,
    )
    ratio, stderr = ratio_mean_and_stderr(result, exact)
    assert stderr < 0.02, stderr
    assert abs(ratio - 1.0) < MAX_Z * stderr, f"{path}: E[Ẑ]/Z = {ratio:.4f} ± {stderr:.4f}"


def test_paths_are_built_from_the_right_points():
    model = random_rbm(5, 3, scale=3.0, seed=11)
    model.set_base_rate((torch.rand(40, 5, generator=torch.Generator().manual_seed(2)) < 0.3).double())
    trajectory = grown_path(model)  # anchor + 4 points, the last is the model
    base = base_path(trajectory, model)
    assert base.n_points == 2 and bool((base.weights[0] == 0).all())
    assert torch.equal(base.visible_bias[0], model.base_logits.detach())
    assert torch.equal(base.weights[1], trajectory.weights[-1])
    cut = cut_path(trajectory, 2)
    assert cut.updates.tolist() == [-1, 0, 1, 3] and torch.equal(cut.weights[-1], trajectory.weights[-1])
    assert cut_path(trajectory, 3) is trajectory  # the jump from the last-but-one point is the last segment
    assert candidate_cuts(5, 12) == [1, 2]
    assert candidate_cuts(65, 6) == [1, 21, 42, 62] and candidate_cuts(65, 2) == []


@pytest.mark.slow
def test_auto_scores_every_candidate_and_anneals_along_the_best():
    model = models()[0]
    result = trajectory_ais(model, trajectory=grown_path(model), n_chains=50, n_steps=60, generator=3)
    info = result.info
    labels = [candidate.label for candidate in info.candidates]
    assert labels == ["base", "cut at update 0", "cut at update 1", "trajectory"]
    best = max(info.candidates, key=lambda candidate: candidate.pilot_log_z)
    assert info.path == best.label
    assert all(math.isfinite(c.pilot_log_z) and c.length > 0 for c in info.candidates)
    # A fixed path is walked by the pilot only to place its steps: one candidate.
    fixed = trajectory_ais(model, trajectory=grown_path(model), n_chains=50, path=1, generator=3)
    assert fixed.info.path == "cut at update 0" and len(fixed.info.candidates) == 1
    assert fixed.info.updates.tolist() == [-1, 0, 3]


def test_pilot_check_flags_an_estimate_far_below_a_pilot_path():
    candidates = [PathCandidate("base", -1, 10.0, 1.0), PathCandidate("trajectory", 4, 30.0, 5.0)]
    slack = math.log(2 / 1e-3)
    assert pilot_check(30.0 - slack - 0.5, 0.1, candidates) is not None
    assert pilot_check(30.0 - slack + 0.5, 0.1, candidates) is None
    assert pilot_check(30.0 - slack - 0.3, 0.1, candidates) is None  # within 4 standard errors
    assert pilot_check(0.0, 0.1, []) is None
