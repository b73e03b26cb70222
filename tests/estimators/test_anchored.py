"""Anchored AIS: unbiased in Z for any anchor set, exact when the set holds everything, never
below the anchor's certified bound, and right on a sharp model where plain AIS misses."""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.anchored import AnchoredInfo, anchor_log_weights
from boltzlab.estimators.verdict.lower_bound import log_f_layer, visited_states
from harness import check_estimator_exact, random_dbm, random_rbm, sharp_rbm

pytestmark = pytest.mark.filterwarnings("ignore:AIS is starting from a uniform base")


def random_rows(n_rows: int, n_visible: int, seed: int = 0) -> torch.Tensor:
    """Binary rows for the anchor chains to start from (hand-made models have no data)."""
    return torch.bernoulli(
        torch.full((n_rows, n_visible), 0.5), generator=torch.Generator().manual_seed(seed)
    )


def heaviest_visible_state(model: bl.RBM) -> torch.Tensor:
    """The visible state with the largest marginal, shape ``(1, n_visible)``, by enumeration."""
    n = model.n_visible
    states = ((torch.arange(2**n)[:, None] >> torch.arange(n)) & 1).double()
    return states[log_f_layer(model, states, "visible").argmax()][None]


@pytest.mark.parametrize(("n_visible", "n_hidden"), [(4, 3), (2, 5)])
def test_each_chain_is_unbiased_for_z_with_a_partial_anchor(n_visible, n_hidden):
    # E[Z_S + w(1 − P)] = Z for any S fixed before AIS runs: here S is the one state a single
    # anchor chain starts in (from the heaviest visible state), and AIS has only K = 4
    # temperatures, so both parts carry mass and the AIS part is far from exact (hidden layer:
    # P in closed form; visible layer, 2 < 5 units: an indicator).
    model = random_rbm(n_visible, n_hidden, scale=3.0, seed=1, base_rate=n_visible == 4)
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(
        model,
        method="anchored-ais",
        anchor_data=heaviest_visible_state(model),
        anchor_chains=1,
        anchor_sweeps=0,
        n_chains=200_000,
        n_temperatures=4,
        schedule="linear",
        generator=2,
        record_ess=False,
        lower_bound_sweeps=0,
    )
    info = result.info
    assert isinstance(info, AnchoredInfo)
    assert info.anchor.layer == ("hidden" if n_hidden <= n_visible else "visible")
    assert 0.02 < info.anchor_share < 0.98, "the test needs both parts to carry mass"
    ratios = torch.exp(info.log_weights - exact)
    mean, stderr = float(ratios.mean()), float(ratios.std() / math.sqrt(ratios.numel()))
    assert abs(mean - 1.0) < 3 * stderr, f"E[Ẑ_i]/Z = {mean:.4f} ± {stderr:.4f}"
    assert result.log_z >= info.anchor.log_z


def test_agrees_with_enumeration_within_its_error_bar():
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model,
            method="anchored-ais",
            anchor_data=random_rows(2, model.n_visible, seed),
            anchor_chains=2,
            anchor_sweeps=1,
            n_chains=200 * budget,
            n_temperatures=100,
            generator=seed,
            lower_bound_sweeps=0,  # the verdict's witness is tested in test_trust.py
        )
    )


def test_an_anchor_holding_every_state_gives_the_exact_value():
    model = sharp_rbm(9, 4, seed=3, scale=2.0)
    exact = bl.exact_log_z(model)
    rows = random_rows(100, 9)
    result = bl.estimate_log_z(model, method="anchored-ais", anchor_data=rows, n_temperatures=50, generator=0)
    assert result.info.anchor.n_states == 2**4
    assert result.log_z == pytest.approx(exact, abs=1e-9)
    assert result.info.chains_in_anchor == pytest.approx(1.0)
    # The error bar keeps the term for mass no chain could see: positive, 1/n_chains at most.
    assert 0 < result.stderr <= 1 / 100 + 1e-12


