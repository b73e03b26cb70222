"""The tempered estimators' budget: one round when the checks pass, doubling rounds that continue
from where the chains are while they fail, up to max_sweeps; what was spent is in info.budget."""

import pytest
import torch

import boltzlab as bl
from boltzlab.cli.evaluate import row_from_estimate
from boltzlab.cli.logz import describe_estimate
from boltzlab.errors import ValidationError
from boltzlab.estimators import collect_tempered_samples
from boltzlab.estimators.tempered import budget as tempered_budget_module
from boltzlab.estimators.tempered.budget import DEFAULT_MAX_SWEEPS, TemperedBudget
from boltzlab.estimators.tempered.rts import rts_from_samples
from harness import random_rbm, sharp_rbm, stand_in_bound
from tolerances import MAX_Z


@pytest.mark.slow
def test_an_easy_model_gets_one_round_on_the_placed_ladder():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(model, method="rts", n_chains=40, n_temperatures=30, generator=0)
    budget = result.info.budget
    assert isinstance(budget, TemperedBudget) and budget is result.info.samples.budget
    assert budget.ladder == "adaptive" and budget.placed is not None
    assert budget.passed and budget.stop_reason == "checks passed" and len(budget.rounds) == 1
    assert budget.rounds[0].long_run_sweeps == 1000 and budget.rounds[0].failures == ()
    assert budget.max_sweeps == DEFAULT_MAX_SWEEPS
    spent = int(result.info.samples.block_sweeps.sum())
    assert budget.sweeps_per_chain == spent
    assert result.cost_sweeps == budget.cost_sweeps == 40 * spent + budget.placed.cost_sweeps
    assert torch.equal(result.info.betas, budget.placed.ladder.betas.float().double())
    assert abs(result.z_score(exact)) < MAX_Z
    assert result.reliable, result.warnings


def test_failing_checks_double_the_long_run_until_max_sweeps():
    # Two separated modes, four chains, a short first round on the linear ladder: the chain
    # groups cannot agree and the chains barely cross the ladder, so every round fails.
    model = sharp_rbm(12, 8, seed=0, scale=8.0)
    result = bl.estimate_log_z(
        model,
        method="rts",
        ladder="linear",
        n_chains=8,
        n_temperatures=12,
        n_sweeps=20,
        n_initial_iterations=1,
        initial_sweeps=10,
        max_sweeps=200,
        generator=0,
        lower_bound_sweeps=0,
    )
    budget = result.info.budget
    lengths = [round_.long_run_sweeps for round_ in budget.rounds]
    assert lengths == [20 * 2**i for i in range(len(lengths))], lengths
    assert budget.sweeps_per_chain == 10 + sum(lengths) <= 200 < budget.sweeps_per_chain + 2 * lengths[-1]
    if not budget.passed:
        assert budget.stop_reason == "max_sweeps reached (200)"
        assert all(round_.failures for round_ in budget.rounds)
        assert result.failed
        assert any("budget grew" in warning for warning in result.warnings)
    # Later rounds continue from where the chains were, with no initial iterations, and the
    # estimate is the last round's.
    assert result.info.samples.n_initial_iterations == 0 and result.info.samples.n_sweeps == lengths[-1]
    assert result.log_z == budget.rounds[-1].log_z
    assert result.cost_sweeps == budget.cost_sweeps == 8 * budget.sweeps_per_chain


def test_a_given_n_sweeps_is_a_fixed_budget():
    model = sharp_rbm(12, 8, seed=0, scale=8.0)
    result = bl.estimate_log_z(
        model, method="ts", ladder="linear", n_chains=8, n_temperatures=12, n_sweeps=30, generator=0
    )
    budget = result.info.budget
    assert len(budget.rounds) == 1 and budget.max_sweeps == budget.sweeps_per_chain
    assert budget.stop_reason in ("fixed budget", "checks passed")
    assert budget.ladder == "linear" and budget.placed is None


def test_an_explicit_ladder_is_used_as_given():
    model = random_rbm(6, 3, seed=1, base_rate=True)
    ladder = [0.0, 0.2, 0.5, 0.7, 1.0]
    result = bl.estimate_log_z(model, method="ti", ladder=ladder, n_chains=20, n_sweeps=50, generator=0)
    assert result.info.budget.ladder == "given"
    assert torch.allclose(result.info.betas, torch.tensor(ladder, dtype=torch.float64))


