"""Annealing schedules: shapes, endpoints, monotonicity, the SM08 grid, and validation."""

import numpy as np
import pytest
import torch

from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing import schedules
from boltzlab.estimators.annealing.schedules import get_schedule, linear, sm08, validate_schedule


def test_linear_is_k_over_k():
    assert linear(4).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    betas = linear(7)
    assert betas.dtype == torch.float64 and betas.shape == (8,)
    assert torch.equal(betas, torch.arange(8, dtype=torch.float64) / 7)
    assert linear(1).tolist() == [0.0, 1.0]
    assert linear().numel() == schedules.DEFAULT_N_TEMPERATURES + 1


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "10"])
def test_linear_refuses_a_bad_length(bad):
    with pytest.raises(ValidationError, match="n_temperatures"):
        linear(bad)


def test_sm08_default_is_the_reference_grid_without_repeated_knots():
    # [0:1e-3:0.5, 0.5:1e-4:0.9, 0.9:1e-5:1] has 501 + 4001 + 10001 points; dropping the
    # repeated 0.5 and 0.9 leaves 14,501 βs, i.e. 500 + 4,000 + 10,000 increments.
    betas = sm08()
    assert betas.dtype == torch.float64
    assert betas.shape == (14_501,)
    assert betas[0] == 0.0 and betas[-1] == 1.0
    assert betas[500] == 0.5 and betas[4_500] == 0.9
    steps = torch.diff(betas)
    for piece, spacing in ((steps[:500], 1e-3), (steps[500:4_500], 1e-4), (steps[4_500:], 1e-5)):
        assert torch.allclose(piece, torch.full_like(piece, spacing), rtol=1e-9, atol=0)
    reference = np.concatenate(
        [np.linspace(0, 0.5, 501), np.linspace(0.5, 0.9, 4001)[1:], np.linspace(0.9, 1, 10001)[1:]]
    )
    assert np.allclose(betas.numpy(), reference, rtol=0, atol=1e-15)


@pytest.mark.parametrize("n_temperatures", [3, 10, 29, 1_000, 10_000, 14_500, 20_001])
def test_sm08_other_lengths_keep_the_three_pieces_and_their_proportions(n_temperatures):
    betas = sm08(n_temperatures)
    assert betas.shape == (n_temperatures + 1,)
    assert betas[0] == 0.0 and betas[-1] == 1.0
    assert bool((torch.diff(betas) > 0).all()), "sm08 must be strictly increasing"
    counts = [int(((betas > lo) & (betas <= hi)).sum()) for lo, hi in ((0, 0.5), (0.5, 0.9), (0.9, 1))]
    assert sum(counts) == n_temperatures and min(counts) >= 1
    if n_temperatures >= 29:  # below that the first piece's share is under one increment
        for count, share in zip(counts, (500, 4_000, 10_000), strict=True):
            assert abs(count - n_temperatures * share / 14_500) <= 1.0
    if n_temperatures == 14_500:
        assert torch.equal(betas, sm08())


def test_sm08_needs_three_increments():
    with pytest.raises(ValidationError, match=">= 3"):
        sm08(2)


def test_validate_schedule_accepts_sequences_and_repeats_and_copies():
    values = [0.0, 0.3, 0.3, 1.0]
    betas = validate_schedule(values)
    assert betas.dtype == torch.float64 and betas.tolist() == values
    source = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float32)
    checked = validate_schedule(source)
    checked[1] = 0.7
    assert source[1] == 0.5, "validate_schedule must not alias its input"


@pytest.mark.parametrize(
    ("betas", "message"),
    [
        ([[0.0, 1.0]], "1-D"),
        ([0.0], "at least two"),
        ([0.0, float("nan"), 1.0], "finite"),
        ([0.0, float("inf"), 1.0], "finite"),
        ([0.1, 0.5, 1.0], "start at beta = 0"),
        ([0.0, 0.5, 0.99], "end at beta = 1"),
        ([0.0, 0.6, 0.4, 1.0], r"non-decreasing; beta\[2\]"),
        (["a", "b"], "could not be read"),
    ],
)
def test_validate_schedule_names_the_problem(betas, message):
    with pytest.raises(ValidationError, match=message):
        validate_schedule(betas)


def test_get_schedule_by_name_or_values():
    assert torch.equal(get_schedule("linear", 5), linear(5))
    assert torch.equal(get_schedule("SM08"), sm08())
    assert torch.equal(get_schedule([0.0, 0.2, 1.0]), torch.tensor([0.0, 0.2, 1.0], dtype=torch.float64))
    assert get_schedule(torch.linspace(0, 1, 11), 10).shape == (11,)
    with pytest.raises(ValidationError, match="unknown schedule 'geometric'; choose one of linear, sm08"):
        get_schedule("geometric")
    with pytest.raises(ValidationError, match="n_temperatures=3 but the explicit schedule has 2"):
        get_schedule([0.0, 0.5, 1.0], 3)


def test_adding_a_schedule_is_one_function():
    @schedules.register_schedule("test-quadratic")
    def quadratic(n_temperatures):
        return linear(n_temperatures) ** 2

    try:
        assert "test-quadratic" in schedules.available_schedules()
        assert torch.equal(get_schedule("test-quadratic", 4), linear(4) ** 2)
    finally:
        schedules._SCHEDULES.remove("test-quadratic")
