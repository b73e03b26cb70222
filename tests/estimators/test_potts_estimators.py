"""Every log Z estimator on Potts RBMs, against enumeration (issue: categorical units).

The tempered family of a Potts RBM runs from its profile base to the model with the hidden
units summed out in the same :class:`~boltzlab.models.base.MarginalTerms` form as a binary
RBM, so each estimator runs unchanged; these are its exact-oracle checks on a q = 3 and a
q = 21 model (:func:`harness.tiny_potts`), E[Ẑ] = Z for AIS's weights, the q = 2 model's
log Z equal to the binary RBM's, and the verdict's certified bound on Potts models.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.estimators.verdict.judge import judge
from boltzlab.estimators.verdict.lower_bound import certified_lower_bound
from harness import (
    binary_as_potts,
    check_estimator_exact,
    exact_visible_samples,
    random_potts,
    tiny_potts,
    tiny_rbms,
    with_exact_witness,
)
from tolerances import MAX_Z

# RTS in the fast tier; the others (5-11 s each here) in the slow one.
TEMPERED = (
    "rts",
    *(pytest.param(method, marks=pytest.mark.slow) for method in ("ts", "ti", "ti-rb", "mbar")),
)
UNIFORM_BASE = "ignore:AIS is starting from a uniform base"
pytestmark = pytest.mark.filterwarnings(UNIFORM_BASE)


def test_q2_potts_log_z_is_the_binary_log_z_at_every_beta():
    for model in tiny_rbms():
        potts = binary_as_potts(model)
        for beta in (0.0, 0.35, 1.0):
            assert bl.exact_log_z(potts, beta) == pytest.approx(bl.exact_log_z(model, beta), abs=1e-12)


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
        models=tiny_potts(torch.float32),
    )


@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_ais_weights_are_unbiased_in_z(operator):
    # E[w] = Z for any schedule: with K = 3 on the q = 3 model mean(w)/Z is 1 within its
    # standard error while mean(log w) sits visibly below log Z (Jensen).
    model = random_potts(3, 3, 2, scale=2.5, seed=5, base_rate=True)
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

    check_estimator_exact(estimate, models=tiny_potts(torch.float32))


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
        models=tiny_potts(torch.float32),
    )


@pytest.mark.slow
def test_certified_bound_holds_and_the_verdict_checks_potts_models():
    # The visited-state sum is a lower bound whatever the chains did; on a tiny model whose
    # witness rows are its own exact samples it is tight, and an estimate with a fitted
    # witness gets a checked verdict instead of "unchecked".
    for model in tiny_potts(torch.float32):
        with_exact_witness(model, n_rows=200)
        exact = bl.exact_log_z(model)
        bound = certified_lower_bound(model, data=model.witness, n_chains=200, generator=0)
        assert bound.log_z <= exact + 1e-9
        assert bound.log_z > exact - 0.05, (bound.log_z, exact)
        result = bl.estimate_log_z(model, method="ais", n_chains=200, n_temperatures=100, generator=1)
        assert result.status == "reliable", result.warnings
        assert abs(result.log_z - exact) < MAX_Z * result.stderr


def test_a_missed_mode_is_caught_by_the_bound():
    # An estimate set 5 nats below log Z with a tiny error bar must not be called reliable.
    model = with_exact_witness(tiny_potts(torch.float32)[0], n_rows=200)
    exact = bl.exact_log_z(model)
    bound = certified_lower_bound(model, data=model.witness, n_chains=200, generator=0)
    wrong = bl.LogZEstimate(log_z=exact - 5.0, stderr=0.01, method="ais")
    judged = judge(model, wrong, bound=bound)
    assert judged.status == "unreliable", judged.warnings
