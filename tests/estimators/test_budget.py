"""Estimator options at a matched cost (:mod:`boltzlab.estimators.budget`).

Properties checked: AIS and RAISE get as many temperatures as the sweeps per chain; the
tempered-sampling methods get initial iterations plus a long run that add up to the total,
the initial phase shrunk to at most half of it; too small a total and an unknown method are
refused naming the reason.
"""

from __future__ import annotations

import pytest

from boltzlab.errors import ValidationError
from boltzlab.estimators.budget import matched_options
from boltzlab.estimators.tempered.budget import tempered_budget


def test_tempered_budget_never_exceeds_the_total() -> None:
    assert tempered_budget(1000) == {
        "pilot_temperatures": 100,
        "n_initial_iterations": 10,
        "initial_sweeps": 45,
        "n_sweeps": 450,
    }
    small = tempered_budget(130)
    assert small["initial_sweeps"] == 5
    assert small["pilot_temperatures"] + small["n_initial_iterations"] * 5 + small["n_sweeps"] == 130
    with pytest.raises(ValidationError, match="more than 20"):
        tempered_budget(19)


def test_matched_options_per_method() -> None:
    assert matched_options("AIS", 300) == {"n_temperatures": 300, "n_chains": 100}
    assert matched_options("raise", 300) == {"n_temperatures": 300}
    assert matched_options("mbar", 1000) == tempered_budget(1000)
    assert matched_options("exact", 1000) == {}
    with pytest.raises(ValidationError, match="no matched budget"):
        matched_options("nope", 100)
