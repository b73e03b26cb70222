"""RAISE is unbiased for the annealed model's p_ann(v) (checked against p_0·T_1⋯T_K built from
exact matrices, for Gibbs and flip), p_ann tends to p as K grows, its log Z is biased upward so
that AIS and RAISE sandwich the exact log Z, and the log Z agrees with enumeration within its
own error bar when the schedule is long (docs/algorithms.md §4.2, §7)."""

import dataclasses
import itertools
import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators import RAISEResult, joint_log_probabilities, raise_log_likelihood
from boltzlab.estimators.annealing.raise_ import (
    MAX_SCHEDULE_SHIFT,
    SCHEDULE_CHECK_STRIDE,
    coarsened,
    raise_checks,
)
from boltzlab.estimators.annealing.schedules import linear
from boltzlab.estimators.verdict.checks import Verdict
from boltzlab.evaluation import group_transition_matrix, transition_matrix
from harness import check_estimator_exact, random_rbm

UNIFORM_BASE = "ignore:AIS is starting from a uniform base"


def visible_marginal(model: bl.RBM, joint: torch.Tensor) -> torch.Tensor:
    """Sum a distribution over joint states (visible units are the low bits) over h."""
    n_states = 1 << model.n_visible
    codes = torch.arange(joint.numel()) & (n_states - 1)
    return torch.zeros(n_states, dtype=torch.float64).index_add_(0, codes, joint)


def exact_p_ann(model: bl.RBM, operator: str, betas: torch.Tensor) -> torch.Tensor:
    """p_ann(v_K) = p_0·T_1⋯T_K with AIS's kernel: redraw h at β_k, then one sweep at β_k."""
    gibbs, transition = bl.operators.get("gibbs"), bl.operators.get(operator)
    distribution = joint_log_probabilities(model, 0.0).exp()
    for beta in betas[1:].tolist():
        redraw = group_transition_matrix(model, gibbs, (1,), beta=beta)
        distribution = distribution @ redraw @ transition_matrix(model, transition, beta=beta)
    return visible_marginal(model, distribution)


def exact_p(model: bl.RBM) -> torch.Tensor:
    return visible_marginal(model, joint_log_probabilities(model, 1.0).exp())


def as_visible(model: bl.RBM, codes: torch.Tensor) -> torch.Tensor:
    return ((codes[:, None] >> torch.arange(model.n_visible)) & 1).to(model.dtype)


def exact_samples(model: bl.RBM, n_examples: int, seed: int) -> torch.Tensor:
    """Visible vectors drawn exactly from the model by enumeration."""
    generator = torch.Generator().manual_seed(seed)
    return as_visible(
        model, torch.multinomial(exact_p(model), n_examples, replacement=True, generator=generator)
    )


def mean_and_stderr(values: torch.Tensor) -> tuple[float, float]:
    return float(values.mean()), float(values.std() / math.sqrt(values.numel()))


@pytest.mark.parametrize("operator", ["gibbs", "flip"])
def test_weights_are_unbiased_for_the_annealed_model(operator):
    # E[w] = p_ann(v) exactly, for any K. With K = 3 on a strongly coupled RBM, p_ann differs
    # from p by many standard errors, so the check tells the two apart; flip needs the same
    # redraw of h at each β as AIS, without which its reverse kernel is not T_k's reversal.
    model = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    betas = linear(3)
    p_ann, p = exact_p_ann(model, operator, betas), exact_p(model)
    for code in (int(p.argmax()), 5):
        data = as_visible(model, torch.tensor([code]))
        result = raise_log_likelihood(
            model, data, n_chains=200_000, schedule=betas, operator=operator, generator=code
        )
        ratio, stderr = mean_and_stderr(torch.exp(result.log_weights[0]) / p_ann[code])
        assert abs(ratio - 1.0) < 3 * stderr, f"{operator}, v={code}: E[w]/p_ann = {ratio:.4f} ± {stderr:.4f}"
        assert abs(float(p[code] / p_ann[code]) - 1.0) > 5 * stderr, "p_ann too close to p to tell apart"
        # Jensen: log p̂ from one chain is below log p_ann on average.
        gap, gap_stderr = mean_and_stderr(result.log_weights[0] - math.log(p_ann[code]))
        assert gap + 3 * gap_stderr < 0, f"mean(log w) − log p_ann = {gap:.4f} shows no Jensen gap"


def test_annealed_model_tends_to_the_model():
    # p_ann → p as K grows; the total variation falls roughly like 1/K.
    model = random_rbm(4, 3, scale=3.0, seed=1, base_rate=True)
    p = exact_p(model)
    distances = [float((exact_p_ann(model, "gibbs", linear(k)) - p).abs().sum() / 2) for k in (4, 16, 64)]
    assert all(later < earlier for earlier, later in itertools.pairwise(distances)), distances
    assert distances[-1] < distances[0] / 4, distances


