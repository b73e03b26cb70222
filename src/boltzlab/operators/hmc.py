"""Hamiltonian Monte Carlo for tempered continuous families, one trajectory per chain at its own β.

Duane, Kennedy, Pendleton & Roweth (1987), "Hybrid Monte Carlo", Phys. Lett. B 195; the
form here follows Neal (2011), "MCMC using Hamiltonian dynamics", Handbook of MCMC, ch. 5:
the potential is ``U(x) = −log f_β(x)`` (eq. 5.13 with the tempered density of
docs/algorithms.md §1.3), the kinetic energy ``K(p) = ½ Σ_i p_i²/m_i`` (eq. 5.5), one step is

1. draw fresh momenta ``p ~ N(0, diag(m))`` (eq. 5.23),
2. run ``L`` leapfrog steps of size ``ε`` (eqs. 5.18–5.20), with the gradient of the
   tempered log density at the chain's own β,
3. accept the end point with probability ``min(1, exp(H(x, p) − H(x', p')))`` (eq. 5.22),
   ``H = U + K`` evaluated in float64, otherwise keep ``x``.

Leapfrog is volume-preserving and, followed by a momentum flip, an involution, so step 3 is
a Metropolis step that leaves every ``p_β`` invariant exactly, up to floating-point rounding
of the trajectory: float64 chains return to their start within about 1e-14; float32 chains
integrate in float32 (the accept is still float64) and are reversible only to about 1e-6. The momentum flip need not be
applied because the momenta are discarded. The kernel satisfies detailed balance, so its time
reversal is itself: ``reverse=True`` (tempered transitions) runs the same kernel.

Every chain in a batch runs at its own β (``chains.beta``), so tempering schemes sweep all
their temperatures in one call. With ``adapt=True`` the step size of a chain at β is
``step_size · ℓ(β)/ℓ(1)``, where ``ℓ`` is the model's ``length_scale(beta)``; it depends
on β only, never on the state, so each chain's kernel is still a fixed HMC kernel for its
``p_β`` and exactness is kept.

Models supply ``log_f(layers, beta)`` and, for speed, ``log_f_gradient(layers, beta)``
(a closed-form gradient per layer); without the latter the gradient is taken by autograd
through ``log_f``. The state may consist of several real-valued layers; they move together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.base import StepInfo, register
from boltzlab.rng import rand, randn
from boltzlab.validation import check_chains_match, check_positive_int

__all__ = ["HMCInfo", "HMCOperator", "PhasePoint", "leapfrog"]


@dataclass(frozen=True, slots=True)
class HMCInfo(StepInfo):
    """Per-step HMC diagnostics (never carried forward).

    Attributes
    ----------
    previous, current : Chains
        The chains before and after the step (as for every operator; ``flip_rate`` is the
        fraction of coordinates that moved, i.e. 1 for accepted chains and 0 otherwise).
    accepted : Tensor, shape (n_chains,), bool
        Whether each chain's proposal was accepted.
    log_acceptance_ratio : Tensor, shape (n_chains,), float64
        ``H(x, p) − H(x', p')``: the energy error of the trajectory with its sign flipped
        (0 for an exact integrator; ``−inf`` or NaN for a diverged one, always rejected).
    step_size : Tensor, shape (n_chains,), float64
        The leapfrog step each chain used (differs between chains only with ``adapt=True``).
    """

    accepted: Tensor
    log_acceptance_ratio: Tensor
    step_size: Tensor

    @property
    def acceptance_probability(self) -> Tensor:
        """``min(1, exp(log_acceptance_ratio))`` per chain, float64; NaN ratios give 0."""
        ratio = torch.nan_to_num(self.log_acceptance_ratio, nan=-math.inf)
        return ratio.clamp(max=0.0).exp()

    @property
    def acceptance_rate(self) -> float:
        """Mean acceptance probability over the chains (a lower-variance rate than ``accepted``)."""
        return float(self.acceptance_probability.mean())


@dataclass(frozen=True, slots=True)
class PhasePoint:
    """A point of phase space and the gradient of the potential's negative there.

    Attributes
    ----------
    position : Tensor, shape (n_chains, n_units)
        All layers concatenated along axis 1, in the chains' dtype.
    momentum : Tensor, shape (n_chains, n_units)
        In the chains' dtype.
    gradient : Tensor, shape (n_chains, n_units)
        ``∇_x log f_β(position)``, in the chains' dtype.
    """

    position: Tensor
    momentum: Tensor
    gradient: Tensor


def _split_layers(position: Tensor, sizes: tuple[int, ...]) -> tuple[Tensor, ...]:
    return (position,) if len(sizes) == 1 else tuple(torch.split(position, list(sizes), dim=1))


def _join_layers(layers: tuple[Tensor, ...]) -> Tensor:
    return layers[0] if len(layers) == 1 else torch.cat(layers, dim=1)


def gradient_log_f(model: TemperedModel, position: Tensor, beta: Tensor) -> Tensor:
    """``∇_x log f_β(x)`` at ``position`` (layers concatenated), in ``position``'s dtype.

    Uses the model's closed-form ``log_f_gradient`` when it has one, autograd through
    ``log_f`` otherwise. ``beta`` has shape ``(n_chains,)``. Shape ``(n_chains, n_units)``.
    """
    sizes = tuple(model.layer_sizes)
    closed_form = getattr(model, "log_f_gradient", None)
    if closed_form is not None:
        gradients = closed_form(_split_layers(position, sizes), beta)
    else:
        with torch.enable_grad():
            leaves = tuple(layer.detach().requires_grad_(True) for layer in _split_layers(position, sizes))
            value = model.log_f(leaves, beta).sum()
            gradients = torch.autograd.grad(value, leaves)
    return _join_layers(tuple(gradients)).to(position.dtype)


def leapfrog(
    model: TemperedModel,
    point: PhasePoint,
    beta: Tensor,
    *,
    step_size: Tensor | float,
    n_steps: int,
    mass: Tensor | float = 1.0,
) -> PhasePoint:
    """``n_steps`` leapfrog steps of Hamilton's equations for ``H = −log f_β(x) + ½ pᵀM⁻¹p``.

    Neal (2011), eqs. 5.18–5.20, with the half momentum steps of consecutive steps merged.
    Volume-preserving and reversible: from the end point with negated momentum, the same
    call returns to ``point`` with negated momentum (up to rounding).

    Parameters
    ----------
    model : TemperedModel
        Supplies ``log_f_gradient`` (or ``log_f`` for autograd).
    point : PhasePoint
        Start; its ``gradient`` must be ``∇ log f_β(point.position)``. Not modified.
    beta : Tensor, shape (n_chains,)
        Inverse temperature of each chain.
    step_size : float or Tensor of shape (n_chains,)
        ``ε``, per chain or shared.
    n_steps : int
        ``L ≥ 1``.
    mass : float or Tensor of shape (n_units,), default 1.0
        Diagonal of the mass matrix ``M``.

    Returns
    -------
    PhasePoint
        The end point, with the gradient there.
    """
    dtype, device = point.position.dtype, point.position.device
    epsilon = torch.as_tensor(step_size, dtype=dtype, device=device)
    if epsilon.dim() == 1:
        epsilon = epsilon[:, None]
    drift = epsilon / torch.as_tensor(mass, dtype=dtype, device=device)  # ε M⁻¹
    position, momentum, gradient = point.position, point.momentum, point.gradient
    # Out-of-place updates keep the map differentiable (a test takes its Jacobian); fused
    # multiply-adds keep the op count, which dominates at small sizes, low.
    momentum = torch.addcmul(momentum, epsilon, gradient, value=0.5)
    for step in range(n_steps):
        position = torch.addcmul(position, drift, momentum)
        gradient = gradient_log_f(model, position, beta)
        momentum = torch.addcmul(momentum, epsilon, gradient, value=0.5 if step == n_steps - 1 else 1.0)
    return PhasePoint(position=position, momentum=momentum, gradient=gradient)


def _check_mass(mass: Tensor | float) -> Tensor | float:
    if isinstance(mass, Tensor):
        mass = mass.detach().clone()
        if mass.dim() > 1 or not bool(torch.isfinite(mass).all()) or not bool((mass > 0).all()):
            raise ValidationError(
                f"mass must be a positive number or a 1-D tensor of positive masses, got shape "
                f"{tuple(mass.shape)}"
            )
        return mass
    try:
        number = float(mass)
    except (TypeError, ValueError):
        raise ValidationError(f"mass must be a positive number or a 1-D tensor, got {mass!r}") from None
    if not (math.isfinite(number) and number > 0.0):
        raise ValidationError(f"mass must be a positive number, got {mass!r}")
    return number


@register("hmc")
class HMCOperator:
    """Hamiltonian Monte Carlo at each chain's own β (module docstring); registered ``"hmc"``.

    For models with real-valued layers and nothing summed out (``update_groups[0] == ()``),
    such as :class:`~boltzlab.models.toy.GaussianMixtureFamily`.

    Parameters
    ----------
    step_size : float, default 0.25
        Leapfrog step ``ε`` (at β = 1 when ``adapt=True``). The defaults suit unit-scale
        targets (components of standard deviation about 1 in about 10 dimensions: acceptance
        near 0.95 on the default :class:`~boltzlab.models.toy.GaussianMixtureFamily`).
    n_leapfrog : int, default 8
        Leapfrog steps ``L`` per trajectory.
    mass : float or Tensor of shape (n_units,), default 1.0
        Diagonal mass matrix; momenta are drawn from ``N(0, diag(mass))``.
    adapt : bool, default False
        Scale each chain's step with the model's ``length_scale(β)`` relative to β = 1
        (requires the model to define it). A function of β only, so exactness is kept.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.models.GaussianMixtureFamily()
    >>> g = bl.rng.make_generator(0)
    >>> chains = model.sample_exact(13, beta=1.0, generator=g)
    >>> chains, info = bl.operators.get("hmc", step_size=0.3).step(model, chains, generator=g)
    >>> tuple(info.accepted.shape)
    (13,)
    """

    name = "hmc"

    def __init__(
        self, step_size: float = 0.25, n_leapfrog: int = 8, *, mass: Tensor | float = 1.0, adapt: bool = False
    ) -> None:
        try:
            step = float(step_size)
        except (TypeError, ValueError):
            raise ValidationError(f"step_size must be a positive number, got {step_size!r}") from None
        if not (math.isfinite(step) and step > 0.0):
            raise ValidationError(f"step_size must be a positive number, got {step_size!r}")
        self.step_size = step
        self.n_leapfrog = check_positive_int(n_leapfrog, "n_leapfrog")
        self.mass = _check_mass(mass)
        if not isinstance(adapt, bool):
            raise ValidationError(f"adapt must be True or False, got {adapt!r}")
        self.adapt = adapt

    def __repr__(self) -> str:
        mass = self.mass if isinstance(self.mass, float) else f"tensor{tuple(self.mass.shape)}"
        return (
            f"HMCOperator(step_size={self.step_size}, n_leapfrog={self.n_leapfrog}, mass={mass}, "
            f"adapt={self.adapt})"
        )

    def step_sizes(self, model: TemperedModel, beta: Tensor) -> Tensor:
        """The leapfrog step of each chain, float64, shape ``(n_chains,)``."""
        beta64 = beta.to(torch.float64)
        if not self.adapt:
            return torch.full_like(beta64, self.step_size)
        length_scale = getattr(model, "length_scale", None)
        if length_scale is None:
            raise ValidationError(
                f"adapt=True needs a model with length_scale(beta); {type(model).__name__} has none"
            )
        ones = torch.ones(1, dtype=torch.float64, device=beta.device)
        relative = length_scale(beta64).to(beta.device) / length_scale(ones).to(beta.device)
        return self.step_size * relative

    def step(
        self,
        model: TemperedModel,
        chains: Chains,
        *,
        generator: torch.Generator,
        terms: MarginalTerms | None = None,
        reverse: bool = False,
    ) -> tuple[Chains, HMCInfo]:
        """One HMC trajectory per chain at its own β, with a Metropolis accept in float64.

        Parameters
        ----------
        model : TemperedModel
            A continuous model: every layer real-valued, ``update_groups[0] == ()``.
        chains : Chains
            Current states; not modified.
        generator : torch.Generator
            Momenta are drawn first (``randn``, the chains' dtype), then one float64 uniform
            per chain for the accept.
        terms : MarginalTerms, optional
            Accepted for the operator protocol and not needed: nothing is summed out.
        reverse : bool, default False
            The kernel is reversible, so the reversed sweep is the same kernel.

        Returns
        -------
        (Chains, HMCInfo)
        """
        del terms, reverse  # see the docstring: neither changes the kernel
        check_chains_match(model, chains)  # else float32 chains of a float64 model stay float32
        if model.update_groups and model.update_groups[0]:
            raise ValidationError(
                f"the hmc operator needs a continuous model with nothing summed out; "
                f"{type(model).__name__} sums out layers {model.update_groups[0]} (use 'gibbs' or 'flip')"
            )
        beta = chains.beta
        position = _join_layers(chains.layers)
        dtype, device = position.dtype, position.device
        mass = torch.as_tensor(self.mass, dtype=dtype, device=device)
        if mass.numel() not in (1, position.shape[1]):
            raise ValidationError(
                f"mass has {mass.numel()} entries but the model's state has {position.shape[1]} coordinates"
            )
        step_size = self.step_sizes(model, beta)

        momentum = randn(tuple(position.shape), generator=generator, dtype=dtype, device=device) * mass.sqrt()
        start = PhasePoint(
            position=position, momentum=momentum, gradient=gradient_log_f(model, position, beta)
        )
        end = leapfrog(
            model, start, beta, step_size=step_size.to(dtype), n_steps=self.n_leapfrog, mass=self.mass
        )

        sizes = tuple(model.layer_sizes)
        mass64 = mass.to(torch.float64)
        kinetic_start = 0.5 * (momentum.to(torch.float64).square() / mass64).sum(1)
        kinetic_end = 0.5 * (end.momentum.to(torch.float64).square() / mass64).sum(1)
        log_ratio = (
            model.log_f(_split_layers(end.position, sizes), beta)
            - kinetic_end
            - model.log_f(chains.layers, beta)
            + kinetic_start
        )
        uniform = rand(tuple(log_ratio.shape), generator=generator, dtype=torch.float64, device=device)
        # NaN (a diverged trajectory) compares False: rejected, never propagated.
        accepted = torch.log(uniform) < log_ratio
        new_position = torch.where(accepted[:, None], end.position, position)
        new_chains = Chains(layers=_split_layers(new_position, sizes), beta=beta)
        info = HMCInfo(
            previous=chains,
            current=new_chains,
            accepted=accepted,
            log_acceptance_ratio=log_ratio,
            step_size=step_size,
        )
        return new_chains, info
