"""Exact answers for the Gaussian-mixture family: ``log Z(β)`` by quadrature, exact draws of ``t``.

With the notation of :mod:`boltzlab.models.toy` (components ``w_c N(a_c u, σ² I)``, base
``N(0, s² I)``, ``λ_β = β/σ² + (1 − β)/s²``) and ``x = t·u + y``, ``y ⊥ u``:

    log Z(β) = β log Z − β (d/2) log 2πσ² − (1 − β)(d/2) log 2πs²
               + ((d − 1)/2) log(2π/λ_β) + log ∫ exp(β G(t) − (1 − β) t²/(2s²)) dt,

    G(t) = log Σ_c w_c exp(−(t − a_c)²/(2σ²)).

**Quadrature.** The remaining integrand decays like a Gaussian and is analytic in a strip
around the real axis (its singularities are the complex zeros of the mixture sum; for two
components they lie ``πσ²/|a_2 − a_1|`` from the axis, and the widest gap bounds them in
general), so the trapezoid rule on a grid much finer than the strip converges geometrically
(Trefethen & Weideman 2014, "The exponentially convergent trapezoidal rule", SIAM Review 56):
the result is exact to float64 rounding (agreement with adaptive quadrature to 1e-15 in the
tests).

**Exact draws of t at any β** come from rejection sampling: for ``0 ≤ β ≤ 1``,
``(Σ_c q_c)^β ≤ Σ_c q_c^β`` (the power is subadditive), and each ``q_c^β`` times the base
factor is a Gaussian bump in ``t`` (:func:`_tempered_bumps`), so the bumps' mixture is an
envelope with acceptance probability at least ``1/C`` (exactly 1 at β = 1, where the
envelope is the mixture).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = ["Bumps", "MixtureParameters", "exact_log_z"]

# Quadrature: the grid reaches this many standard deviations of the widest tempered bump past
# the outermost bump centres (the integrand there is below e^{-98} of its peak) ...
_TAIL_STANDARD_DEVIATIONS = 14.0
# ... with a spacing of at most 1/8 of a bump's standard deviation (trapezoid error
# ~ exp(−2π²·8²) for a Gaussian) and 1/16 of the analyticity strip's half-width πσ²/spread
# (error ~ exp(−2π·16)); both are far below float64 rounding.
_POINTS_PER_STANDARD_DEVIATION = 8.0
_POINTS_PER_STRIP = 16.0
_MAX_QUADRATURE_POINTS = 1 << 24


@dataclass(frozen=True, slots=True)
class MixtureParameters:
    """The family's parameters in float64 and the per-component constants derived from them.

    Attributes
    ----------
    direction : Tensor, shape (d,)
        ``u``, unit norm.
    positions : Tensor, shape (C,)
        ``a_c``.
    log_weights : Tensor, shape (C,)
        ``log w_c``, normalised.
    offsets : Tensor, shape (C,)
        ``log w_c − a_c²/(2σ²)``.
    slopes : Tensor, shape (C,)
        ``a_c/σ²``.
    component_std : float
        ``σ``.
    base_std : float
        ``s``.
    """

    direction: Tensor
    positions: Tensor
    log_weights: Tensor
    # log w_c − (t − a_c)²/(2σ²) = offsets_c + t·slopes_c − t²/(2σ²): the last term is shared
    # by all components, so responsibilities need one fused multiply-add per state.
    offsets: Tensor
    slopes: Tensor
    component_std: float
    base_std: float

    def precision(self, beta: Tensor | float) -> Tensor | float:
        """``λ_β = β/σ² + (1 − β)/s²``, the precision of ``p_β`` across the line; ``beta``'s shape."""
        return beta / self.component_std**2 + (1.0 - beta) / self.base_std**2

    def shifted_log_terms(self, t: Tensor) -> Tensor:
        """``log w_c − (t − a_c)²/(2σ²) + t²/(2σ²)`` (the ``t²`` term, common to all ``c``, dropped).

        ``t`` float64 of shape ``(n,)``; returns float64 of shape ``(n, C)``.
        """
        return torch.addmm(self.offsets, t[:, None], self.slopes[None, :])

    def log_t_integrand(self, t: Tensor, beta: float) -> Tensor:
        """``β G(t) − (1 − β) t²/(2s²)`` at float64 ``t`` of shape ``(n,)``; float64, ``(n,)``."""
        component_terms = self.shifted_log_terms(t) - (t.square() * (0.5 / self.component_std**2))[:, None]
        log_mixture = torch.logsumexp(component_terms, 1)
        return beta * log_mixture - (1.0 - beta) * t.square() / (2.0 * self.base_std**2)


@dataclass(frozen=True, slots=True)
class Bumps:
    """The envelope bumps of the ``t``-integrand at one β.

    ``w_c^β exp(−β(t − a_c)²/(2σ²) − (1 − β)t²/(2s²))`` is a Gaussian in ``t`` with
    precision ``λ``, centre ``m_c = β a_c/(σ² λ)`` and total mass ``exp(log_mass_c)``.

    Attributes
    ----------
    centres : Tensor, shape (C,), float64
    log_masses : Tensor, shape (C,), float64
    precision : float
    """

    centres: Tensor
    log_masses: Tensor
    precision: float


