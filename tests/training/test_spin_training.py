"""Training models with ±1 spin visible units: the gradient is taken in spin coordinates.

The spin parameters ``θ_s = (W, b, c)`` map linearly to the equal binary model's
``θ_b = (2W, 2b, c − Wᵀ1)``, so the log-likelihood gradient in spin coordinates is the chain
rule of the binary one, ``G_W = 2G_W' − 1·G_c'ᵀ``, ``G_b = 2G_b'``, ``G_c = G_c'`` — not the
binary step. Checked here against autograd and against the binary objectives, for the RBM's
objective, the DBM's mean-field objective, the pseudo-likelihood and centring; then a short
training run on ±1 data.
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.chains import Chains
from boltzlab.estimators.pseudo_likelihood import pseudo_likelihood_gradient, site_log_conditionals
from boltzlab.models.rbm import all_binary_states
from boltzlab.training import Centering, objective_for
from boltzlab.training.spin_objective import SpinDBMObjective, SpinRBMObjective
from harness import random_spin_dbm, random_spin_rbm


def rows(n: int, width: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, width, generator=g, dtype=torch.float64) < 0.4).double()


def written(model, objective, positive, negative) -> list[torch.Tensor]:
    for parameter in model.parameters():
        parameter.grad = None
    objective.write_gradient_(model, positive, negative)
    return [parameter.grad.clone() for parameter in model.parameters()]


def test_spin_rbm_gradient_is_autograd_of_the_free_energy_difference():
    # model − data = ∇[mean_B(−F) − mean_A(−F)] with −F(s) = b·s + Σ_j softplus(c + sW).
    model = random_spin_rbm(5, 3, seed=1)
    objective = objective_for(model)
    assert isinstance(objective, SpinRBMObjective)
    data, samples = rows(7, 5, 0), rows(9, 5, 1)
    chains = Chains(
        layers=(samples, torch.zeros(9, 3, dtype=torch.float64)), beta=torch.ones(9, dtype=torch.float64)
    )
    grads = written(model, objective, objective.positive(model, data), objective.negative(model, chains))
    weights, fields, hidden = (
        p.detach().clone().requires_grad_() for p in (model.weights, model.visible_bias, model.hidden_bias)
    )

    def minus_free_energy(v):
        s = 2 * v - 1
        return s @ fields + torch.nn.functional.softplus(hidden + s @ weights).sum(1)

    (minus_free_energy(samples).mean() - minus_free_energy(data).mean()).backward()
    for ours, theirs in zip(grads, (weights.grad, fields.grad, hidden.grad), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-12)


def chain_rule(
    binary_grads: list[torch.Tensor], first_weights: int, visible: int, next_bias: int
) -> dict[int, torch.Tensor]:
    """Spin-coordinate gradients from the equal binary model's (module docstring)."""
    out = dict(enumerate(binary_grads))
    out[first_weights] = 2 * binary_grads[first_weights] - binary_grads[next_bias][None, :]
    out[visible] = 2 * binary_grads[visible]
    return out


def test_spin_rbm_gradient_is_the_chain_rule_of_the_binary_one_not_its_step():
    model = random_spin_rbm(5, 3, seed=2)
    binary = model.binary_rbm()
    data, samples = rows(8, 5, 2), rows(6, 5, 3)
    chains = Chains(
        layers=(samples, torch.zeros(6, 3, dtype=torch.float64)), beta=torch.ones(6, dtype=torch.float64)
    )
    spin_objective, binary_objective = objective_for(model), objective_for(binary)
    ours = written(
        model, spin_objective, spin_objective.positive(model, data), spin_objective.negative(model, chains)
    )
    theirs = written(
        binary,
        binary_objective,
        binary_objective.positive(binary, data),
        binary_objective.negative(binary, chains),
    )
    expected = chain_rule(theirs, 0, 1, 2)
    for index, gradient in enumerate(ours):
        assert torch.allclose(gradient, expected[index], atol=1e-12)
    assert not torch.allclose(ours[0], theirs[0], atol=1e-3)  # the binary step is a different one


def test_spin_dbm_mean_field_gradient_is_the_chain_rule_of_the_binary_one():
    model = random_spin_dbm((4, 3, 2), seed=3)
    binary = model.binary_dbm()
    objective, binary_objective = objective_for(model), objective_for(binary)
    assert isinstance(objective, SpinDBMObjective)
    data = rows(6, 4, 4)
    g = torch.Generator().manual_seed(5)
    layers = tuple(
        (torch.rand(5, size, generator=g, dtype=torch.float64) < 0.5).double() for size in (4, 3, 2)
    )
    chains = Chains(layers=layers, beta=torch.ones(5, dtype=torch.float64))
    ours = written(model, objective, objective.positive(model, data), objective.negative(model, chains))
    theirs = written(
        binary,
        binary_objective,
        binary_objective.positive(binary, data),
        binary_objective.negative(binary, chains),
    )
    # parameters: weights.0, weights.1, biases.0, biases.1, biases.2
    expected = chain_rule(theirs, 0, 2, 3)
    for index, gradient in enumerate(ours):
        assert torch.allclose(gradient, expected[index], atol=1e-10), index


