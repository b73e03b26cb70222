"""One record per estimator: every place that treats methods differently reads it.

Properties checked: every method has a record whose family and flags are known; a new tempered
variant registered in one place (as CONTRIBUTING.md shows) is reachable from
``estimate_log_z`` with the witness handed to its budget, judged by the tempered family's
checks, given a matched budget and the CLI's flags, and its chain-group check uses the
record's ``from_samples`` — with no other file edited.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import torch

import boltzlab as bl
from boltzlab.cli.logz import estimator_options, methods_taking
from boltzlab.errors import ValidationError
from boltzlab.estimators.budget import matched_options
from boltzlab.estimators.record import (
    FAMILIES,
    FLAGS,
    get_record,
    records,
    register_estimator,
    unregister_estimator,
)
from boltzlab.estimators.tempered.budget import (
    TemperedOptions,
    estimate_with_budget,
    long_run_batches,
    register_tempered,
    tempered_budget,
)
from boltzlab.estimators.tempered.checks import tempered_verdict_checks
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.verdict.checks import Verdict
from boltzlab.estimators.verdict.judge import judge


def test_every_method_has_a_record_with_a_known_family_and_flags() -> None:
    assert {record.name for record in records()} == set(bl.estimators.methods())
    for record in records():
        assert record.family in FAMILIES and record.flags <= set(FLAGS)
        assert get_record(record.name.upper().replace("-", "_")) is record
    assert {record.name for record in records("tempered")} == {"rts", "ts", "ti", "ti-rb", "mbar"}
    assert {r.name for r in records() if r.trajectory_route} == {"rts", "mbar"}


def test_an_unknown_method_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValidationError, match=r"unknown method 'nope'; choose one of .*ais"):
        get_record("nope")


calls: list[str] = []


def _counts(samples):
    calls.append("from_samples")
    return rts_from_samples(samples, statistic="counts")


@pytest.fixture
def variant() -> Iterator[str]:
    """The tempered variant of CONTRIBUTING.md, "A new log Z estimator": TS under its own name."""

    @register_tempered("my-ts", from_samples=_counts)
    def my_ts(model, *, generator=None, **options):
        calls.append("run")
        return estimate_with_budget(
            model,
            "my-ts",
            recompute=_counts,
            generator=generator,
            options=options,
            own_options=(),
            n_batches=long_run_batches("chains", None),
        )

    calls.clear()
    yield "my-ts"
    unregister_estimator("my-ts")


def test_a_tempered_variant_is_one_registration(variant: str) -> None:
    model = bl.RBM(n_visible=6, n_hidden=3, generator=2)
    rows = (torch.rand(40, 6, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    # Its budget grows (no n_sweeps): the verdict's witness runs first and is handed to it.
    estimate = bl.estimate_log_z(
        model,
        variant,
        n_chains=20,
        n_temperatures=6,
        max_sweeps=200,
        check_data=rows,
        generator=1,
        pilot_temperatures=100,
    )
    exact = bl.exact_log_z(model)
    assert abs(estimate.log_z - exact) < 5 * estimate.stderr + 1e-3
    assert estimate.method == variant and estimate.lower_bound is not None
    assert estimate.lower_bound.started_from.startswith("data") and calls[0] == "run"
    same = bl.estimate_log_z(
        model,
        "ts",
        n_chains=20,
        n_temperatures=6,
        max_sweeps=200,
        check_data=rows,
        generator=1,
        pilot_temperatures=100,
    )
    assert (estimate.log_z, estimate.stderr, estimate.verdict) == (same.log_z, same.stderr, same.verdict)
    calls.clear()
    # Samples the budget loop never judged: the verdict recomputes the estimate on chain
    # groups with the record's from_samples.
    samples = dataclasses.replace(estimate.info.samples, budget=None)
    unjudged = dataclasses.replace(estimate, info=dataclasses.replace(estimate.info, samples=samples))
    assert tempered_verdict_checks(unjudged, Verdict()) is unjudged and "from_samples" in calls
    assert matched_options(variant, 1000) == tempered_budget(1000)
    assert estimator_options(variant, {"sweeps": 50, "max-chains": 40}) == {"n_sweeps": 50, "max_chains": 40}
    with pytest.raises(ValidationError, match="takes no --schedule"):
        estimator_options(variant, {"schedule": "linear"})
    assert variant in methods_taking("sweeps")


def test_every_flag_sets_an_option_its_method_takes() -> None:
    """The CLI's flags and the library's options are one definition: no flag sets a name the
    method would refuse, and the tempered families' options are typed dataclasses."""
    for record in records():
        for flag in record.flags - {"operator", "alpha", "examples"}:
            assert record.keyword(flag) in record.option_names(), (record.name, flag)
        if "alpha" in record.flags:
            assert "operator" in record.option_names()
    for record in [*records("tempered"), get_record("trajectory-rts"), get_record("trajectory-mbar")]:
        assert dataclasses.is_dataclass(record.options), record.name
    with pytest.raises(ValidationError, match="unknown rts option"):
        bl.estimate_log_z(bl.RBM(n_visible=4, n_hidden=2, generator=0), "rts", n_chain=10)


