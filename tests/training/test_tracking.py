"""Log-likelihood tracking during training with RTS (the "rts" phase) and the optimiser choice.

Properties checked:
* while a tiny RBM trains, the tracked ``log Ẑ_K`` equals the exact ``log Z`` passed through the
  tracker's own damped average (``L_{t+1} = (1 − α)L_t + α·log Z(θ_t)``: the lag the paper's
  update implies) to within 4 of the tracker's own standard errors at every record, and the
  standard errors are calibrated (root-mean-square z-score near 1);
* with fixed parameters one tempered step maps exact draws of the joint ``q(x, k)`` to draws of
  ``q(x, k)`` (chi-square over all (state, level) cells), and the β = 1 states it returns are
  exact ``p`` samples; after the initial iterations and many sweeps from the base, the β = 1
  states are exact ``p`` samples — chi-square z-scores below 4;
* the callback's numbers are ``mean log f(v) − log Ẑ_K`` on the final model; they fill the
  record fields, or the ``rts_*`` extras when exact tracking is on; early stopping ends a
  run whose validation log-likelihood stops improving;
* an update with no chain at β = 1 reuses the last β = 1 states and counts it;
* an interrupted, resumed run (RTS phase, RMSspectral) is bit-identical to the uninterrupted one;
  resuming with the other optimiser is refused;
* ``optimizer="rmsspectral"`` trains (an RMSspectral object steps) and raises the exact
  log-likelihood of a small model; bad settings are refused by name.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import boltzlab as bl
import harness
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import joint_log_probabilities, joint_states
from boltzlab.estimators.tempered.levels import resolve_log_prior, single_precision_log_f_all
from boltzlab.models.base import log_f_marginal_all
from boltzlab.training import (
    Callback,
    EarlyStopping,
    RTSLikelihoodTracker,
    RTSTracking,
    RTSTrackingState,
    train,
)
from boltzlab.training.rmsspectral import RMSspectral
from boltzlab.training.rts_influence import chain_influence


def _patterns(n: int, n_visible: int = 8, *, seed: int = 0, flip: float = 0.1) -> torch.Tensor:
    """``n`` noisy copies of three random prototypes."""
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(3, n_visible, generator=g) < 0.5).float()
    noise = (torch.rand(n, n_visible, generator=g) < flip).float()
    return (prototypes[torch.arange(n) % 3] + noise) % 2


def _chi_square_z(counts: torch.Tensor, probabilities: torch.Tensor) -> float:
    """``(χ² − df)/sqrt(2 df)`` of ``counts`` against ``probabilities``; cells expecting fewer
    than 5 are pooled into one."""
    counts = counts.to(torch.float64).flatten()
    expected = probabilities.to(torch.float64).flatten() * counts.sum()
    small = expected < 5
    counts = torch.cat([counts[~small], counts[small].sum().reshape(1)])
    expected = torch.cat([expected[~small], expected[small].sum().reshape(1)])
    keep = expected > 0
    statistic = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    df = int(keep.sum()) - 1
    return (statistic - df) / math.sqrt(2 * df)


def _state_index(layers: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Joint state index, bit u = global unit u (visible first), as in ``joint_states``."""
    units = torch.cat(layers, 1).to(torch.int64)
    return (units * (2 ** torch.arange(units.shape[1]))).sum(1)


class _Recorder(Callback):
    """Exact log Z and the tracked log Ẑ_K with its standard error, before and after every update."""

    def __init__(self) -> None:
        self.exact: list[float] = []
        self.tracked: list[float] = []
        self.stderr: list[float] = []

    def _record(self, run) -> None:
        self.exact.append(bl.exact_log_z(run.model))
        self.tracked.append(run.phase.log_z(run.phase_state))
        self.stderr.append(run.phase.log_z_stderr(run.phase_state))

    def on_train_begin(self, run) -> None:
        self._record(run)

    def on_update(self, run) -> None:
        self._record(run)


