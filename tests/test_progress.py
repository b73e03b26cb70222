"""Progress reports count exactly the chain-sweeps an estimate says it spent (``cost_sweeps``),
change no result, and reach nobody outside a ``reporting`` block."""

import pytest
import torch

import boltzlab as bl
from boltzlab import progress
from harness import random_rbm


def counted(method: str, model: bl.RBM, **options) -> tuple[int, bl.estimators.LogZEstimate]:
    done: list[int] = []
    with progress.reporting(done.append):
        estimate = bl.estimate_log_z(model, method=method, generator=0, lower_bound_sweeps=0, **options)
    return sum(done), estimate


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("ais", {"n_chains": 7, "n_temperatures": 60}),
        ("raise", {"n_chains": 3, "n_temperatures": 60}),
        ("rts", {"n_chains": 6, "n_temperatures": 8, "n_sweeps": 40, "initial_sweeps": 5}),
        ("mbar", {"n_chains": 6, "n_temperatures": 8, "n_sweeps": 40, "initial_sweeps": 5}),
        # Its anchor chains run through sampling.iterate.
        ("anchored-ais", {"n_chains": 7, "n_temperatures": 60, "anchor_chains": 9, "anchor_sweeps": 4}),
    ],
)
def test_reports_add_up_to_the_cost_and_change_nothing(method, options):
    model = random_rbm(6, 4, seed=2, base_rate=True)
    rows = torch.randint(0, 2, (4, 6), generator=torch.Generator().manual_seed(0))
    if method == "raise":
        options = {**options, "data": rows}
    if method == "anchored-ais":
        options = {**options, "anchor_data": rows}
    total, estimate = counted(method, model, **options)
    assert total == estimate.cost_sweeps > 0
    quiet = bl.estimate_log_z(model, method=method, generator=0, lower_bound_sweeps=0, **options)
    assert quiet.log_z == estimate.log_z


def test_the_witness_reports_its_sweeps_too():
    model = random_rbm(6, 4, seed=2, base_rate=True)
    done: list[int] = []
    with progress.reporting(done.append):
        estimate = bl.estimate_log_z(
            model, method="ais", generator=0, n_chains=7, n_temperatures=60, lower_bound_sweeps=5
        )
    assert sum(done) == estimate.cost_sweeps + estimate.lower_bound.cost_sweeps > estimate.cost_sweeps


def test_nobody_listens_outside_the_block():
    done: list[int] = []
    with progress.reporting(done.append):
        progress.advance(3)
    progress.advance(4)
    assert done == [3]
