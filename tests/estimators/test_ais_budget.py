"""AIS's chain budget: with ``n_chains`` unset, rounds of independent chains until the pooled
weights pass their checks or ``max_chains`` ran; a given ``n_chains`` is one round."""

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.cli.logz import describe_estimate
from boltzlab.errors import ValidationError
from boltzlab.estimators import ais
from boltzlab.estimators.annealing.chain_budget import (
    DEFAULT_CHAINS,
    DEFAULT_MAX_CHAINS,
    budget_failures,
    budget_runs,
    next_round,
    plan_chains,
    without_budget,
)
from boltzlab.estimators.annealing.options import AISOptions
from boltzlab.estimators.verdict.checks import DEFAULT_TARGET_STDERR as TARGET_STDERR
from harness import random_rbm, stand_in_bound

# A strongly coupled RBM annealed through 20 temperatures: 100 chains leave a standard error
# of about 0.2 nats, above the 0.1 target, so the budget has to grow.
HARD = {"n_temperatures": 20, "schedule": "linear"}


def hard_model() -> bl.RBM:
    return random_rbm(8, 5, scale=3.0, seed=2, base_rate=True)


def test_the_budget_grows_until_the_error_bar_passes_and_stays_right():
    model = hard_model()
    exact = bl.exact_log_z(model)
    # The estimator itself: estimate_log_z would run the verdict's witness first for a budget
    # (and after a fixed run), drawing from the generator in a different order.
    fixed = ais(model, n_chains=DEFAULT_CHAINS, generator=0, **HARD)
    assert fixed.stderr > TARGET_STDERR, "the model is too easy to make the budget grow"
    grown = ais(model, generator=0, **HARD)
    budget = grown.info.budget
    assert len(budget.rounds) >= 2 and budget.rounds[0] == DEFAULT_CHAINS
    assert sum(budget.rounds) == grown.info.n_chains == grown.info.log_weights.numel()
    assert grown.info.final_chains.n_chains == grown.info.n_chains
    assert grown.cost_sweeps == grown.info.n_chains * (HARD["n_temperatures"] - 1)
    # The first round is the fixed run: same generator, same draws.
    assert torch.equal(grown.info.log_weights[:DEFAULT_CHAINS], fixed.info.log_weights)
    assert budget.stopped == "checks passed" and budget.stderrs[-1] <= TARGET_STDERR
    assert grown.stderr <= TARGET_STDERR + 1e-12
    assert abs(grown.log_z - exact) < 4 * grown.stderr, (grown.log_z, grown.stderr, exact)
    # The ESS trace pools the rounds: at the last temperature it is the pooled weights' ESS.
    assert math.isclose(math.exp(float(grown.info.log_ess_trace[-1])), grown.info.ess, rel_tol=1e-9)
    # `boltzlab logz` says how the chains came about.
    rounds = " + ".join(map(str, budget.rounds))
    assert f"{grown.info.n_chains} chains in {len(budget.rounds)} rounds ({rounds}; checks passed)" in (
        describe_estimate(grown)
    )


def test_a_given_n_chains_is_one_round_even_when_its_checks_fail():
    result = bl.estimate_log_z(hard_model(), method="ais", n_chains=60, generator=0, **HARD)
    budget = result.info.budget
    assert budget.rounds == (60,) and budget.stopped == "fixed budget"
    assert budget.failures, "the fixed run should fail the 0.1-nat target on this model"
    assert not any("chain budget" in warning for warning in result.warnings)


def test_n_chains_with_max_chains_starts_the_budget_there():
    result = bl.estimate_log_z(hard_model(), method="ais", n_chains=60, max_chains=500, generator=0, **HARD)
    budget = result.info.budget
    assert budget.rounds[0] == 60 and len(budget.rounds) >= 2 and sum(budget.rounds) <= 500


def test_a_cap_below_the_first_round_lowers_it():
    result = bl.estimate_log_z(hard_model(), method="ais", max_chains=40, generator=0, **HARD)
    assert result.info.budget.rounds == (40,)
    assert result.info.budget.stopped == "max_chains reached"


def test_blocked_chains_grow_in_rounds_and_are_reproducible():
    # blocks= runs the sharded path (one process here): every round cuts its chains into
    # blocks with their own streams, drawn from the run's generator.
    options = {"blocks": 8, "generator": 4, "target_stderr": 0.05, "lower_bound_sweeps": 0, **HARD}
    first = bl.estimate_log_z(hard_model(), method="ais", **options)
    again = bl.estimate_log_z(hard_model(), method="ais", **options)
    assert len(first.info.budget.rounds) >= 2
    assert sum(first.info.budget.rounds) == first.info.n_chains == first.info.final_chains.n_chains
    assert torch.equal(first.info.log_weights, again.info.log_weights)


