"""DBM learning (docs/algorithms.md §3.1–3.4): the mean-field objective, SAP/FPCD/AST/CAST, pretraining.

Properties checked:
* the data term is the gradient of ``E_Q[−E]`` with the mean-field means held fixed (autograd,
  to rounding), and at a mean-field fixed point the total derivative of the bound's data part;
* the model term from exact samples of the model is unbiased for ``∂ log Z/∂θ`` (autograd on
  the enumerated ``log Z``), Rao-Blackwellised or not, and Rao-Blackwellising lowers its variance;
* SAP (= PCD), FPCD, adaptive-ST learning and CAST, each with Gibbs and flip-the-state, raise
  the variational bound (exact log Z) of a 64-12-6 DBM on digits by more than 4 run-to-run
  standard deviations over 3 seeds;
* greedy layer-wise pretraining gives a DBM whose bound beats a random initialisation (with
  the visible biases at the data's log-odds) by more than 4 standard deviations over seeds;
* ``VariationalBoundTracker`` reports the bound of :func:`boltzlab.variational_lower_bound`;
* a DBM CAST run resumes bit-identically from a checkpoint;
* the objective never modifies its inputs; bad settings raise ValidationError.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities, joint_states
from boltzlab.training import objective_for
from boltzlab.training.mean_field_objective import MeanFieldObjective, VariationalBoundTracker
from boltzlab.training.pretraining import pretrain_dbm
from harness import random_dbm

SEEDS = (0, 1, 2)
SHAPE = (5, 3, 4)


def _data(n_examples: int = 11, n_visible: int = 5, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n_examples, n_visible, generator=g, dtype=torch.float64) < 0.4).double()


def _negative_energy(dbm: bl.DBM, layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``−E`` written with the model's parameters, so autograd sees them; shape (n,)."""
    total = sum(((layers[l] @ w) * layers[l + 1]).sum(1) for l, w in enumerate(dbm.weights))
    return total + sum(layer @ b for layer, b in zip(layers, dbm.biases, strict=True))


def _flat_grads(dbm: bl.DBM) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in dbm.parameters()])


def _objective_gradient(dbm, objective, positive, negative) -> torch.Tensor:
    """−(data term − model term), as the objective writes it, flattened (parameter order)."""
    for p in dbm.parameters():
        p.grad = None
    objective.write_gradient_(dbm, positive, negative)
    return _flat_grads(dbm).clone()


def _zeros_like_layers(dbm: bl.DBM) -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(1, size, dtype=dbm.dtype) for size in dbm.layer_sizes)


# ------------------------------------------------------------------------------ the gradient
def test_data_term_is_the_gradient_of_the_expected_energy_with_the_means_held_fixed():
    dbm = random_dbm(SHAPE, scale=1.5, seed=5)
    data = _data()
    objective = MeanFieldObjective()
    positive = objective.positive(dbm, data)
    # grad = model term − data term; with a zero model term it is −(data term).
    written = -_objective_gradient(dbm, objective, positive, _zeros_like_layers(dbm))
    for p in dbm.parameters():
        p.grad = None
    fixed = tuple(layer.detach() for layer in positive)
    _negative_energy(dbm, fixed).mean().backward()
    assert torch.allclose(written, _flat_grads(dbm), atol=1e-12, rtol=0)


def _differentiable_mean_field(dbm: bl.DBM, v: torch.Tensor, n_updates: int) -> list[torch.Tensor]:
    """The mean-field iteration of models/mean_field.py, written with autograd-visible parameters."""
    means = [v]
    for index in range(1, len(dbm.layer_sizes)):
        means.append(torch.sigmoid(dbm.biases[index] + means[index - 1] @ dbm.weights[index - 1]))
    for _ in range(n_updates):
        for group in (dbm.update_groups[0], dbm.update_groups[1][1:]):
            snapshot = list(means)
            for index in group:
                logits = dbm.biases[index] + snapshot[index - 1] @ dbm.weights[index - 1]
                if index < len(dbm.weights):
                    logits = logits + snapshot[index + 1] @ dbm.weights[index].t()
                means[index] = torch.sigmoid(logits)
    return means