# ------------------------------------------------------------------------------ tracking vs exact
def test_tracked_log_z_follows_the_exact_log_z_through_the_damped_average() -> None:
    recorder = _Recorder()
    model = bl.RBM(n_visible=8, n_hidden=5, generator=0)
    step_size = 0.2
    train(
        model,
        _patterns(240),
        algorithm="rts",
        k=5,
        n_chains=200,
        batch_size=20,
        n_updates=300,
        learning_rate=0.05,
        log_every=1000,
        generator=0,
        algorithm_params={"n_levels": 10, "step_size": step_size},
        callbacks=[recorder],
    )
    exact = torch.tensor(recorder.exact, dtype=torch.float64)
    tracked = torch.tensor(recorder.tracked, dtype=torch.float64)
    stderr = torch.tensor(recorder.stderr, dtype=torch.float64)
    # The damped update averages per-update RTS estimates of log Z(θ_t): apply the same average
    # to the exact values. L_0 is the exact value itself, so the initial estimate's error counts.
    reference = [float(exact[0])]
    for update in range(1, exact.numel()):
        reference.append((1 - step_size) * reference[-1] + step_size * float(exact[update - 1]))
    z = (tracked - torch.tensor(reference, dtype=torch.float64)) / stderr
    assert bool((stderr > 0).all())
    assert float(z[::20].abs().max()) < 4.0  # 16 records, each within 4 standard errors
    assert 0.5 < float(z.square().mean().sqrt()) < 1.6  # the error bar is neither too wide nor too narrow
    # log Z rose by several nats; the lag of the damped average is what separates the two.
    assert float(exact[-1] - exact[0]) > 2.0
    lag = (exact - tracked).abs().max()
    assert float(lag) > 10 * float(stderr.max())  # the comparison with the average is not vacuous


# ------------------------------------------------------------------------------ exact invariance
def _exact_joint(model: bl.RBM, phase: RTSTracking, log_z_hat: torch.Tensor) -> torch.Tensor:
    """``q(x, k) ∝ p_k(x)·r_k Z_k / Ẑ_k`` over (joint state, level); shape (n_states, K)."""
    _, betas64 = phase.level_betas(model)
    log_p = torch.stack([joint_log_probabilities(model, float(beta)) for beta in betas64], 1)
    log_level = resolve_log_prior(phase.prior, betas64) + _exact_log_z_levels(model, phase) - log_z_hat
    return (log_p + (log_level - torch.logsumexp(log_level, 0))[None, :]).exp()


def _exact_log_z_levels(model: bl.RBM, phase: RTSTracking) -> torch.Tensor:
    _, betas64 = phase.level_betas(model)
    return torch.tensor([bl.exact_log_z(model, float(beta)) for beta in betas64], dtype=torch.float64)


def test_one_step_leaves_the_exact_tempered_joint_invariant() -> None:
    model = harness.random_rbm(4, 3, scale=2.0, seed=1, dtype=torch.float64, base_rate=True)
    phase = RTSTracking(operator=bl.operators.get("flip"), k=1, n_chains=20_000, n_levels=5)
    g = torch.Generator().manual_seed(7)
    # Any Ẑ leaves q(x, k) ∝ f_k(x) r_k / Ẑ_k invariant: take one that is off by up to a nat.
    offset = torch.tensor([0.0, 0.4, -0.7, 1.0, 0.3], dtype=torch.float64)
    log_z = _exact_log_z_levels(model, phase)
    log_z_hat = log_z + offset
    joint = _exact_joint(model, phase, log_z_hat)
    draws = torch.multinomial(joint.flatten(), phase.n_chains, replacement=True, generator=g)
    states, levels = draws // phase.n_levels, draws % phase.n_levels
    layers = tuple(layer[states].contiguous() for layer in joint_states(model.layer_sizes))
    betas, _ = phase.level_betas(model)
    log_prior = resolve_log_prior(phase.prior, betas)
    state = RTSTrackingState(
        chains=Chains(layers=layers, beta=betas[levels]),
        levels=levels,
        log_z_hat=log_z_hat,
        influence=torch.zeros((phase.n_chains, phase.n_levels), dtype=torch.float64),
        log_c=log_prior.clone(),
        log_prior=log_prior,
        target=Chains(layers=layers, beta=torch.ones(phase.n_chains, dtype=torch.float64)),
        n_updates=0,
        n_reused=0,
        initial_stop_statistics=torch.zeros(0, dtype=torch.float64),
    )
    before = [layer.clone() for layer in layers]
    new_state, samples = phase.step(model, state, batch=layers[0], positive=layers, generator=g)
    assert all(torch.equal(a, b) for a, b in zip(before, state.chains.layers, strict=True))  # input kept
    index = _state_index(new_state.chains.layers) * phase.n_levels + new_state.levels
    counts = torch.bincount(index, minlength=joint.numel())
    assert _chi_square_z(counts, joint.flatten()) < 4.0
    assert torch.equal(new_state.chains.beta, betas[new_state.levels])
    # The β = 1 states handed to the trainer: exact p, independent (one per chain).
    assert bool((samples.beta == 1).all()) and samples.n_chains > 2000
    top = joint[:, -1] / joint[:, -1].sum()
    assert _chi_square_z(torch.bincount(_state_index(samples.layers), minlength=top.numel()), top) < 4.0
    # The damped update moved log Ẑ towards the exact log Z (it started a nat off at level 3).
    assert abs(float(new_state.log_z_hat[3] - log_z[3])) < abs(float(offset[3]))