def test_the_cap_is_kept_and_the_verdict_says_the_checks_still_fail():
    result = bl.estimate_log_z(
        hard_model(), method="ais", max_chains=300, target_stderr=1e-4, generator=1, **HARD
    )
    budget = result.info.budget
    assert sum(budget.rounds) == 300 == result.info.n_chains
    assert budget.stopped == "max_chains reached" and budget.failures
    assert any("chain budget ran 300 chains" in warning for warning in result.warnings)


def test_an_easy_model_runs_one_round_identical_to_the_fixed_run():
    model = random_rbm(6, 3, scale=0.5, seed=0, base_rate=True)
    default = ais(model, n_temperatures=200, generator=3)
    fixed = ais(model, n_chains=DEFAULT_CHAINS, n_temperatures=200, generator=3)
    assert default.info.budget.rounds == (DEFAULT_CHAINS,)
    assert default.info.budget.stopped == "checks passed"
    assert default.log_z == fixed.log_z


def test_an_estimate_below_a_certified_bound_makes_the_budget_grow():
    # A bound just above what 100 chains give (a stand-in for the verdict's witness when the
    # chains all missed the heavy tail): the budget must not stop there, whatever the error bar.
    model = hard_model()
    fixed = bl.estimate_log_z(model, method="ais", n_chains=DEFAULT_CHAINS, generator=0, **HARD)
    bound = stand_in_bound(fixed.log_z + 1.0)
    result = ais(model, generator=0, lower_bound=bound, target_stderr=10.0, max_chains=400, **HARD)
    assert result.info.budget.rounds[0] == DEFAULT_CHAINS and sum(result.info.budget.rounds) == 400
    assert any("certified lower bound" in message for message in result.info.budget.failures)
    unbounded = ais(model, generator=0, target_stderr=10.0, max_chains=400, **HARD)
    assert unbounded.info.budget.rounds == (DEFAULT_CHAINS,)


def test_estimate_log_z_hands_the_witness_to_the_budget_and_the_verdict():
    result = bl.estimate_log_z(hard_model(), method="ais", generator=0, **HARD)
    assert result.lower_bound is not None and result.lower_bound.cost_sweeps == 1000 * 200
    fixed = bl.estimate_log_z(hard_model(), method="ais", n_chains=50, generator=0, **HARD)
    assert fixed.lower_bound is not None  # run after the estimate, as for every other method


def test_rounds_ask_for_what_the_error_says_at_least_doubling_within_the_cap():
    plan = plan_chains(AISOptions())
    assert (plan.first, plan.max_chains, plan.target_stderr) == (DEFAULT_CHAINS, DEFAULT_MAX_CHAINS, 0.1)
    # 0.3 nats with 100 chains: 100·9·1.25 = 1,125 wanted in all, 1,025 more.
    assert next_round(100, 0.3, plan) == 1025
    # Just above the target: at least double.
    assert next_round(100, 0.105, plan) == 100
    # Within the cap, and nothing once it is reached.
    assert next_round(1000, 1.0, plan) == DEFAULT_MAX_CHAINS - 1000
    assert next_round(DEFAULT_MAX_CHAINS, 1.0, plan) == 0
    assert next_round(100, math.inf, plan) == 100
    # No last round of a handful: 1,495 run and 100 wanted would leave 5, so all 105 are taken.
    assert next_round(1495, 0.11, plan) == 105
    assert plan_chains(AISOptions(n_chains=50)).fixed
    grown = plan_chains(AISOptions(n_chains=50, max_chains=400))
    assert grown.max_chains == 400 and not grown.fixed
    assert plan_chains(AISOptions(max_chains=40)).first == 40


def test_callers_that_want_a_fixed_cost_keep_100_chains_unless_told_otherwise():
    assert without_budget({"n_temperatures": 50}) == {"n_temperatures": 50, "n_chains": DEFAULT_CHAINS}
    assert without_budget({"max_chains": 400}) == {"max_chains": 400}
    assert budget_runs({}) and budget_runs({"n_chains": 50, "max_chains": 400})
    assert not budget_runs({"n_chains": 50}) and not budget_runs(without_budget({}))


def test_budget_failures_name_the_check_and_the_threshold():
    even = torch.zeros(400, dtype=torch.float64)
    assert budget_failures(even, 0.1) == ([], 0.0)
    one_heavy = torch.zeros(400, dtype=torch.float64)
    one_heavy[7] = 30.0
    failures, stderr = budget_failures(one_heavy, 0.1)
    assert any("effective sample size" in message for message in failures)
    assert any("above the target 0.1 nats" in message for message in failures)
    assert stderr > 0.1


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"target_stderr": 0.0}, "target_stderr"),
        ({"max_chains": 0}, "max_chains"),
        ({"n_chains": -1}, "n_chains"),
        ({"n_chains": 200, "max_chains": 100}, "below n_chains"),
    ],
)
def test_bad_budget_options_are_refused(options, match):
    with pytest.raises(ValidationError, match=match):
        bl.estimate_log_z(hard_model(), method="ais", generator=0, **HARD, **options)
