"""The annealing family's schedule check: AIS and trajectory AIS rerun on every fourth step.

The verdict's arithmetic is checked on hand-made shifts (``judge_shift``); the runs, on tiny
models: the full run's draws do not depend on the check, the coarse run keeps every point of
a trajectory path, its sweeps are counted, and both runs are right against enumeration.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_trajectory_ais import grown_path

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.schedule_check import (
    MAX_ANNEALING_SHIFT,
    MAX_SCHEDULE_SHIFT,
    SCHEDULE_CHECK_MIN_TEMPERATURES,
    CoarseRun,
    coarse_run_checks,
    coarsened,
    judge_shift,
)
from boltzlab.estimators.trajectory.ais import trajectory_ais
from boltzlab.estimators.verdict.checks import Verdict
from harness import random_rbm, with_exact_witness
from tolerances import MAX_Z


def _estimate(log_z: float, stderr: float, coarse: CoarseRun | None = None) -> bl.LogZEstimate:
    class Info:
        schedule_check = coarse

    return bl.LogZEstimate(log_z=log_z, stderr=stderr, method="ais", info=Info())


def _coarse(log_z: float, stderr: float, *, n_steps: int = 250, n_full_steps: int = 1000) -> CoarseRun:
    return CoarseRun(
        stride=4,
        n_steps=n_steps,
        log_z=log_z,
        stderr=stderr,
        n_chains=100,
        n_full_steps=n_full_steps,
        cost_sweeps=0,
    )


def _judged(estimate: bl.LogZEstimate) -> tuple[bl.LogZEstimate, Verdict]:
    verdict = Verdict()
    return coarse_run_checks(estimate, verdict, what="AIS", advice="use more temperatures"), verdict


def test_a_shift_within_its_error_leaves_the_estimate_alone() -> None:
    estimate = _estimate(10.0, 0.1, _coarse(9.8, 0.1))  # S = −0.2 ± 0.141: 1.4 s.e.
    judged, verdict = _judged(estimate)
    assert judged.stderr == 0.1 and not verdict.failures
    assert verdict.notes == [
        "schedule check: on every 4th step (250 of 1,000) the estimate moves by -0.2 ± 0.14 nats, a bias of about "
        "-0.0667 at the full schedule"
    ]


def test_a_significant_shift_widens_the_error_bar_by_the_extrapolated_bias() -> None:
    estimate = _estimate(10.0, 0.05, _coarse(9.4, 0.1))  # S = −0.6 ± 0.112: significant, under a nat
    judged, verdict = _judged(estimate)
    bias = -0.6 * 250 / 750
    assert not verdict.failures
    assert judged.stderr == pytest.approx(math.hypot(0.05, bias), rel=1e-12)
    assert "includes the schedule check's bias estimate -0.2" in verdict.notes[-1]


@pytest.mark.parametrize("shift", [-3.5, +3.5])
def test_a_significant_shift_beyond_three_nats_is_unreliable_either_way(shift: float) -> None:
    estimate = _estimate(10.0, 0.1, _coarse(10.0 + shift, 0.2))
    judged, verdict = _judged(estimate)
    assert abs(shift) > MAX_ANNEALING_SHIFT
    assert len(verdict.failures) == 1
    assert verdict.failures[0].startswith(
        "AIS has not converged in its schedule: on every 4th step (250 of 1,000)"
    )
    assert verdict.failures[0].endswith("use more temperatures")
    assert judged.stderr == pytest.approx(math.hypot(0.1, shift / 3), rel=1e-12)


def test_a_large_shift_inside_its_error_bar_is_not_a_failure() -> None:
    # Heavy-tailed coarse weights: 3.5 nats off, but within 2 of its own error bars.
    judged, verdict = _judged(_estimate(10.0, 0.1, _coarse(6.5, 1.9)))
    assert not verdict.failures and judged.stderr == 0.1


def test_a_significant_shift_of_one_to_three_nats_widens_ais_but_fails_raise() -> None:
    """AIS's limit is three nats (a bias of one at the full schedule); RAISE's stays at one."""
    judged, verdict = _judged(_estimate(10.0, 0.1, _coarse(8.0, 0.2)))
    assert not verdict.failures and judged.stderr == pytest.approx(math.hypot(0.1, 2.0 / 3), rel=1e-12)
    raise_verdict = Verdict()
    judge_shift(
        _estimate(10.0, 0.1),
        raise_verdict,
        shift=-2.0,
        shift_stderr=0.2,
        n_steps=1000,
        coarse=250,
        stride=4,
        what="RAISE",
        advice="",
    )
    assert -MAX_SCHEDULE_SHIFT > -2.0 and raise_verdict.failures[0].startswith("RAISE has not converged")


def test_without_a_coarse_run_nothing_is_said() -> None:
    estimate = _estimate(10.0, 0.1)
    judged, verdict = _judged(estimate)
    assert judged is estimate and not verdict.notes and not verdict.failures


def test_judge_shift_without_an_error_bar_only_notes() -> None:
    verdict = Verdict()
    estimate = _estimate(1.0, 0.1)
    judged = judge_shift(
        estimate,
        verdict,
        shift=3.0,
        shift_stderr=math.inf,
        n_steps=100,
        coarse=25,
        stride=4,
        what="RAISE",
        advice="",
    )
    assert judged is estimate and not verdict.failures and "not judged" in verdict.notes[0]


def test_coarsened_keeps_both_ends() -> None:
    betas = torch.linspace(0, 1, 11, dtype=torch.float64)
    assert coarsened(betas, 4).tolist() == pytest.approx([0.0, 0.4, 0.8, 1.0])
    assert coarsened(torch.linspace(0, 1, 9, dtype=torch.float64), 4).tolist() == pytest.approx(
        [0.0, 0.5, 1.0]
    )


def test_ais_draws_are_the_same_with_and_without_the_check_and_both_runs_are_right() -> None:
    model = random_rbm(7, 3, seed=4, dtype=torch.float64, base_rate=True)
    exact = bl.exact_log_z(model)
    options = {"n_chains": 400, "n_temperatures": 200, "schedule": "linear", "lower_bound_sweeps": 0}
    checked = bl.estimate_log_z(model, "ais", generator=5, **options)
    plain = bl.estimate_log_z(model, "ais", generator=5, schedule_check=False, **options)
    assert torch.equal(checked.info.log_weights, plain.info.log_weights)
    assert plain.info.schedule_check is None and not any("schedule check" in w for w in plain.warnings)
    coarse = checked.info.schedule_check
    assert (coarse.stride, coarse.n_steps, coarse.n_full_steps, coarse.n_chains) == (4, 50, 200, 400)
    assert checked.cost_sweeps == plain.cost_sweeps + 400 * 49 == plain.cost_sweeps + coarse.cost_sweeps
    assert any(w.startswith("schedule check: on every 4th step (50 of 200)") for w in checked.warnings)
    assert abs(checked.z_score(exact)) < MAX_Z
    assert abs(coarse.log_z - exact) < MAX_Z * coarse.stderr


def test_short_schedules_are_not_checked() -> None:
    model = random_rbm(7, 3, seed=4, dtype=torch.float64, base_rate=True)
    short = SCHEDULE_CHECK_MIN_TEMPERATURES - 1
    result = bl.estimate_log_z(
        model, "ais", n_chains=20, n_temperatures=short, schedule="linear", generator=0, lower_bound_sweeps=0
    )
    assert result.info.schedule_check is None and result.cost_sweeps == 20 * (short - 1)


def test_anchored_ais_leaves_the_check_off() -> None:
    model = with_exact_witness(random_rbm(7, 3, seed=4, dtype=torch.float64, base_rate=True))
    result = bl.estimate_log_z(model, "anchored-ais", n_temperatures=100, generator=0)
    assert not any("schedule check" in w for w in result.warnings)


def test_a_bad_flag_is_refused() -> None:
    model = random_rbm(7, 3, seed=4, dtype=torch.float64, base_rate=True)
    with pytest.raises(ValidationError, match="schedule_check must be True or False"):
        bl.estimate_log_z(model, "ais", schedule_check="yes", generator=0)


def test_trajectory_ais_coarse_grid_keeps_every_point_and_draws_are_unchanged() -> None:
    model = with_exact_witness(random_rbm(5, 3, scale=3.0, seed=11))
    exact = bl.exact_log_z(model)
    path = grown_path(model)
    checked = trajectory_ais(model, trajectory=path, n_chains=300, n_steps_per_segment=30, generator=3)
    plain = trajectory_ais(
        model, trajectory=path, n_chains=300, n_steps_per_segment=30, generator=3, schedule_check=False
    )
    assert torch.equal(checked.info.log_weights, plain.info.log_weights)
    coarse = checked.info.schedule_check
    n_full = checked.info.n_distributions - 1
    # Every 4th of the 120 increments (31 positions), plus the path's points at 30 and 90 that
    # the stride skips (60 it keeps): 33 positions, 32 steps.
    assert coarse.n_full_steps == n_full == 120 and coarse.n_steps == 32
    assert checked.cost_sweeps == plain.cost_sweeps + coarse.cost_sweeps == plain.cost_sweeps + 300 * 31
    assert abs(checked.z_score(exact)) < MAX_Z and abs(coarse.log_z - exact) < MAX_Z * coarse.stderr
    judged = bl.estimate_log_z(
        model, "trajectory-ais", trajectory=path, n_chains=300, n_steps_per_segment=30, generator=3
    )
    assert any(w.startswith("schedule check: on every 4th step (32 of 120)") for w in judged.warnings)


def test_trajectory_ais_coarse_grid_adds_points_a_stride_would_skip() -> None:
    model = random_rbm(5, 3, scale=3.0, seed=11)
    # 41 increments per segment: every 4th position skips the points at 41, 82 and 123.
    result = trajectory_ais(
        model, trajectory=grown_path(model), n_chains=20, n_steps_per_segment=41, generator=0
    )
    assert result.info.schedule_check.n_steps == 41 + 3  # ⌈164/4⌉ positions, plus the three points
