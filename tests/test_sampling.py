"""bl.sample: every operator draws from the distribution its exact transition matrix predicts."""

import pytest
import torch
from scipy import stats

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import joint_log_probabilities
from boltzlab.evaluation import transition_matrix
from harness import random_rbm


def _codes(layers):
    bits = torch.cat(layers, 1).to(torch.int64)
    return (bits * 2 ** torch.arange(bits.shape[1])).sum(1)


@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_plain_sampler_matches_exact_n_step_distribution(operator):
    # From exact base samples, the law after n sweeps is p0·T^n: compare with a chi-square test
    # on 20,000 independent chains (joint states, 2^6 cells); and T^n has reached p itself.
    model = random_rbm(4, 2, scale=2.0, seed=21, base_rate=True, dtype=torch.float32)
    n_chains, n_sweeps = 20_000, 25
    result = bl.sample(model, operator=operator, n_chains=n_chains, n_sweeps=n_sweeps, generator=7)
    p_target = joint_log_probabilities(model).exp()
    base = joint_log_probabilities(model, 0.0).exp()
    step = transition_matrix(model, bl.operators.get(operator))
    predicted = base @ torch.linalg.matrix_power(step, n_sweeps)
    counts = torch.bincount(_codes(result.chains.layers), minlength=len(p_target)).double()
    keep = predicted > 1e-12
    assert counts[~keep].sum() == 0
    p_value = stats.chisquare(counts[keep].numpy(), (predicted[keep] * n_chains).numpy()).pvalue
    assert p_value > 1e-3, f"{operator}: chi-square p = {p_value:.2e}"
    assert (predicted - p_target).abs().sum() < 1e-3  # well mixed: the test is about p itself


def test_sample_is_reproducible_and_keeps_what_it_is_asked_to():
    model = random_rbm(7, 3, seed=2, dtype=torch.float32)
    first = bl.sample(
        model, operator="flip", n_chains=13, n_sweeps=20, generator=3, keep_every=5, record_energy=True
    )
    second = bl.sample(
        model, operator="flip", n_chains=13, n_sweeps=20, generator=3, keep_every=5, record_energy=True
    )
    assert torch.equal(first.samples, second.samples) and first.samples.shape == (4, 13, 7)
    assert first.energies.shape == (20, 13) and first.energies.dtype == torch.float64
    assert torch.allclose(first.energies[-1], model.energy(first.chains.layers))
    other = bl.sample(model, operator="flip", n_chains=13, n_sweeps=20, generator=4, keep_every=5)
    assert not torch.equal(first.samples, other.samples)
    assert first.info.flip_rate.shape == (20,)


def test_sample_starts_from_data_rows():
    model = random_rbm(7, 3, seed=2, dtype=torch.float32)
    data = torch.zeros(5, 7)
    data[:, 0] = 1
    start = bl.sampling.initial_chains(model, 13, init=data, generator=torch.Generator().manual_seed(0))
    assert torch.equal(start.visible, data[:1].expand(13, -1)) and torch.all(start.beta == 1)


def test_sample_validates_its_arguments():
    model = random_rbm(7, 3, seed=2, dtype=torch.float32)
    with pytest.raises(ValidationError, match="sampler"):
        bl.sample(model, sampler="magic", n_sweeps=2)
    with pytest.raises(ValidationError, match="n_chains"):
        bl.sample(model, n_chains=0, n_sweeps=2)
    with pytest.raises(ValidationError, match="operator"):
        bl.sample(model, operator="hmc2", n_sweeps=2)
    with pytest.raises(ValidationError, match="binary"):
        bl.sample(model, init=torch.full((3, 7), 0.5), n_sweeps=2)
