"""Running samplers: ``iterate`` yields every step so callers own the loop; ``sample`` runs one.

A *sampler* turns an operator into a Markov chain over the model's states. The plain sampler
applies the operator at β = 1; tempered samplers (parallel tempering, simulated tempering,
CAST, tempered transitions) register themselves here under their own names and take the
operator as an argument, so every operator works inside every sampler.

``sample(..., sampler="st" | "ast" | "cast")`` first adapts level weights on a ladder placed
from β = 0 to 1, then freezes them and samples (:mod:`boltzlab.tempering.adaptation`); the
CAST paper's adapting-for-ever settings remain those of the schemes' classes, which the
trainers use. Every tempered run carries a verdict (docs/trust.md, "Samplers").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed, progress
from boltzlab import operators as operator_registry
from boltzlab.chains import Chains
from boltzlab.distributed import Shard
from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator, StepInfo
from boltzlab.registry import Registry
from boltzlab.rng import resolve_generator
from boltzlab.tempering import sharding
from boltzlab.tempering.adaptation import ADAPTIVE_SAMPLERS, LevelWeightAdaptation, adapt_then_freeze
from boltzlab.tempering.agreement import (
    N_BATCHES,
    N_GROUPS,
    accumulate_group_means_,
    chain_groups,
    group_agreement,
)
from boltzlab.tempering.registry import get_scheme_factory, register_scheme, schemes
from boltzlab.tempering.sample_results import SampleResult, SchemeInfo
from boltzlab.tempering.verdict import (
    GROUP_AGREEMENT_P_VALUE,
    MAX_HOTTEST_BETA,
    MIN_ROUND_TRIPS,
    sampler_warnings,
)
from boltzlab.validation import as_model_data, check_finite_model, check_positive_int

__all__ = [
    "GROUP_AGREEMENT_P_VALUE",
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
    "wants_adaptation",
]


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
        progress.advance(chains.n_chains)
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
def _sample_plain(
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
    kept = []
    # Written in place rather than appended: a few hundred bytes kept per sweep between the
    # sweep's megabyte temporaries fragmented glibc's heap until a 784×500 RBM's 100 chains took
    # 23 GB after some 20,000 sweeps (0.4 GB at 15,000 with these buffers).
    device = state.layers[0].device
    energies = (
        torch.empty((n_sweeps, state.n_chains), dtype=torch.float64, device=device) if record_energy else None
    )
    flip_rates = torch.empty(n_sweeps, dtype=torch.float64, device=device)
    start = state
    for sweep, (state, info) in enumerate(
        iterate(model, operator, start, generator=generator, n_sweeps=n_sweeps)
    ):
        flip_rates[sweep] = info.flip_rate.mean()
        if energies is not None:
            energies[sweep] = model.energy(state.layers)
        if keep_every and (sweep + 1) % keep_every == 0:
            kept.append(state.layers[0].clone())
    return SampleResult(
        chains=state,
        samples=torch.stack(kept) if kept else None,
        energies=energies if n_sweeps else None,
        info=PlainInfo(
            operator=getattr(operator, "name", type(operator).__name__),
            n_sweeps=n_sweeps,
            burn_in=burn_in,
            flip_rate=flip_rates,
        ),
    )


def make_scheme(name: str, operator: str | Operator = "gibbs", **options: Any) -> Any:
    """The registered tempering scheme ``name`` around ``operator``, built with ``options``.

    For callers that own the loop (``scheme.init`` / ``scheme.step``) instead of collecting a
    :class:`SampleResult`, e.g. to stream statistics without keeping every state. The scheme
    is built as configured: ``st``, ``ast`` and ``cast`` do not adapt first here (use
    :func:`boltzlab.tempering.adaptation.adapt_then_freeze` for the scheme and starting state
    that ``sample`` uses).
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
    adaptation: LevelWeightAdaptation | None = None,
    shard: Shard | None = None,
) -> SampleResult:
    """Run a tempering scheme for ``burn_in + n_sweeps`` steps and collect its β = 1 chains.

    Step infos of the ``n_sweeps`` recorded steps go to ``scheme.summarize`` when it exists;
    the β = 1 chains' visible means go, per group of chains and batch of sweeps, to the
    verdict's group check (:mod:`boltzlab.tempering.agreement`). ``adaptation`` is only
    passed through to the result's info. With a ``shard`` this process runs its blocks of
    the ``n_chains`` systems with ``shard.generator`` (``state``, when given, holds only
    them) and everything but ``info.final_state`` is gathered from every process
    (:mod:`boltzlab.tempering.sharding`).
    """
    if shard is not None:
        generator = shard.generator  # type: ignore[assignment]  # a BlockGenerator draws like one
    if state is None:
        state = scheme.init(model, n_chains if shard is None else shard.rows, generator=generator)
    for _ in range(burn_in):
        state, _ = scheme.step(model, state, generator=generator)
    kept, energies, infos = [], [], []
    sums, groups, sizes = None, None, None
    for sweep in range(n_sweeps):
        state, info = scheme.step(model, state, generator=generator)
        infos.append(info)
        target = scheme.samples(state)
        # All systems, over every process (a state given without a shard sets its own number).
        n_total = target.n_chains if shard is None else shard.n_items
        if sweep == 0 and n_total >= 2 * N_GROUPS and n_sweeps >= 2 * N_BATCHES:
            groups = chain_groups(n_total, device=target.device)
            sizes = torch.bincount(groups, minlength=N_GROUPS)
            groups = groups if shard is None else groups[shard.start : shard.stop]
            width = target.layers[0].shape[1]
            sums = torch.zeros(N_BATCHES, N_GROUPS, width, dtype=torch.float64, device=target.device)
        if sums is not None:
            accumulate_group_means_(
                sums, sweep * N_BATCHES // n_sweeps, target.layers[0], groups, sizes=sizes
            )
        if record_energy:
            energies.append(model.energy(target.layers))
        if keep_every and (sweep + 1) % keep_every == 0:
            kept.append(target.layers[0].clone())
    summarize = getattr(scheme, "summarize", None)
    final = scheme.samples(state)
    samples = torch.stack(kept) if kept else None
    energy = torch.stack(energies) if energies else None
    summary_state = state
    if shard is not None:
        infos = sharding.gather_step_infos(infos, shard, model.device)
        summary_state = sharding.summary_state(state)
        final = distributed.gather_chains(final)
        samples = None if samples is None else distributed.gather_rows(samples, dim=1)
        energy = None if energy is None else distributed.gather_rows(energy, dim=1)
        sums = None if sums is None else distributed.sum_in_rank_order(sums, what="pooling the group means")
    summary = summarize(infos, summary_state) if summarize is not None else tuple(infos)
    agreement = None
    if sums is not None:
        per_batch = torch.bincount(torch.arange(n_sweeps) * N_BATCHES // n_sweeps, minlength=N_BATCHES)
        agreement = group_agreement(sums / per_batch.to(sums)[:, None, None])
    reasons = sampler_warnings(summary, getattr(scheme, "ladder", None), agreement)
    return SampleResult(
        chains=final,
        samples=samples,
        energies=energy,
        info=SchemeInfo(
            scheme=getattr(scheme, "name", type(scheme).__name__),
            operator=getattr(getattr(scheme, "operator", None), "name", "?"),
            n_sweeps=n_sweeps,
            burn_in=burn_in,
            summary=summary,
            final_state=state,
            adaptation=adaptation,
            groups=agreement,
        ),
        reliable=not reasons,
        warnings=reasons,
    )


_RUN_OPTIONS = ("burn_in", "keep_every", "record_energy")
# Options that configure a scheme that adapts for ever (or fixes its weights): given to
# st / ast / cast, they switch the default adapt-then-freeze off.
_FOREVER_OPTIONS = ("log_weights", "gamma", "gamma_decay", "shared_weights")


def wants_adaptation(name: str, options: dict[str, Any]) -> bool:
    """Whether ``sample(sampler=name, **options)`` adapts, then freezes (pops ``adapt``).

    By default ``st``, ``ast`` and ``cast`` adapt unless the caller gave the level weights or
    the adapting-for-ever schedule (``log_weights``, ``gamma``, ``gamma_decay``,
    ``shared_weights``): then the scheme runs exactly as configured, as the trainers run it.
    """
    adapt = options.pop("adapt", None)
    if adapt is None:
        return name in ADAPTIVE_SAMPLERS and not any(key in options for key in _FOREVER_OPTIONS)
    if not isinstance(adapt, bool):
        raise ValidationError(f"adapt must be True or False, got {adapt!r}")
    if adapt and name not in ADAPTIVE_SAMPLERS:
        raise ValidationError(f"adapt=True is for the samplers {', '.join(ADAPTIVE_SAMPLERS)}, not {name!r}")
    forever = [key for key in _FOREVER_OPTIONS[1:] if key in options]
    if adapt and forever:
        raise ValidationError(
            f"{', '.join(forever)} configure adapting for ever; with adapt=True the weights are "
            "learnt, then frozen (pass adapt=False to run the scheme as configured)"
        )
    return adapt


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
        blocks = options.pop("blocks", None)
        adapting = wants_adaptation(name, options)
        if blocks is not None and not sharding.shardable(name, adapting):
            raise ValidationError(
                f"blocks= shards {', '.join(sharding.SHARDED_SCHEMES)} (ast and cast with their weights "
                f"adapted, then frozen); the {name!r} run as configured runs whole on every process"
            )
        if adapting:
            try:
                start = adapt_then_freeze(
                    name, operator, model, n_chains, generator=generator, blocks=blocks, **options
                )
            except TypeError as error:
                raise ValidationError(f"bad options for sampler {name!r}: {error}") from None
            return run_scheme(
                model,
                start.scheme,
                n_chains=n_chains,
                n_sweeps=n_sweeps,
                generator=generator,
                state=start.state,
                adaptation=start.adaptation,
                shard=start.shard,
                **run_options,
            )
        try:
            scheme = get_scheme_factory(name)(operator, **options)
        except TypeError as error:
            raise ValidationError(f"bad options for sampler {name!r}: {error}") from None
        part = None
        if sharding.shardable(name, adapting):
            part = distributed.shard_if_requested(n_chains, generator, blocks=blocks, device=model.device)
        return run_scheme(
            model,
            scheme,
            n_chains=n_chains,
            n_sweeps=n_sweeps,
            generator=generator,
            shard=part,
            **run_options,
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
        Sampler options, e.g. ``burn_in``, ``keep_every``, ``record_energy``, and the scheme's
        own. For ``"st"``, ``"ast"`` and ``"cast"``: ``adapt`` (default: on unless
        ``log_weights`` or the ``gamma`` schedule is given; :func:`wants_adaptation`) first
        learns level weights on a ladder placed from ``low`` (0) to 1 — ``ladder``,
        ``n_levels``, ``level_spacing``, ``adapt_sweeps`` shape it — then samples with them
        frozen; ``result.info.adaptation`` says what that cost. ``blocks`` cuts the chains
        (for PT, ST, AST and CAST: the systems) into blocks with their own random streams; in
        a ``torch.distributed`` process group they always are, and each process runs whole
        blocks (docs/architecture.md, "Scaling out"; :mod:`boltzlab.tempering.sharding`).
        Tempered transitions, trajectory tempering, and AST or CAST adapting for ever run
        whole on every process of a group.

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
    check_finite_model(model, "sample")
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
    blocks = options.pop("blocks", None)
    if blocks is not None and sampler != "plain":
        raise ValidationError(
            f"blocks= applies to the plain sampler and the tempering schemes, not {sampler!r}"
        )
    chains = initial_chains(model, n_chains, init=init, generator=generator)
    if sampler == "plain" and (blocks is not None or distributed.topology().active):
        return _sample_plain_sharded(model, op, chains, n_sweeps, generator, blocks, options)
    return _SAMPLERS.get(sampler)(
        model, operator=op, chains=chains, n_sweeps=n_sweeps, generator=generator, **options
    )


def _sample_plain_sharded(
    model: TemperedModel,
    operator: Operator,
    chains: Chains,
    n_sweeps: int,
    generator: torch.Generator,
    blocks: int | None,
    options: dict[str, Any],
) -> SampleResult:
    """The plain sampler with the chains cut into blocks, each with its own random stream; in a
    process group each process runs whole blocks and the results are gathered in chain order
    (docs/architecture.md, "Scaling out"). The starting states are drawn alike on every process."""
    local, part = distributed.shard_chains(chains, generator, n_blocks=blocks)
    result = _sample_plain(
        model, operator=operator, chains=local, n_sweeps=n_sweeps, generator=part.generator, **options
    )  # type: ignore[arg-type]  # the block generator is accepted wherever rng draws
    gathered = distributed.gather_chains(result.chains)
    samples, energies = result.samples, result.energies
    flip_rate = result.info.flip_rate * (part.rows / chains.n_chains)
    return SampleResult(
        chains=gathered,
        samples=None if samples is None else distributed.gather_rows(samples, dim=1),
        energies=None if energies is None else distributed.gather_rows(energies, dim=1),
        info=dataclasses.replace(result.info, flip_rate=distributed.sum_in_rank_order(flip_rate)),
    )