def test_beta_one_states_are_exact_after_the_initial_phase_and_many_sweeps() -> None:
    model = harness.random_rbm(3, 4, scale=2.5, seed=2, dtype=torch.float64, base_rate=True)
    phase = RTSTracking(
        operator=bl.operators.get("gibbs"),
        k=2,
        n_chains=3000,
        n_levels=6,
        target_samples="last-sweep",  # one state per chain at most: independent draws
        initial_sweeps=20,
    )
    g = torch.Generator().manual_seed(3)
    state = phase.init(model, torch.zeros(1, 3, dtype=torch.float64), generator=g)
    assert state.initial_stop_statistics.numel() >= 1
    for _ in range(40):  # learning rate 0: the parameters never change
        state, samples = phase.step(model, state, batch=None, positive=(), generator=g)
    exact = joint_log_probabilities(model, 1.0).exp()
    counts = torch.bincount(_state_index(samples.layers), minlength=exact.numel())
    assert samples.n_chains > 500
    assert _chi_square_z(counts, exact) < 4.0
    log_z = bl.exact_log_z(model)
    assert abs(phase.log_z(state) - log_z) < 4 * phase.log_z_stderr(state)


# ------------------------------------------------------------------------------ callback
def test_callback_values_fill_the_record_fields_or_the_rts_extras() -> None:
    data, validation = _patterns(60), _patterns(21, seed=1)
    settings = {
        "algorithm": "rts",
        "k": 3,
        "n_chains": 40,
        "batch_size": 10,
        "n_updates": 12,
        "log_every": 100,
        "generator": 0,
        "algorithm_params": {"n_levels": 6, "initial_sweeps": 10},
    }
    model = bl.RBM(n_visible=8, n_hidden=3, generator=0)
    result = train(model, data, callbacks=[RTSLikelihoodTracker(6, validation)], **settings)
    assert [record.update for record in result.history] == [0, 6, 12]
    last = result.history[-1]
    log_z = last.extra["rts_log_z"]
    assert last.train_log_likelihood == pytest.approx(bl.log_likelihood(model, data, log_z), abs=1e-9)
    assert last.validation_log_likelihood == pytest.approx(
        bl.log_likelihood(model, validation, log_z), abs=1e-9
    )
    assert last.log_z is None and last.extra["rts_log_z_stderr"] > 0
    # With exact tracking on, the exact values keep the fields and RTS's go to the extras.
    model = bl.RBM(n_visible=8, n_hidden=3, generator=0)
    both = train(
        model,
        data,
        validation_data=validation,
        track_exact_every=6,
        callbacks=[RTSLikelihoodTracker(6)],
        **settings,
    )
    last = both.history[-1]
    assert last.log_z == pytest.approx(bl.exact_log_z(model), abs=1e-9)
    assert last.train_log_likelihood == pytest.approx(bl.log_likelihood(model, data, last.log_z), abs=1e-9)
    assert last.extra["rts_train_log_likelihood"] == pytest.approx(
        bl.log_likelihood(model, data, last.extra["rts_log_z"]), abs=1e-9
    )
    assert "rts_validation_log_likelihood" in last.extra


def test_early_stopping_ends_a_run_whose_validation_likelihood_stops_improving() -> None:
    data = _patterns(120, seed=3, flip=0.02)
    # The same prototypes, noisier: a sharpening model first fits them better, then worse.
    validation = _patterns(30, seed=3, flip=0.2)
    stopper = EarlyStopping(patience=3)
    result = train(
        bl.RBM(n_visible=8, n_hidden=4, generator=1),
        data,
        algorithm="rts",
        k=3,
        n_chains=60,
        batch_size=20,
        n_updates=400,
        learning_rate=0.1,
        log_every=1000,
        generator=1,
        algorithm_params={"n_levels": 6, "initial_sweeps": 10},
        callbacks=[RTSLikelihoodTracker(5, validation), stopper],
    )
    assert result.stopped_early and result.n_updates < 400
    values = [record.validation_log_likelihood for record in result.history]
    assert all(value is not None for value in values)
    best = max(range(len(values)), key=values.__getitem__)
    assert best > 0  # it did improve first
    assert len(values) - 1 - best == stopper.patience  # stopped after `patience` records without gain


