"""Optimiser and learning-rate schedules.

Properties checked: the schedules give their closed-form values (inverse with lr = 0.005,
c = 2000 is 10/(2000 + t)); the trainer's recorded learning rates follow them; momentum and
weight decay sit in the optimiser's param groups, decay on the weight matrix only; with a zero
gradient, weight decay shrinks the weights by the factor (1 − lr·λ) and leaves biases alone;
momentum accumulates as torch.optim.SGD defines it.
"""

from __future__ import annotations

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.training import (
    ConstantSchedule,
    InverseSchedule,
    LinearSchedule,
    make_optimizer,
    make_schedule,
    make_scheduler,
    train,
)


def test_schedule_values() -> None:
    assert make_schedule("constant", n_updates=10) == ConstantSchedule()
    assert [make_schedule("constant", n_updates=10)(t) for t in (0, 5, 10**6)] == [1.0, 1.0, 1.0]
    linear = make_schedule("linear", n_updates=8)
    assert linear == LinearSchedule(8)
    assert [linear(t) for t in (0, 2, 4, 8, 9)] == [1.0, 0.75, 0.5, 0.0, 0.0]
    inverse = make_schedule("inverse", n_updates=10)
    assert inverse == InverseSchedule(2000.0)
    for t in (0, 1, 17, 2000, 198_000):
        assert 0.005 * inverse(t) == pytest.approx(10 / (2000 + t), rel=1e-15)
    assert InverseSchedule(offset=10)(10) == 0.5

    def custom(t: int) -> float:
        return 0.5**t

    assert make_schedule(custom, n_updates=3) is custom
    with pytest.raises(ValidationError, match="lr_schedule must be one of"):
        make_schedule("exponential", n_updates=3)
    with pytest.raises(ValidationError, match="offset > 0"):
        InverseSchedule(offset=0)


def test_scheduler_steps_the_optimizer_learning_rate() -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    optimizer = make_optimizer(model, learning_rate=0.005)
    scheduler = make_scheduler(optimizer, InverseSchedule(2000.0))
    rates = []
    for _ in range(5):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([10 / (2000 + t) for t in range(5)], rel=1e-15)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("linear", [0.2 * (1 - t / 12) for t in (0, 4, 8, 12)]),
        ("inverse", [0.2 * 2000 / (2000 + t) for t in (0, 4, 8, 12)]),
    ],
)
def test_trainer_records_follow_the_schedule(schedule: str, expected: list[float]) -> None:
    data = (torch.rand(20, 7, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    result = train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        data,
        batch_size=5,
        n_updates=12,
        learning_rate=0.2,
        lr_schedule=schedule,
        log_every=4,
        generator=0,
    )
    assert [r.learning_rate for r in result.history] == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_param_groups_hold_momentum_and_weight_decay() -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    optimizer = make_optimizer(model, learning_rate=0.1, momentum=0.9, weight_decay=0.01)
    assert isinstance(optimizer, torch.optim.SGD)
    groups = {group["name"]: group for group in optimizer.param_groups}
    assert groups["weights"]["params"] == [model.weights]
    assert {id(p) for p in groups["biases"]["params"]} == {id(model.visible_bias), id(model.hidden_bias)}
    assert groups["weights"]["weight_decay"] == 0.01 and groups["biases"]["weight_decay"] == 0.0
    assert all(group["momentum"] == 0.9 and group["lr"] == 0.1 for group in optimizer.param_groups)


def test_weight_decay_shrinks_weights_with_zero_gradient() -> None:
    model = bl.RBM(
        weights=torch.randn(7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
        visible_bias=torch.ones(7),
        hidden_bias=-torch.ones(3),
        dtype=torch.float64,
    )
    weights, visible_bias = model.weights.detach().clone(), model.visible_bias.detach().clone()
    optimizer = make_optimizer(model, learning_rate=0.5, weight_decay=0.1)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    torch.testing.assert_close(model.weights.detach(), weights * (1 - 0.5 * 0.1), rtol=1e-15, atol=0)
    assert torch.equal(model.visible_bias.detach(), visible_bias)


def test_momentum_accumulates_as_sgd_defines_it() -> None:
    model = bl.RBM(weights=torch.zeros(7, 3), dtype=torch.float64)
    optimizer = make_optimizer(model, learning_rate=0.1, momentum=0.5)
    for _ in range(3):
        for parameter in model.parameters():
            parameter.grad = torch.ones_like(parameter)
        optimizer.step()
    # buffer: 1, 1.5, 1.75 -> total step 0.1 * (1 + 1.5 + 1.75)
    torch.testing.assert_close(model.weights.detach(), torch.full((7, 3), -0.425, dtype=torch.float64))
