"""RTS and MBAR with the trajectory as a second route: the temperature route's estimate where its
verdict passes, the trajectory route's where only that one passes, the temperature route flagged
(with a note) where both fail; docs/trust.md, "Which route: temperature, then the trajectory"."""

from __future__ import annotations

import pytest
import torch
from test_trajectory_ais import grown_path, models

import boltzlab as bl
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.routes import (
    ROUTE_STREAM,
    TRAJECTORY_ROUTE_OPTIONS,
    route_note,
    with_trajectory_route,
)
from boltzlab.rng import fork
from harness import random_rbm
from tolerances import MAX_Z


def stand_in(reliable: bool, log_z: float, method: str, cost: int) -> LogZEstimate:
    warnings = () if reliable else (f"{method} failed a check",)
    return LogZEstimate(
        log_z=log_z, stderr=0.1, method=method, cost_sweeps=cost, reliable=reliable, warnings=warnings
    )


class Recorder:
    """An ``estimate`` that returns given results in turn and records what it was asked."""

    def __init__(self, *results: LogZEstimate) -> None:
        self.results, self.calls = list(results), []

    def __call__(self, model, method, *, generator, **options):
        self.calls.append((method, generator, options))
        return self.results.pop(0)


OPTIONS = {"n_chains": 50, "n_temperatures": 30, "check_data": torch.zeros(2, 5), "lower_bound_sweeps": 10}


def route(recorder: Recorder, model=None, trajectory="path", generator=None):
    generator = generator if generator is not None else torch.Generator().manual_seed(3)
    model = model if model is not None else random_rbm(5, 3, seed=0)
    return with_trajectory_route(
        recorder,
        model,
        "rts",
        "trajectory-rts",
        trajectory=trajectory,
        generator=generator,
        options=dict(OPTIONS),
    )


def test_a_reliable_temperature_route_is_the_answer_and_the_trajectory_is_not_run():
    recorder = Recorder(stand_in(True, 1.0, "rts", 100))
    result = route(recorder)
    assert result.log_z == 1.0 and result.method == "rts" and len(recorder.calls) == 1
    assert recorder.calls[0][2] == OPTIONS


def test_an_unchecked_temperature_route_is_the_answer_and_the_trajectory_is_not_run():
    """Unchecked is not flagged: every check passed, and the trajectory route could reach no
    more data than the temperature route did (docs/trust.md, "Three verdicts")."""
    unchecked = LogZEstimate(log_z=1.0, stderr=0.1, method="rts", cost_sweeps=100, unchecked="no data")
    recorder = Recorder(unchecked)
    result = route(recorder)
    assert result is unchecked and len(recorder.calls) == 1


def test_a_flagged_temperature_route_hands_over_to_an_unchecked_trajectory_route():
    second = LogZEstimate(log_z=2.0, stderr=0.1, method="trajectory-rts", cost_sweeps=30, unchecked="no data")
    result = route(Recorder(stand_in(False, 0.0, "rts", 100), second))
    assert (
        result.method == "trajectory-rts" and result.status == "unchecked" and result.unchecked == "no data"
    )


def test_a_flagged_temperature_route_hands_over_to_a_reliable_trajectory_route():
    generator = torch.Generator().manual_seed(3)
    expected_stream = fork(generator, ROUTE_STREAM).initial_seed()
    recorder = Recorder(stand_in(False, 0.0, "rts", 100), stand_in(True, 2.0, "trajectory-rts", 30))
    result = route(recorder, generator=generator)
    assert result.log_z == 2.0 and result.method == "trajectory-rts" and result.reliable
    assert result.cost_sweeps == 130  # both runs are paid for
    assert "rts along temperature was flagged (rts failed a check; 0.0000 ± 0.1)" in result.warnings[-1]
    assert route_note(result) == result.warnings[-1]
    (_, first_generator, _), (method, second_generator, options) = recorder.calls
    assert method == "trajectory-rts" and first_generator is generator
    # Its own stream, the same whatever the first route drew; only the options both routes share.
    assert second_generator.initial_seed() == expected_stream
    assert options["trajectory"] == "path" and "n_temperatures" not in options
    assert set(options) == {"trajectory", "n_chains", "check_data", "lower_bound_sweeps"}
    assert set(options) - {"trajectory", "check_data", "lower_bound_sweeps"} <= set(TRAJECTORY_ROUTE_OPTIONS)


def test_where_both_routes_fail_the_temperature_route_is_reported_flagged_with_a_note():
    recorder = Recorder(stand_in(False, 0.0, "rts", 100), stand_in(False, 5.0, "trajectory-rts", 30))
    result = route(recorder)
    assert result.method == "rts" and result.log_z == 0.0 and result.failed
    assert result.verdict == "UNRELIABLE: rts failed a check" and result.cost_sweeps == 130
    assert "trajectory-rts gave 5.0000 ± 0.1 (trajectory-rts failed a check)" in result.warnings[-1]
    assert route_note(result) is None


@pytest.mark.parametrize("case", ["no trajectory", "not an RBM"])
def test_without_a_trajectory_route_the_temperature_route_stands(case):
    recorder = Recorder(stand_in(False, 0.0, "rts", 100))
    if case == "no trajectory":
        result = route(recorder, trajectory=None)
    else:
        result = route(recorder, model=bl.DBM([5, 3, 2], generator=0))
    assert result.method == "rts" and result.failed and len(recorder.calls) == 1


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rts", "mbar"])
def test_estimate_log_z_takes_the_trajectory_and_is_unchanged_where_temperature_passes(method):
    model = models()[0]
    path = grown_path(model)
    options = {"n_chains": 40, "n_temperatures": 20, "n_sweeps": 300, "generator": 2}
    plain = bl.estimate_log_z(model, method=method, **options)
    routed = bl.estimate_log_z(model, method=method, trajectory=path, **options)
    assert plain.reliable and routed.method == method
    assert routed.log_z == plain.log_z and routed.cost_sweeps == plain.cost_sweeps


@pytest.mark.slow
def test_estimate_log_z_reports_the_trajectory_route_where_temperature_is_flagged():
    # Weights left at Ẑ = 1 (no initial iterations) pile the chains up at one end of the
    # temperature ladder (flagged: level balance); the trajectory route, which has its own
    # pilot weights, is right.
    model = models()[0]
    path = grown_path(model)
    exact = bl.exact_log_z(model)
    options = {"n_chains": 40, "n_sweeps": 300, "generator": 0, "ladder": "linear", "n_initial_iterations": 0}
    flagged = bl.estimate_log_z(model, method="rts", **options)
    assert flagged.failed
    routed = bl.estimate_log_z(model, method="rts", trajectory=path, **options)
    assert routed.method == "trajectory-rts" and routed.reliable, routed.warnings
    assert abs(routed.z_score(exact)) < MAX_Z
    assert routed.cost_sweeps > flagged.cost_sweeps and "along temperature was flagged" in routed.warnings[-1]
