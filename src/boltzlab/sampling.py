"""Running samplers: ``iterate`` yields every step so callers own the loop; ``sample`` runs one.

A *sampler* turns an operator into a Markov chain over the model's states. The plain sampler
applies the operator at β = 1; tempered samplers (parallel tempering, simulated tempering,
CAST, tempered transitions) register themselves here under their own names and take the
operator as an argument, so every operator works inside every sampler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators as operator_registry
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator, StepInfo
from boltzlab.rng import resolve_generator
from boltzlab.validation import as_binary_tensor, check_positive_int

__all__ = [
    "SampleResult",
    "iterate",
    "register_sampler",
    "sample",
    "samplers",
]


@dataclass(frozen=True)
class SampleResult:
    """What a sampling run returns.

    Attributes
    ----------
    chains : Chains
        Final states of the target (β = 1) chains.
    samples : Tensor or None, shape (n_kept, n_chains, n_visible)
        Visible states kept every ``keep_every`` sweeps after burn-in (``None`` if none kept).
    energies : Tensor or None, shape (n_sweeps, n_chains), float64
        Joint energy ``E(x)`` of every chain after every sweep, when recorded.
    info : Any
        Sampler-specific diagnostics (a dataclass); for ``"plain"`` a :class:`PlainInfo`.
    """

    chains: Chains
    samples: Tensor | None
    energies: Tensor | None
    info: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class PlainInfo:
    """Diagnostics of the plain sampler: operator name, sweeps, mean flip rate per sweep."""

    operator: str
    n_sweeps: int
    burn_in: int
    flip_rate: Tensor  # (n_sweeps,), mean fraction of units changed per sweep


def iterate(
    model: TemperedModel,
    operator: Operator,
    chains: Chains,
    *,
    generator: torch.Generator,
    n_sweeps: int | None = None,
) -> Iterator[tuple[Chains, StepInfo]]:
    """Yield ``(chains, info)`` after every sweep; forever when ``n_sweeps`` is ``None``."""
    sweep = 0
    while n_sweeps is None or sweep < n_sweeps:
        chains, info = operator.step(model, chains, generator=generator)
        sweep += 1
        yield chains, info


SamplerFunction = Callable[..., SampleResult]
_SAMPLERS: dict[str, SamplerFunction] = {}


def register_sampler(name: str) -> Callable[[SamplerFunction], SamplerFunction]:
    """Function decorator: make a sampler reachable as ``sample(model, sampler=name)``."""

    def decorate(function: SamplerFunction) -> SamplerFunction:
        _SAMPLERS[name] = function
        return function

    return decorate


def samplers() -> tuple[str, ...]:
    """Names accepted by :func:`sample`."""
    return tuple(sorted(_SAMPLERS))


def initial_chains(
    model: TemperedModel,
    n_chains: int,
    *,
    init: str | Tensor | Chains,
    generator: torch.Generator,
    beta: float = 1.0,
) -> Chains:
    """Starting states: ``"base"`` (exact base samples), data rows (``Tensor``), or ``Chains``."""
    if isinstance(init, Chains):
        if init.n_chains != n_chains:
            raise ValidationError(f"init has {init.n_chains} chains but n_chains={n_chains}")
        return init.with_beta(beta)
    if isinstance(init, str):
        if init != "base":
            raise ValidationError(f"init must be 'base', a data tensor or Chains, got {init!r}")
        return model.init_chains(n_chains, generator=generator).with_beta(beta)
    data = as_binary_tensor(
        init, "init", n_units=model.layer_sizes[0], dtype=model.dtype, device=model.device
    )
    rows = torch.randint(0, data.shape[0], (n_chains,), generator=generator, device=model.device)
    base = model.init_chains(n_chains, generator=generator)
    return Chains(layers=(data[rows], *base.layers[1:]), beta=base.beta).with_beta(beta)


@register_sampler("plain")
def sample_plain(
    model: TemperedModel,
    *,
    operator: Operator,
    chains: Chains,
    n_sweeps: int,
    generator: torch.Generator,
    burn_in: int = 0,
    keep_every: int = 0,
    record_energy: bool = False,
) -> SampleResult:
    """The operator applied at β = 1, ``burn_in + n_sweeps`` times."""
    state = chains
    for state, _ in iterate(model, operator, chains, generator=generator, n_sweeps=burn_in):  # noqa: B007
        pass
    kept, energies, flip_rates = [], [], []
    start = state
    for sweep, (state, info) in enumerate(
        iterate(model, operator, start, generator=generator, n_sweeps=n_sweeps)
    ):
        flip_rates.append(info.flip_rate.mean())
        if record_energy:
            energies.append(model.energy(state.layers))
        if keep_every and (sweep + 1) % keep_every == 0:
            kept.append(state.layers[0].clone())
    return SampleResult(
        chains=state,
        samples=torch.stack(kept) if kept else None,
        energies=torch.stack(energies) if energies else None,
        info=PlainInfo(
            operator=getattr(operator, "name", type(operator).__name__),
            n_sweeps=n_sweeps,
            burn_in=burn_in,
            flip_rate=torch.stack(flip_rates) if flip_rates else torch.empty(0, dtype=torch.float64),
        ),
    )


def sample(
    model: TemperedModel,
    *,
    sampler: str = "plain",
    operator: str | Operator = "gibbs",
    n_chains: int = 100,
    n_sweeps: int = 1000,
    generator: torch.Generator | int | None = None,
    init: str | Tensor | Chains = "base",
    operator_params: dict[str, Any] | None = None,
    **options: Any,
) -> SampleResult:
    """Draw samples from ``model`` with any sampler and any operator.

    Parameters
    ----------
    model : TemperedModel
    sampler : str, default "plain"
        One of :func:`samplers`.
    operator : str or Operator, default "gibbs"
        ``"gibbs"``, ``"flip"``, ``"mixture"`` or an operator object.
    n_chains : int, default 100
    n_sweeps : int, default 1000
        Sweeps after burn-in.
    generator : torch.Generator or int, optional
    init : "base", Tensor of shape (n, n_visible), or Chains
        Where the chains start: exact samples of the base model, random rows of data, or
        given states.
    operator_params : dict, optional
        Passed to ``operators.get`` (e.g. ``{"alpha": 0.5}`` for the mixture).
    **options
        Sampler options, e.g. ``burn_in``, ``keep_every``, ``record_energy``.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.sample(model, operator="flip", n_chains=13, n_sweeps=20, generator=0, keep_every=10)
    >>> tuple(result.samples.shape)
    (2, 13, 7)
    """
    key = sampler.lower()
    if key not in _SAMPLERS:
        raise ValidationError(f"unknown sampler {sampler!r}; choose one of {', '.join(samplers())}")
    n_chains = check_positive_int(n_chains, "n_chains")
    n_sweeps = check_positive_int(n_sweeps, "n_sweeps")
    generator = resolve_generator(generator, model.device)
    op = operator_registry.get(operator, **(operator_params or {}))
    chains = initial_chains(model, n_chains, init=init, generator=generator)
    return _SAMPLERS[key](
        model, operator=op, chains=chains, n_sweeps=n_sweeps, generator=generator, **options
    )
