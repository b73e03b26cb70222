"""Progress events: the chain-sweeps add up to exactly what an estimate says it spent
(``cost_sweeps``); the stages and budget rounds arrive in order; reporting changes no result;
and a hook hears only the call or block it was given to."""

import threading

import pytest
import torch

import boltzlab as bl
from boltzlab import progress
from harness import random_rbm


def sweeps_in(events) -> int:
    return sum(event.chain_sweeps for event in events if isinstance(event, progress.Sweeps))


def counted(method: str, model: bl.RBM, **options) -> tuple[int, bl.estimators.LogZEstimate]:
    events: list[progress.ProgressEvent] = []
    estimate = bl.estimate_log_z(
        model, method=method, generator=0, lower_bound_sweeps=0, progress=events.append, **options
    )
    return sweeps_in(events), estimate


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


def test_the_witness_reports_its_sweeps_and_the_stages_come_in_order():
    model = random_rbm(6, 4, seed=2, base_rate=True)
    events: list[progress.ProgressEvent] = []
    estimate = bl.estimate_log_z(
        model, method="ais", generator=0, n_chains=7, n_temperatures=60, lower_bound_sweeps=5,
        progress=events.append,
    )  # fmt: skip
    assert sweeps_in(events) == estimate.cost_sweeps + estimate.lower_bound.cost_sweeps > estimate.cost_sweeps
    stages = [event.name for event in events if isinstance(event, progress.Stage)]
    assert stages == ["ais", "checks"]  # a fixed budget: the witness runs inside the checks


def test_a_growing_budget_reports_its_rounds_before_their_sweeps():
    """AIS's chain budget (n_chains unset) with an unreachable target grows to max_chains in
    rounds; every round after the first is announced, with its chains, before it runs."""
    model = random_rbm(6, 4, seed=2, base_rate=True)
    events: list[progress.ProgressEvent] = []
    estimate = bl.estimate_log_z(
        model, method="ais", generator=0, n_temperatures=30, max_chains=300, target_stderr=1e-9,
        progress=events.append,
    )  # fmt: skip
    rounds = [event for event in events if isinstance(event, progress.RoundStarted)]
    chains = estimate.info.budget.rounds
    assert len(chains) >= 2 and [event.number for event in rounds] == list(range(2, len(chains) + 1))
    assert [event.n_chains for event in rounds] == list(chains[1:])
    assert all(event.long_run_sweeps is None and "standard error" in event.reason for event in rounds)
    stages = [event.name for event in events if isinstance(event, progress.Stage)]
    assert stages == ["witness", "ais", "checks"]  # a growing budget: the witness runs first
    first_round = events.index(rounds[0])
    assert sweeps_in(events[first_round:]) > 0  # the round's sweeps follow its announcement


def test_the_tempered_budget_reports_wider_and_longer_rounds():
    """An unreachable target: the tempered budget adds chains up to max_chains, then runs longer."""
    model = random_rbm(6, 4, seed=2, base_rate=True)
    events: list[progress.ProgressEvent] = []
    estimate = bl.estimate_log_z(
        model, method="rts", generator=0, n_chains=6, n_temperatures=8, initial_sweeps=5, n_sweeps=20,
        max_sweeps=400, target_stderr=1e-9, max_chains=12, lower_bound_sweeps=0, progress=events.append,
    )  # fmt: skip
    rounds = [event for event in events if isinstance(event, progress.RoundStarted)]
    budget = estimate.info.budget.rounds
    assert len(budget) >= 2 and [(event.n_chains, event.long_run_sweeps) for event in rounds] == [
        (round_.n_chains, round_.long_run_sweeps) for round_ in budget[1:]
    ]
    assert sweeps_in(events) == estimate.cost_sweeps


def test_a_hook_hears_only_its_own_call():
    model = random_rbm(6, 4, seed=2, base_rate=True)
    heard: list[progress.ProgressEvent] = []
    bl.estimate_log_z(model, method="ais", generator=0, n_chains=5, n_temperatures=20, progress=heard.append)
    after = len(heard)
    bl.estimate_log_z(model, method="ais", generator=0, n_chains=5, n_temperatures=20)
    progress.advance(4)
    assert len(heard) == after > 0


def test_nobody_listens_outside_the_block_nor_in_another_thread():
    done: list[progress.ProgressEvent] = []
    with progress.reporting(done.append):
        progress.advance(3)
        other = threading.Thread(target=progress.advance, args=(9,))
        other.start()
        other.join()
        with progress.reporting(None):  # None keeps the enclosing hook
            progress.emit(progress.Stage("ais"))
    progress.advance(4)
    assert done == [progress.Sweeps(3), progress.Stage("ais")]
