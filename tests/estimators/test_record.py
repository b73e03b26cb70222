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
from boltzlab.estimators.record import FAMILIES, FLAGS, get_record, records, unregister_estimator
from boltzlab.estimators.tempered.budget import (
    estimate_with_budget,
    long_run_batches,
    register_tempered,
    tempered_budget,
)
from boltzlab.estimators.tempered.checks import tempered_verdict_checks
from boltzlab.estimators.tempered.rts import rts_from_samples
from boltzlab.estimators.verdict.checks import Verdict


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
        model, variant, n_chains=20, n_temperatures=6, max_sweeps=200, check_data=rows, generator=1
    )
    exact = bl.exact_log_z(model)
    assert abs(estimate.log_z - exact) < 5 * estimate.stderr + 1e-3
    assert estimate.method == variant and estimate.lower_bound is not None
    assert estimate.lower_bound.started_from.startswith("data") and calls[0] == "run"
    same = bl.estimate_log_z(
        model, "ts", n_chains=20, n_temperatures=6, max_sweeps=200, check_data=rows, generator=1
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
