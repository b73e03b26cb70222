"""Per-example AIS for the true log p(v) of a DBM, against enumeration (docs/algorithms.md §4.1).

Properties checked, on enumerable DBMs with two and three hidden layers (5-3-4, 4-3-2-3):
* the estimate of each example is within 4 of its standard errors of the exact ``log p(v)``,
  for Gibbs and flip-the-state sweeps and for the mean-field, mixed and uniform bases;
* it lies above the variational bound (which the exact value does by construction);
* AIS is unbiased in ``f(v)``, not in its log: with K = 2, ``mean(w)/f(v) = 1`` within 4
  standard errors while ``mean(log w) < log f(v)``;
* with K = 1 and the pure mean-field base, AIS is importance sampling from Q with the odd
  layer summed out: the mean log-weight equals its exact expectation within 4 standard
  errors, which lies between the variational bound and log f(v);
* the error bar shrinks with more chains; inputs are not modified; bad arguments are refused.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood, exact_log_likelihood
from boltzlab.models import all_binary_states
from boltzlab.models.mean_field import mean_field_posterior, variational_lower_bound_per_example
from harness import random_dbm

SHAPES = [(5, 3, 4), (4, 3, 2, 3)]


def _model(shape: tuple[int, ...]) -> bl.DBM:
    return random_dbm(shape, scale=2.0, seed=3, base_rate=True)


def _examples(n_visible: int, n_examples: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return (torch.rand(n_examples, n_visible, generator=g) < 0.5).double()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("operator", ["gibbs", "flip"])
@pytest.mark.parametrize("base_mixing", [0.0, 0.05, 1.0])
def test_estimate_is_within_its_error_bar_of_the_exact_log_probability(shape, operator, base_mixing):
    dbm = _model(shape)
    v = _examples(shape[0])
    log_z = bl.exact_log_z(dbm)
    exact = exact_log_likelihood(dbm, v, log_z=log_z)
    result = estimate_log_likelihood(
        dbm,
        v,
        log_z=log_z,
        n_chains=2000,
        n_temperatures=20,
        operator=operator,
        base_mixing=base_mixing,
        generator=11,
    )
    z = (result.log_probability - exact) / result.stderr
    assert float(z.abs().max()) < 4.0, z
    assert torch.allclose(result.log_unnormalized - log_z, result.log_probability)
    assert result.log_weights.shape == (6, 2000) and result.cost_sweeps == 6 * 2000 * 19


@pytest.mark.parametrize("shape", SHAPES)
def test_estimate_lies_above_the_variational_bound(shape):
    dbm = _model(shape)
    v = _examples(shape[0])
    log_z = bl.exact_log_z(dbm)
    result = estimate_log_likelihood(dbm, v, log_z=log_z, n_chains=2000, n_temperatures=50, generator=12)
    exact = exact_log_likelihood(dbm, v, log_z=log_z)
    bound = variational_lower_bound_per_example(dbm, v, log_z, n_updates=10)
    assert torch.allclose(result.variational_bound, bound)
    assert bool((exact >= bound - 1e-12).all())  # the bound is a bound
    gap = exact - bound
    resolved = gap > 8 * result.stderr  # examples whose gap the estimate can resolve
    assert int(resolved.sum()) >= 3
    assert bool((result.log_probability[resolved] > bound[resolved]).all())
    assert result.mean > result.mean_bound


def test_ais_is_unbiased_in_f_of_v_and_low_in_its_log():
    dbm = _model((5, 3, 4))
    v = _examples(5, n_examples=3)
    log_f = -dbm.free_energy(v)
    result = estimate_log_likelihood(
        dbm, v, log_z=0.0, n_chains=100_000, n_temperatures=2, base_mixing=1.0, generator=13
    )
    ratio = torch.exp(result.log_weights - log_f[:, None])
    mean, stderr = ratio.mean(1), ratio.std(1) / math.sqrt(ratio.shape[1])
    assert float(((mean - 1) / stderr).abs().max()) < 4.0
    log_weights_mean = result.log_weights.mean(1)
    log_weights_stderr = result.log_weights.std(1) / math.sqrt(ratio.shape[1])
    assert bool((log_weights_mean + 4 * log_weights_stderr < log_f).all())


def test_one_increment_from_the_mean_field_base_is_rao_blackwellised_importance_sampling():
    # K = 1: h² ~ Q(h²) and w = f(v, h²)/Q(h²) with h¹ summed out, so
    # E[log w] = Σ_{h²} Q(h²)·[log f(v, h²) − log Q(h²)], which lies between the variational
    # bound (h¹ also under Q) and log f(v).
    dbm = _model((5, 3, 4))
    v = _examples(5)
    result = estimate_log_likelihood(
        dbm, v, log_z=0.0, n_chains=20_000, n_temperatures=1, base_mixing=0.0, generator=14
    )
    means = mean_field_posterior(dbm, v, n_updates=10).means[2].clamp(1e-6, 1 - 1e-6)
    states = all_binary_states(4, dtype=torch.float64)  # every h²
    weights, biases = [w.detach() for w in dbm.weights], [b.detach() for b in dbm.biases]
    for example in range(v.shape[0]):
        log_q = (states * means[example].log() + (1 - states) * (-means[example]).log1p()).sum(1)
        inputs = biases[1] + v[example] @ weights[0] + states @ weights[1].t()
        log_f = v[example] @ biases[0] + states @ biases[2] + torch.nn.functional.softplus(inputs).sum(1)
        expected = float((log_q.exp() * (log_f - log_q)).sum())
        draws = result.log_weights[example]
        assert abs(float(draws.mean()) - expected) < 4 * float(draws.std()) / math.sqrt(draws.numel())
        assert (
            float(result.variational_bound[example])
            <= expected
            <= float(-dbm.free_energy(v[example : example + 1])[0])
        )


def test_error_bar_shrinks_with_more_chains_and_inputs_are_untouched():
    dbm = _model((4, 3, 2, 3))
    v = _examples(4)
    before = (v.clone(), [p.detach().clone() for p in dbm.parameters()])
    small = estimate_log_likelihood(
        dbm, v, log_z=0.0, n_chains=100, n_temperatures=5, base_mixing=1.0, generator=0
    )
    large = estimate_log_likelihood(
        dbm, v, log_z=0.0, n_chains=6400, n_temperatures=5, base_mixing=1.0, generator=0
    )
    assert float(large.stderr.mean()) < 0.25 * float(small.stderr.mean())
    assert torch.equal(v, before[0])
    assert all(torch.equal(a, b.detach()) for a, b in zip(before[1], dbm.parameters(), strict=True))
    # Batching the examples changes only the random stream, never the target.
    batched = estimate_log_likelihood(
        dbm,
        v,
        log_z=0.0,
        n_chains=6400,
        n_temperatures=5,
        base_mixing=1.0,
        generator=0,
        chains_per_batch=6400,
    )
    z = (batched.log_probability - large.log_probability) / torch.sqrt(batched.stderr**2 + large.stderr**2)
    assert float(z.abs().max()) < 4.0


def test_log_z_estimate_error_enters_the_mean_error():
    dbm = _model((5, 3, 4))
    v = _examples(5)
    estimate = bl.LogZEstimate(log_z=bl.exact_log_z(dbm), stderr=0.3, method="ais")
    result = estimate_log_likelihood(dbm, v, log_z=estimate, n_chains=50, n_temperatures=5, generator=0)
    assert result.log_z_stderr == 0.3
    expected = math.sqrt(float(result.stderr.square().sum()) / 36 + 0.09)
    assert result.mean_stderr == pytest.approx(expected)


def test_bad_arguments_are_refused():
    dbm = _model((5, 3, 4))
    v = _examples(5)
    with pytest.raises(ValidationError, match="base_mixing"):
        estimate_log_likelihood(dbm, v, log_z=0.0, base_mixing=1.5)
    with pytest.raises(ValidationError, match="data"):
        estimate_log_likelihood(dbm, _examples(4), log_z=0.0)
    with pytest.raises(ValidationError, match="log_z"):
        estimate_log_likelihood(dbm, v, log_z="big")
    with pytest.raises(ValidationError, match="operator"):
        estimate_log_likelihood(dbm, v, log_z=0.0, operator="hmc")
    with pytest.raises(ValidationError, match="dbm"):
        estimate_log_likelihood(bl.RBM(5, 3), v, log_z=0.0)
