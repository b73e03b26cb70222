"""boltzlab.sklearn.BernoulliRBM: scikit-learn's estimator checks, and what the drop-in promises."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import all_binary_states
from boltzlab.sklearn import BernoulliRBM
from boltzlab.sklearn import log_z as sklearn_log_z

N_VISIBLE, N_HIDDEN, N_CHAINS = 7, 3, 13


def _binary_rows(n_rows=40, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(size=(n_rows, N_VISIBLE)) < rng.uniform(0.2, 0.8, N_VISIBLE)).astype(np.float64)


def _grey_rows(n_rows=40, seed=0):
    return np.random.default_rng(seed).uniform(size=(n_rows, N_VISIBLE))


def _small(**params):
    settings = {"n_components": N_HIDDEN, "n_chains": N_CHAINS, "n_iter": 4, "random_state": 0}
    return BernoulliRBM(**{**settings, **params})


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*clipped to \\[0, 1\\]:UserWarning")
@parametrize_with_checks([BernoulliRBM()])
def test_sklearn_estimator_checks(estimator, check):
    # Every check of sklearn.utils.estimator_checks, with the defaults (256 hidden units); the
    # checks feed data outside [0, 1], which the default out_of_range="clip" clips with a warning.
    check(estimator)


def test_fitted_attributes_have_scikit_learns_shapes_and_the_model_behind_them():
    X = _binary_rows()
    rbm = _small().fit(X)
    assert isinstance(rbm.model_, bl.RBM)
    assert rbm.components_.shape == (N_HIDDEN, N_VISIBLE)
    assert rbm.intercept_hidden_.shape == (N_HIDDEN,)
    assert rbm.intercept_visible_.shape == (N_VISIBLE,)
    assert rbm.h_samples_.shape == (N_CHAINS, N_HIDDEN)
    assert set(np.unique(rbm.h_samples_)) <= {0.0, 1.0}
    assert rbm.n_features_in_ == N_VISIBLE
    assert [record.update for record in rbm.history_] == [0, 4, 8, 12, 16]  # 40 // 10 updates a pass
    hidden = rbm.transform(X)
    assert hidden.shape == (40, N_HIDDEN) and hidden.dtype == np.float64
    assert ((hidden > 0) & (hidden < 1)).all()
    assert rbm.transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(
        hidden, 1 / (1 + np.exp(-(X @ rbm.components_.T + rbm.intercept_hidden_))), rtol=1e-5
    )
    assert rbm.gibbs(X).shape == (40, N_VISIBLE) and rbm.gibbs(X).dtype == bool
    assert rbm.sample(5, n_sweeps=10).shape == (5, N_VISIBLE)
    # components_ is the model's weight matrix, not a copy: writing into it changes the model.
    rbm.components_[1, 2] = 0.75
    assert float(rbm.model_.weights.detach()[2, 1]) == 0.75
    np.testing.assert_array_equal(X, _binary_rows())  # the input is not modified


def test_the_same_random_state_gives_the_same_model_and_another_a_different_one():
    X = _grey_rows()
    first, second, other = _small().fit(X), _small().fit(X), _small(random_state=1).fit(X)
    np.testing.assert_array_equal(first.components_, second.components_)
    np.testing.assert_array_equal(first.h_samples_, second.h_samples_)
    np.testing.assert_array_equal(first.score_samples(X), second.score_samples(X))
    np.testing.assert_array_equal(first.sample(4, n_sweeps=5), second.sample(4, n_sweeps=5))
    assert not np.array_equal(first.components_, other.components_)


def test_score_samples_is_the_exact_normalised_log_probability():
    rbm = _small(n_iter=10, learning_rate=0.3).fit(_binary_rows())
    states = all_binary_states(N_VISIBLE).numpy()
    log_p = rbm.score_samples(states)
    assert rbm.log_z_method_ == "exact" and rbm.log_z_stderr_ == 0.0 and rbm.log_z_reliable_
    # Normalised over all 2^7 visible states (to float32 rounding of the hidden inputs), and
    # equal to −F(v) − log Z of the model itself.
    assert abs(np.logaddexp.reduce(log_p)) < 1e-6
    model = rbm.model_
    expected = -model.free_energy(torch.tensor(states, dtype=model.dtype)) - bl.exact_log_z(model)
    np.testing.assert_allclose(log_p, expected.numpy(), rtol=0, atol=1e-9)
    assert rbm.log_z_ == pytest.approx(bl.estimate_log_z(model, method="exact").log_z, abs=1e-12)
    # Grey rows are scored as their thresholded binary rows, one at a time.
    grey = _grey_rows(9)
    np.testing.assert_array_equal(rbm.score_samples(grey), rbm.score_samples((grey >= 0.5) * 1.0))
    assert rbm.score_samples(grey[3:4])[0] == rbm.score_samples(grey)[3]


def test_log_z_is_cached_until_the_parameters_change():
    X = _binary_rows()
    rbm = _small().fit(X)
    estimate = rbm.log_z_estimate_
    rbm.score_samples(X)
    assert rbm.log_z_estimate_ is estimate  # kept, not recomputed
    rbm.partial_fit(X)
    assert rbm.log_z_estimate_ is not estimate
    assert rbm.log_z_ == pytest.approx(bl.exact_log_z(rbm.model_), abs=1e-12)
    assert rbm.log_z_ != estimate.log_z
    rbm.components_[0, 0] += 1.0  # a write into the parameters is seen too
    assert rbm.log_z_ == pytest.approx(bl.exact_log_z(rbm.model_), abs=1e-12)
    kept = rbm.log_z_estimate_
    rbm.set_params(learning_rate=0.5)
    assert "_log_z_cache" not in vars(rbm) and rbm.log_z_estimate_ is not kept


@pytest.mark.slow
def test_an_estimated_log_z_says_so_and_lands_within_its_error_bar(monkeypatch):
    # Above MAX_EXACT_UNITS "auto" switches to anchored AIS; here the limit is lowered so that
    # the estimate can be compared with the exact value of the same small model.
    monkeypatch.setattr(sklearn_log_z, "MAX_EXACT_UNITS", 2)
    rbm = _small(n_iter=10, learning_rate=0.3, log_z_params={"n_temperatures": 300}).fit(_binary_rows())
    exact = bl.exact_log_z(rbm.model_)
    assert rbm.log_z_method_ == "anchored-ais" and rbm.log_z_stderr_ > 0
    assert abs(rbm.log_z_ - exact) < 4 * rbm.log_z_stderr_ + 1e-6
    ais = _small(n_iter=10, learning_rate=0.3, log_z_method="ais").fit(_binary_rows())
    assert ais.log_z_method_ == "ais"
    assert abs(ais.log_z_ - exact) < 4 * ais.log_z_stderr_ + 1e-6


def test_partial_fit_is_one_minibatch_averaged_update_that_continues_the_chains():
    # scikit-learn's learning-rate convention: ΔW = lr·(⟨v p(h|v)ᵀ⟩_X − ⟨v⁻ p(h|v⁻)ᵀ⟩_chains),
    # averages over the rows (grey values used as they are) and over the persistent chains.
    X = _grey_rows(23)
    rbm = _small(learning_rate=0.2, dtype="float64").partial_fit(X)
    for _ in range(2):
        weights = rbm.components_.T.copy()
        visible, hidden = rbm.intercept_visible_.copy(), rbm.intercept_hidden_.copy()
        chains_before = rbm._carried.phase_tensors["chains.layer0"].clone()
        rbm.partial_fit(X)
        v_model = rbm._carried.phase_tensors["chains.layer0"].numpy()
        assert v_model.shape == (N_CHAINS, N_VISIBLE) and not np.array_equal(v_model, chains_before.numpy())

        def hidden_probability(v, weights=weights, hidden=hidden):
            return 1 / (1 + np.exp(-(v @ weights + hidden)))

        h_data, h_model = hidden_probability(X), hidden_probability(v_model)
        expected = weights + 0.2 * (X.T @ h_data / len(X) - v_model.T @ h_model / N_CHAINS)
        np.testing.assert_allclose(rbm.components_.T, expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            rbm.intercept_visible_, visible + 0.2 * (X.mean(0) - v_model.mean(0)), rtol=0, atol=1e-12
        )
        np.testing.assert_allclose(
            rbm.intercept_hidden_, hidden + 0.2 * (h_data.mean(0) - h_model.mean(0)), rtol=0, atol=1e-12
        )
    with pytest.raises(ValueError, match="X has 4 features, but BernoulliRBM is expecting 7"):
        rbm.partial_fit(X[:, :4])


def test_a_pickled_estimator_continues_exactly_as_the_original():
    X = _grey_rows()
    rbm = _small(momentum=0.5).fit(X)
    copy = pickle.loads(pickle.dumps(rbm))
    for estimator in (rbm, copy):
        estimator.partial_fit(X)
    np.testing.assert_array_equal(rbm.components_, copy.components_)
    np.testing.assert_array_equal(rbm.gibbs(X), copy.gibbs(X))


@pytest.mark.parametrize("algorithm, operator", [("cd", "flip"), ("fpcd", "gibbs"), ("pcd", "mixture")])
def test_other_algorithms_and_operators_train_on_grey_data(algorithm, operator):
    operator_params = {"alpha": 0.5} if operator == "mixture" else None
    rbm = _small(algorithm=algorithm, operator=operator, operator_params=operator_params).fit(_grey_rows())
    assert set(np.unique(rbm.h_samples_)) <= {0.0, 1.0}
    assert np.isfinite(rbm.score_samples(_grey_rows(5))).all()


def test_values_outside_the_unit_interval_are_clipped_with_a_warning_or_refused():
    X = _binary_rows() * 255
    with pytest.warns(UserWarning, match=r"values from 0 to 255: clipped to \[0, 1\]"):
        clipped = _small().fit(X)
    np.testing.assert_array_equal(clipped.components_, _small().fit(X / 255).components_)
    with pytest.raises(ValidationError, match=r"X must hold values in \[0, 1\].*MinMaxScaler"):
        _small(out_of_range="error").fit(X)
    with pytest.raises(ValidationError, match="out_of_range must be one of"):
        _small(out_of_range="scale").fit(X)
    with pytest.raises(ValidationError, match="learning_rate must be in"):
        _small(learning_rate=-1.0).fit(X / 255)


def test_a_digits_pipeline_learns_features_a_classifier_can_use():
    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    pipeline = Pipeline(
        [
            ("rbm", BernoulliRBM(n_components=64, learning_rate=0.06, n_iter=10, random_state=0)),
            ("logistic", LogisticRegression(C=100.0, max_iter=500)),
        ]
    )
    pipeline.fit(X[:1200], y[:1200])
    assert pipeline.named_steps["rbm"].transform(X[:3]).shape == (3, 64)
    # 0.86 with these seeds (scikit-learn's BernoulliRBM: 0.85; chance: 0.1).
    assert pipeline.score(X[1200:], y[1200:]) > 0.8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_device_cuda_fits_and_scores_like_the_cpu():
    X = _binary_rows()
    rbm = _small(device="cuda").fit(X)
    assert rbm.model_.device.type == "cuda"
    assert rbm.components_.shape == (N_HIDDEN, N_VISIBLE)
    assert rbm.score_samples(X).shape == (40,) and np.isfinite(rbm.score_samples(X)).all()
    assert rbm.sample(3, n_sweeps=5).shape == (3, N_VISIBLE)