@pytest.mark.slow
def test_ais_and_raise_sandwich_the_exact_log_z():
    # E[log Ẑ_AIS] ≤ log Z ≤ E[log Ẑ_RAISE] (the upper side in expectation over data drawn from
    # the model), checked on the seed-average of 30 short runs; the bracket is non-trivial.
    model = random_rbm(9, 4, scale=2.0, seed=7, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    options = {"n_chains": 10, "n_temperatures": 5, "schedule": "linear"}
    lower, upper = [], []
    for seed in range(30):
        lower.append(bl.estimate_log_z(model, method="ais", generator=seed, **options).log_z - exact)
        data = exact_samples(model, 10, seed=100 + seed)
        estimate = bl.estimate_log_z(model, method="raise", data=data, generator=1000 + seed, **options)
        assert estimate.bound == "upper"
        upper.append(estimate.log_z - exact)
    lower_mean, lower_stderr = mean_and_stderr(torch.tensor(lower))
    upper_mean, upper_stderr = mean_and_stderr(torch.tensor(upper))
    assert lower_mean < 3 * lower_stderr, f"AIS above log Z: {lower_mean:.3f} ± {lower_stderr:.3f}"
    assert upper_mean > -3 * upper_stderr, f"RAISE below log Z: {upper_mean:.3f} ± {upper_stderr:.3f}"
    width = upper_mean - lower_mean
    assert width > 3 * math.hypot(lower_stderr, upper_stderr), (lower_mean, upper_mean)


@pytest.mark.filterwarnings(UNIFORM_BASE)
def test_log_z_agrees_with_enumeration_within_its_error_bar():
    # With a long schedule the upward bias is far below the error bar.
    def estimate(model, budget, seed):
        data = exact_samples(model, 20 * budget, seed)
        return bl.estimate_log_z(
            model,
            method="raise",
            data=data,
            n_chains=4,
            n_temperatures=300,
            schedule="linear",
            generator=seed,
            lower_bound_sweeps=0,  # the verdict's witness is tested in test_trust.py
        )

    check_estimator_exact(estimate)


def test_log_likelihoods_approach_the_exact_ones():
    model = random_rbm(7, 3, scale=2.0, seed=4, dtype=torch.float32, base_rate=True)
    log_p = exact_p(model).log()
    codes = torch.multinomial(
        exact_p(model), 13, replacement=True, generator=torch.Generator().manual_seed(0)
    )
    result = raise_log_likelihood(
        model, as_visible(model, codes), n_chains=20, n_temperatures=400, schedule="linear", generator=1
    )
    z_scores = (result.log_likelihoods - log_p[codes]) / result.stderrs
    assert z_scores.abs().max() < 4, z_scores
    assert result.mean_log_likelihood == pytest.approx(float(result.log_likelihoods.mean()))


def test_result_contract():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    data = exact_samples(model, 5, seed=0)
    before = data.clone()
    parameters = {name: value.clone() for name, value in model.state_dict().items()}
    result = raise_log_likelihood(model, data, n_chains=13, n_temperatures=30, schedule="linear", generator=2)
    assert isinstance(result, RAISEResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.n_chains = 1  # type: ignore[misc]
    assert result.log_weights.shape == (5, 13) and result.log_weights.dtype == torch.float64
    assert (
        result.log_likelihoods.shape == (5,) and result.stderrs.shape == (5,) and result.log_f.shape == (5,)
    )
    assert torch.allclose(result.log_likelihoods, torch.logsumexp(result.log_weights, 1) - math.log(13))
    assert torch.allclose(result.log_f, -model.free_energy(data))
    assert bool(((result.ess >= 1 - 1e-9) & (result.ess <= 13 + 1e-9)).all())
    assert result.cost_sweeps == 5 * 13 * 30 and result.operator == "gibbs"
    assert torch.equal(result.schedule_info.betas, linear(30))
    assert torch.equal(data, before), "RAISE modified the data"
    for name, value in model.state_dict().items():
        assert torch.equal(value, parameters[name]), f"RAISE modified the model's {name}"

    again = raise_log_likelihood(
        model,
        data,
        n_chains=13,
        n_temperatures=30,
        schedule="linear",
        generator=torch.Generator().manual_seed(2),
    )
    assert torch.equal(result.log_weights, again.log_weights)
    # One example per batch: the same computation in another random order.
    batched = raise_log_likelihood(
        model, data, n_chains=13, n_temperatures=30, schedule="linear", generator=2, chains_per_batch=13
    )
    assert batched.log_weights.shape == (5, 13) and not torch.equal(batched.log_weights, result.log_weights)

    estimate = bl.estimate_log_z(
        model, method="raise", data=data, n_chains=13, n_temperatures=30, schedule="linear", generator=2
    )
    assert estimate.method == "raise" and estimate.bound == "upper" and estimate.info.n_chains == 13
    assert estimate.log_z == pytest.approx(float((result.log_f - result.log_likelihoods).mean()), abs=1e-12)
    assert estimate.stderr == pytest.approx(float(result.log_z_per_example.std() / math.sqrt(5)), rel=1e-12)
    assert estimate.cost_sweeps == 5 * 13 * 30


def test_runs_with_an_adaptive_decelerated_schedule():
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    estimate = bl.estimate_log_z(
        model,
        method="raise",
        data=exact_samples(model, 10, seed=3),
        n_temperatures=400,
        schedule="varopt",
        decelerate=0.01,
        schedule_options={"pilot_chains": 50, "pilot_temperatures": 100},
        generator=3,
    )
    info = estimate.info.schedule_info
    assert info.name == "varopt" and float(info.betas.diff().max()) <= 0.01 * (1 + 1e-12)
    # The schedule check anneals the same examples on every 4th temperature (100 of them).
    assert estimate.cost_sweeps == 10 * 10 * 400 + 10 * 10 * 100 + 50 * 99
    assert abs(estimate.z_score(bl.exact_log_z(model))) < 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "pass data="),
        ({"data": torch.zeros(3, 6)}, "data has 6 units per example, the model expects 7"),
        ({"data": torch.full((3, 7), 0.5)}, "data must be binary"),
        ({"data": torch.zeros(3, 7), "n_chains": 0}, "n_chains must be a positive integer"),
        ({"data": torch.zeros(3, 7), "n_sweeps": 4}, "unknown RAISE option"),
        ({"data": torch.zeros(3, 7), "schedule": [0.0, 0.5]}, "end at beta = 1"),
        ({"data": torch.zeros(3, 7), "operator": "metropolis"}, "unknown operator"),
    ],
)
def test_refuses_bad_options_at_the_door(options, message):
    model = random_rbm(7, 3, seed=4, base_rate=True)
    with pytest.raises(ValidationError, match=message):
        bl.estimate_log_z(model, method="raise", generator=0, **options)


