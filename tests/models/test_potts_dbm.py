"""The Potts DBM (categorical visible sites, binary hidden layers), exactly on tiny models."""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.estimators.exact import model_joint_states
from boltzlab.models import PottsDBM
from harness import (
    SchemeCase,
    check_estimator_exact,
    check_operator_exact,
    check_scheme_exact,
    random_potts_dbm,
    state_codes,
)
from tempering.test_parallel import locate, place, pt_exact  # PT's exact kernel, from its own test


def test_exact_log_z_and_log_p_match_brute_force():
    model = random_potts_dbm(2, 3, (2, 2), seed=1)
    layers = model_joint_states(model)
    for beta in (0.0, 0.4, 1.0):
        brute = float(torch.logsumexp(model.log_f(layers, beta), 0))
        assert bl.exact_log_z(model, beta) == pytest.approx(brute, abs=1e-10)
    # log f(v) with every hidden layer summed out, per sequence.
    log_f = model.log_f(layers, 1.0)
    codes = state_codes(layers, model) % 9
    sequences = torch.tensor([[0, 0], [2, 1], [1, 2]])
    for row in sequences:
        expected = float(torch.logsumexp(log_f[codes == int(row[0] + 3 * row[1])], 0))
        assert float(-model.free_energy(row[None])) == pytest.approx(expected, abs=1e-10)


def test_operators_leave_the_tempered_potts_dbm_invariant():
    for name in ("gibbs", "flip", "mixture"):
        check_operator_exact(
            bl.operators.get(name), models=[random_potts_dbm(2, 3, (2, 1), seed=2)], n_monte_carlo=20_000
        )


def test_parallel_tempering_on_a_potts_dbm():
    model = random_potts_dbm(1, 3, (1, 1), seed=3)
    check_scheme_exact(
        lambda operator, case: bl.tempering.ParallelTempering(operator, case.betas),
        pt_exact("alternating", 1),
        place=place,
        locate=locate,
        cases=[SchemeCase(model=model, betas=(0.3, 1.0), label="1x3-state Potts DBM, 1-1 hidden")],
        operators=("gibbs", "flip"),
    )


def test_ais_agrees_with_enumeration():
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model, method="ais", n_chains=100 * budget, n_temperatures=100, generator=seed
        ),
        models=[random_potts_dbm(2, 3, (2, 2), seed=4, dtype=torch.float32)],
    )


def test_training_keeps_the_gauge_and_the_file_round_trips(tmp_path):
    data = torch.randint(0, 3, (60, 4), generator=torch.Generator().manual_seed(0))
    model = PottsDBM(n_sites=4, n_states=3, hidden_sizes=[3, 2], alphabet="custom:AB-", generator=1)
    result = bl.train(model, data, batch_size=10, n_updates=30, learning_rate=0.05, generator=0)
    trained = result.model
    assert trained.weights[0].detach().view(4, 3, 3).sum(1).abs().max() < 1e-5
    assert trained.biases[0].detach().view(4, 3).sum(1).abs().max() < 1e-5
    loaded = bl.io.load_model(trained.save(tmp_path / "m.safetensors"))
    assert isinstance(loaded, PottsDBM) and loaded.layer_sizes == (12, 3, 2)
    assert loaded.alphabet is not None and loaded.alphabet.symbols == "AB-"
    for mine, theirs in zip(trained.parameters(), loaded.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    assert bl.exact_log_z(loaded) == bl.exact_log_z(trained)