def test_at_a_mean_field_fixed_point_the_data_term_is_the_total_derivative_of_the_bound():
    # Envelope theorem: the bound is stationary in μ at the fixed point, so differentiating
    # through μ*(θ) adds nothing; the objective's gradient is then the bound's gradient.
    dbm = random_dbm(SHAPE, scale=0.7, seed=6)
    data = _data()
    objective = MeanFieldObjective(n_updates=300)
    positive = objective.positive(dbm, data)
    written = -_objective_gradient(dbm, objective, positive, _zeros_like_layers(dbm))
    for p in dbm.parameters():
        p.grad = None
    means = _differentiable_mean_field(dbm, data, 300)
    hidden = torch.cat(means[1:], dim=1)
    entropy = -(hidden * torch.log(hidden) + (1 - hidden) * torch.log1p(-hidden)).sum(1)
    (_negative_energy(dbm, tuple(means)) + entropy).mean().backward()
    assert torch.allclose(written, _flat_grads(dbm), atol=1e-9, rtol=0)


def _exact_log_z_gradient(dbm: bl.DBM) -> torch.Tensor:
    for p in dbm.parameters():
        p.grad = None
    states = joint_states(dbm.layer_sizes)
    torch.logsumexp(_negative_energy(dbm, states), 0).backward()
    return _flat_grads(dbm).clone()


def _model_term_draws(dbm, objective, *, n_batches: int, n_samples: int, seed: int) -> torch.Tensor:
    """``n_batches`` model terms from exact samples of p (shape (n_batches, n_parameters))."""
    g = torch.Generator().manual_seed(seed)
    probabilities = joint_log_probabilities(dbm).exp()
    states = joint_states(dbm.layer_sizes)
    zeros = _zeros_like_layers(dbm)
    draws = []
    for _ in range(n_batches):
        index = torch.multinomial(probabilities, n_samples, replacement=True, generator=g)
        chains = bl.Chains(
            layers=tuple(layer[index] for layer in states), beta=torch.ones(n_samples).double()
        )
        # grad = model term − data term, with a zero data term: the model term itself.
        draws.append(_objective_gradient(dbm, objective, zeros, objective.negative(dbm, chains)))
    return torch.stack(draws)


@pytest.mark.parametrize("rao_blackwellise", [True, False])
def test_model_term_from_exact_samples_is_unbiased_for_the_gradient_of_log_z(rao_blackwellise):
    dbm = random_dbm(SHAPE, scale=1.5, seed=7)
    exact = _exact_log_z_gradient(dbm)
    objective = MeanFieldObjective(rao_blackwellise=rao_blackwellise)
    draws = _model_term_draws(dbm, objective, n_batches=300, n_samples=17, seed=8)
    stderr = draws.std(0) / math.sqrt(draws.shape[0])
    z = (draws.mean(0) - exact) / stderr
    # 32 parameters, each compared once: |z| < 4 for all of them.
    assert float(z.abs().max()) < 4.0


def test_rao_blackwellising_the_odd_layers_lowers_the_variance_of_the_model_term():
    dbm = random_dbm(SHAPE, scale=1.5, seed=7)
    kwargs = {"n_batches": 300, "n_samples": 17, "seed": 9}
    rb = _model_term_draws(dbm, MeanFieldObjective(rao_blackwellise=True), **kwargs)
    plain = _model_term_draws(dbm, MeanFieldObjective(rao_blackwellise=False), **kwargs)
    # Same draws (same seed), so the difference is the conditional expectation only.
    assert float(rb.var(0).sum()) < 0.8 * float(plain.var(0).sum())