@pytest.mark.slow
def test_defaults_are_accurate_on_a_small_model():
    # "estimate_log_z(model, method='raise', data=...) with no options": SM08's 14,500
    # temperatures, 10 chains per example, Gibbs; 100 examples drawn from the model.
    model = random_rbm(7, 3, seed=4, dtype=torch.float32, base_rate=True)
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(model, method="raise", data=exact_samples(model, 100, seed=0), generator=0)
    assert abs(result.z_score(exact)) < 4, f"{result} vs exact {exact:.4f}"
    assert result.info.n_chains == 10 and result.info.schedule_info.n_temperatures == 14_500


def test_the_schedule_check_reruns_the_same_examples_on_every_fourth_temperature():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    data = exact_samples(model, 6, seed=1)
    checked = raise_log_likelihood(
        model, data, n_chains=5, n_temperatures=400, schedule="linear", generator=3
    )
    unchecked = raise_log_likelihood(
        model, data, n_chains=5, n_temperatures=400, schedule="linear", generator=3, schedule_check=False
    )
    # The full run draws what it drew without the check (the check's chains draw from forks).
    assert torch.equal(checked.log_weights, unchecked.log_weights) and unchecked.schedule_check is None
    # The sharded path: a stream per block of examples.
    options = {"n_chains": 5, "n_temperatures": 400, "schedule": "linear", "generator": 3, "blocks": 3}
    with_check = raise_log_likelihood(model, data, **options)
    without = raise_log_likelihood(model, data, schedule_check=False, **options)
    assert torch.equal(with_check.log_weights, without.log_weights)
    # Nor does what the caller's generator draws afterwards (the verdict's witness) change.
    after = []
    for flag in (True, False):
        generator = torch.Generator().manual_seed(7)
        raise_log_likelihood(
            model,
            data,
            n_chains=5,
            n_temperatures=400,
            schedule="linear",
            generator=generator,
            schedule_check=flag,
        )
        after.append(torch.rand(3, generator=generator))
    assert torch.equal(*after)
    check = checked.schedule_check
    assert check.stride == SCHEDULE_CHECK_STRIDE == 4 and check.n_temperatures == 100
    assert check.log_likelihoods.shape == check.stderrs.shape == (6,)
    assert checked.cost_sweeps == unchecked.cost_sweeps + check.cost_sweeps == 6 * 5 * (400 + 100)
    assert torch.allclose(coarsened(linear(400), 4), linear(100), atol=1e-15, rtol=0)
    # Both ends are kept when the stride does not divide K.
    odd = coarsened(linear(10), 4)
    assert odd[0] == 0.0 and odd[-1] == 1.0 and odd.numel() == 4
    short = raise_log_likelihood(model, data, n_chains=5, n_temperatures=39, schedule="linear", generator=3)
    assert short.schedule_check is None, "too short a schedule to coarsen is not checked"