def _tempered_bumps(parameters: MixtureParameters, beta: float) -> Bumps:
    """The :class:`Bumps` of the ``t``-integrand at ``beta`` in [0, 1]."""
    variance = parameters.component_std**2
    precision = float(parameters.precision(beta))
    positions = parameters.positions
    centres = beta * positions / (variance * precision)
    log_masses = (
        beta * parameters.log_weights
        + 0.5 * precision * centres.square()
        - beta * positions.square() / (2.0 * variance)
        + 0.5 * math.log(2.0 * math.pi / precision)
    )
    return Bumps(centres=centres, log_masses=log_masses, precision=precision)


def _quadrature_grid(parameters: MixtureParameters, beta: float) -> tuple[Tensor, float]:
    """Equispaced ``t`` nodes (float64, on the parameters' device) and their spacing."""
    bumps = _tempered_bumps(parameters, beta)
    standard_deviation = bumps.precision**-0.5
    spacing = standard_deviation / _POINTS_PER_STANDARD_DEVIATION
    positions = parameters.positions
    spread = float(positions.max() - positions.min())
    if spread > 0.0:
        strip = math.pi * parameters.component_std**2 / spread
        spacing = min(spacing, strip / _POINTS_PER_STRIP)
    low = float(bumps.centres.min()) - _TAIL_STANDARD_DEVIATIONS * standard_deviation
    high = float(bumps.centres.max()) + _TAIL_STANDARD_DEVIATIONS * standard_deviation
    n_points = math.ceil((high - low) / spacing) + 1
    if n_points > _MAX_QUADRATURE_POINTS:
        raise ValidationError(
            f"the components are too far apart for exact log Z(beta) by quadrature "
            f"({n_points} nodes needed); reduce max(positions) - min(positions) relative to component_std"
        )
    nodes = torch.linspace(low, high, n_points, dtype=torch.float64, device=positions.device)
    return nodes, (high - low) / (n_points - 1)


def exact_log_z(parameters: MixtureParameters, beta: float, *, log_z: float) -> float:
    """``log Z(β)`` in nats (module docstring) for ``0 < beta < 1``; ``log_z`` is ``log Z(1)``.

    Trapezoid quadrature of the one-dimensional factor, exact to float64 rounding. The ends
    have closed forms (0 and ``log_z``) that the caller gives directly.
    """
    nodes, spacing = _quadrature_grid(parameters, beta)
    log_t_integral = float(torch.logsumexp(parameters.log_t_integrand(nodes, beta), 0)) + math.log(spacing)
    d = parameters.direction.shape[0]
    precision = float(parameters.precision(beta))
    return (
        beta * log_z
        - beta * 0.5 * d * math.log(2.0 * math.pi * parameters.component_std**2)
        - (1.0 - beta) * 0.5 * d * math.log(2.0 * math.pi * parameters.base_std**2)
        + 0.5 * (d - 1) * math.log(2.0 * math.pi / precision)
        + log_t_integral
    )


def sample_line_coordinates(
    parameters: MixtureParameters, n_samples: int, beta: float, *, generator: torch.Generator
) -> Tensor:
    """``n_samples`` exact draws of ``t = x·u`` under ``p_β``; float64, shape ``(n_samples,)``.

    By rejection from the bumps' mixture (module docstring); ``generator`` is on the
    parameters' device.
    """
    device = parameters.positions.device
    bumps = _tempered_bumps(parameters, beta)
    centres, log_masses, precision = bumps.centres, bumps.log_masses, bumps.precision
    probabilities = torch.softmax(log_masses, 0)
    n_components = parameters.positions.shape[0]
    accepted: list[Tensor] = []
    n_accepted = 0
    while n_accepted < n_samples:
        # The acceptance probability is at least 1/C, so C·remaining draws (plus a few)
        # usually finish in one round.
        n_draws = n_components * (n_samples - n_accepted) + 8
        components = torch.multinomial(probabilities, n_draws, replacement=True, generator=generator)
        noise = torch.randn(n_draws, generator=generator, dtype=torch.float64, device=device)
        t = centres[components] + noise * precision**-0.5
        log_envelope = torch.logsumexp(
            log_masses[None, :]
            - 0.5 * precision * (t[:, None] - centres[None, :]).square()
            - 0.5 * math.log(2.0 * math.pi / precision),
            1,
        )
        log_accept = parameters.log_t_integrand(t, beta) - log_envelope
        # At β = 1 the envelope is the target (log_accept = 0 up to rounding): all accepted.
        uniform = torch.rand(n_draws, generator=generator, dtype=torch.float64, device=device)
        keep = t[torch.log(uniform) < log_accept]
        accepted.append(keep)
        n_accepted += keep.numel()
    return torch.cat(accepted)[:n_samples]
