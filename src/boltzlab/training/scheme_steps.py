"""A tempering scheme run inside a negative phase: its steps, their diagnostic rates, its checkpoint.

Shared by the scheme-driven phases of :mod:`boltzlab.training.tempered` (PT, CAST, Trans-SAP)
and the adaptive-ST phase of :mod:`boltzlab.training.adaptive_tempering`. Each algorithm turns
a scheme step's ``info`` into a few rates (swap or move acceptance), kept as exponential moving
averages of numerator and denominator over about ``metrics_horizon`` steps on the device — no
synchronisation per update — and part of the checkpointed state, so a resumed run logs the
same numbers. The scheme's own checkpoint tensors sit beside the phase's under
:data:`_SCHEME_PREFIX`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = ["PT_METRICS", "ST_METRICS", "TT_METRICS", "MetricFunction", "MovingRates", "pt_metrics"]

MetricFunction = Callable[[Any], tuple[Tensor, Tensor]]
"""``info -> (numerators, denominators)``: float64 tensors of shape ``(n_metrics,)``."""

_SCHEME_PREFIX = "scheme."
_NUMERATORS = "metrics.numerators"
_DENOMINATORS = "metrics.denominators"


def _float64(values: Sequence[Tensor | float], device: torch.device) -> Tensor:
    return torch.stack([torch.as_tensor(value, dtype=torch.float64, device=device) for value in values])


def pt_metrics(info: Any) -> tuple[Tensor, Tensor]:
    """PT: ``swap_acceptance`` (accepted / proposed exchanges) and ``round_trips_per_step``
    (completed bottom → top → bottom trips per system and step)."""
    n_chains = info.swap_accepted.shape[1]
    device = info.swap_accepted.device
    numerators = _float64([info.swap_accepted.sum(), info.round_trips.sum()], device)
    denominators = _float64([info.swap_attempted.sum() * n_chains, float(n_chains)], device)
    return numerators, denominators


def tt_metrics(info: Any) -> tuple[Tensor, Tensor]:
    """Tempered transitions: ``move_acceptance`` (fraction of moves accepted) and
    ``move_acceptance_probability`` (mean ``min(1, A)``, the same expectation with less noise)."""
    n_chains = info.accepted.shape[0]
    device = info.accepted.device
    numerators = _float64([info.accepted.sum(), info.log_acceptance.clamp_max(0.0).exp().sum()], device)
    return numerators, torch.full((2,), float(n_chains), dtype=torch.float64, device=device)


def st_metrics(info: Any) -> tuple[Tensor, Tensor]:
    """Adaptive ST: ``level_acceptance`` (accepted level moves) and ``bottom_occupancy``
    (fraction of chain-steps at the hottest level; 0 when the chains never get there)."""
    n_chains = info.accepted.shape[0]
    device = info.accepted.device
    numerators = _float64([info.accepted.sum(), (info.levels == 0).sum()], device)
    return numerators, torch.full((2,), float(n_chains), dtype=torch.float64, device=device)


def cast_metrics(info: Any) -> tuple[Tensor, Tensor]:
    """CAST: :func:`st_metrics` of the fast chains."""
    return st_metrics(info.fast)


PT_METRICS = ("swap_acceptance", "round_trips_per_step")
TT_METRICS = ("move_acceptance", "move_acceptance_probability")
ST_METRICS = ("level_acceptance", "bottom_occupancy")


class MovingRates:
    """Exponentially weighted rates of scheme-step diagnostics (module docstring)."""

    def __init__(self, names: Sequence[str], function: MetricFunction | None, horizon: float) -> None:
        if bool(names) != (function is not None):
            raise ValidationError("give metric_names and metric_function together")
        if isinstance(horizon, bool) or not isinstance(horizon, (int, float)):
            raise ValidationError(f"metrics_horizon must be a number >= 1, got {horizon!r}")
        if not 1.0 <= float(horizon) < float("inf"):
            raise ValidationError(f"metrics_horizon must be a finite number >= 1, got {horizon!r}")
        self.names = tuple(names)
        self.function = function
        self.horizon = float(horizon)
        self.keep = 1.0 - 1.0 / self.horizon

    def zeros(self, device: torch.device) -> tuple[Tensor, Tensor]:
        zeros = torch.zeros(len(self.names), dtype=torch.float64, device=device)
        return zeros, zeros.clone()

    def add(self, numerators: Tensor, denominators: Tensor, info: Any) -> tuple[Tensor, Tensor]:
        """The sums after one more step (new tensors; no host synchronisation)."""
        if self.function is None:
            return numerators, denominators
        step_numerators, step_denominators = self.function(info)
        return numerators * self.keep + step_numerators, denominators * self.keep + step_denominators

    def values(self, numerators: Tensor, denominators: Tensor) -> dict[str, float]:
        """The rates; a metric with nothing measured yet is left out."""
        pairs = zip(self.names, numerators.tolist(), denominators.tolist(), strict=True)
        return {name: numerator / denominator for name, numerator, denominator in pairs if denominator > 0}

    def to_tensors(self, numerators: Tensor, denominators: Tensor) -> dict[str, Tensor]:
        return {_NUMERATORS: numerators, _DENOMINATORS: denominators}

    def from_tensors(self, tensors: dict[str, Tensor], device: torch.device) -> tuple[Tensor, Tensor]:
        n_metrics = len(self.names)
        zeros = torch.zeros(n_metrics, dtype=torch.float64)
        numerators = tensors.get(_NUMERATORS, zeros)
        denominators = tensors.get(_DENOMINATORS, zeros)
        if numerators.shape != (n_metrics,) or denominators.shape != (n_metrics,):
            raise ValidationError(
                f"the checkpoint's metrics have shape {tuple(numerators.shape)}, expected ({n_metrics},)"
            )
        return (
            numerators.to(device=device, dtype=torch.float64),
            denominators.to(device=device, dtype=torch.float64),
        )


def scheme_tensors(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """The scheme's own checkpoint tensors among a phase's (:func:`with_scheme_prefix` reversed)."""
    return {
        name.removeprefix(_SCHEME_PREFIX): value
        for name, value in tensors.items()
        if name.startswith(_SCHEME_PREFIX)
    }


def with_scheme_prefix(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """A scheme's ``state_tensors`` renamed ``scheme.<name>``, to sit beside a phase's own tensors."""
    return {_SCHEME_PREFIX + name: value for name, value in tensors.items()}


def advance_scheme(
    scheme: Any,
    model: Any,
    scheme_state: Any,
    n_steps: int,
    *,
    rates: MovingRates,
    numerators: Tensor,
    denominators: Tensor,
    generator: torch.Generator,
) -> tuple[Any, Tensor, Tensor]:
    """``n_steps`` steps of a tempering scheme, each folded into the moving diagnostic rates.

    Parameters
    ----------
    scheme : TemperingScheme
        Stepped under the model's current parameters.
    model : TemperedModel
    scheme_state : Any
        The scheme's state; not modified.
    n_steps : int
        Scheme steps (one sweep of every chain plus the scheme's moves each).
    rates : MovingRates
        Turns each step's ``info`` into rates.
    numerators, denominators : Tensor, shape (n_metrics,), float64
        The moving sums before the first step.
    generator : torch.Generator

    Returns
    -------
    scheme_state : Any
    numerators, denominators : Tensor, shape (n_metrics,), float64
        The moving sums after the last step.
    """
    for _ in range(n_steps):
        scheme_state, info = scheme.step(model, scheme_state, generator=generator)
        numerators, denominators = rates.add(numerators, denominators, info)
    return scheme_state, numerators, denominators