def with_shifts(result: RAISEResult, shifts: torch.Tensor) -> RAISEResult:
    """``result`` whose schedule check moved each example's log Z by ``shifts`` (nats)."""
    check = dataclasses.replace(result.schedule_check, log_likelihoods=result.log_likelihoods - shifts)
    return dataclasses.replace(result, schedule_check=check)


def test_the_schedule_check_widens_the_error_bar_or_fails_the_estimate():
    model = random_rbm(7, 3, seed=4, base_rate=True)
    data = exact_samples(model, 20, seed=2)
    result = raise_log_likelihood(model, data, n_chains=5, n_temperatures=400, schedule="linear", generator=3)
    estimate = bl.estimators.LogZEstimate(
        log_z=float(result.log_z_per_example.mean()), stderr=0.05, method="raise", info=result
    )
    noise = torch.linspace(-0.01, 0.01, 20, dtype=torch.float64)

    def judged(shifts):
        verdict = Verdict()
        return raise_checks(dataclasses.replace(estimate, info=with_shifts(result, shifts)), verdict), verdict

    # Within its own noise: nothing changes but a note.
    same, verdict = judged(noise)
    assert same.stderr == 0.05 and not verdict.failures and "schedule check" in verdict.notes[0]
    # Significant and small: the bias estimate S/3 joins the error bar.
    moved, verdict = judged(0.6 + noise)
    assert moved.stderr == pytest.approx(math.hypot(0.05, 0.2)) and not verdict.failures
    # Significant and over MAX_SCHEDULE_SHIFT: not converged, whatever the error bar.
    far, verdict = judged(-(MAX_SCHEDULE_SHIFT + 0.5) + noise)
    assert (
        far.stderr > 0.5
        and len(verdict.failures) == 1
        and "has not converged in its schedule" in verdict.failures[0]
    )
    # Large but noisy (under SHIFT_SIGNIFICANCE standard errors): no evidence either way.
    noisy, verdict = judged(1.5 + 1000 * noise)
    assert noisy.stderr == 0.05 and not verdict.failures
    # K_c/(K − K_c) when the stride does not divide K: 401 temperatures keep ⌈401/4⌉ = 101.
    odd = raise_log_likelihood(model, data, n_chains=5, n_temperatures=401, schedule="linear", generator=3)
    estimate_odd = dataclasses.replace(estimate, info=with_shifts(odd, 0.6 + noise))
    widened = raise_checks(estimate_odd, Verdict())
    assert odd.schedule_check.n_temperatures == 101
    assert widened.stderr == pytest.approx(math.hypot(0.05, 0.6 * 101 / 300))


def test_the_schedule_check_of_one_example():
    # One example: the two runs' delta-method errors; with one chain there are none, and the
    # shift is reported but not judged.
    model = random_rbm(7, 3, seed=4, base_rate=True)
    data = exact_samples(model, 1, seed=2)
    for n_chains, judged in ((8, True), (1, False)):
        estimate = bl.estimate_log_z(
            model, method="raise", data=data, n_chains=n_chains, n_temperatures=200, schedule="linear",
            generator=0, lower_bound_sweeps=0,
        )  # fmt: skip
        note = next(w for w in estimate.warnings if w.startswith("schedule check"))
        assert ("not judged" in note) != judged and math.isfinite(estimate.log_z)


def test_the_schedule_check_covers_a_short_schedule_from_atypical_data():
    # A sharp RBM, uniform random data (not the model's), 160 temperatures: the estimate is
    # 0.018 low and the coarse run's shift is significant, so the error bar takes the bias in.
    model = random_rbm(12, 8, scale=4.0, seed=0, base_rate=True)
    data = torch.randint(0, 2, (30, 12), generator=torch.Generator().manual_seed(0)).double()
    estimate = bl.estimate_log_z(
        model, method="raise", data=data, n_temperatures=160, schedule="linear", generator=0,
        lower_bound_sweeps=0,
    )  # fmt: skip
    spread = float(estimate.info.log_z_per_example.std() / math.sqrt(30))
    assert estimate.stderr > 2 * spread, "the significant shift did not widen the error bar"
    assert abs(estimate.z_score(bl.exact_log_z(model))) < 2
