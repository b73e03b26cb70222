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
from boltzlab.registry import Registry
from boltzlab.rng import resolve_generator
from boltzlab.tempering.registry import get_scheme_factory, register_scheme, schemes
from boltzlab.validation import as_model_data, check_positive_int

__all__ = [
    "MAX_HOTTEST_BETA",
    "MIN_ROUND_TRIPS",
    "SampleResult",
    "SchemeInfo",
    "iterate",
    "make_scheme",
    "register_sampler",
    "register_scheme",
    "run_scheme",
    "sample",
    "sampler_warnings",
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
    reliable : bool
        The verdict of a tempered sampler (docs/trust.md): ``False`` when its chains did not
        travel the ladder, so its β = 1 samples keep the mode proportions of their starts.
        The plain sampler has no such diagnostic and is always ``True``.
    warnings : tuple of str
        The reasons, each naming the diagnostic, its value and the threshold.
    """

    chains: Chains
    samples: Tensor | None
    energies: Tensor | None
    info: Any = field(default=None, repr=False)
    reliable: bool = True
    warnings: tuple[str, ...] = ()


#: Round trips per chain between the two ends of a ladder below which a tempered sampler's
#: β = 1 samples are not trusted: a chain that never went down to the hot end and back has
#: not crossed the barriers the ladder is there to cross.
MIN_ROUND_TRIPS = 1.0


#: A ladder whose hottest level is above this β does not reach temperatures where the modes of
#: a trained model mix (the CAST paper's 0.9–1 ladder is made for learning, not for sampling).
MAX_HOTTEST_BETA = 0.5


def sampler_warnings(summary: Any, ladder: Any = None) -> tuple[str, ...]:
    """Reasons not to trust a tempered run: its ladder's reach and its chains' round trips."""
    reasons: list[str] = []
    betas = getattr(ladder, "betas", ladder)
    if isinstance(betas, Tensor) and betas.numel() > 1:
        hottest = float(betas.min())
        if hottest > MAX_HOTTEST_BETA:
            reasons.append(
                f"the ladder's hottest level is β = {hottest:.3g}, above {MAX_HOTTEST_BETA:g}: chains "
                "never reach temperatures where separated modes mix (pass a ladder that reaches β = 0)"
            )
    return tuple(reasons) + _round_trip_warnings(getattr(summary, "fast", summary))


def _round_trip_warnings(summary: Any) -> tuple[str, ...]:
    trips = getattr(summary, "round_trips", None)
    occupancy = getattr(summary, "occupancy", None)
    n_levels = int(occupancy.numel()) if isinstance(occupancy, Tensor) else None
    if not isinstance(trips, Tensor) or trips.numel() == 0 or n_levels == 1:
        return ()
    mean = float(trips.to(torch.float64).mean())
    if mean < MIN_ROUND_TRIPS:
        return (
            f"chains made {mean:.2f} round trips each between the ends of the ladder, below "
            f"{MIN_ROUND_TRIPS:g}: the β = 1 samples may keep the mode proportions of their starting "
            "states (run longer, use a ladder that reaches β = 0, or adapt the level weights first)",
        )
    return ()


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
_SAMPLERS: Registry[SamplerFunction] = Registry("sampler")


def register_sampler(name: str) -> Callable[[SamplerFunction], SamplerFunction]:
    """Function decorator: make a sampler reachable as ``sample(model, sampler=name)``."""
    return _SAMPLERS.register(name)


def samplers() -> tuple[str, ...]:
    """Names accepted by :func:`sample`: the plain sampler and every registered tempering scheme."""
    return tuple(sorted({*_SAMPLERS.names(), *schemes()}))


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
    data = as_model_data(model, init, "init")
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


@dataclass(frozen=True)
class SchemeInfo:
    """Diagnostics of a tempering-scheme run (``sample(..., sampler="pt" | "st" | ...)``).

    Attributes
    ----------
    scheme : str
    operator : str
    n_sweeps, burn_in : int
    summary : Any
        ``scheme.summarize(step_infos, final_state)`` — e.g. swap acceptance per pair,
        level occupancy, per-chain temperature trajectories — or the tuple of per-step infos
        when the scheme has no ``summarize``.
    final_state : Any
        The scheme's last state (for inspection or to continue the run).
    """

    scheme: str
    operator: str
    n_sweeps: int
    burn_in: int
    summary: Any
    final_state: Any = field(repr=False)


def make_scheme(name: str, operator: str | Operator = "gibbs", **options: Any) -> Any:
    """The registered tempering scheme ``name`` around ``operator``, built with ``options``.

    For callers that own the loop (``scheme.init`` / ``scheme.step``) instead of collecting a
    :class:`SampleResult`, e.g. to stream statistics without keeping every state.
    """
    factory = get_scheme_factory(name)
    try:
        return factory(operator_registry.get(operator), **options)
    except TypeError as error:
        raise ValidationError(f"bad options for tempering scheme {name!r}: {error}") from None


def run_scheme(
    model: TemperedModel,
    scheme: Any,
    *,
    n_chains: int,
    n_sweeps: int,
    generator: torch.Generator,
    burn_in: int = 0,
    keep_every: int = 0,
    record_energy: bool = False,
    state: Any = None,
) -> SampleResult:
    """Run a tempering scheme for ``burn_in + n_sweeps`` steps and collect its β = 1 chains.

    Step infos of the ``n_sweeps`` recorded steps go to ``scheme.summarize`` when it exists.
    """
    state = scheme.init(model, n_chains, generator=generator) if state is None else state
    for _ in range(burn_in):
        state, _ = scheme.step(model, state, generator=generator)
    kept, energies, infos = [], [], []
    for sweep in range(n_sweeps):
        state, info = scheme.step(model, state, generator=generator)
        infos.append(info)
        target = scheme.samples(state)
        if record_energy:
            energies.append(model.energy(target.layers))
        if keep_every and (sweep + 1) % keep_every == 0:
            kept.append(target.layers[0].clone())
    summarize = getattr(scheme, "summarize", None)
    summary = summarize(infos, state) if summarize is not None else tuple(infos)
    reasons = sampler_warnings(summary, getattr(scheme, "ladder", None))
    return SampleResult(
        chains=scheme.samples(state),
        samples=torch.stack(kept) if kept else None,
        energies=torch.stack(energies) if energies else None,
        info=SchemeInfo(
            scheme=getattr(scheme, "name", type(scheme).__name__),
            operator=getattr(getattr(scheme, "operator", None), "name", "?"),
            n_sweeps=n_sweeps,
            burn_in=burn_in,
            summary=summary,
            final_state=state,
        ),
        reliable=not reasons,
        warnings=reasons,
    )


_RUN_OPTIONS = ("burn_in", "keep_every", "record_energy")


def _scheme_sampler(name: str) -> SamplerFunction:
    def sample_with_scheme(
        model: TemperedModel,
        *,
        operator: Operator,
        chains: Chains | None,
        n_sweeps: int,
        generator: torch.Generator,
        n_chains: int,
        **options: Any,
    ) -> SampleResult:
        run_options = {key: options.pop(key) for key in _RUN_OPTIONS if key in options}
        try:
            scheme = get_scheme_factory(name)(operator, **options)
        except TypeError as error:
            raise ValidationError(f"bad options for sampler {name!r}: {error}") from None
        return run_scheme(
            model, scheme, n_chains=n_chains, n_sweeps=n_sweeps, generator=generator, **run_options
        )

    return sample_with_scheme


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
    if sampler not in samplers():
        raise ValidationError(f"unknown sampler {sampler!r}; known: {', '.join(samplers())}")
    n_chains = check_positive_int(n_chains, "n_chains")
    n_sweeps = check_positive_int(n_sweeps, "n_sweeps")
    generator = resolve_generator(generator, model.device)
    op = operator_registry.get(operator, **(operator_params or {}))
    if sampler in schemes():
        if not (isinstance(init, str) and init == "base"):
            raise ValidationError(
                f"sampler {sampler!r} starts its own chains from the base; init= is for 'plain'"
            )
        return _scheme_sampler(sampler)(
            model,
            operator=op,
            chains=None,
            n_sweeps=n_sweeps,
            generator=generator,
            n_chains=n_chains,
            **options,
        )
    chains = initial_chains(model, n_chains, init=init, generator=generator)
    return _SAMPLERS.get(sampler)(
        model, operator=op, chains=chains, n_sweeps=n_sweeps, generator=generator, **options
    )