def test_cli_flag_lists_come_from_the_records() -> None:
    assert methods_taking("examples") == ["raise"]
    assert methods_taking("decelerate") == ["ais", "anchored-ais", "raise"]
    assert estimator_options("trajectory-ais", {"temperatures": 7}) == {"n_steps": 7}
    assert estimator_options("trajectory-rts", {"temperatures": 7}) == {"n_levels": 7}


def _stub(name: str, seen: list[dict], **capabilities):
    """An estimator that records the options the door hands it and returns the exact log Z."""

    @register_estimator(name, **capabilities)
    def run(model, *, generator=None, **options):
        seen.append(dict(options))
        return bl.LogZEstimate(log_z=bl.exact_log_z(model), stderr=0.01, method=name, cost_sweeps=1)

    return run


def test_the_door_reads_data_option_anchoring_growth_and_the_route_from_the_record() -> None:
    model = bl.RBM(n_visible=5, n_hidden=3, generator=1)
    rows = (torch.rand(20, 5, generator=torch.Generator().manual_seed(2)) < 0.5).float()
    seen: list[dict] = []
    try:
        _stub(
            "stub-anchored", seen, family="annealing", data_option="anchor_data", anchors_on_check_data=True
        )
        _stub("stub-grows", seen, family="tempered", grows=lambda options: options.get("n_sweeps") is None)
        _stub("stub-route", seen, family="tempered", trajectory_route="stub-grows")
        judged = bl.estimate_log_z(model, "stub-anchored", check_data=rows, lower_bound_sweeps=5, generator=0)
        assert seen[-1]["anchor_data"] is rows and judged.lower_bound.started_from.startswith("data")
        # Its budget grows (n_sweeps=None is "not given"): the witness runs first and is handed over.
        bl.estimate_log_z(model, "stub-grows", n_sweeps=None, lower_bound_sweeps=5, generator=0)
        assert seen[-1]["lower_bound"] is not None
        bl.estimate_log_z(model, "stub-grows", n_sweeps=10, lower_bound_sweeps=5, generator=0)
        assert "lower_bound" not in seen[-1]
        # A passing temperature route is the answer; the trajectory is not needed.
        routed = bl.estimate_log_z(
            model, "stub-route", trajectory="unused", lower_bound_sweeps=5, generator=0
        )
        assert routed.method == "stub-route" and "trajectory" not in seen[-1]
    finally:
        for name in ("stub-anchored", "stub-grows", "stub-route"):
            unregister_estimator(name)


def test_an_estimate_no_record_knows_is_unchecked_never_reliable() -> None:
    model = bl.RBM(n_visible=5, n_hidden=3, generator=1)
    bare = bl.LogZEstimate(log_z=bl.exact_log_z(model), stderr=0.01, method="nobody", cost_sweeps=1)
    judged = judge(model, bare, check_data=torch.zeros(3, 5), lower_bound_sweeps=5, generator=0)
    assert judged.status == "unchecked" and "no estimator is registered as 'nobody'" in judged.unchecked


def test_a_record_is_checked_and_filed_under_one_spelling() -> None:
    with pytest.raises(ValueError, match="no data_option"):
        register_estimator("bad", family="annealing", anchors_on_check_data=True)(lambda model: None)
    with pytest.raises(ValueError, match="does not take"):
        register_estimator("bad", family="annealing", keywords={"sweeps": "n"})(lambda model: None)
    register_estimator("My_Method", family="exact")(lambda model: None)
    try:
        assert get_record("my-method").name == "my-method"
    finally:
        unregister_estimator("my-method")


def test_tempered_options_none_is_not_given_and_a_none_target_is_no_target() -> None:
    options = TemperedOptions.from_given({"n_chains": None, "target_stderr": None}, "rts")
    assert options.n_chains is None and "n_chains" not in options.given()
    assert options.target_stderr is None
    assert TemperedOptions.from_given({}, "rts").target_stderr == 0.1
    with pytest.raises(ValidationError, match="target_stderr"):
        TemperedOptions.from_given({"target_stderr": float("inf")}, "rts")
    with pytest.raises(ValidationError, match="unknown rts option"):
        TemperedOptions.from_given({"n_chain": 3}, "rts")
