"""Pseudo-likelihood: the score, its gradient, and training by it (``algorithm="pl"``).

Properties checked:
* every ``log p(v_i | v_−i)`` equals the conditional computed by brute force from the joint
  ``exp(−E(v, h))``, summing the hidden units by enumeration and normalising over the site's
  states, on a 7×3 binary RBM and a Potts RBM with 4 sites of q = 3 states and 2 hidden units;
* the score's two normalisations: nats per site (default) is the sum over sites divided by L,
  and a model with zero weights and fields gives −log q per site exactly;
* the hand-written gradient equals autograd of the value (binary and Potts), and a
  finite difference of the public score;
* one update of ``train(..., algorithm="pl")`` on the whole data is exactly
  ``θ + lr·∇PL`` (a Potts RBM's then put back in the zero-sum gauge), and the run keeps no chains;
* weights: integer sample weights give exactly the score of the data with repeated rows;
* refusals: a DBM, a bad ``per_site``; the scikit-learn wrapper trains by PL on 0/1 data and
  refuses probabilities (a unit's conditional needs its 0/1 value).
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.pseudo_likelihood import pseudo_likelihood_gradient, site_log_conditionals
from boltzlab.models.categorical import one_hot_indices
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import all_binary_states
from boltzlab.sklearn import BernoulliRBM

ROUND_OFF = 1e-12  # float64 sums of a few dozen terms


def _binary_model() -> bl.RBM:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=1.0, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.visible_bias.normal_(generator=g)
        model.hidden_bias.normal_(generator=g)
    return model


def _potts_model() -> PottsRBM:
    model = PottsRBM(n_sites=4, n_states=3, n_hidden=2, generator=0, weight_std=1.0, dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        model.visible_bias.normal_(generator=g)
        model.hidden_bias.normal_(generator=g)
    return model


def _binary_data(n: int = 13) -> torch.Tensor:
    return (torch.rand(n, 7, generator=torch.Generator().manual_seed(3)) < 0.4).double()


def _potts_indices(n: int = 11) -> torch.Tensor:
    return torch.randint(0, 3, (n, 4), generator=torch.Generator().manual_seed(4))


def _log_marginal_by_enumeration(model, v: torch.Tensor) -> torch.Tensor:
    """``log Σ_h exp(−E(v, h))`` with the 2^J hidden states enumerated, per row of ``v``."""
    hidden = all_binary_states(model.n_hidden)
    n, m = v.shape[0], hidden.shape[0]
    energies = model.energy((v.repeat_interleave(m, 0), hidden.repeat(n, 1))).view(n, m)
    return torch.logsumexp(-energies, 1)


def test_binary_conditionals_match_enumeration() -> None:
    model, v = _binary_model(), _binary_data()
    got = site_log_conditionals(model, v)
    assert got.shape == (13, 7)
    for i in range(7):
        states = []
        for s in (0.0, 1.0):
            changed = v.clone()
            changed[:, i] = s
            states.append(_log_marginal_by_enumeration(model, changed))
        log_f = torch.stack(states, 1)
        expected = log_f.gather(1, v[:, i : i + 1].long())[:, 0] - torch.logsumexp(log_f, 1)
        torch.testing.assert_close(got[:, i], expected, rtol=0, atol=ROUND_OFF)


def test_potts_conditionals_match_enumeration() -> None:
    model, indices = _potts_model(), _potts_indices()
    got = site_log_conditionals(model, one_hot_indices(indices, 3, dtype=torch.float64))
    assert got.shape == (11, 4)
    for i in range(4):
        states = []
        for s in range(3):
            changed = indices.clone()
            changed[:, i] = s
            states.append(
                _log_marginal_by_enumeration(model, one_hot_indices(changed, 3, dtype=torch.float64))
            )
        log_f = torch.stack(states, 1)
        expected = log_f.gather(1, indices[:, i : i + 1])[:, 0] - torch.logsumexp(log_f, 1)
        torch.testing.assert_close(got[:, i], expected, rtol=0, atol=ROUND_OFF)


def test_normalisations_per_site_and_per_example() -> None:
    model, v = _binary_model(), _binary_data()
    per_site = bl.pseudo_log_likelihood(model, v)
    per_example = bl.pseudo_log_likelihood(model, v, per_site=False)
    assert per_example == pytest.approx(7 * per_site, rel=1e-14)
    assert per_example == pytest.approx(
        float(site_log_conditionals(model, v).detach().sum(1).mean()), rel=1e-14
    )
    # A model that knows nothing guesses uniformly: −log q per site, whatever the data.
    flat = PottsRBM(n_sites=4, n_states=3, n_hidden=2, weight_std=0.0, generator=0, dtype=torch.float64)
    assert bl.pseudo_log_likelihood(flat, _potts_indices()) == pytest.approx(-math.log(3), rel=1e-14)
    # Batching is memory only.
    assert bl.pseudo_log_likelihood(model, v, batch_size=4) == pytest.approx(per_site, rel=1e-14)


def test_integer_weights_equal_repeated_rows() -> None:
    model, indices = _potts_model(), _potts_indices()
    counts = torch.tensor([0, 1, 2, 3, 1, 0, 4, 1, 1, 2, 1])
    repeated = indices.repeat_interleave(counts, 0)
    weighted = bl.pseudo_log_likelihood(model, indices, sample_weights=counts.double())
    assert weighted == pytest.approx(bl.pseudo_log_likelihood(model, repeated), abs=ROUND_OFF)
    # Only the proportions matter.
    assert bl.pseudo_log_likelihood(model, indices, sample_weights=0.25 * counts) == pytest.approx(
        weighted, abs=1e-14
    )


@pytest.mark.parametrize("kind", ["binary", "potts"])
def test_gradient_matches_autograd(kind: str) -> None:
    if kind == "binary":
        model, v = _binary_model(), _binary_data()
    else:
        model, v = _potts_model(), one_hot_indices(_potts_indices(), 3, dtype=torch.float64)
    before = [p.detach().clone() for p in model.parameters()]
    result = pseudo_likelihood_gradient(model, v)
    parameters = [model.weights, model.visible_bias, model.hidden_bias]
    with torch.enable_grad():
        value = site_log_conditionals(model, v).sum(1).mean()
        expected = torch.autograd.grad(value, parameters)
    assert float(result.value) == pytest.approx(float(value.detach()), abs=ROUND_OFF)
    for got, want in zip((result.weights, result.visible_bias, result.hidden_bias), expected, strict=True):
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=0, atol=ROUND_OFF)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_gradient_matches_finite_differences_of_the_score() -> None:
    model, v = _binary_model(), _binary_data()
    result = pseudo_likelihood_gradient(model, v)
    step = 1e-6
    for parameter, gradient, index in (
        (model.weights, result.weights, (2, 1)),
        (model.visible_bias, result.visible_bias, (5,)),
        (model.hidden_bias, result.hidden_bias, (0,)),
    ):
        values = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                parameter[index] += sign * step
            values.append(bl.pseudo_log_likelihood(model, v, per_site=False))
            with torch.no_grad():
                parameter[index] -= sign * step
        # Central difference: error O(step²) ≈ 1e-12, plus round-off 1e-16/step ≈ 1e-10.
        assert (values[0] - values[1]) / (2 * step) == pytest.approx(float(gradient[index]), abs=1e-8)


@pytest.mark.parametrize("kind", ["binary", "potts"])
def test_one_pl_update_is_the_exact_gradient_step(kind: str) -> None:
    if kind == "binary":
        model, data = _binary_model(), _binary_data()
        v = data
    else:
        model, data = _potts_model(), _potts_indices()
        v = one_hot_indices(data, 3, dtype=torch.float64)
    step = pseudo_likelihood_gradient(model, v)  # the whole data: the one minibatch, in some order
    expected = [
        p.detach() + 0.1 * g
        for p, g in zip(model.parameters(), (step.weights, step.visible_bias, step.hidden_bias), strict=True)
    ]
    result = bl.train(
        model,
        data,
        algorithm="pl",
        batch_size=v.shape[0],
        n_updates=1,
        learning_rate=0.1,
        generator=0,
        snapshots=0,
    )
    if kind == "potts":  # the trainer keeps the zero-sum gauge; so does the expectation
        reference = PottsRBM(
            weights=expected[0].view(4, 3, 2),
            visible_bias=expected[1],
            hidden_bias=expected[2],
            dtype=torch.float64,
        ).apply_gauge_()
        expected = [p.detach() for p in reference.parameters()]
    for got, want in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(got.detach(), want, rtol=0, atol=ROUND_OFF)
    assert result.final_chains is None
    assert model.metadata["training"]["algorithm"] == "pl"


def test_pl_training_raises_the_pseudo_likelihood() -> None:
    data = _binary_data(40)
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0, dtype=torch.float64)
    before = bl.pseudo_log_likelihood(model, data)
    bl.train(
        model, data, algorithm="pl", batch_size=40, n_updates=30, learning_rate=0.2, generator=0, snapshots=0
    )
    # Full-batch ascent with a small step: the objective rises (a deterministic run).
    assert bl.pseudo_log_likelihood(model, data) > before + 0.01


def test_refusals() -> None:
    dbm = bl.DBM(layer_sizes=[7, 3, 2], generator=0)
    with pytest.raises(ValidationError, match=r"binary RBMs .* Potts RBMs"):
        bl.pseudo_log_likelihood(dbm, _binary_data())
    with pytest.raises(ValidationError, match='algorithm="pl"'):
        bl.train(dbm, _binary_data(), algorithm="pl", batch_size=5, n_updates=1)
    with pytest.raises(ValidationError, match="per_site"):
        bl.pseudo_log_likelihood(_binary_model(), _binary_data(), per_site="yes")
    with pytest.raises(ValidationError, match="sample_weights must have shape"):
        bl.pseudo_log_likelihood(_binary_model(), _binary_data(), sample_weights=torch.ones(3))


def test_the_scikit_learn_wrapper_trains_by_pl_on_binary_data_only() -> None:
    binary = _binary_data(30).numpy()
    fitted = BernoulliRBM(n_components=3, algorithm="pl", n_iter=2, batch_size=10, random_state=0).fit(binary)
    assert fitted.components_.shape == (3, 7)
    with pytest.raises(ValidationError, match="needs 0/1 data"):
        BernoulliRBM(n_components=3, algorithm="pl", n_iter=1, random_state=0).fit(0.5 * binary + 0.25)
