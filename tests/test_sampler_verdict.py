"""Tempered samplers say when their β = 1 samples cannot be trusted (docs/trust.md).

On a bimodal RBM, ST with zero level weights never leaves β = 1 and AST/CAST on the 0.9–1
ladder never reach temperatures where the modes mix: each must be marked unreliable, while
PT and tempered transitions with defaults, which are right there, are not.
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.sampling import MIN_ROUND_TRIPS, sampler_warnings
from harness import bimodal_rbm


@pytest.fixture(scope="module")
def bimodal():
    model, _ = bimodal_rbm(10, 4, seed=0)
    return model


@pytest.mark.parametrize(
    ("sampler", "reliable"), [("pt", True), ("tt", True), ("st", False), ("ast", False), ("cast", False)]
)
def test_defaults_are_judged(bimodal, sampler, reliable):
    result = bl.sample(bimodal, sampler=sampler, n_chains=20, n_sweeps=200, generator=0)
    assert result.reliable is reliable, result.warnings
    assert bool(result.warnings) is not reliable


def test_plain_sampler_has_no_verdict_to_give(bimodal):
    result = bl.sample(bimodal, n_chains=5, n_sweeps=3, generator=0)
    assert result.reliable and result.warnings == ()


class _Summary:
    def __init__(self, trips):
        self.round_trips = torch.tensor(trips)
        self.occupancy = torch.full((4,), 0.25)


def test_round_trip_threshold():
    assert sampler_warnings(_Summary([1, 2, 1])) == ()
    (message,) = sampler_warnings(_Summary([0, 1, 0]))
    assert f"below {MIN_ROUND_TRIPS:g}" in message
    (message,) = sampler_warnings(_Summary([3, 3]), ladder=torch.tensor([0.8, 0.9, 1.0]))
    assert "hottest level is β = 0.8" in message
