"""The CAST paper's two-node demonstration (Salakhutdinov 2010, §3; docs/algorithms.md §2.4).

Properties checked: the sweep is the library's Gibbs sweep of the equivalent 1×1 RBM (exact
matrices) and the sampled chain follows that matrix (transition counts within 4 standard
errors); plain Gibbs never leaves its starting mode, and the closed-form probability that it
would is tiny; FPCD reaches the data mode (1,1), stays, and occupies it almost all the time;
Wang-Landau visits the four states equally up to the bound the adaptation implies; runs are
reproducible from the seed; bad arguments are refused. The command is checked in
``test_two_node_command.py``.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.evaluation import transition_matrix
from boltzlab_experiments.two_node.run import (
    DATA_STATE,
    START_STATE,
    STATES,
    gibbs_escape_probability,
    potentials,
    run_two_node,
    run_two_node_sampler,
    sweep_matrix,
    two_node_rbm,
)

COUPLING = 5.0


def test_sweep_is_the_library_gibbs_sweep_of_the_equivalent_rbm() -> None:
    ours = sweep_matrix(potentials(COUPLING))
    library = transition_matrix(two_node_rbm(COUPLING), bl.operators.get("gibbs"))
    # Library joint state j = v + 2h with v = (x_1 + 1)/2, h = (x_2 + 1)/2 is our state 3 − j.
    permutation = torch.tensor([3, 2, 1, 0])
    assert torch.allclose(ours, library[permutation][:, permutation], atol=1e-12, rtol=0)
    assert torch.allclose(ours.sum(1), torch.ones(4, dtype=torch.float64), atol=1e-12)
    for index, (x1, x2) in enumerate(STATES):  # φ = c·x_1·x_2: modes at equal signs
        assert float(potentials(COUPLING)[index]) == COUPLING * x1 * x2


def test_sampled_chain_follows_the_sweep_matrix() -> None:
    # A weak coupling so that every transition happens often; counts per row are multinomial.
    coupling = 0.5
    run = run_two_node_sampler("gibbs", n_steps=20_000, coupling=coupling, generator=11)
    counts = torch.zeros(4, 4, dtype=torch.float64)
    counts.index_put_(
        (run.states[:-1], run.states[1:]), torch.ones(run.n_steps, dtype=torch.float64), accumulate=True
    )
    matrix = sweep_matrix(potentials(coupling))
    visits = counts.sum(1, keepdim=True)
    expected = visits * matrix
    stderr = torch.sqrt(visits * matrix * (1 - matrix))
    z = (counts - expected) / stderr
    assert float(z.abs().max()) < 4.0, z


def test_gibbs_stays_in_its_starting_mode() -> None:
    n_steps = 100
    result = run_two_node(n_steps=n_steps, generator=0)
    gibbs = result.run("gibbs")
    assert bool((gibbs.states == START_STATE).all())
    assert torch.equal(gibbs.log_weights, torch.zeros(n_steps + 1, 4, dtype=torch.float64))
    # The chance that this assertion could have failed: leaving within n sweeps, 1 − σ(2c)^{2n},
    # equal to 1 − T[start, start]^n from the exact matrix, and about 2n·e^{−2c}.
    escape = gibbs_escape_probability(n_steps, coupling=COUPLING)
    stay_one = float(sweep_matrix(potentials(COUPLING))[START_STATE, START_STATE])
    assert math.isclose(escape, 1.0 - stay_one**n_steps, rel_tol=1e-9)
    assert math.isclose(escape, 2 * n_steps * math.exp(-2 * COUPLING), rel_tol=0.01)
    assert escape < 0.01


def test_fpcd_falls_into_the_data_mode_and_stays() -> None:
    n_steps, eta = 1000, 1.0
    fpcd = run_two_node(n_steps=n_steps, learning_rate=eta, generator=0).run("fpcd")
    arrivals = (fpcd.states == DATA_STATE).nonzero().flatten()
    assert arrivals.numel() > 0
    first = int(arrivals[0])
    assert bool((fpcd.states[first:] == DATA_STATE).all())
    # Once there, the visit and data terms cancel: the data state's weight stops moving.
    assert bool((fpcd.log_weights[first:, DATA_STATE] == fpcd.log_weights[first, DATA_STATE]).all())
    assert float(fpcd.occupancy()[DATA_STATE]) == pytest.approx(1.0 - (first - 1) / n_steps)
    # It leaves the start once the weights have eaten its 2c-nat barrier (η per step), and then
    # the data mode sits even higher above the other states: the chance that the "stays"
    # assertion above could have failed, at most n_steps × the per-sweep leaving probability
    # under the final weights, is tiny.
    assert first <= 2 * COUPLING / eta + 5
    final = potentials(COUPLING) - fpcd.log_weights[-1]
    leave = 1.0 - float(sweep_matrix(final)[DATA_STATE, DATA_STATE])
    assert n_steps * leave < 1e-5
    assert float(fpcd.occupancy()[DATA_STATE]) > 0.95


def test_wang_landau_visits_the_four_states_about_equally() -> None:
    n_steps, eta = 1000, 1.0
    wang_landau = run_two_node(n_steps=n_steps, learning_rate=eta, generator=0).run("wang-landau")
    visits = torch.bincount(wang_landau.states[1:], minlength=4).to(torch.float64)
    # Every visit adds η to its state's log-weight, so log g_k = η·n_k exactly.
    assert torch.allclose(wang_landau.log_weights[-1], eta * visits, atol=1e-9)
    # Occupancy − 1/4 = (φ_k − (u_k − ū))/(η·N) with u = φ − log g the effective log-densities
    # (Σφ = 0). The adaptation keeps u within a few nats of its mean (a state B nats above the
    # rest is entered almost surely at its next chance); with B = 5 the bound is (c + 5)/(ηN).
    effective = potentials(COUPLING) - wang_landau.log_weights[-1]
    spread = float((effective - effective.mean()).abs().max())
    bound = 5.0
    assert spread <= bound
    tolerance = (COUPLING + bound) / (eta * n_steps)
    assert float((wang_landau.occupancy() - 0.25).abs().max()) <= tolerance
    # The modes get c/η more visits than the mean, the other two states c/η fewer.
    modes = visits[[0, 3]] - n_steps / 4
    assert bool((modes > 0).all()) and bool((modes <= (COUPLING + bound) / eta).all())


def test_same_seed_same_chains_and_different_seed_different_chains() -> None:
    first = run_two_node(n_steps=300, generator=5)
    again = run_two_node(n_steps=300, generator=5)
    other = run_two_node(n_steps=300, generator=6)
    for a, b in zip(first.runs, again.runs, strict=True):
        assert torch.equal(a.states, b.states) and torch.equal(a.log_weights, b.log_weights)
    assert not torch.equal(first.run("wang-landau").states, other.run("wang-landau").states)
    assert first.occupancy_table().shape == (3, 4)
    assert torch.allclose(first.occupancy_table().sum(1), torch.ones(3, dtype=torch.float64))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValidationError, match="sampler"):
        run_two_node_sampler("metropolis", n_steps=10)
    with pytest.raises(ValidationError, match="n_steps"):
        run_two_node(n_steps=0)
    with pytest.raises(ValidationError, match="learning_rate"):
        run_two_node(n_steps=10, learning_rate=-1.0)
    with pytest.raises(ValidationError, match="log_density"):
        sweep_matrix(torch.zeros(3))
    with pytest.raises(ValidationError, match="start"):
        run_two_node(n_steps=10).run("gibbs").occupancy(5, 5)
