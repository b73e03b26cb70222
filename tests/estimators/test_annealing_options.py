"""The annealing estimators' typed options: AIS, anchored AIS and RAISE check what they are given once.

Properties checked: an unknown name is refused with every accepted one listed; a bad value is
refused when the options are made, before any chain runs, and the run's helpers do not check
again; the defaults are the documented ones and the public functions' signatures read theirs
from the classes; the records carry the classes, so the option names they know are the fields.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing import anchored, options
from boltzlab.estimators.annealing.ais import ais
from boltzlab.estimators.annealing.anchored import anchored_ais
from boltzlab.estimators.annealing.chain_budget import DEFAULT_CHAINS, DEFAULT_MAX_CHAINS, plan_chains
from boltzlab.estimators.annealing.options import AISOptions, AnchoredAISOptions, RAISEOptions
from boltzlab.estimators.annealing.raise_ import raise_log_likelihood
from boltzlab.estimators.record import get_record
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR
from boltzlab.operators.gibbs import GibbsOperator
from harness import random_rbm

SMALL = {"n_temperatures": 5, "schedule": "linear"}


def _names(cls: type) -> list[str]:
    return [field.name for field in dataclasses.fields(cls)]


@pytest.mark.parametrize(
    ("method", "cls", "label", "own"),
    [
        ("ais", AISOptions, "AIS", []),
        ("raise", RAISEOptions, "RAISE", ["data"]),
        ("anchored-ais", AnchoredAISOptions, "anchored-ais", []),
    ],
)
def test_an_unknown_option_is_refused_with_the_accepted_names(method, cls, label, own) -> None:
    model = random_rbm(6, 3, seed=1, base_rate=True)
    with pytest.raises(ValidationError) as caught:
        bl.estimate_log_z(model, method=method, bogus=1, n_chain=10, generator=0)
    message = str(caught.value)
    assert message.startswith(f"unknown {label} option(s) bogus, n_chain; {label} takes ")
    accepted = message.split(" takes ", 1)[1].split(", ")
    assert accepted == [*own, *_names(cls), "generator"]


@pytest.mark.parametrize(
    ("cls", "given", "match"),
    [
        (AISOptions, {"n_chains": 0}, "n_chains must be a positive integer, got 0"),
        (AISOptions, {"n_chains": 200, "max_chains": 100}, r"max_chains \(100\) is below n_chains \(200\)"),
        (AISOptions, {"target_stderr": -1.0}, "target_stderr must be a positive, finite number"),
        (AISOptions, {"schedule": "cosine"}, "unknown schedule 'cosine'"),
        (AISOptions, {"schedule_options": {"pilot_chains": 5}}, "apply only to the adaptive schedules"),
        (AISOptions, {"schedule": "varopt", "schedule_options": {"pilots": 5}}, "unknown option"),
        (AISOptions, {"operator": "metropolis"}, "unknown operator 'metropolis'"),
        (RAISEOptions, {"n_chains": None}, "n_chains must be a positive integer, got None"),
        (RAISEOptions, {"chains_per_batch": 0}, "chains_per_batch must be a positive integer"),
        (AnchoredAISOptions, {"anchor_chains": 0}, "anchor_chains must be a positive integer"),
        (AnchoredAISOptions, {"anchor_sweeps": -1}, "anchor_sweeps must be a non-negative integer"),
    ],
)
def test_a_bad_value_is_refused_when_the_options_are_made(cls, given, match) -> None:
    with pytest.raises(ValidationError, match=match):
        cls(**given)
    with pytest.raises(ValidationError, match=match):
        cls.from_given(given, "x")


def test_options_are_checked_once_before_any_chain_runs(monkeypatch) -> None:
    model = random_rbm(6, 3, seed=1, base_rate=True)
    rows = torch.bernoulli(torch.full((20, 6), 0.5), generator=torch.Generator().manual_seed(0))
    calls: list[Any] = []
    checked = options.check_schedule
    monkeypatch.setattr(options, "check_schedule", lambda *a, **k: calls.append(a) or checked(*a, **k))
    ais(model, n_chains=8, generator=0, **SMALL)
    raise_log_likelihood(model, rows[:3], n_chains=2, generator=0, **SMALL)
    anchored_ais(model, anchor_data=rows, anchor_chains=10, anchor_sweeps=2, n_chains=8, generator=0, **SMALL)
    assert len(calls) == 3  # one construction per run: the helpers read the checked object

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the anchor chains ran before the options were checked")

    monkeypatch.setattr(anchored, "visited_states", never)
    with pytest.raises(ValidationError, match="max_chains"):
        anchored_ais(model, anchor_data=rows, n_chains=50, max_chains=10, generator=0)


def test_the_options_are_frozen_and_keep_their_own_copy() -> None:
    pilot = {"pilot_chains": 20}
    made = AISOptions(schedule="varopt", schedule_options=pilot)
    pilot["pilot_chains"] = 999
    assert made.schedule_options == {"pilot_chains": 20}
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.n_chains = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        made.schedule_options["pilot_chains"] = 5  # type: ignore[index]


def test_defaults_are_the_documented_ones() -> None:
    made = AISOptions()
    assert (made.n_chains, made.n_temperatures, made.schedule, made.record_ess) == (None, None, "sm08", True)
    assert isinstance(made.operator, GibbsOperator)
    assert made.decelerate is made.schedule_options is made.blocks is None
    assert made.max_chains is made.target_stderr is made.lower_bound is None
    plan = plan_chains(made)
    assert (plan.first, plan.max_chains, plan.target_stderr, plan.fixed) == (
        DEFAULT_CHAINS,
        DEFAULT_MAX_CHAINS,
        DEFAULT_TARGET_STDERR,
        False,
    )
    assert (RAISEOptions().n_chains, RAISEOptions().chains_per_batch) == (10, 16_384)
    anchored_options = AnchoredAISOptions()
    assert (anchored_options.anchor_chains, anchored_options.anchor_sweeps) == (1000, 200)
    # Anchored AIS runs a fixed 100 chains unless a budget option is given.
    assert anchored_options.n_chains == DEFAULT_CHAINS and plan_chains(anchored_options).fixed
    assert AnchoredAISOptions(max_chains=400).n_chains is None
    assert AnchoredAISOptions(target_stderr=0.05).n_chains is None


@pytest.mark.parametrize(
    ("function", "cls"),
    [(ais, AISOptions), (raise_log_likelihood, RAISEOptions), (anchored_ais, AnchoredAISOptions)],
)
def test_public_signatures_take_their_defaults_from_the_options(function, cls) -> None:
    defaults = {field.name: field.default for field in dataclasses.fields(cls)}
    parameters = inspect.signature(function).parameters
    spelled = [name for name in parameters if name in defaults]
    assert spelled, function.__name__
    for name in spelled:
        assert parameters[name].default is defaults[name], (function.__name__, name)


def test_the_records_carry_the_options_classes() -> None:
    for method, cls in [("ais", AISOptions), ("raise", RAISEOptions), ("anchored-ais", AnchoredAISOptions)]:
        record = get_record(method)
        assert record.options is cls
        assert set(_names(cls)) <= record.option_names()
    assert get_record("raise").option_names() == {*_names(RAISEOptions), "data"}
    assert get_record("anchored-ais").option_names() == set(_names(AnchoredAISOptions))