def test_objective_does_not_modify_its_inputs_and_the_dbm_hook_returns_it():
    dbm = random_dbm(SHAPE, scale=1.5, seed=5)
    objective = objective_for(dbm)
    assert isinstance(objective, MeanFieldObjective)
    assert (objective.n_updates, objective.init, objective.rao_blackwellise) == (5, "bottom_up", True)
    data = _data()
    chains = dbm.init_chains(13, generator=0).with_beta(1.0)
    before = (data.clone(), tuple(layer.clone() for layer in chains.layers))
    positive = objective.positive(dbm, data)
    negative = objective.negative(dbm, chains)
    objective.write_gradient_(dbm, positive, negative)
    objective.reconstruction_error(dbm, data)
    assert torch.equal(data, before[0])
    assert all(torch.equal(a, b) for a, b in zip(chains.layers, before[1], strict=True))
    # Even layers pass through; odd layers are the conditional means given them.
    assert torch.equal(negative[0], chains.layers[0]) and torch.equal(negative[2], chains.layers[2])
    expected = torch.sigmoid(
        dbm.biases[1] + chains.layers[0] @ dbm.weights[0] + chains.layers[2] @ dbm.weights[1].t()
    )
    assert torch.allclose(negative[1], expected.detach(), atol=1e-12)


def test_bad_objective_settings_are_refused():
    with pytest.raises(ValidationError, match="n_updates"):
        MeanFieldObjective(n_updates=-1)
    with pytest.raises(ValidationError, match="init"):
        MeanFieldObjective(init="top_down")
    with pytest.raises(ValidationError, match="rao_blackwellise"):
        MeanFieldObjective(rao_blackwellise="yes")
    with pytest.raises(ValidationError, match="log_z"):
        VariationalBoundTracker(5, log_z="rts")


# ------------------------------------------------------------------------------ learning
@functools.cache
def _digits() -> torch.Tensor:
    return bl.data.load("digits").train[:400]


def _initial_dbm() -> bl.DBM:
    """Small random weights, visible biases at the data's log-odds: about the factorial model,
    so the bound can rise only through the weights."""
    data = _digits()
    dbm = bl.DBM(layer_sizes=[64, 12, 6], generator=0, weight_std=0.01)
    with torch.no_grad():
        dbm.biases[0].copy_(torch.logit(0.95 * data.mean(0) + 0.025))
    return dbm


def _bound(dbm: bl.DBM) -> float:
    return bl.variational_lower_bound(dbm, _digits(), bl.exact_log_z(dbm))


ALGORITHMS = {
    "pcd": {},
    "fpcd": {},
    "ast": {"n_levels": 10, "sap_updates": 10, "run_length": 10},
    "cast": {"n_levels": 10, "lag": 10},
}


@pytest.mark.slow
@pytest.mark.parametrize("operator", ["gibbs", "flip"])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_learning_raises_the_variational_bound_beyond_run_to_run_noise(algorithm, operator):
    start = _bound(_initial_dbm())
    finals = []
    for seed in SEEDS:
        dbm = _initial_dbm()
        bl.train(
            dbm,
            _digits(),
            algorithm=algorithm,
            algorithm_params=ALGORITHMS[algorithm],
            operator=operator,
            n_chains=40,
            batch_size=40,
            n_updates=150,
            learning_rate=0.05,
            momentum=0.5,
            generator=seed,
            log_every=150,
        )
        finals.append(_bound(dbm))
    finals_t = torch.tensor(finals, dtype=torch.float64)
    gain = float(finals_t.mean()) - start
    noise = float(finals_t.std())
    assert min(finals) > start
    assert gain > 4.0 * noise, (algorithm, operator, start, finals)


def test_pretraining_beats_a_random_initialisation():
    data = _digits()
    random_bound = _bound(_initial_dbm())
    bounds = []
    for seed in SEEDS:
        result = pretrain_dbm(
            [64, 12, 6], data, n_updates=300, batch_size=40, learning_rate=0.1, generator=seed
        )
        assert result.dbm.base_fitted and result.dbm.layer_sizes == (64, 12, 6)
        bounds.append(_bound(result.dbm))
    bounds_t = torch.tensor(bounds, dtype=torch.float64)
    assert min(bounds) > random_bound
    assert float(bounds_t.mean()) - random_bound > 4.0 * float(bounds_t.std()), (random_bound, bounds)


