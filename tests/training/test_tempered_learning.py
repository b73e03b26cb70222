"""Learning with tempered negative phases (docs/algorithms.md §3.2–3.4): FPCD, PT, adaptive ST,
CAST and Trans-SAP, with every operator.

Properties checked:
* every algorithm × operator raises the exact log-likelihood of a 9×4 RBM by more than 4
  run-to-run standard errors over 3 seeds, and by no less than PCD does with the same seeds
  (4 standard errors of the paired difference);
* on a bimodal RBM whose barrier a β = 1 sweep crosses with probability ~1e-16, the chains of
  PCD and FPCD never change mode, while those of PT, Trans-SAP, CAST and adaptive ST do;
* a phase step is exactly ``k`` steps of its scheme (PT: one swap round per update, t-PT_k);
  adaptive-ST learning is ``N`` SAP updates then one run whose Wang–Landau weights carry over;
  the moving-average diagnostics equal their definition;
* CAST and adaptive-ST learning resume bit-identically from a checkpoint;
* ``bl.train(model, data, algorithm="cast", operator="flip")`` works end to end with the CAST
  paper's defaults (20 levels 1 → 0.9, lag 50, γ = 10);
* bad settings raise ValidationError naming the option.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.io import load_checkpoint
from boltzlab.tempering.cast import CAST
from boltzlab.tempering.parallel import ParallelTempering
from boltzlab.tempering.wang_landau import AdaptiveSimulatedTempering
from boltzlab.training import (
    AdaptiveTemperingLearning,
    Callback,
    NegativePhase,
    SchemePhase,
    available_phases,
    find_latest_checkpoint,
    get_phase,
    train,
)
from boltzlab.training.scheme_steps import PT_METRICS, pt_metrics

OPERATORS = ("gibbs", "flip", "mixture")
SEEDS = (0, 1, 2)
# Small settings so that each run takes well under a second on one thread.
SMALL = {
    "fpcd": {},
    "pt": {"n_levels": 5},
    "ast": {"n_levels": 10, "sap_updates": 5, "run_length": 10},
    "cast": {"n_levels": 10, "lag": 10},
    "trans-sap": {"n_levels": 3},
}


def _data(n_examples: int = 37, n_visible: int = 9, seed: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(3, n_visible, generator=g) < 0.5).float()
    noise = (torch.rand(n_examples, n_visible, generator=g) < 0.1).float()
    return (prototypes[torch.arange(n_examples) % 3] + noise) % 2  # noisy copies of 3 patterns


@functools.cache
def _gains(algorithm: str, operator: str) -> tuple[float, ...]:
    """Exact log-likelihood gain of 100 updates, one per seed (model and run seeded alike)."""
    gains = []
    for seed in SEEDS:
        result = train(
            bl.RBM(n_visible=9, n_hidden=4, generator=seed),
            _data(),
            algorithm=algorithm,
            algorithm_params=SMALL.get(algorithm, {}),
            operator=operator,
            n_chains=20,
            batch_size=10,
            n_updates=100,
            learning_rate=0.2,
            momentum=0.5,
            log_every=100,
            track_exact_every=100,
            generator=seed,
        )
        first, last = result.history[0], result.history[-1]
        gains.append(last.train_log_likelihood - first.train_log_likelihood)
    return tuple(gains)


# Every algorithm once and every operator at least once in the fast tier; the rest of the
# grid (about 1 s a pair) runs in the slow tier (CONTRIBUTING.md, "Two tiers").
FAST_PAIRS = {("fpcd", "gibbs"), ("pt", "flip"), ("ast", "mixture"), ("cast", "flip"), ("trans-sap", "gibbs")}


@pytest.mark.parametrize(
    ("algorithm", "operator"),
    [
        pytest.param(
            algorithm, operator, marks=() if (algorithm, operator) in FAST_PAIRS else pytest.mark.slow
        )
        for algorithm in ["fpcd", "pt", "ast", "cast", "trans-sap"]
        for operator in OPERATORS
    ],
)
def test_every_algorithm_and_operator_learns(algorithm: str, operator: str) -> None:
    gains = torch.tensor(_gains(algorithm, operator), dtype=torch.float64)
    reference = torch.tensor(_gains("pcd", operator), dtype=torch.float64)
    n = len(SEEDS)
    assert bool((gains > 0).all()), gains
    # The mean gain clears zero by 4 run-to-run standard errors ...
    assert float(gains.mean()) > 4 * float(gains.std()) / math.sqrt(n), gains
    # ... and is not below PCD's with the same seeds by more than 4 standard errors of the
    # paired difference (a broken negative phase learns visibly less than PCD).
    difference = gains - reference
    assert float(difference.mean()) > -4 * float(difference.std()) / math.sqrt(n), (gains, reference)


class _ModeRecorder(Callback):
    """After every update: which of the two modes each negative chain is in."""

    def __init__(self) -> None:
        self.modes: list[torch.Tensor] = []

    def on_update(self, run) -> None:
        visible = run.phase.samples(run.phase_state).visible
        self.modes.append(visible.mean(1) > 0.5)


def _bimodal_run(algorithm: str, operator: str, params: dict) -> torch.Tensor:
    """Modes of 20 negative chains over 100 updates, shape (100, 20), on a two-mode RBM.

    One hidden unit switches all 9 visibles on (W = 8, b = −4, c = −36): the modes "all off"
    and "all on" have equal mass (the energy is symmetric under v → 1 − v, h → 1 − h), and at
    β = 1 a chain in one mode turns its hidden unit on with probability σ(−36) ≈ 2e-16. The
    data are both modes with 5 % noise; a tiny learning rate keeps the model where it is.
    """
    n_visible = 9
    model = bl.RBM(
        weights=torch.full((n_visible, 1), 8.0),
        visible_bias=torch.full((n_visible,), -4.0),
        hidden_bias=torch.full((1,), -36.0),
    )
    g = torch.Generator().manual_seed(0)
    data = torch.cat([torch.zeros(20, n_visible), torch.ones(20, n_visible)])
    data = (data + (torch.rand(40, n_visible, generator=g) < 0.05).float()) % 2
    recorder = _ModeRecorder()
    train(
        model,
        data,
        algorithm=algorithm,
        algorithm_params=params,
        operator=operator,
        n_chains=20,
        batch_size=10,
        n_updates=100,
        learning_rate=1e-3,
        log_every=100,
        generator=1,
        callbacks=[recorder],
    )
    return torch.stack(recorder.modes)


@pytest.mark.parametrize(
    ("algorithm", "operator", "params", "min_fraction"),
    [
        ("pcd", "gibbs", {}, None),
        ("fpcd", "flip", {}, None),
        ("pt", "mixture", {}, 1.0),
        ("trans-sap", "gibbs", {"n_levels": 4}, 1.0),
        # The fast chains need a ladder reaching β = 0 here: at the paper's β ≥ 0.9 the
        # barrier is as high as at β = 1.
        ("cast", "flip", {"n_levels": 6, "low": 0.0, "lag": 5}, 0.5),
        ("ast", "mixture", {"n_levels": 6, "low": 0.0, "sap_updates": 4, "run_length": 40}, 0.5),
    ],
)
def test_tempered_chains_cross_where_pcd_sticks(
    algorithm: str, operator: str, params: dict, min_fraction: float | None
) -> None:
    modes = _bimodal_run(algorithm, operator, params)
    switches = (modes[1:] != modes[:-1]).sum(0)
    both = modes.any(0) & (~modes).any(0)
    if min_fraction is None:
        # Stuck: 20 chains × 100 updates × ~2e-16 expected crossings.
        assert int(switches.sum()) == 0, switches
    else:
        assert float(both.double().mean()) >= min_fraction, both
        assert int(switches.sum()) >= 20, switches  # not one lucky crossing each


def test_pt_phase_is_k_scheme_steps_with_one_swap_round_per_update() -> None:
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    op = bl.operators.get("flip")
    k = 3
    phase = get_phase("pt", operator=op, k=k, n_chains=13, n_levels=4, metrics_horizon=2)
    assert isinstance(phase, NegativePhase) and isinstance(phase, SchemePhase)
    assert phase.scheme.swap_every == k  # t-PT_k: k sweeps, then swaps
    g = torch.Generator().manual_seed(3)
    state = phase.init(model, _data(), generator=g)
    reference_scheme = ParallelTempering(op, n_levels=4, swap_every=k)
    reference_state = state.scheme_state
    g_reference = torch.Generator().set_state(g.get_state())
    infos = []
    for _ in range(5):
        state, samples = phase.step(model, state, batch=_data()[:5], positive=(), generator=g)
        for _ in range(k):
            reference_state, info = reference_scheme.step(model, reference_state, generator=g_reference)
            infos.append(info)
        for a, b in zip(samples.layers, reference_scheme.samples(reference_state).layers, strict=True):
            assert torch.equal(a, b)
    assert torch.equal(samples.beta, torch.ones(13))
    # PT runs the swap round that follows a sweep at the start of the next step (so that step's
    # sweep reuses the round's matrix product): after 5 updates, 4 rounds are done and the
    # fifth opens update 6.
    assert state.scheme_state.n_rounds == 4 and state.scheme_state.n_steps == 5 * k
    # The metric is the moving average with factor 1 − 1/metrics_horizon per scheme step.
    keep, numerator, denominator = 0.5, 0.0, 0.0
    for info in infos:
        numerator = numerator * keep + float(info.swap_accepted.sum())
        denominator = denominator * keep + float(info.swap_attempted.sum()) * 13
    assert phase.metrics(state)["swap_acceptance"] == pytest.approx(numerator / denominator, rel=1e-12)


def test_moving_average_of_diagnostics() -> None:
    """Metric = Σ_t ρ^(T−t)·numerator_t / Σ_t ρ^(T−t)·denominator_t with ρ = 1 − 1/horizon."""
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    horizon = 4.0
    scheme = ParallelTempering(bl.operators.get("gibbs"), n_levels=6)
    phase = SchemePhase(
        name="pt-test",
        scheme=scheme,
        n_chains=13,
        metric_names=PT_METRICS,
        metric_function=pt_metrics,
        metrics_horizon=horizon,
    )
    g = torch.Generator().manual_seed(0)
    state = phase.init(model, _data(), generator=g)
    assert phase.metrics(state) == {}  # nothing measured yet
    infos, scheme_state = [], state.scheme_state
    g_reference = torch.Generator().set_state(g.get_state())
    for _ in range(7):
        state, _ = phase.step(model, state, batch=_data()[:5], positive=(), generator=g)
        scheme_state, info = scheme.step(model, scheme_state, generator=g_reference)
        infos.append(info)
    keep = 1 - 1 / horizon
    weights = [keep ** (len(infos) - 1 - t) for t in range(len(infos))]
    accepted = sum(w * float(info.swap_accepted.sum()) for w, info in zip(weights, infos, strict=True))
    attempted = sum(w * float(info.swap_attempted.sum()) * 13 for w, info in zip(weights, infos, strict=True))
    trips = sum(w * float(info.round_trips.sum()) for w, info in zip(weights, infos, strict=True))
    metrics = phase.metrics(state)
    assert metrics["swap_acceptance"] == pytest.approx(accepted / attempted, rel=1e-12)
    assert metrics["round_trips_per_step"] == pytest.approx(trips / (13 * sum(weights)), rel=1e-12)
    rebuilt = phase.state_from_tensors(model, phase.state_tensors(state))
    assert phase.metrics(rebuilt) == metrics


@pytest.mark.parametrize("operator", OPERATORS)
def test_adaptive_st_learning_alternates_sap_and_runs_with_carried_weights(operator: str) -> None:
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0, weight_std=1.0)
    op = bl.operators.get(operator)
    sap_updates, run_length, k = 3, 7, 2
    phase = get_phase("ast", operator=op, k=k, n_chains=13, sap_updates=sap_updates, run_length=run_length)
    assert isinstance(phase, AdaptiveTemperingLearning)
    scheme = AdaptiveSimulatedTempering(op)  # the paper's 20 levels 1 → 0.9, γ = 10
    g = torch.Generator().manual_seed(4)
    state = phase.init(model, _data(), generator=g)
    g_reference = torch.Generator().set_state(g.get_state())
    chains, scheme_state = state.chains, state.scheme_state
    for cycle in range(2):
        for _ in range(sap_updates):  # plain sweeps at β = 1; the adaptive-ST state is left alone
            before = state.scheme_state
            state, samples = phase.step(model, state, batch=_data()[:5], positive=(), generator=g)
            for _ in range(k):
                chains, _ = op.step(model, chains, generator=g_reference)
            assert state.scheme_state is before
            assert all(torch.equal(a, b) for a, b in zip(samples.layers, chains.layers, strict=True))
        # The run: every chain starts at β = 1 from its persistent state, with the weights
        # the previous run ended with.
        weights_before = state.scheme_state.log_weights
        levels = torch.full((13,), scheme.top, dtype=torch.int64)
        scheme_state = replace(scheme_state, chains=chains, levels=levels, last_target=chains)
        assert torch.equal(scheme_state.log_weights, weights_before)
        for _ in range(run_length):
            scheme_state, _ = scheme.step(model, scheme_state, generator=g_reference)
        chains = scheme.samples(scheme_state)
        state, samples = phase.step(model, state, batch=_data()[:5], positive=(), generator=g)
        assert state.updates_since_run == 0
        assert state.scheme_state.n_steps == (cycle + 1) * run_length
        assert torch.equal(state.scheme_state.log_weights, scheme_state.log_weights)
        assert not torch.equal(state.scheme_state.log_weights, weights_before)  # γ = 10 moved them
        assert all(torch.equal(a, b) for a, b in zip(samples.layers, chains.layers, strict=True))
        assert torch.equal(samples.beta, torch.ones(13))
    assert set(phase.metrics(state)) == {"level_acceptance", "bottom_occupancy"}


class _Interrupted(Exception):
    """Stands in for a killed process."""


class _InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise _Interrupted


RESUME = {
    "cast": ("flip", {"n_levels": 6, "lag": 7}),
    "ast": ("mixture", {"n_levels": 6, "sap_updates": 4, "run_length": 5}),
}


def _resume_run(directory: Path, algorithm: str, *, seed_model: int, seed: int, callbacks=(), resume=False):
    operator, params = RESUME[algorithm]
    return train(
        bl.RBM(n_visible=9, n_hidden=4, generator=seed_model),
        _data(),
        algorithm=algorithm,
        algorithm_params=params,
        operator=operator,
        operator_params={"alpha": 0.5} if operator == "mixture" else None,
        n_chains=13,
        batch_size=8,
        n_updates=30,
        learning_rate=0.1,
        momentum=0.5,
        lr_schedule="inverse",
        log_every=5,
        track_exact_every=10,
        checkpoint_dir=directory,
        checkpoint_every=10,
        generator=seed,
        callbacks=list(callbacks),
        resume=resume,
    )


@pytest.mark.parametrize("algorithm", ["cast", "ast"])
def test_resume_is_bit_identical(tmp_path: Path, algorithm: str) -> None:
    whole = _resume_run(tmp_path / "whole", algorithm, seed_model=0, seed=123)
    with pytest.raises(_Interrupted):
        _resume_run(tmp_path / "parts", algorithm, seed_model=0, seed=123, callbacks=[_InterruptAt(17)])
    # New objects (another initial model, another seed): everything comes from the checkpoint.
    resumed = _resume_run(tmp_path / "parts", algorithm, seed_model=99, seed=999, resume=True)
    assert resumed.n_updates == whole.n_updates == 30
    for (name, a), b in zip(whole.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(whole.final_chains.layers, resumed.final_chains.layers, strict=True):
        assert torch.equal(a, b)
    final_whole = load_checkpoint(find_latest_checkpoint(tmp_path / "whole"))
    final_parts = load_checkpoint(find_latest_checkpoint(tmp_path / "parts"))
    assert any("log_weights" in name for name in final_whole.tensors)  # the WL weights are saved
    assert final_whole.tensors.keys() == final_parts.tensors.keys()
    for name, tensor in final_whole.tensors.items():
        assert torch.equal(tensor, final_parts.tensors[name]), name
    strip = [{**r.to_dict(), "time": None} for r in whole.history]
    assert [{**r.to_dict(), "time": None} for r in resumed.history] == strip
    assert "level_acceptance" in whole.history[-1].extra


def test_cast_end_to_end_with_paper_defaults(tmp_path: Path) -> None:
    data = _data()
    kept = data.clone()
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    result = bl.train(
        model,
        data,
        algorithm="cast",
        operator="flip",
        n_chains=13,
        batch_size=8,
        n_updates=120,
        learning_rate=0.1,
        log_every=40,
        track_exact_every=120,
        checkpoint_dir=tmp_path,
        generator=0,
    )
    assert torch.equal(data, kept)
    assert [record.update for record in result.history] == [0, 40, 80, 120]
    assert result.history[-1].train_log_likelihood > result.history[0].train_log_likelihood
    chains = result.final_chains
    assert [tuple(layer.shape) for layer in chains.layers] == [(13, 9), (13, 4)]
    assert torch.equal(chains.beta, torch.ones(13))
    level_acceptance = result.history[-1].extra["level_acceptance"]
    assert 0.0 < level_acceptance < 1.0
    checkpoint = load_checkpoint(find_latest_checkpoint(tmp_path))
    described = checkpoint.metadata["phase"]
    assert (described["name"], described["n_levels"], described["lag"]) == ("cast", 20, 50)
    assert "gamma=10.0" in described["scheme"] and "low" not in described  # the paper's defaults
    assert int(checkpoint.tensors["phase.scheme.n_exchanges"]) == 120 // 50
    assert checkpoint.tensors["phase.scheme.fast.log_weights"].shape == (13, 20)  # one per fast chain
    assert model.metadata["training"]["algorithm"] == "cast"


def test_cast_scheme_phase_matches_the_scheme() -> None:
    """The CAST phase is the CAST scheme, one step per update with k = 1."""
    model = bl.RBM(n_visible=9, n_hidden=4, generator=1, weight_std=1.0)
    op = bl.operators.get("gibbs")
    phase = get_phase("cast", operator=op, k=1, n_chains=13, lag=3, n_levels=5, low=0.5)
    scheme = CAST(op, lag=3, n_levels=5, low=0.5)
    g = torch.Generator().manual_seed(0)
    state = phase.init(model, _data(), generator=g)
    g_reference = torch.Generator().set_state(g.get_state())
    scheme_state = state.scheme_state
    for _ in range(7):
        state, samples = phase.step(model, state, batch=_data()[:5], positive=(), generator=g)
        scheme_state, _ = scheme.step(model, scheme_state, generator=g_reference)
        assert all(
            torch.equal(a, b)
            for a, b in zip(samples.layers, scheme.samples(scheme_state).layers, strict=True)
        )
    assert state.scheme_state.n_exchanges == 2


def test_registered_names() -> None:
    assert {"cd", "pcd", "fpcd", "pt", "ast", "cast", "trans-sap"} <= set(available_phases())
    phase = get_phase("trans_sap", operator=bl.operators.get("gibbs"), k=2, n_chains=13)
    assert phase.name == "trans-sap" and phase.scheme.target_sweeps == 1 and phase.scheme.n_levels == 10
    pt = get_phase("pt", operator=bl.operators.get("gibbs"), k=1, n_chains=13)
    assert [round(float(b), 12) for b in pt.scheme.ladder.betas] == [round(i / 9, 12) for i in range(10)]


@pytest.mark.parametrize(
    ("algorithm", "params", "message"),
    [
        ("pt", {"n_levels": 1}, "n_levels must be an integer >= 2"),
        ("pt", {"ladder": [0.5, 0.2, 1.0]}, "strictly increasing"),
        ("pt", {"pairs": "random"}, "pairs must be one of"),
        ("pt", {"metrics_horizon": 0.5}, "metrics_horizon must be a finite number >= 1"),
        ("pt", {"levels": 4}, "bad algorithm_params for 'pt'"),
        ("cast", {"lag": 0}, "lag must be a positive integer"),
        ("cast", {"exchange": "steal"}, "exchange must be one of"),
        ("ast", {"sap_updates": 0}, "sap_updates must be a positive integer"),
        ("ast", {"run_length": -1}, "run_length must be a positive integer"),
        ("ast", {"gamma": -1.0}, "gamma must be finite and >= 0"),
        ("trans-sap", {"target_sweeps": -1}, "target_sweeps must be a non-negative integer"),
    ],
)
def test_bad_settings_are_refused(algorithm: str, params: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        train(
            bl.RBM(n_visible=9, n_hidden=4),
            _data(),
            algorithm=algorithm,
            algorithm_params=params,
            n_updates=1,
            batch_size=8,
        )


def test_checkpoint_with_other_chain_count_is_refused() -> None:
    model = bl.RBM(n_visible=9, n_hidden=4)
    op = bl.operators.get("gibbs")
    g = torch.Generator().manual_seed(0)
    for algorithm in ("pt", "cast", "trans-sap", "ast"):
        small = get_phase(algorithm, operator=op, k=1, n_chains=5)
        tensors = small.state_tensors(small.init(model, _data(), generator=g))
        large = get_phase(algorithm, operator=op, k=1, n_chains=7)
        with pytest.raises(ValidationError, match=r"5 .*chains, this run asks for 7"):
            large.state_from_tensors(model, tensors)
