"""Every log Z estimator on ±1 spin RBMs and DBMs, against enumeration (issue: spin units).

A spin model's tempered family has the :class:`~boltzlab.models.base.MarginalTerms` form with
``s = 2v − 1`` read inside the model, so each estimator runs unchanged; these are its
exact-oracle checks on :func:`harness.tiny_spin_rbms`, E[Ẑ] = Z for AIS's weights, per-example
AIS on a spin DBM, and the verdict's certified bound (which reads the equal binary RBM's
``log f`` less ``Σ_i b_i``).
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood, exact_log_likelihood
from boltzlab.estimators.verdict.judge import judge
from boltzlab.estimators.verdict.lower_bound import certified_lower_bound
from harness import (
    check_estimator_exact,
    exact_visible_samples,
    random_spin_dbm,
    random_spin_rbm,
    sharp_rbm,
    tiny_spin_rbms,
    with_exact_witness,
)
from tolerances import MAX_Z

# AIS, its unbiasedness and the bound in the fast tier; the tempered estimators and RAISE
# (several seconds each) in the slow one: their fast exact tests are the binary models'.
TEMPERED = ("rts", "ts", "ti", "ti-rb", "mbar")
pytestmark = pytest.mark.filterwarnings("ignore:AIS is starting from a uniform base")


@pytest.mark.parametrize("schedule", ["linear", "sm08", pytest.param("varopt", marks=pytest.mark.slow)])
def test_ais_agrees_with_enumeration(schedule):
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model,
            method="ais",
            n_chains=100 * budget,
            n_temperatures=100,
            schedule=schedule,
            generator=seed,
            lower_bound_sweeps=0,
        ),
        models=tiny_spin_rbms(torch.float32),
    )


@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_ais_weights_are_unbiased_in_z(operator):
    # E[w] = Z at K = 3, with a visible Jensen gap in mean(log w).
    model = random_spin_rbm(4, 3, scale=1.5, seed=5, base_rate=True)
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(
        model,
        method="ais",
        n_chains=100_000,
        n_temperatures=3,
        schedule="linear",
        operator=operator,
        generator=2,
        record_ess=False,
        lower_bound_sweeps=0,
    )
    ratios = torch.exp(result.info.log_weights - exact)
    mean, stderr = float(ratios.mean()), float(ratios.std() / math.sqrt(ratios.numel()))
    assert abs(mean - 1.0) < MAX_Z * stderr, f"{operator}: E[w]/Z = {mean:.4f} ± {stderr:.4f}"
    gap = float((result.info.log_weights - exact).mean())
    assert gap < -0.05, f"mean(log w) − log Z = {gap:.3f} shows no Jensen gap at K = 3"


@pytest.mark.slow
def test_raise_agrees_with_enumeration():
    def estimate(model, budget, seed):
        return bl.estimate_log_z(
            model,
            method="raise",
            data=exact_visible_samples(model, 20 * budget, seed=seed),
            n_chains=4,
            n_temperatures=300,
            schedule="linear",
            generator=seed,
            lower_bound_sweeps=0,
        )

    check_estimator_exact(estimate, models=tiny_spin_rbms(torch.float32))


@pytest.mark.slow
@pytest.mark.parametrize("method", TEMPERED)
def test_tempered_estimators_agree_with_enumeration(method):
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model,
            method=method,
            n_chains=20,
            n_temperatures=20,
            n_sweeps=150 * budget,
            generator=seed,
            lower_bound_sweeps=0,
        ),
        models=tiny_spin_rbms(torch.float32),
    )


def test_ais_on_a_spin_dbm_and_its_per_example_likelihood():
    dbm = random_spin_dbm((4, 3, 2), seed=12).float()
    exact = bl.exact_log_z(dbm)
    result = bl.estimate_log_z(dbm, method="ais", n_chains=400, n_temperatures=200, generator=3)
    assert abs(result.log_z - exact) < MAX_Z * result.stderr, (result.log_z, exact, result.stderr)
    data = torch.tensor([[1, -1, 1, -1], [-1, -1, 1, 1], [1, 1, 1, 1]])
    per_example = estimate_log_likelihood(
        dbm, data, log_z=exact, n_chains=200, n_temperatures=100, generator=4
    )
    truth = exact_log_likelihood(dbm, data, log_z=exact)
    z = (per_example.log_probability - truth).abs() / per_example.stderr
    assert bool((z < MAX_Z).all()), (per_example.log_probability, truth, per_example.stderr)


def test_certified_bound_holds_and_the_verdict_checks_spin_models():
    # The visited-state sum bounds log Z from below and is tight on a tiny model whose witness
    # rows are its own exact samples; an AIS estimate then gets a checked verdict.
    for model in tiny_spin_rbms(torch.float32):
        with_exact_witness(model, n_rows=200)
        exact = bl.exact_log_z(model)
        bound = certified_lower_bound(model, data=model.witness, n_chains=100, generator=0)
        assert bound.log_z <= exact + 1e-9
        assert bound.log_z > exact - 0.05, (bound.log_z, exact)
        result = bl.estimate_log_z(model, method="ais", n_chains=200, n_temperatures=100, generator=1)
        assert result.status == "reliable", result.warnings
        assert abs(result.log_z - exact) < MAX_Z * result.stderr


def test_a_missed_mode_is_caught_by_the_bound():
    model = with_exact_witness(tiny_spin_rbms(torch.float32)[0], n_rows=200)
    exact = bl.exact_log_z(model)
    bound = certified_lower_bound(model, data=model.witness, n_chains=100, generator=0)
    wrong = bl.LogZEstimate(log_z=exact - 5.0, stderr=0.01, method="ais")
    assert judge(model, wrong, bound=bound).status == "unreliable"


@pytest.mark.slow
def test_a_sharp_spin_model_gets_the_binary_models_estimate_and_verdict():
    # A sharp model (few separated modes, hard to anneal) written in spin coordinates: its
    # chains are the equal binary model's draw for draw (same seed, float64), so AIS returns
    # the binary estimate less Σ_i b_i, with the same error bar and the same verdict.
    binary = with_exact_witness(sharp_rbm(8, 6, seed=3, scale=2.5), n_rows=300)
    model = bl.models.SpinRBM.from_binary(binary)
    ours = bl.estimate_log_z(model, method="ais", n_chains=100, n_temperatures=300, generator=7)
    theirs = bl.estimate_log_z(binary, method="ais", n_chains=100, n_temperatures=300, generator=7)
    offset = float(model.spin_offset())
    assert ours.log_z == pytest.approx(theirs.log_z - offset, abs=1e-8)
    assert ours.stderr == pytest.approx(theirs.stderr, rel=1e-6)
    assert ours.status == theirs.status
    exact = bl.exact_log_z(model)
    assert ours.status != "reliable" or abs(ours.log_z - exact) < MAX_Z * ours.stderr