def test_pretraining_stacks_the_rbms_as_documented():
    data = bl.data.load("bars-and-stripes", size=3).train
    result = pretrain_dbm([9, 6, 5, 4], data, n_updates=[20, 10, 10], batch_size=7, generator=1)
    rbms, dbm = result.rbms, result.dbm
    for index, rbm in enumerate(rbms):
        assert torch.equal(dbm.weights[index].detach(), rbm.weights.detach())
    assert torch.equal(dbm.biases[0].detach(), rbms[0].visible_bias.detach())
    assert torch.equal(dbm.biases[3].detach(), rbms[2].hidden_bias.detach())
    middle = 0.5 * (rbms[0].hidden_bias.detach() + rbms[1].visible_bias.detach())
    assert torch.allclose(dbm.biases[1].detach(), middle)
    with pytest.raises(ValidationError, match="n_updates"):
        pretrain_dbm([9, 6, 4], data, n_updates=[5], batch_size=7)
    with pytest.raises(ValidationError, match="interior_bias"):
        pretrain_dbm([9, 6, 4], data, n_updates=5, batch_size=7, interior_bias="middle")


# ------------------------------------------------------------------------------ tracking, resume
def test_bound_tracker_reports_the_bound_with_exact_and_ais_log_z():
    data = _digits()[:120]
    dbm = _initial_dbm()
    tracker = VariationalBoundTracker(10)
    result = bl.train(
        dbm,
        data,
        algorithm="pcd",
        n_chains=20,
        batch_size=20,
        n_updates=20,
        log_every=20,
        learning_rate=0.05,
        validation_data=_digits()[200:260],
        callbacks=[tracker],
        generator=0,
    )
    last = result.history[-1]
    assert [record.update for record in result.history] == [0, 10, 20]
    log_z = bl.exact_log_z(dbm)
    assert last.log_z == pytest.approx(log_z, abs=1e-10)
    assert last.extra["train_bound"] == pytest.approx(bl.variational_lower_bound(dbm, data, log_z), abs=1e-9)
    assert last.extra["validation_bound"] == pytest.approx(
        bl.variational_lower_bound(dbm, _digits()[200:260], log_z), abs=1e-9
    )
    ais_tracker = VariationalBoundTracker(
        1, log_z="ais", ais_options={"n_chains": 200, "n_temperatures": 300, "schedule": "linear"}, seed=4
    )
    estimate_a = ais_tracker.measure(_FixedRun(dbm, data))
    estimate_b = ais_tracker.measure(_FixedRun(dbm, data))
    assert estimate_a == estimate_b  # its own seed per update: repeatable
    assert abs(estimate_a["log_z"] - log_z) < 4 * estimate_a["log_z_stderr"] + 1e-3


class _FixedRun:
    """The part of a RunView the tracker reads."""

    def __init__(self, model, data):
        self.model, self.data, self.validation_data, self.update = model, data, None, 7


def test_dbm_cast_training_resumes_bit_identically(tmp_path: Path):
    data = _digits()[:120]
    common = {
        "algorithm": "cast",
        "algorithm_params": {"n_levels": 5, "lag": 4},
        "operator": "flip",
        "n_chains": 9,
        "batch_size": 20,
        "learning_rate": 0.05,
        "generator": 3,
        "log_every": 5,
    }
    straight = _initial_dbm()
    bl.train(straight, data, n_updates=14, **common)
    resumed = _initial_dbm()
    bl.train(resumed, data, n_updates=6, checkpoint_dir=tmp_path, **common)
    bl.train(resumed, data, n_updates=14, checkpoint_dir=tmp_path, resume=True, **common)
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


def test_pcd_chains_start_from_the_data_through_mean_field():
    dbm = _initial_dbm()
    v = _digits()[:13]
    chains = dbm.chains_from(v, generator=0)
    assert [tuple(layer.shape) for layer in chains.layers] == [(13, 64), (13, 12), (13, 6)]
    assert torch.equal(chains.layers[0], v) and torch.equal(chains.beta, torch.ones(13))
