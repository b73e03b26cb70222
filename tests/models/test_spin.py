"""±1 spin visible units (SpinRBM, SpinDBM) against brute-force sums of the spin energy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.dbm_likelihood import exact_log_likelihood
from boltzlab.models import SpinDBM, SpinRBM
from boltzlab.models.rbm import all_binary_states
from harness import random_spin_dbm, random_spin_rbm, tiny_spin_rbms


def spins(n: int) -> torch.Tensor:
    """All ``2^n`` spin rows, float64, in the order of ``all_binary_states`` (−1 for bit 0)."""
    return all_binary_states(n) * 2 - 1


def brute_log_z_rbm(model: SpinRBM, beta: float) -> float:
    """``log Σ_{s,h} exp(−βE(s,h) + (1 − β) log p1(s, h))`` written from the spin energy itself."""
    w = model.weights.detach().double()
    b = model.visible_bias.detach().double()
    c = model.hidden_bias.detach().double()
    base = model.base_logits.double()
    s = spins(model.n_visible)
    h = all_binary_states(model.n_hidden)
    minus_energy = (s @ w) @ h.T + (s @ b)[:, None] + (h @ c)[None, :]
    up = (s + 1) / 2
    log_p1 = (up @ base - torch.nn.functional.softplus(base).sum())[:, None] - model.n_hidden * math.log(2)
    return float(torch.logsumexp((beta * minus_energy + (1 - beta) * log_p1).flatten(), 0))


def brute_log_z_dbm(model: SpinDBM, beta: float) -> float:
    ws = [w.detach().double() for w in model.weights]
    bs = [b.detach().double() for b in model.biases]
    base = model.base_logits.double()
    terms = []
    sizes = model.layer_sizes
    for s in spins(sizes[0]):
        for h1 in all_binary_states(sizes[1]):
            for h2 in all_binary_states(sizes[2]):
                minus_energy = s @ ws[0] @ h1 + h1 @ ws[1] @ h2 + s @ bs[0] + h1 @ bs[1] + h2 @ bs[2]
                log_p1 = ((s + 1) / 2) @ base - torch.nn.functional.softplus(base).sum()
                log_p1 = log_p1 - (sizes[1] + sizes[2]) * math.log(2)
                terms.append(beta * minus_energy + (1 - beta) * log_p1)
    return float(torch.logsumexp(torch.stack(terms), 0))


@pytest.mark.parametrize("beta", [0.0, 0.35, 1.0])
def test_spin_rbm_log_z_is_the_spin_energy_summed(beta):
    for model in tiny_spin_rbms():  # one enumerates h (J < D), the other s (D < J)
        assert bl.exact_log_z(model, beta=beta) == pytest.approx(brute_log_z_rbm(model, beta), abs=1e-10)


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_spin_dbm_log_z_is_the_spin_energy_summed(beta):
    model = random_spin_dbm((3, 2, 2), seed=5)
    assert bl.exact_log_z(model, beta=beta) == pytest.approx(brute_log_z_dbm(model, beta), abs=1e-10)
    for enumerated in ("odd", "even"):
        log_z = float(torch.logsumexp(torch.cat(list(model.enumerate_log_f(beta, enumerated=enumerated))), 0))
        assert log_z == pytest.approx(brute_log_z_dbm(model, beta), abs=1e-10)


def test_the_equal_binary_models_differ_in_log_z_by_the_field_sum_only():
    model = random_spin_rbm(5, 3, seed=7, base_rate=True)
    binary = model.binary_rbm()
    offset = float(model.spin_offset())
    for beta in (0.0, 0.4, 1.0):
        assert bl.exact_log_z(model, beta=beta) == pytest.approx(
            bl.exact_log_z(binary, beta=beta) - beta * offset, abs=1e-10
        )
    data = spins(5)[[0, 3, 17, 31]]
    assert bl.log_likelihood(model, data, bl.exact_log_z(model)) == pytest.approx(
        bl.log_likelihood(binary, (data + 1) / 2, bl.exact_log_z(binary)), abs=1e-10
    )
    back = SpinRBM.from_binary(binary)
    for name in ("weights", "visible_bias", "hidden_bias", "base_logits"):
        assert torch.allclose(getattr(back, name), getattr(model, name), atol=1e-12), name
    dbm = random_spin_dbm((3, 2, 2), seed=6)
    for beta in (0.3, 1.0):
        assert bl.exact_log_z(dbm, beta=beta) == pytest.approx(
            bl.exact_log_z(dbm.binary_dbm(), beta=beta) - beta * float(dbm.spin_offset()), abs=1e-10
        )


def test_conditionals_energy_and_marginal_match_the_joint():
    model = random_spin_rbm(3, 2, scale=2.0, seed=11, base_rate=True)
    states = all_binary_states(5)
    v, h = states[:, :3], states[:, 3:]
    for beta_value in (0.3, 1.0):
        beta = torch.full((32,), beta_value, dtype=torch.float64)
        log_f = model.log_f((v, h), beta).view(4, 8)  # rows: h code, columns: v code
        # p(v_i = 1 | h) from the joint against the model's visible log-odds
        joint = log_f.exp()
        for i in range(3):
            on = joint[:, (torch.arange(8) >> i) & 1 == 1].sum(1) / joint.sum(1)
            first = torch.arange(4) * 8  # rows with v = 0 in the enumeration order
            logits = model.conditional_logits(0, (v[first], h[first]), beta[:4])[:, i]
            # the conditional does not depend on v: read it at v = 0
            assert torch.allclose(torch.sigmoid(logits), on, atol=1e-12)
        # the summed-out form: log Σ_h f(v, h)
        summed = torch.logsumexp(log_f, 0)
        assert torch.allclose(-model.free_energy(v[:8], beta_value), summed, atol=1e-12)
        hidden = torch.sigmoid(model.conditional_logits(1, (v[:8], None), beta[:8]))
        for j in range(2):
            on = joint[(torch.arange(4) >> j) & 1 == 1].sum(0) / joint.sum(0)
            assert torch.allclose(hidden[:, j], on, atol=1e-12)
    # the spin energy itself, at one state
    s = torch.tensor([[1.0, -1.0, 1.0]], dtype=torch.float64)
    one = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    with torch.no_grad():
        expected = -(s @ model.weights @ one.T + s @ model.visible_bias + one @ model.hidden_bias)
    assert float(model.energy(((s + 1) / 2, one))) == pytest.approx(float(expected), abs=1e-12)


def test_spin_data_forms_and_refusals():
    model = SpinRBM(n_visible=3, n_hidden=2, generator=0)
    as_spins = model.validate_data(torch.tensor([[1, -1, 1], [-1, -1, 1]]))
    assert torch.equal(as_spins, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))
    assert torch.equal(model.validate_data([[1, 0, 1]]), torch.tensor([[1.0, 0.0, 1.0]]))
    assert torch.equal(model.to_spins(as_spins), torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]))
    assert torch.equal(model.validate_data(torch.ones(2, 3, dtype=torch.uint8)), torch.ones(2, 3))
    with pytest.raises(ValidationError, match="mixes -1 and 0"):
        model.validate_data([[1, -1, 0]])
    with pytest.raises(ValidationError, match="spins"):
        model.validate_data([[1, -1, 2]])
    with pytest.raises(ValidationError, match="binary"):
        model.validate_data([[1, 0.5, 1]])
    with pytest.raises(ValidationError, match="NaN"):
        model.validate_data([[1, float("nan"), 1]])
    with pytest.raises(ValidationError, match="3"):
        model.validate_data([[1, -1]])
    # the base reads spins: its log-odds are those of s = +1
    model.set_base_rate(torch.tensor([[1, -1, -1]] * 3 + [[1, 1, -1]]), smoothing=0.5)
    assert torch.allclose(model.base_logits, torch.logit(torch.tensor([1.0, 0.25, 0.0]) * 0.5 + 0.25))
    assert model.witness is not None and model.witness.shape == (4, 3)
    kept = {tuple(row) for row in model.witness.tolist()}  # the spins' rows, held 0/1
    assert kept == {(1.0, 0.0, 0.0), (1.0, 1.0, 0.0)}


def test_spin_chains_and_samples():
    model = random_spin_rbm(4, 3, seed=2, dtype=torch.float32, base_rate=True)
    chains = model.chains_from(torch.tensor([[1, -1, 1, -1]] * 5), generator=0)
    assert torch.equal(chains.layers[0][0], torch.tensor([1.0, 0.0, 1.0, 0.0]))
    dbm = random_spin_dbm((4, 3, 2), seed=3).float()
    chains = dbm.chains_from(torch.tensor([[1, -1, 1, -1]] * 5), generator=0)
    assert torch.equal(chains.layers[0][0], torch.tensor([1.0, 0.0, 1.0, 0.0]))


def test_spin_models_round_trip_through_files(tmp_path):
    model = random_spin_rbm(4, 3, seed=2, dtype=torch.float32, base_rate=True)
    path = model.save(tmp_path / "spin.safetensors")
    loaded = bl.io.load_model(path)
    assert type(loaded) is SpinRBM
    assert bl.exact_log_z(loaded) == bl.exact_log_z(model)
    assert loaded.witness is not None and torch.equal(loaded.witness, model.witness)
    with pytest.raises(ValidationError):
        bl.RBM.load(path)
    dbm = random_spin_dbm((3, 2, 2), seed=4)
    loaded_dbm = bl.io.load_model(dbm.save(tmp_path / "spin-dbm.safetensors"))
    assert type(loaded_dbm) is SpinDBM
    assert bl.exact_log_z(loaded_dbm) == pytest.approx(bl.exact_log_z(dbm), abs=1e-12)


def test_spin_dbm_exact_log_likelihood_and_mean_field_read_spins():
    dbm = random_spin_dbm((3, 2, 2), seed=8)
    data = spins(3)
    log_z = bl.exact_log_z(dbm)
    exact = exact_log_likelihood(dbm, data, log_z=log_z)
    assert float(torch.logsumexp(exact, 0)) == pytest.approx(0.0, abs=1e-10)  # p sums to one over s
    binary = dbm.binary_dbm()
    assert torch.allclose(exact, exact_log_likelihood(binary, (data + 1) / 2), atol=1e-10)
    # the mean-field posterior is the equal binary DBM's: the fixed point reads s, not v
    for n_updates in (0, 1, 30):  # the bottom-up start too, not only the fixed point
        ours = bl.models.mean_field_posterior(dbm, data, n_updates=n_updates).means
        theirs = bl.models.mean_field_posterior(binary, (data + 1) / 2, n_updates=n_updates).means
        for a, b in zip(ours[1:], theirs[1:], strict=True):
            assert torch.allclose(a, b, atol=1e-10), n_updates
    bound = bl.variational_lower_bound(dbm, data, log_z, n_updates=30)
    assert bound == pytest.approx(
        bl.variational_lower_bound(binary, (data + 1) / 2, bl.exact_log_z(binary), n_updates=30), abs=1e-9
    )


@pytest.mark.parametrize("cls", [SpinRBM, SpinDBM])
def test_spin_model_repr_names_the_units(cls):
    model = cls(n_visible=3, n_hidden=2) if cls is SpinRBM else cls(layer_sizes=[3, 2, 2])
    assert "±1" in repr(model)


def test_spin_rbm_refuses_a_layer_it_lacks():
    model = SpinRBM(n_visible=3, n_hidden=2)
    with pytest.raises(ValidationError, match="layers 0 and 1"):
        model.conditional_logits(2, (torch.zeros(1, 3), torch.zeros(1, 2)), torch.ones(1))


def test_brute_force_helpers_agree_with_each_other():
    # the helpers above are independent of the library; a spin RBM with no couplings is
    # independent spins and hidden units: log Z = Σ log 2cosh(b) + Σ softplus(c)
    model = SpinRBM(
        weights=torch.zeros(3, 2, dtype=torch.float64),
        visible_bias=torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64),
        hidden_bias=torch.tensor([0.5, -0.2], dtype=torch.float64),
        dtype=torch.float64,
    )
    expected = sum(math.log(2 * math.cosh(b)) for b in (0.3, -1.0, 2.0)) + sum(
        math.log1p(math.exp(c)) for c in (0.5, -0.2)
    )
    assert brute_log_z_rbm(model, 1.0) == pytest.approx(expected, abs=1e-12)
    assert bl.exact_log_z(model) == pytest.approx(expected, abs=1e-12)
    assert list(itertools.islice(spins(2).tolist(), 4)) == [[-1, -1], [1, -1], [-1, 1], [1, 1]]


def test_data_files_coded_as_spins_read_as_binary(tmp_path):
    # ±1 is binary data coded as spins: files read with −1 as 0, and a spin model reads them back.
    values = [[1, -1, 1], [-1, -1, 1], [1, 1, -1]]
    (tmp_path / "s.csv").write_text("\n".join(",".join(map(str, row)) for row in values) + "\n")
    np.save(tmp_path / "s.npy", np.array(values, dtype=np.int8))
    expected = (torch.tensor(values, dtype=torch.float32) + 1) / 2
    for name in ("s.csv", "s.npy"):
        assert torch.equal(bl.data.load(str(tmp_path / name)).train, expected), name
    np.save(tmp_path / "mixed.npy", np.array([[1, -1, 0]], dtype=np.int8))
    with pytest.raises(bl.errors.DataError, match="binary"):
        bl.data.load(str(tmp_path / "mixed.npy"))
