"""Every log Z estimator on Potts RBMs and ±1 spin models, against enumeration.

Both families keep the :class:`~boltzlab.models.base.MarginalTerms` form of their tempered
family (a Potts site summed by a log-sum-exp, a spin read as ``s = 2v − 1``), so each estimator
runs unchanged. Every check here runs on both: a q = 3 and a q = 21 Potts RBM
(:func:`harness.tiny_potts`) and two spin RBMs (:func:`harness.tiny_spin_rbms`) — estimates
within their error bars, E[Ẑ] = Z for AIS's weights, the verdict's certified bound. Then what is
one family's own: the q = 2 Potts model's log Z equal to the binary RBM's; AIS and per-example
AIS on a spin DBM; and a sharp model written in spin coordinates, which must get the binary
model's estimate and verdict.
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
    binary_as_potts,
    check_estimator_exact,
    exact_visible_samples,
    random_potts,
    random_spin_dbm,
    random_spin_rbm,
    sharp_rbm,
    tiny_potts,
    tiny_rbms,
    tiny_spin_rbms,
    with_exact_witness,
)
from tolerances import MAX_Z

FAMILIES = {"potts": tiny_potts, "spin": tiny_spin_rbms}
#: A model of each family for the E[w] = Z check: K = 3 leaves a visible Jensen gap.
UNBIASED = {
    "potts": lambda: random_potts(3, 3, 2, scale=2.5, seed=5, base_rate=True),
    "spin": lambda: random_spin_rbm(4, 3, scale=1.5, seed=5, base_rate=True),
}
# RTS on the Potts models in the fast tier (a 100-point pilot, no witness: neither is what is
# checked); the rest (several seconds each) in the slow one.
TEMPERED = [
    pytest.param(family, method, marks=() if (family, method) == ("potts", "rts") else pytest.mark.slow)
    for family in FAMILIES
    for method in ("rts", "ts", "ti", "ti-rb", "mbar")
]
pytestmark = pytest.mark.filterwarnings("ignore:AIS is starting from a uniform base")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("schedule", ["linear", "sm08", pytest.param("varopt", marks=pytest.mark.slow)])
def test_ais_agrees_with_enumeration(family, schedule):
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
        models=FAMILIES[family](torch.float32),
    )


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_ais_weights_are_unbiased_in_z(family, operator):
    # E[w] = Z for any schedule: with K = 3 mean(w)/Z is 1 within its standard error while
    # mean(log w) sits visibly below log Z (Jensen).
    model = UNBIASED[family]()
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


@pytest.mark.parametrize("family", [pytest.param("potts"), pytest.param("spin", marks=pytest.mark.slow)])
def test_raise_agrees_with_enumeration(family):
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

    check_estimator_exact(estimate, models=FAMILIES[family](torch.float32))


@pytest.mark.parametrize(("family", "method"), TEMPERED)
def test_tempered_estimators_agree_with_enumeration(family, method):
    check_estimator_exact(
        lambda model, budget, seed: bl.estimate_log_z(
            model,
            method=method,
            n_chains=20,
            n_temperatures=20,
            n_sweeps=150 * budget,
            generator=seed,
            pilot_temperatures=100,
            lower_bound_sweeps=0,
        ),
        models=FAMILIES[family](torch.float32),
    )


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_certified_bound_holds_and_the_verdict_checks_the_family(family):
    # The visited-state sum is a lower bound whatever the chains did; on a tiny model whose
    # witness rows are its own exact samples it is tight, and an estimate with a fitted
    # witness gets a checked verdict instead of "unchecked".
    for model in FAMILIES[family](torch.float32):
        with_exact_witness(model, n_rows=200)
        exact = bl.exact_log_z(model)
        bound = certified_lower_bound(model, data=model.witness, n_chains=100, generator=0)
        assert bound.log_z <= exact + 1e-9
        assert bound.log_z > exact - 0.05, (bound.log_z, exact)
        result = bl.estimate_log_z(model, method="ais", n_chains=200, n_temperatures=100, generator=1)
        assert result.status == "reliable", result.warnings
        assert abs(result.log_z - exact) < MAX_Z * result.stderr


@pytest.mark.parametrize("family", FAMILIES)
def test_a_missed_mode_is_caught_by_the_bound(family):
    # An estimate set 5 nats below log Z with a tiny error bar must not be called reliable.
    model = with_exact_witness(FAMILIES[family](torch.float32)[0], n_rows=200)
    exact = bl.exact_log_z(model)
    bound = certified_lower_bound(model, data=model.witness, n_chains=100, generator=0)
    wrong = bl.LogZEstimate(log_z=exact - 5.0, stderr=0.01, method="ais")
    judged = judge(model, wrong, bound=bound)
    assert judged.status == "unreliable", judged.warnings


# ---------------------------------------------------------------------------- one family's own
def test_q2_potts_log_z_is_the_binary_log_z_at_every_beta():
    for model in tiny_rbms():
        potts = binary_as_potts(model)
        for beta in (0.0, 0.35, 1.0):
            assert bl.exact_log_z(potts, beta) == pytest.approx(bl.exact_log_z(model, beta), abs=1e-12)


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