def test_a_run_continues_from_its_final_state():
    model = random_rbm(6, 3, seed=1, base_rate=True)
    first = collect_tempered_samples(model, n_chains=9, n_temperatures=5, n_sweeps=7, generator=0)
    state = first.final_state
    assert state.chains.n_chains == 9 and state.levels.shape == (9,)
    assert torch.equal(state.chains.beta, first.betas[state.levels].to(state.chains.dtype))
    assert first.passages is not None and first.passages.shape == (9,)
    again = collect_tempered_samples(
        model,
        n_chains=9,
        n_temperatures=5,
        n_sweeps=7,
        n_initial_iterations=0,
        initial_log_z=rts_from_samples(first).info.log_z_levels,
        start=state,
        generator=1,
    )
    assert again.n_initial_iterations == 0 and int(again.level_counts.sum()) == 9 * 7
    with pytest.raises(ValidationError, match="start holds 9 chains"):
        collect_tempered_samples(model, n_chains=8, n_temperatures=5, n_sweeps=3, start=state, generator=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ladder": "geometric"}, "ladder must be 'adaptive', 'linear'"),
        ({"max_sweeps": 0}, "max_sweeps"),
        ({"pilot_chains": 0}, "pilot_chains"),
        ({"max_sweep": 10}, "unknown rts option"),
        ({"target_stderr": 0.0, "max_sweeps": 8}, "target_stderr"),
        ({"lower_bound": 3.0, "max_sweeps": 8}, "lower_bound must be a LowerBound"),
        ({"target_stderr": True, "max_sweeps": 8}, "target_stderr"),
        ({"target_stderr": float("inf"), "max_sweeps": 8}, "target_stderr"),
    ],
)
def test_refuses_bad_budget_options(options, message):
    model = random_rbm(5, 2, seed=0)
    with pytest.raises(ValidationError, match=message):
        bl.estimate_log_z(
            model, method="rts", n_chains=4, n_temperatures=4, n_sweeps=4, generator=0, **options
        )


EASY = {"n_chains": 40, "n_temperatures": 30, "n_sweeps": 100, "max_sweeps": 1000, "lower_bound_sweeps": 0}


@pytest.mark.slow
def test_an_estimate_below_a_certified_bound_makes_the_budget_grow():
    # The easy model passes every check in one round; a bound above its estimate (a stand-in
    # for the witness when the chains missed mass) must make it grow, whatever its error bar.
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    plain = bl.estimate_log_z(model, method="rts", generator=0, **EASY)
    assert len(plain.info.budget.rounds) == 1 and plain.info.budget.passed
    bounded = bl.estimate_log_z(
        model, method="rts", generator=0, lower_bound=stand_in_bound(plain.log_z + 1.0), **EASY
    )
    budget = bounded.info.budget
    assert [round_.long_run_sweeps for round_ in budget.rounds] == [100, 200, 400]
    assert budget.stop_reason == "max_sweeps reached (1000)"
    assert all("certified lower bound" in round_.failures[-1] for round_ in budget.rounds)
    # The first round is the same run as without the bound.
    assert budget.rounds[0].log_z == plain.log_z
    # `boltzlab logz` says how the sweeps came about.
    initial = budget.rounds[0].initial_sweeps
    spent = (
        f"{initial} initial sweeps, then 3 rounds of 100 + 200 + 400 long-run sweeps "
        f"({initial + 700} per chain; max_sweeps reached (1000))"
    )
    assert spent in describe_estimate(bounded)
    # `boltzlab evaluate` prints the same line under its table; a budget of one round, none.
    assert spent in row_from_estimate(bounded, train_log_f=0.0, test_log_f=0.0, seconds=1.0).budget_grew
    assert row_from_estimate(plain, train_log_f=0.0, test_log_f=0.0, seconds=1.0).budget_grew is None


@pytest.mark.slow
def test_a_target_standard_error_adds_chains_once_the_checks_pass():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    # n_chains given without max_chains: the chains run, with no target to grow towards.
    plain = bl.estimate_log_z(model, method="mbar", generator=0, **EASY)
    assert plain.info.budget.target_stderr is None and plain.info.budget.max_chains == 40
    assert [(r.n_chains, r.long_run_sweeps) for r in plain.info.budget.rounds] == [(40, 100)]
    target = plain.stderr / 3
    precise = bl.estimate_log_z(
        model, method="mbar", generator=0, target_stderr=target, max_chains=400, **EASY
    )
    budget = precise.info.budget
    chains = [r.n_chains for r in budget.rounds]
    # 1/√n with a margin: about 9 × 1.25 × 40 chains, at most max_chains; every round 100 sweeps.
    assert chains[0] == 40 and chains[1] == 400 and {r.long_run_sweeps for r in budget.rounds} == {100}
    assert budget.target_stderr == target and budget.max_chains == 400
    assert precise.info.samples.n_chains == chains[-1] and precise.stderr < plain.stderr / 2
    # Every check passes; EASY turns the witness off, so the verdict is "unchecked".
    assert abs(precise.z_score(exact)) < MAX_Z and precise.status == "unchecked", precise.warnings
    assert "above the target" in budget.rounds[0].failures[-1]
    assert budget.passed == (precise.stderr <= target)
    if not budget.passed:
        assert budget.stop_reason == "max_chains reached (400)"
    # Every round's chain-sweeps and the fresh chains' burn-in are counted.
    first, wider = budget.rounds[0], budget.rounds[1]
    run = 40 * (first.initial_sweeps + 100) + 400 * 100
    assert precise.cost_sweeps > budget.placed.cost_sweeps + run
    # A fixed budget has nothing to grow towards.
    fixed = bl.estimate_log_z(
        model, method="mbar", generator=0, n_chains=40, n_temperatures=30, n_sweeps=100, target_stderr=target
    )
    assert fixed.info.budget.target_stderr is None and len(fixed.info.budget.rounds) == 1
    assert wider.diagnosis.round_trips > 0


