"""The optimiser and learning-rate schedules of the trainer: plain ``torch.optim``.

Parameters move by ``torch.optim.SGD`` (momentum, weight decay) on the gradient of the
negative average log-likelihood; the learning rate follows a ``LambdaLR`` factor ``f(t)``, so
update ``t`` (counted from 0) uses ``learning_rate · f(t)``:

* ``"constant"``: ``f(t) = 1``;
* ``"linear"``: ``f(t) = max(0, 1 − t/T)``, decaying to 0 at the end of a ``T``-update run;
* ``"inverse"``: ``f(t) = c/(c + t)``. With ``learning_rate = 0.005`` and ``c = 2000`` this is
  the ``lr_t = 10/(2000 + t)`` of Salakhutdinov (2010, CAST; docs/algorithms.md §3.1), which meets
  the Robbins–Monro conditions ``Σ lr_t = ∞``, ``Σ lr_t² < ∞`` of stochastic approximation
  (Younes 1988; Tieleman 2008).

Weight decay is applied to the weight matrices only (parameters with two or more dimensions),
not to the biases, as is usual for RBMs (Hinton 2010, *A practical guide to training RBMs*,
§10): decaying a bias pulls a unit's base rate towards ½ and buys no regularisation.

``optimizer="rmsspectral"`` steps with :class:`~boltzlab.training.rmsspectral.RMSspectral`
(preconditioned spectral descent; Carlson et al. 2015, as in the RTS paper's tracking runs)
instead of SGD; it has no momentum and no weight decay, and the schedules apply to it alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from boltzlab.errors import ValidationError
from boltzlab.training.rmsspectral import RMSspectral

__all__ = [
    "ConstantSchedule",
    "InverseSchedule",
    "LinearSchedule",
    "Schedule",
    "make_optimizer",
    "make_schedule",
    "make_scheduler",
]

Schedule = Callable[[int], float]
"""A learning-rate factor: ``f(t)`` multiplies the base learning rate at update ``t`` (from 0)."""


# Not slots: LambdaLR.state_dict() copies ``fn.__dict__`` of callable objects.
@dataclass(frozen=True)
class ConstantSchedule:
    """``f(t) = 1``."""

    def __call__(self, update: int) -> float:
        return 1.0


@dataclass(frozen=True)
class LinearSchedule:
    """``f(t) = max(0, 1 − t/n_updates)``: the rate reaches 0 after ``n_updates`` updates."""

    n_updates: int

    def __post_init__(self) -> None:
        if isinstance(self.n_updates, bool) or not isinstance(self.n_updates, int) or self.n_updates < 1:
            raise ValidationError(f"LinearSchedule needs n_updates >= 1, got {self.n_updates!r}")

    def __call__(self, update: int) -> float:
        return max(0.0, 1.0 - update / self.n_updates)


@dataclass(frozen=True)
class InverseSchedule:
    """``f(t) = offset/(offset + t)``; with learning rate 0.005 and offset 2000, ``10/(2000 + t)``."""

    offset: float = 2000.0

    def __post_init__(self) -> None:
        if not (isinstance(self.offset, (int, float)) and math.isfinite(self.offset) and self.offset > 0):
            raise ValidationError(f"InverseSchedule needs a finite offset > 0, got {self.offset!r}")

    def __call__(self, update: int) -> float:
        return self.offset / (self.offset + update)


_NAMES = ("constant", "linear", "inverse")


def schedule_record(schedule: Schedule) -> dict[str, Any]:
    """A learning-rate schedule by name and parameters, for files people read:
    ``{"lr_schedule": "linear", "lr_schedule_params": {"n_updates": 4200}}`` rather than its
    ``repr``; a function of the caller's by its qualified name, without parameters."""
    names = {ConstantSchedule: "constant", LinearSchedule: "linear", InverseSchedule: "inverse"}
    name = names.get(type(schedule))
    if name is None:
        label = getattr(schedule, "__qualname__", None) or type(schedule).__name__
        return {"lr_schedule": str(label), "lr_schedule_params": {}}
    params = {key: value for key, value in vars(schedule).items() if not key.startswith("_")}
    return {"lr_schedule": name, "lr_schedule_params": params}