def test_spin_pseudo_likelihood_and_its_gradient():
    model = random_spin_rbm(5, 3, seed=6)
    data = rows(11, 5, 6)
    # the conditionals are the equal binary RBM's
    assert bl.pseudo_log_likelihood(model, data * 2 - 1) == pytest.approx(
        bl.pseudo_log_likelihood(model.binary_rbm(), data), abs=1e-12
    )
    result = pseudo_likelihood_gradient(model, data)
    parameters = (model.weights, model.visible_bias, model.hidden_bias)
    with torch.enable_grad():
        value = site_log_conditionals(model, data).sum(1).mean()
        autograd = torch.autograd.grad(value, parameters)
    assert float(result.value) == pytest.approx(float(value.detach()), abs=1e-12)
    for ours, theirs in zip((result.weights, result.visible_bias, result.hidden_bias), autograd, strict=True):
        assert torch.allclose(ours, theirs, atol=1e-12)


def test_centring_a_spin_rbm_offsets_the_spins():
    model = random_spin_rbm(4, 2, seed=7)
    data = rows(10, 4, 7)
    offsets = Centering(model).init(model, data)
    assert torch.allclose(offsets.layers[0], (2 * data - 1).mean(0))


@pytest.mark.parametrize("centering", [False, True])
def test_training_a_spin_rbm_on_spins_learns(centering):
    # 400 rows from a 6x3 spin RBM: PCD on the ±1 data recovers most of what the teacher has
    # over independent spins (the base-rate model), in exact log-likelihood.
    teacher = random_spin_rbm(6, 3, scale=2.0, seed=8)
    states = all_binary_states(6)
    p = torch.softmax(-teacher.free_energy(states), 0)
    data = states[torch.multinomial(p, 400, replacement=True, generator=torch.Generator().manual_seed(8))]
    spins = (data * 2 - 1).float()
    model = bl.models.SpinRBM(n_visible=6, n_hidden=3, generator=0)
    model.set_base_rate(spins)
    bl.train(
        model,
        spins,
        algorithm="pcd",
        n_chains=50,
        batch_size=50,
        n_updates=400,
        learning_rate=0.05,
        centering=centering,
        generator=0,
    )
    learned = bl.log_likelihood(model, spins, bl.exact_log_z(model))
    best = bl.log_likelihood(teacher, spins, bl.exact_log_z(teacher))
    independent = model.binary_rbm()  # the base-rate model: no couplings, the base's fields
    with torch.no_grad():
        independent.weights.zero_()
        independent.hidden_bias.zero_()
        independent.visible_bias.copy_(independent.base_logits)
    floor = bl.log_likelihood(independent, data, bl.exact_log_z(independent))
    assert best - floor > 0.03  # the teacher's structure is there to learn
    assert learned > floor + 0.7 * (best - floor), (learned, floor, best)


def test_pseudo_likelihood_training_of_a_spin_rbm():
    # algorithm="pl" hands the PL gradient the 0/1 rows, though the spin data term holds s.
    data = rows(60, 6, 9) * 2 - 1
    model = bl.models.SpinRBM(n_visible=6, n_hidden=3, generator=0)
    before = bl.pseudo_log_likelihood(model, data)
    result = bl.train(
        model, data, algorithm="pl", batch_size=20, n_updates=60, learning_rate=0.1, generator=0
    )
    assert result.final_chains is None
    assert bl.pseudo_log_likelihood(model, data) > before + 0.01


def test_a_checkpoint_resumes_only_into_its_own_units(tmp_path):
    # An RBM and a SpinRBM hold tensors of the same names and shapes that mean different
    # distributions: resuming one's checkpoint into the other is refused, naming both classes.
    data = rows(40, 6, 10)
    settings = {"batch_size": 10, "checkpoint_dir": tmp_path, "generator": 0}
    bl.train(bl.models.SpinRBM(n_visible=6, n_hidden=3, generator=0), data, n_updates=4, **settings)
    with pytest.raises(bl.errors.ValidationError, match="model: checkpoint 'SpinRBM', now 'RBM'"):
        bl.train(bl.RBM(n_visible=6, n_hidden=3, generator=0), data, n_updates=8, resume=True, **settings)
    resumed = bl.train(
        bl.models.SpinRBM(n_visible=6, n_hidden=3, generator=0), data, n_updates=8, resume=True, **settings
    )
    assert resumed.history[-1].update == 8