def test_defaults_aim_at_a_tenth_of_a_nat_with_up_to_800_chains():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    result = bl.estimate_log_z(
        model,
        method="rts",
        generator=0,
        n_temperatures=30,
        n_sweeps=100,
        max_sweeps=1000,
        lower_bound_sweeps=0,
    )
    budget = result.info.budget
    assert (budget.target_stderr, budget.max_chains) == (0.1, 800)
    assert result.stderr <= 0.1 or budget.stop_reason.startswith("max_")


@pytest.mark.slow
def test_estimate_log_z_hands_the_witness_to_a_growing_tempered_budget(monkeypatch):
    seen = []
    original = tempered_budget_module.bound_failures

    def spy(estimate, bound):
        seen.append(bound)
        return original(estimate, bound)

    monkeypatch.setattr(tempered_budget_module, "bound_failures", spy)
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    options = {"n_chains": 40, "n_temperatures": 30, "n_sweeps": 100, "generator": 0}
    # Any spelling the registry accepts; the budget sees the witness the verdict reports.
    result = bl.estimate_log_z(model, method="TI_RB", max_sweeps=400, **options)
    assert result.lower_bound is not None and seen and all(bound is result.lower_bound for bound in seen)
    assert result.reliable, result.warnings
    # Run before the estimate from a fork: the estimate is the one of a run without the witness.
    seen.clear()
    alone = bl.estimate_log_z(model, method="ti-rb", max_sweeps=400, lower_bound_sweeps=0, **options)
    assert result.log_z == alone.log_z and seen == [None]
    # A fixed budget has nothing to grow: the witness runs after the estimate, for the verdict.
    seen.clear()
    fixed = bl.estimate_log_z(model, method="ti-rb", **options)
    assert seen == [None] and fixed.lower_bound is not None
    # A bound the caller gives is the budget's; the verdict runs its own witness.
    seen.clear()
    given = stand_in_bound(0.0)
    bl.estimate_log_z(model, method="rts", max_sweeps=400, lower_bound=given, **options)
    assert seen and all(bound is given for bound in seen)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["rts", "ti-rb", "mbar"])
def test_defaults_get_right_a_sharp_model_the_linear_ladder_misses(method):
    # 12×8, weights N(0, 8²): from Ẑ = 1 on the linear ladder the chains never cross it and
    # the estimates land nats off (flagged); the pilot's ladder and weights get it right.
    model = sharp_rbm(12, 8, seed=0, scale=8.0)
    exact = bl.exact_log_z(model)
    linear = bl.estimate_log_z(
        model, method=method, ladder="linear", n_sweeps=1000, generator=0, lower_bound_sweeps=0
    )
    assert abs(linear.log_z - exact) > 1.0 and linear.failed
    default = bl.estimate_log_z(model, method=method, generator=0, lower_bound_sweeps=0)
    # Every check passes; with the witness turned off the verdict is "unchecked", not "reliable".
    assert abs(default.z_score(exact)) < MAX_Z and default.status == "unchecked", default.warnings


def test_a_numpy_ladder_is_taken_as_the_ladder():
    import numpy as np

    model = random_rbm(7, 3, seed=4, base_rate=True)
    betas = np.linspace(0.0, 1.0, 5)
    options = {"n_chains": 6, "n_sweeps": 20, "n_initial_iterations": 1, "initial_sweeps": 4}
    from_numpy = bl.estimate_log_z(model, method="rts", ladder=betas, generator=0, **options)
    from_list = bl.estimate_log_z(model, method="rts", ladder=list(betas), generator=0, **options)
    assert from_numpy.log_z == from_list.log_z