def test_right_on_a_sharp_model_where_plain_ais_misses():
    """Too few temperatures leave AIS nats low on a sharp model; the anchored estimate, built
    from the same AIS run plus the states chains at β = 1 visit, is right within its error."""
    model = sharp_rbm(12, 8, seed=0, scale=8.0)
    exact = bl.exact_log_z(model)
    plain = bl.estimate_log_z(model, method="ais", n_temperatures=10, n_chains=64, generator=0)
    assert plain.log_z < exact - 1.0, "the test needs AIS to miss"
    anchored = bl.estimate_log_z(
        model,
        method="anchored-ais",
        anchor_data=random_rows(200, 12),
        n_temperatures=10,
        n_chains=64,
        generator=0,
    )
    assert abs(anchored.log_z - exact) < max(0.1, 4 * anchored.stderr)
    assert anchored.reliable, anchored.warnings
    assert anchored.log_z >= anchored.info.anchor.log_z
    assert anchored.cost_sweeps == plain.cost_sweeps + anchored.info.anchor.cost_sweeps


@pytest.mark.slow
def test_anchor_data_starts_the_anchor_chains_and_check_data_is_passed_on():
    model = sharp_rbm(10, 6, seed=4, scale=2.0)
    rows = random_rows(30, 10)
    given = bl.estimate_log_z(model, method="anchored-ais", anchor_data=rows, n_temperatures=20, generator=1)
    assert given.info.anchor.started_from == "data and base"  # 30 rows for 1,000 anchor chains
    passed = bl.estimate_log_z(model, method="anchored-ais", check_data=rows, n_temperatures=20, generator=1)
    assert passed.log_z == given.log_z
    full = bl.estimate_log_z(
        model, method="anchored-ais", anchor_data=random_rows(1000, 10), n_temperatures=20, generator=1
    )
    assert full.info.anchor.started_from == "data"


def test_refuses_to_run_without_data():
    # Anchor chains from the base find what AIS finds: on two sharp Fashion-MNIST RBMs such an
    # anchor was 0.5 and 1.5 nats low with an error bar of 0.01-0.07, so there is no such mode.
    with pytest.raises(ValidationError, match="anchor_data"):
        bl.estimate_log_z(sharp_rbm(6, 3, seed=0, scale=1.0), method="anchored-ais")


def test_anchor_log_weights_is_logaddexp_of_the_two_parts():
    model = sharp_rbm(6, 3, seed=5, scale=1.5)
    visited = visited_states(model, n_chains=1, n_sweeps=0, generator=0)
    chains = model.init_chains(5, generator=torch.Generator().manual_seed(1))
    log_w = torch.randn(5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    log_chain_z, log_in = anchor_log_weights(model, visited, log_w, chains)
    # P(h ∈ S | v) by hand: the single anchor state's conditional probability.
    h = next(visited.states())[0]
    logits = model.hidden_bias + chains.layers[0] @ model.weights
    by_hand = (h * logits - torch.nn.functional.softplus(logits)).sum(1)
    assert torch.allclose(log_in, by_hand, atol=1e-12)
    expected = torch.log(torch.exp(torch.tensor(visited.log_z)) + torch.exp(log_w) * (1 - by_hand.exp()))
    assert torch.allclose(log_chain_z, expected, atol=1e-10)


@pytest.mark.slow
def test_same_seed_same_result():
    model = sharp_rbm(8, 5, seed=6, scale=2.0)
    rows = random_rows(40, 8)
    first = bl.estimate_log_z(model, method="anchored-ais", anchor_data=rows, n_temperatures=30, generator=7)
    second = bl.estimate_log_z(model, method="anchored-ais", anchor_data=rows, n_temperatures=30, generator=7)
    assert first.log_z == second.log_z and first.stderr == second.stderr


def test_refuses_models_without_a_layer_to_sum():
    with pytest.raises(ValidationError, match="needs a binary RBM"):
        bl.estimate_log_z(random_dbm((3, 2, 2), seed=0), method="anchored-ais", anchor_data=random_rows(4, 3))