def test_tracker_refuses_a_run_without_the_rts_phase() -> None:
    with pytest.raises(ValidationError, match="algorithm='rts'"):
        train(
            bl.RBM(n_visible=8, n_hidden=3, generator=0),
            _patterns(20),
            algorithm="pcd",
            batch_size=10,
            n_updates=2,
            callbacks=[RTSLikelihoodTracker(1)],
        )


# ------------------------------------------------------------------------------ fallback
def test_an_update_without_beta_one_states_reuses_the_last_ones() -> None:
    model = harness.random_rbm(4, 3, scale=1.0, seed=4, dtype=torch.float64, base_rate=True)
    # A prior that starves the top level: essentially no chain ever reaches β = 1.
    phase = RTSTracking(
        operator=bl.operators.get("gibbs"),
        k=2,
        n_chains=13,
        n_levels=4,
        prior=[1.0, 1.0, 1.0, 1e-30],
        n_initial_iterations=0,
        update_log_z=False,
    )
    g = torch.Generator().manual_seed(0)
    state = phase.init(model, torch.zeros(1, 4, dtype=torch.float64), generator=g)
    first = state.target
    assert first.n_chains >= 1 and bool((first.beta == 1).all())  # the highest level reached
    for update in range(1, 6):
        state, samples = phase.step(model, state, batch=None, positive=(), generator=g)
        assert samples is first and state.n_reused == update
    assert phase.metrics(state)["rts_reused_updates"] == 5.0


def test_the_papers_literal_alternatives_update_only_the_target_level() -> None:
    # docs/open-questions.md item 10: the update written for Ẑ_K alone, ĉ from the last sweep only.
    model = harness.random_rbm(4, 3, scale=1.0, seed=5, dtype=torch.float64, base_rate=True)
    phase = RTSTracking(
        operator=bl.operators.get("gibbs"),
        k=3,
        n_chains=50,
        n_levels=4,
        n_initial_iterations=0,
        initial_log_z=[0.0, 0.5, 1.0, 1.5],
        update_levels="target",
        c_hat_sweeps="last-sweep",
    )
    g = torch.Generator().manual_seed(1)
    state = phase.init(model, torch.zeros(1, 4, dtype=torch.float64), generator=g)
    new_state, _ = phase.step(model, state, batch=None, positive=(), generator=g)
    assert torch.equal(new_state.log_z_hat[:-1], state.log_z_hat[:-1])
    assert float(new_state.log_z_hat[-1]) != float(state.log_z_hat[-1])
    assert phase.describe()["update_levels"] == "target"


def test_single_precision_densities_match_the_float64_ones_to_rounding() -> None:
    model = harness.random_rbm(11, 500, scale=0.3, seed=6, dtype=torch.float32, base_rate=True)
    v = (torch.rand(13, 11, generator=torch.Generator().manual_seed(2)) < 0.5).float()
    terms = model.marginal_terms(v)
    betas = torch.linspace(0, 1, 7, dtype=torch.float64)
    exact = log_f_marginal_all(terms, betas)
    fast = single_precision_log_f_all(terms, betas)
    # float32 rounding: a few eps per softplus, accumulated over the 500 summed-out units.
    bound = 500 * 4 * torch.finfo(torch.float32).eps * (1 + float(terms.preactivation.abs().max()))
    assert float((fast - exact).abs().max()) < bound


def test_chain_influences_reproduce_the_delta_method_by_perturbation() -> None:
    # Removing one chain changes log ĉ_k − log ĉ_0 by about −influence/n.
    g = torch.Generator().manual_seed(5)
    log_sums = torch.randn(50, 4, generator=g, dtype=torch.float64)
    influence = chain_influence(log_sums)

    def increment(rows: torch.Tensor) -> torch.Tensor:
        pooled = torch.logsumexp(rows, 0)
        return pooled - pooled[0]

    change = increment(log_sums[1:]) - increment(log_sums)
    assert torch.allclose(change, -influence[0] / 49, atol=2e-3)
    assert torch.allclose(influence.mean(0), torch.zeros(4, dtype=torch.float64), atol=1e-12)