def make_schedule(schedule: str | Schedule, *, n_updates: int) -> Schedule:
    """The learning-rate factor named by ``schedule``, or ``schedule`` itself if callable.

    Parameters
    ----------
    schedule : {"constant", "linear", "inverse"} or callable
        A callable maps the update index ``t`` (from 0) to a factor of the base rate.
    n_updates : int
        Length of the run; the end point of ``"linear"``.
    """
    if callable(schedule):
        return schedule
    if not isinstance(schedule, str) or schedule.lower() not in _NAMES:
        raise ValidationError(
            f"lr_schedule must be one of {', '.join(repr(n) for n in _NAMES)} or a callable "
            f"update -> factor, got {schedule!r}"
        )
    name = schedule.lower()
    if name == "constant":
        return ConstantSchedule()
    if name == "linear":
        return LinearSchedule(int(n_updates))
    return InverseSchedule()


def _schedule_description(schedule: str | Schedule) -> str:
    """A stable text form of a schedule for configs and checkpoints (its name or its repr)."""
    return schedule.lower() if isinstance(schedule, str) else repr(schedule)


_OPTIMIZERS = ("sgd", "rmsspectral")
# Hyperparameters only one of the two optimisers has: they tell which one a saved state is from.
_OWN_KEYS = {"sgd": ("dampening", "nesterov"), "rmsspectral": ("alpha", "eps")}


def check_optimizer(name: str, *, momentum: float, weight_decay: float) -> str:
    """The optimiser's name, lower-cased; :class:`ValidationError` for an unknown name, or for
    momentum or weight decay with RMSspectral (it has neither)."""
    if not isinstance(name, str) or name.lower() not in _OPTIMIZERS:
        raise ValidationError(f"optimizer must be one of {', '.join(map(repr, _OPTIMIZERS))}, got {name!r}")
    if name.lower() == "rmsspectral" and (momentum != 0.0 or weight_decay != 0.0):
        raise ValidationError(
            f"optimizer='rmsspectral' takes no momentum or weight decay, got momentum={momentum!r}, "
            f"weight_decay={weight_decay!r}; set both to 0"
        )
    return name.lower()


def make_optimizer(
    model: nn.Module,
    *,
    learning_rate: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    optimizer: str = "sgd",
) -> torch.optim.Optimizer:
    """``torch.optim.SGD`` (or RMSspectral) over ``model``'s parameters.

    Parameters
    ----------
    model : nn.Module
    learning_rate : float > 0
        Base learning rate (the schedule multiplies it); RMSspectral's step size η.
    momentum : float in [0, 1)
        SGD only; must be 0 for RMSspectral.
    weight_decay : float >= 0
        L2 coefficient λ: SGD adds ``λ·W`` to the gradient of every weight matrix. Must be 0
        for RMSspectral.
    optimizer : {"sgd", "rmsspectral"}, default "sgd"

    Returns
    -------
    torch.optim.Optimizer
        Param group ``"weights"`` holds the weight matrices (with ``weight_decay``), group
        ``"biases"`` the rest (no decay); the groups carry their name under the key ``"name"``.
        RMSspectral takes spectral steps on the matrices and RMSprop steps on the biases, with
        its defaults ``alpha = 0.99`` (the paper's λ) and ``eps = 1e-8``.
    """
    name = check_optimizer(optimizer, momentum=momentum, weight_decay=weight_decay)
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": params, "weight_decay": decay, "name": group_name}
        for group_name, params, decay in (("weights", decayed, float(weight_decay)), ("biases", plain, 0.0))
        if params
    ]
    if name == "rmsspectral":
        return RMSspectral(groups, lr=float(learning_rate))
    return torch.optim.SGD(groups, lr=float(learning_rate), momentum=float(momentum))


def check_optimizer_state(param_groups: list[dict[str, Any]], name: str, *, source: str) -> None:
    """Refuse saved optimiser ``param_groups`` that come from the other optimiser.

    ``load_state_dict`` takes the saved hyperparameters as they come, so an SGD checkpoint
    loaded into RMSspectral (or the reverse) would fail only at the next step, obscurely.
    """
    if not param_groups or all(key in param_groups[0] for key in _OWN_KEYS[name]):
        return
    other = next(
        (other for other, keys in _OWN_KEYS.items() if all(key in param_groups[0] for key in keys)), "another"
    )
    raise ValidationError(
        f"cannot resume from {source}: it was trained with optimizer={other!r}, this run asks for {name!r}"
    )


def make_scheduler(optimizer: torch.optim.Optimizer, schedule: Schedule) -> torch.optim.lr_scheduler.LambdaLR:
    """``LambdaLR(optimizer, schedule)``: after ``t`` calls of ``step()``, lr = base·schedule(t)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
