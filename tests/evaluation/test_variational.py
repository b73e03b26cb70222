"""Mean-field inference in a DBM and the variational lower bound, against enumeration.

On tiny DBMs everything is exact: ``log p(v)`` by summing every hidden state, and the gap
of the bound, ``KL(Q ‖ p(h | v))``, by enumerating the hidden states under ``Q``.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_states
from boltzlab.models import (
    all_binary_states,
    binary_entropy,
    mean_field_posterior,
    variational_lower_bound_per_example,
)
from harness import random_dbm

SHAPES = [(3, 3, 2), (2, 3, 2, 2), (4, 2, 3)]


def exact_log_p(model: bl.DBM) -> torch.Tensor:
    """``log p(v)`` of every visible state (order of ``all_binary_states``), by brute force."""
    layers = joint_states(model.layer_sizes)
    joint = model.log_f(layers, 1.0) - bl.exact_log_z(model)
    bits = layers[0].to(torch.int64)
    codes = (bits * 2 ** torch.arange(bits.shape[1])).sum(1)
    return torch.stack([torch.logsumexp(joint[codes == c], 0) for c in range(2 ** model.layer_sizes[0])])


@pytest.mark.parametrize("shape", SHAPES)
def test_fixed_point_holds_after_convergence(shape):
    # After many updates every hidden mean equals σ(its input from the neighbouring means),
    # and the reported last change says so.
    model = random_dbm(shape, scale=1.0, seed=3)
    v = all_binary_states(shape[0])
    result = mean_field_posterior(model, v, n_updates=200)
    assert result.n_updates == 200 and float(result.last_change.max()) < 1e-12
    for index in range(1, len(shape)):
        below = result.means[index - 1] @ model.weights[index - 1].detach()
        above = result.means[index + 1] @ model.weights[index].detach().t() if index < len(shape) - 1 else 0.0
        expected = torch.sigmoid(model.biases[index].detach() + below + above)
        assert torch.allclose(result.means[index], expected, atol=1e-12, rtol=0)
    assert torch.equal(result.means[0], v)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("init", ["bottom_up", "zeros"])
def test_bound_is_log_p_minus_the_exact_kl_gap_and_never_above_log_p(shape, init):
    # bound(v) = log p(v) − KL(Q ‖ p(h | v)) ≤ log p(v), for every visible state, with Q
    # the product of Bernoulli(μ) built from the returned means.
    model = random_dbm(shape, scale=2.0, seed=5, base_rate=True)
    log_z = bl.exact_log_z(model)
    log_p = exact_log_p(model)
    v = all_binary_states(shape[0])
    hidden_sizes = model.layer_sizes[1:]
    hidden = all_binary_states(sum(hidden_sizes))
    hidden_layers = torch.split(hidden, list(hidden_sizes), dim=1)
    for n_updates in (0, 1, 5):
        bound = variational_lower_bound_per_example(model, v, log_z, n_updates=n_updates, init=init)
        means = mean_field_posterior(model, v, n_updates=n_updates, init=init).means
        q = torch.cat(means[1:], dim=1).clamp(1e-12, 1 - 1e-12)
        for row in range(v.shape[0]):
            log_q = (hidden * q[row].log() + (1 - hidden) * torch.log1p(-q[row])).sum(1)
            layers = (v[row].expand(hidden.shape[0], -1), *hidden_layers)
            log_posterior = model.log_f(layers, 1.0) - log_z - log_p[row]
            kl = float((log_q.exp() * (log_q - log_posterior)).sum())
            assert float(bound[row]) == pytest.approx(float(log_p[row]) - kl, abs=1e-10)
        assert bool((bound <= log_p + 1e-12).all()), f"{init}, {n_updates} updates: bound above log p(v)"


@pytest.mark.parametrize("shape", SHAPES)
def test_bound_never_decreases_with_more_updates_from_the_bottom_up_start(shape):
    # Each half-update maximises the bound over one parity exactly, so the bound is
    # non-decreasing in the number of updates for every example (hence on average).
    model = random_dbm(shape, scale=3.0, seed=7, base_rate=True)
    v = all_binary_states(shape[0])
    log_z = bl.exact_log_z(model)
    bounds = torch.stack(
        [variational_lower_bound_per_example(model, v, log_z, n_updates=k) for k in range(8)]
    )
    steps = bounds[1:] - bounds[:-1]
    assert float(steps.min()) >= -1e-12, f"bound decreased by {-float(steps.min())}"
    assert float(bounds[-1].mean()) > float(bounds[0].mean()), "updates should improve on the start"


def test_zeros_then_one_update_is_the_bottom_up_pass_for_two_hidden_layers():
    model = random_dbm((4, 3, 2), seed=9)
    v = all_binary_states(4)
    zeros = mean_field_posterior(model, v, n_updates=1, init="zeros").means
    bottom_up = mean_field_posterior(model, v, n_updates=0).means
    assert all(torch.equal(a, b) for a, b in zip(zeros, bottom_up, strict=True))
    assert float(mean_field_posterior(model, v, n_updates=0).last_change.min()) == math.inf


def test_entropy_clipping_is_safe_for_saturated_means():
    # float32 means saturate to exactly 0 and 1; the unclipped entropy would be NaN there.
    entropy = binary_entropy(torch.tensor([0.0, 1.0, 0.5]))
    assert torch.isfinite(entropy).all() and entropy.dtype == torch.float64
    assert float(entropy[0]) < 1e-9 and float(entropy[1]) < 1e-9
    assert float(entropy[2]) == pytest.approx(math.log(2.0), abs=1e-15)
    model = random_dbm((3, 3, 2), scale=60.0, seed=11, dtype=torch.float32)
    v = all_binary_states(3, dtype=torch.float32)
    means = mean_field_posterior(model, v).means
    assert bool(((means[1] == 0) | (means[1] == 1)).any()), "the test needs saturated means"
    bound = variational_lower_bound_per_example(model, v, bl.exact_log_z(model))
    assert torch.isfinite(bound).all()
    exact = exact_log_p(copy.deepcopy(model).to(torch.float64))
    # float32 weights of size 60: the energy term is exact in float64, so 1e-9 is round-off.
    assert bool((bound <= exact + 1e-9).all())


def test_mean_is_the_per_example_mean_and_batching_changes_nothing():
    model = random_dbm((3, 3, 2), seed=13, dtype=torch.float32, base_rate=True)
    data = (torch.rand(29, 3, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    before = data.clone()
    estimate = bl.LogZEstimate(log_z=bl.exact_log_z(model), stderr=0.0, method="exact")
    per_example = variational_lower_bound_per_example(model, data, estimate)
    assert per_example.shape == (29,) and per_example.dtype == torch.float64
    assert bl.variational_lower_bound(model, data, estimate.log_z) == pytest.approx(
        float(per_example.mean()), abs=1e-12
    )
    batched = variational_lower_bound_per_example(model, data, estimate, batch_size=4)
    assert torch.allclose(batched, per_example, atol=1e-12, rtol=0)
    assert torch.equal(data, before), "the data must not be modified"


def test_measured_gap_on_the_3_3_2_dbm_is_small_but_positive():
    # Not a tolerance check of the method: the mean gap log p(v) − bound is positive (the
    # posterior is not factorial) and below the entropy of a uniform posterior, 5·log 2.
    model = random_dbm((3, 3, 2), scale=2.0, seed=5, base_rate=True)
    v = all_binary_states(3)
    gap = exact_log_p(model) - variational_lower_bound_per_example(model, v, bl.exact_log_z(model))
    assert 0.0 < float(gap.mean()) < 5 * math.log(2.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_updates": -1}, r"n_updates must be a non-negative integer"),
        ({"n_updates": 2.5}, r"n_updates must be a non-negative integer"),
        ({"init": "random"}, r"init must be one of 'bottom_up', 'zeros'"),
        ({"epsilon": 0.7}, r"epsilon must be in \(0, 0\.5\)"),
        ({"batch_size": 0}, r"batch_size must be a positive integer"),
        ({"log_z": "big"}, r"log_z must be a number or a LogZEstimate"),
        ({"log_z": math.nan}, r"log_z must be finite"),
        ({"data": torch.full((2, 3), 0.5)}, r"data must be binary"),
        ({"data": torch.ones(2, 4)}, r"data has 4 units per example, the model expects 3"),
        ({"dbm": bl.RBM(n_visible=3, n_hidden=2, generator=0)}, r"dbm must be a boltzlab\.DBM, got RBM"),
    ],
)
def test_refuses_bad_arguments_naming_them(kwargs, message):
    arguments = {"dbm": random_dbm((3, 3, 2), seed=1), "data": torch.ones(2, 3), "log_z": 1.0, **kwargs}
    with pytest.raises(ValidationError, match=message):
        bl.variational_lower_bound(**arguments)