# ------------------------------------------------------------------------------ resume
class _Interrupted(Exception):
    pass


class _InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise _Interrupted


def _resumable_run(directory: Path, *, callbacks=(), resume: bool = False, optimizer: str = "rmsspectral"):
    model = bl.RBM(n_visible=8, n_hidden=3, generator=2)
    result = train(
        model,
        _patterns(37),
        algorithm="rts",
        operator="flip",
        k=2,
        n_chains=13,
        batch_size=8,
        n_updates=30,
        learning_rate=1e-3,
        optimizer=optimizer,
        lr_schedule="linear",
        log_every=5,
        validation_data=_patterns(9, seed=4),
        checkpoint_dir=directory,
        checkpoint_every=10,
        resume=resume,
        generator=3,
        algorithm_params={"n_levels": 5, "initial_sweeps": 10, "density_dtype": "float32"},
        callbacks=[RTSLikelihoodTracker(5), EarlyStopping(patience=100), *callbacks],
    )
    return model, result


def test_resume_is_bit_identical(tmp_path: Path) -> None:
    reference_model, reference = _resumable_run(tmp_path / "straight")
    with pytest.raises(_Interrupted):
        _resumable_run(tmp_path / "broken", callbacks=[_InterruptAt(23)])
    model, resumed = _resumable_run(tmp_path / "broken", resume=True)
    for name, value in reference_model.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name
    assert torch.equal(reference.final_chains.visible, resumed.final_chains.visible)
    strip = [
        {key: value for key, value in record.to_dict().items() if key != "time"}
        for record in reference.history
    ]
    assert strip == [
        {key: value for key, value in record.to_dict().items() if key != "time"} for record in resumed.history
    ]
    with pytest.raises(ValidationError, match="optimizer='rmsspectral'"):
        _resumable_run(tmp_path / "broken", resume=True, optimizer="sgd")


# ------------------------------------------------------------------------------ RMSspectral
def test_rmsspectral_trains_and_raises_the_exact_log_likelihood() -> None:
    class OptimizerSeen(Callback):
        def on_train_begin(self, run) -> None:
            self.kind = type(run.optimizer)

    seen = OptimizerSeen()
    model = bl.RBM(n_visible=8, n_hidden=4, generator=0)
    result = train(
        model,
        _patterns(120),
        algorithm="pcd",
        n_chains=50,
        batch_size=20,
        n_updates=150,
        learning_rate=3e-3,
        optimizer="rmsspectral",
        log_every=50,
        track_exact_every=150,
        generator=0,
        callbacks=[seen],
    )
    assert seen.kind is RMSspectral
    first, last = result.history[0].train_log_likelihood, result.history[-1].train_log_likelihood
    assert last > first + 1.0  # nats per example


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"optimizer": "adam"}, "optimizer must be one of"),
        ({"optimizer": "rmsspectral", "momentum": 0.9}, "no momentum or weight decay"),
        ({"optimizer": "rmsspectral", "weight_decay": 1e-4}, "no momentum or weight decay"),
        ({"algorithm": "rts", "algorithm_params": {"step_size": 0.0}}, "step_size"),
        ({"algorithm": "rts", "algorithm_params": {"ladder": [0.5, 1.0]}}, "start at beta = 0"),
        ({"algorithm": "rts", "algorithm_params": {"prior": "flat"}}, "prior"),
        ({"algorithm": "rts", "algorithm_params": {"target_samples": "some"}}, "target_samples"),
        ({"algorithm": "rts", "algorithm_params": {"update_levels": "first"}}, "update_levels"),
        ({"algorithm": "rts", "algorithm_params": {"c_hat_sweeps": "some"}}, "c_hat_sweeps"),
        ({"algorithm": "rts", "n_chains": 1}, "n_chains"),
        (
            {"algorithm": "rts", "algorithm_params": {"n_levels": 4, "initial_log_z": [0.0, 1.0]}},
            "initial_log_z",
        ),
    ],
)
def test_bad_settings_are_refused_by_name(settings: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        train(
            bl.RBM(n_visible=8, n_hidden=3, generator=0),
            _patterns(20),
            batch_size=10,
            n_updates=2,
            **settings,
        )
