"""The Potts RBM: its energy, tempered family, enumeration, gauge, data and file, exactly.

Brute force here means summing ``exp(−E)`` or ``f_β`` over every joint state
(:func:`boltzlab.estimators.model_joint_states`), independently of the enumeration that
``exact_log_z`` runs (hidden states with the sites summed out, or sequences with the
hidden units summed out).
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.data.sequences import read_sequence_lines
from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import model_joint_states
from boltzlab.models import PottsRBM
from boltzlab.models.categorical import all_categorical_states, as_one_hot
from harness import binary_as_potts, random_potts, random_rbm, tiny_potts


def brute_log_z(model: PottsRBM, beta: float) -> float:
    layers = model_joint_states(model)
    return float(torch.logsumexp(model.log_f(layers, beta), 0))


@pytest.mark.parametrize(
    ("sites", "states", "hidden"),
    [(3, 3, 2), (2, 21, 2), (2, 3, 6), (4, 2, 5)],  # hidden side enumerated, then the sequences
)
def test_exact_log_z_matches_brute_force_at_every_beta(sites, states, hidden):
    model = random_potts(sites, states, hidden, scale=2.0, seed=sites + states, base_rate=True)
    for beta in (0.0, 0.3, 1.0):
        assert bl.exact_log_z(model, beta) == pytest.approx(brute_log_z(model, beta), abs=1e-10)
    assert bl.exact_log_z(model, 0.0) == pytest.approx(0.0, abs=1e-12)  # a normalised base


def test_summed_out_forms_agree_with_the_joint_density():
    model = random_potts(3, 3, 2, scale=2.0, seed=4, base_rate=True)
    v = all_categorical_states(3, 3, dtype=torch.float64)
    h = bl.models.all_binary_states(2, dtype=torch.float64)
    for beta in (0.2, 1.0):
        joint = model.log_f((v.repeat_interleave(4, 0), h.repeat(27, 1)), beta).view(27, 4)
        assert torch.allclose(torch.logsumexp(joint, 1), -model.free_energy(v, beta), atol=1e-10)
        assert torch.allclose(torch.logsumexp(joint, 1), model.visible_log_f(v, beta), atol=1e-10)
        assert torch.allclose(torch.logsumexp(joint, 0), model.hidden_log_f(h, beta), atol=1e-10)


def test_the_conditionals_are_the_joint_density_normalised():
    # The visible logits of each site at β are, up to a per-site constant, log f_β(v, h) with
    # the site's state varied; the hidden log-odds are log f_β(h_j = 1)/f_β(h_j = 0).
    model = random_potts(2, 3, 2, scale=2.0, seed=6, base_rate=True)
    layers = model_joint_states(model)
    beta = torch.full((layers[0].shape[0],), 0.6, dtype=torch.float64)
    logits = model.conditional_logits(0, layers, beta).view(-1, 2, 3)
    log_f = model.log_f(layers, 0.6)
    # Site 0 of state s changes with the first digit: states s, s ± 1, s ± 2 share the rest.
    digit = torch.arange(log_f.numel()) % 3
    rows = torch.arange(log_f.numel()) - digit
    block = torch.stack([log_f[rows + k] for k in range(3)], 1)
    assert torch.allclose(torch.log_softmax(logits[:, 0], 1), torch.log_softmax(block, 1), atol=1e-10)


def test_q2_model_is_the_binary_rbm():
    binary = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    potts = binary_as_potts(binary)
    v = bl.models.all_binary_states(4, dtype=torch.float64)
    one_hot = torch.stack([1 - v, v], 2).reshape(16, 8)
    assert torch.allclose(potts.free_energy(one_hot, 0.4), binary.free_energy(v, 0.4), atol=1e-12)
    assert bl.exact_log_z(potts) == pytest.approx(bl.exact_log_z(binary), abs=1e-12)


def test_gauge_keeps_the_distribution_and_zeroes_the_sums():
    model = random_potts(3, 4, 2, scale=2.0, seed=7, base_rate=True)
    before = model.free_energy(all_categorical_states(3, 4, dtype=torch.float64))
    log_z = bl.exact_log_z(model)
    model.apply_gauge_()
    after = model.free_energy(all_categorical_states(3, 4, dtype=torch.float64))
    # Energies shift by one constant (the fields' removed mean), so log p is unchanged.
    shift = after - before
    assert torch.allclose(shift, shift[:1].expand_as(shift), atol=1e-10)
    assert bl.exact_log_z(model) == pytest.approx(log_z - float(shift[0]), abs=1e-10)
    assert model.potts_weights.detach().sum(1).abs().max() < 1e-12
    assert model.fields.detach().sum(1).abs().max() < 1e-12


def test_training_keeps_the_gauge_and_moves_every_field():
    # Trained in the zero-sum gauge no direction drifts and none freezes: the fields of a
    # symbol the data never use fall, the others move, the sums stay at zero, and every
    # parameter stays finite (the failure seen in peers' codes: fields stuck at zero or NaN).
    generator = torch.Generator().manual_seed(0)
    data = torch.randint(0, 3, (200, 6), generator=generator)  # symbol 3 of 4 never appears
    model = PottsRBM(n_sites=6, n_states=4, n_hidden=3, generator=1)
    result = bl.train(model, data, batch_size=20, n_updates=150, learning_rate=0.05, generator=2)
    fields = result.model.fields.detach()
    assert bool(torch.isfinite(fields).all()) and bool(torch.isfinite(result.model.weights).all())
    assert fields.sum(1).abs().max() < 1e-5
    assert result.model.potts_weights.detach().sum(1).abs().max() < 1e-5
    assert bool((fields[:, 3] < fields[:, :3].min(1).values).all()), fields
    assert fields.abs().min() > 1e-3


def test_data_forms_are_accepted_and_bad_ones_refused_with_the_reason(tmp_path):
    model = PottsRBM(n_sites=3, n_states=4, n_hidden=2, generator=0)
    indices = torch.tensor([[0, 3, 1], [2, 2, 0]])
    one_hot = model.validate_data(indices)
    assert one_hot.shape == (2, 12) and torch.equal(model.to_indices(one_hot), indices)
    assert torch.equal(model.validate_data(one_hot), one_hot)
    assert torch.equal(model.validate_data(one_hot.view(2, 3, 4)), one_hot)
    assert torch.equal(model.validate_data(indices.numpy()), one_hot)
    path = tmp_path / "s.txt"
    path.write_text("AD-\nCCA\n")
    alignment = read_sequence_lines(path, alphabet="custom:ACD-")
    assert model.validate_data(alignment).shape == (2, 12)
    with pytest.raises(ValidationError, match=r"outside 0\.\.3.*e\.g\. 4"):
        model.validate_data(torch.tensor([[0, 4, 1]]))
    with pytest.raises(ValidationError, match="one-hot"):
        model.validate_data(torch.ones(1, 12))
    with pytest.raises(ValidationError, match=r"columns; the model expects"):
        model.validate_data(torch.zeros(1, 5))
    with pytest.raises(ValidationError, match="alphabet has 21 symbols"):
        as_one_hot(read_sequence_lines(path, alphabet="protein"), "data", n_sites=3, n_states=4)
    with pytest.raises(ValidationError, match="NaN"):
        model.validate_data(torch.tensor([[0.0, float("nan"), 1.0]]))


def test_chains_that_are_not_one_hot_are_refused_by_the_operators():
    model = tiny_potts()[0]
    chains = model.init_chains(5, generator=0).with_beta(1.0)
    broken = bl.Chains(layers=(chains.layers[0] * 0, chains.layers[1]), beta=chains.beta)
    with pytest.raises(ValidationError, match="must be one-hot"):
        bl.operators.get("gibbs").step(model, broken, generator=torch.Generator().manual_seed(0))


def test_file_round_trip_is_exact_and_keeps_the_alphabet(tmp_path):
    model = PottsRBM(n_sites=4, n_states=21, n_hidden=3, alphabet="protein", generator=0, weight_std=0.5)
    model.set_base_rate(torch.randint(0, 21, (30, 4), generator=torch.Generator().manual_seed(1)))
    path = model.save(tmp_path / "m.safetensors")
    loaded = bl.io.load_model(path)
    assert isinstance(loaded, PottsRBM) and loaded.n_sites == 4 and loaded.n_states == 21
    for name in ("weights", "visible_bias", "hidden_bias", "base_logits"):
        assert torch.equal(getattr(loaded, name), getattr(model, name)), name
    assert loaded.alphabet is not None and loaded.alphabet.symbols == model.alphabet.symbols
    assert loaded.witness is not None and torch.equal(loaded.witness, model.witness)
    assert bl.exact_log_z(loaded) == bl.exact_log_z(model)


def test_construction_is_checked():
    with pytest.raises(ValidationError, match="n_states >= 2"):
        PottsRBM(n_sites=3, n_states=1, n_hidden=2)
    with pytest.raises(ValidationError, match="need n_states"):
        PottsRBM(weights=torch.zeros(6, 2))
    with pytest.raises(ValidationError, match="alphabet has 21 symbols"):
        PottsRBM(n_sites=3, n_states=4, n_hidden=2, alphabet="protein")
    model = PottsRBM(n_sites=5, n_hidden=2, alphabet="rna", generator=0)
    assert model.n_states == 5 and model.layer_sizes == (25, 2)


def test_training_starts_zero_fields_at_the_profile_and_leaves_others():
    data = torch.randint(0, 3, (50, 4), generator=torch.Generator().manual_seed(0))
    model = PottsRBM(n_sites=4, n_states=3, n_hidden=2, generator=1)
    result = bl.train(model, data, batch_size=10, n_updates=1, learning_rate=1e-9, generator=0)
    profile = result.model.base_logits.view(4, 3)
    assert torch.allclose(result.model.fields, profile - profile.mean(1, keepdim=True), atol=1e-6)
    # Trained fields are not overwritten when training goes on.
    assert not result.model.start_fields_at_profile_()
    fresh = PottsRBM(n_sites=4, n_states=3, n_hidden=2, generator=1)
    fresh.profile_start = False
    kept = bl.train(fresh, data, batch_size=10, n_updates=1, learning_rate=1e-9, generator=0).model
    assert kept.fields.abs().max() < 1e-6
