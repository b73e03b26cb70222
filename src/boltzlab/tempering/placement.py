"""Where a simulated-tempering ladder's levels go, measured by a short pilot annealing run.

docs/algorithms.md §2.3 ("Where the levels go"). A chain moves between neighbouring levels
``β_k < β_{k+1}`` easily when their densities overlap; to first order the overlap is set by
``Δβ²·g(β)`` with ``g(β) = Var_{p_β}[s_β]``, the variance of the hidden-summed path derivative
``s_β = ∂ log f_β/∂β`` (for an RBM with a uniform base, the energy variance). Levels at equal
steps of the thermodynamic length ``Λ(β) = ∫ √g dβ`` give every pair of neighbours the same
overlap: dense where the energy variance peaks (near a phase transition), sparse where nothing
happens. With weights equal to ``log Z_k`` a level move between neighbours ``Δ = Δβ·√g`` apart
is accepted with probability about ``erfc(Δ/(2√2))``; the default spacing ``Δ = 1`` gives
about 0.6 (the estimators' ladder, ``boltzlab.estimators.tempered.ladders``, follows the same
rule at a fixed number of levels).

**The pilot** (:func:`pilot_anneal`) is a short annealed-importance-sampling run from the base
(β = 0, sampled exactly) to β = 1 on a fine linear grid. At no extra cost it measures, at
every grid point, ``ĝ(β)`` from the importance-weighted chains and the running AIS estimate
of ``log Z(β)``, from which the level weights start (a few nats off at worst, where zeros
would be hundreds of nats off on a trained model). Both are rough where the weights
degenerate; the adaptation that follows (:mod:`boltzlab.tempering.adaptation`) corrects the
weights, and ``√ĝ`` is smoothed and floored so no step of the ladder is more than
``1/FLOOR`` times the smallest. The run itself, :func:`anneal_and_measure`, is the one every
pilot uses: this one, the estimators' ladder (``boltzlab.estimators.tempered.ladders``, with
AIS's accurate increments) and VAROPT's measurement of ``g``
(``boltzlab.estimators.annealing.adaptive_schedules``), which differ only in what they measure.

On the bimodal 10×4 RBM of ``tests/test_sampler_verdict.py`` (95% / 5% mode masses), ``Λ(1)``
is 3.9 by enumeration, so the default ladder has five or six levels; ST with exact weights and
Gibbs level moves made 29 round trips per chain in 1,000 sweeps on six such levels, 15 on
twenty (docs/algorithms.md §2.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import distributed, progress
from boltzlab.distributed import Shard
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel, log_f_marginal, path_derivative
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.rng import resolve_generator
from boltzlab.tempering.base import redraw_summed_layers
from boltzlab.tempering.ladders import Ladder
from boltzlab.validation import check_positive_int

__all__ = [
    "FLOOR",
    "MAX_LEVELS",
    "MIN_LEVELS",
    "LadderPilot",
    "PilotMeasure",
    "PlacedLadder",
    "WeightIncrement",
    "anneal_and_measure",
    "pilot_anneal",
    "pilot_log_weights",
    "pilot_shard",
    "place_ladder",
    "smoothed_speed",
]

#: Thermodynamic length between neighbouring levels, ``Δβ·√g`` (about 60% level acceptance).
LEVEL_SPACING = 1.0
#: Fewest and most levels of a placed ladder (a caller's ``n_levels`` overrides both).
MIN_LEVELS, MAX_LEVELS = 4, 256
#: Relative floor on the smoothed ``√ĝ``: where the pilot saw no variance the chains must still move.
FLOOR = 0.05
#: Standard deviation, in β, of the Gaussian kernel that smooths ``√ĝ`` on the pilot's grid.
_SMOOTHING = 0.02

#: ``increment(log_weights, terms, β_from, β_to)``: the log-weights after one annealing step,
#: a new tensor or ``log_weights`` updated in place; float64, shape ``(n_chains,)``.
WeightIncrement = Callable[[Tensor, MarginalTerms, float, float], Tensor]


@dataclass(frozen=True)
class PilotMeasure:
    """What a pilot records at one grid point, in two parts.

    ``features(terms, β)``: per-chain values from the chains' summed-out terms and β (a 0-d
    float64 tensor on the model's device); float64, shape ``(n_chains, c)``.
    ``combine(weights, log_weights, features)``: the row recorded, from the normalised and log
    importance weights (both ``(n_chains,)``) and the features of every chain; float64,
    shape ``(m,)``, same device. The split lets chains sharded over processes be measured
    together: each process keeps its chains' features and weights, and the rows are combined
    once they are gathered (:func:`anneal_and_measure`).
    """

    features: Callable[[MarginalTerms, Tensor], Tensor]
    combine: Callable[[Tensor, Tensor, Tensor], Tensor]


@dataclass(frozen=True)
class LadderPilot:
    """What the pilot annealing run measured on its linear grid.

    Attributes
    ----------
    grid : Tensor, shape (n + 1,), float64
        ``0, 1/n, …, 1`` (:func:`_pilot_grid`).
    log_z : Tensor, shape (n + 1,), float64
        Running AIS estimate of ``log Z(β) − log Z(0)`` (log mean of the partial weights), nats.
    g_hat : Tensor, shape (n + 1,), float64
        Importance-weighted variance of the path derivative, ``ĝ(β)`` (nats²).
    log_ess : Tensor, shape (n + 1,), float64
        Log of Kish's effective sample size of the weights at each grid point.
    n_chains : int
    cost_sweeps : int
        Chain-sweeps spent.
    """

    grid: Tensor
    log_z: Tensor
    g_hat: Tensor
    log_ess: Tensor
    n_chains: int
    cost_sweeps: int


@dataclass(frozen=True)
class PlacedLadder:
    """A ladder at equal thermodynamic length and the level weights to start from.

    Attributes
    ----------
    ladder : Ladder
    initial_log_weights : Tensor, shape (K,), float64
        The pilot's ``log Z(β_k)`` interpolated at the levels, relative to the target level.
    thermodynamic_length : float
        ``Λ(1) − Λ(β_0)`` of the smoothed, floored ``ĝ``.
    pilot : LadderPilot
    """

    ladder: Ladder
    initial_log_weights: Tensor
    thermodynamic_length: float
    pilot: LadderPilot


def _log_f_difference(log_weights: Tensor, terms: MarginalTerms, beta_from: float, beta_to: float) -> Tensor:
    """``log_weights + log f_{β_to}(x) − log f_{β_from}(x)`` from two summed-out densities; a new tensor.

    The samplers' pilot increment (float64, shape ``(n,)``). The estimators pass AIS's
    :func:`~boltzlab.estimators.annealing.increments.add_log_f_increment_` instead, which forms the
    increment from its parts and so avoids the cancellation of two large ``log f``.
    """
    return log_weights + log_f_marginal(terms, beta_to) - log_f_marginal(terms, beta_from)


def anneal_and_measure(
    model: TemperedModel,
    operator: Operator,
    grid: Tensor,
    measure: PilotMeasure | Callable[[Tensor, Tensor, MarginalTerms, Tensor], Tensor],
    *,
    n_chains: int,
    generator: torch.Generator,
    increment: WeightIncrement = _log_f_difference,
    redraw: bool = True,
    shard: Shard | None = None,
) -> Tensor:
    """Anneal ``n_chains`` chains from the base along ``grid``, calling ``measure`` at every point.

    Annealed importance sampling (docs/algorithms.md §4.1): at grid point ``k`` the weights
    take the increment from ``β_{k−1}`` to ``β_k`` and the weighted chains represent
    ``p_{β_k}``, which is what ``measure`` sees; then (below the last point) the chains move
    to ``β_k`` and take one sweep. Nothing is read back to the host inside the loop.

    Parameters
    ----------
    model : TemperedModel
    operator : Operator
        The transition run at each interior grid point (one sweep each).
    grid : Tensor, shape (n + 1,), float64
        Ascending βs from exactly 0 to exactly 1.
    measure : PilotMeasure or callable
        What to record at each grid point (a row of ``m`` values); a plain function
        ``measure(weights, log_weights, terms, β)`` is accepted too when the chains are not
        sharded.
    n_chains : int
    generator : torch.Generator
    increment : WeightIncrement, default :func:`_log_f_difference`
        How the log-weights step from one β to the next.
    redraw : bool, default True
        Redraw the summed-out layers at each new β before the sweep
        (:func:`~boltzlab.tempering.base.redraw_summed_layers`): needed by operators whose
        update reads the current state, so that AIS stays exact; a Gibbs sweep draws them
        afresh anyway, and AIS skips the redraw there to save the random numbers.
    shard : Shard, optional
        This process's blocks of the ``n_chains`` (``generator`` is then ``shard.generator``):
        each process anneals its chains with ``shard.generator`` (``generator`` is then not
        used) and keeps their features and log-weights at every grid point, and the rows are
        combined from all of them, gathered once at the end (a collective; the same rows on
        any number of processes).

    Returns
    -------
    Tensor, shape (n + 1, m), float64, on the CPU
        Row ``k`` is ``measure`` at ``grid[k]``. The run costs ``n_chains·(n − 1)`` sweeps.
    """
    n_temperatures = grid.numel() - 1
    values = grid.tolist()
    # β as device tensors sliced from one copy: a Python float turned into a tensor on an
    # accelerator would be a blocking host-to-device copy per grid point.
    betas_model = grid.to(device=model.device, dtype=model.dtype)
    betas64 = grid.to(model.device)
    plain = None if isinstance(measure, PilotMeasure) else measure
    if plain is not None and shard is not None:
        raise ValidationError(
            "a sharded pilot needs a PilotMeasure (per-chain features, then combine), not a function"
        )
    n_local = n_chains
    if shard is not None:
        # The shard's block streams, never the caller's generator: with that, every process
        # would draw the same numbers for different chains.
        n_local, generator = shard.rows, shard.generator  # type: ignore[assignment]
    chains = model.init_chains(n_local, generator=generator)
    log_weights = torch.zeros(n_local, dtype=torch.float64, device=model.device)
    rows, kept_weights, kept_features = [], [], []
    for k in range(n_temperatures + 1):
        terms = model.marginal_terms(chains.layers)
        if k > 0:
            log_weights = increment(log_weights, terms, values[k - 1], values[k])
        if plain is not None:
            rows.append(plain(torch.softmax(log_weights, 0), log_weights, terms, betas64[k]))
        elif shard is None:
            features = measure.features(terms, betas64[k])
            rows.append(measure.combine(torch.softmax(log_weights, 0), log_weights, features))
        else:
            features = measure.features(terms, betas64[k])
            kept_weights.append(log_weights.clone())  # the increment may update in place
            kept_features.append(features)
        if 0 < k < n_temperatures:
            chains = chains.with_beta(betas_model[k])
            if redraw:
                chains = redraw_summed_layers(model, chains, terms, generator=generator)
            chains, _ = operator.step(model, chains, generator=generator, terms=terms)
            progress.advance(chains.n_chains)
    if shard is not None:
        all_weights = distributed.gather_rows(torch.stack(kept_weights), dim=1, what="gathering the pilot")
        all_features = distributed.gather_rows(torch.stack(kept_features), dim=1, what="gathering the pilot")
        rows = [
            measure.combine(torch.softmax(weights, 0), weights, features)
            for weights, features in zip(all_weights, all_features, strict=True)
        ]
    return torch.stack(rows).cpu()


def _pilot_grid(n_temperatures: int) -> Tensor:
    """The ladder pilots' linear grid ``0, 1/n, …, 1``, ending at exactly 1; float64, shape ``(n + 1,)``."""
    grid = torch.linspace(0.0, 1.0, n_temperatures + 1, dtype=torch.float64)
    grid[-1] = 1.0
    return grid


def pilot_anneal(
    model: TemperedModel,
    operator: Operator,
    *,
    n_chains: int = 64,
    n_temperatures: int = 256,
    generator: torch.Generator | int | None = None,
    increment: WeightIncrement = _log_f_difference,
    redraw: bool = True,
    blocks: int | None = None,
) -> LadderPilot:
    """A short AIS run on the linear grid measuring ``ĝ(β)`` and ``log Z(β)`` at every point.

    Parameters
    ----------
    model : TemperedModel
    operator : Operator
        The transition run at each grid point (one sweep). By default the summed-out layers
        are redrawn at the new β before it, so state-dependent operators keep AIS exact.
    n_chains : int, default 64
    n_temperatures : int, default 256
        Grid intervals ``n``; costs ``n_chains·(n − 1)`` sweeps.
    generator : torch.Generator or int, optional
    increment, redraw
        As in :func:`anneal_and_measure` (the estimators' ladder passes AIS's).
    blocks : int, optional
        Cut the chains into this many blocks with their own random streams; in a
        ``torch.distributed`` process group they always are, and each process anneals whole
        blocks (:func:`pilot_shard`).

    Returns
    -------
    LadderPilot
    """
    n_chains = check_positive_int(n_chains, "pilot_chains")
    n_temperatures = check_positive_int(n_temperatures, "pilot_temperatures")
    operator = resolve_operator(operator)
    generator = resolve_generator(generator, model.device)
    grid = _pilot_grid(n_temperatures)
    part = pilot_shard(n_chains, generator, blocks, model.device)
    measured = anneal_and_measure(
        model,
        operator,
        grid,
        _LADDER_MEASURE,
        n_chains=n_chains,
        generator=generator,
        increment=increment,
        redraw=redraw,
        shard=part,
    )
    return LadderPilot(
        grid=grid,
        log_z=measured[:, 0].clone(),
        g_hat=measured[:, 1].clone(),
        log_ess=measured[:, 2].clone(),
        n_chains=n_chains,
        cost_sweeps=n_chains * max(n_temperatures - 1, 0),
    )


def pilot_shard(
    n_chains: int, generator: torch.Generator, blocks: int | None, device: torch.device
) -> Shard | None:
    """This process's blocks of a pilot's chains when they are sharded (``blocks`` given, or a
    process group), else ``None``; a collective in a group (the seed is checked).

    ``blocks`` is capped at ``n_chains``; a pilot with fewer chains than processes runs whole
    on every process (then its result depends on the number of processes being above that).
    """
    where = distributed.topology()
    if blocks is None and not where.active:
        return None
    # A pilot has fewer chains than the run it serves: its blocks are the caller's, at most one
    # chain each; with more processes than chains it runs whole on every process, alike.
    n_blocks = min(
        blocks if blocks is not None else max(distributed.DEFAULT_BLOCKS, where.world_size), n_chains
    )
    if n_blocks < where.world_size:
        return None
    return distributed.shard_if_requested(
        n_chains, generator, blocks=n_blocks, device=device, what="seed of the pilot's chain blocks"
    )


def _ladder_combine(weights: Tensor, log_weights: Tensor, features: Tensor) -> Tensor:
    """``[log Ẑ(β), ĝ(β), log ESS]`` at one grid point; float64, (3,)."""
    derivative = features[:, 0]
    centred = derivative - (weights * derivative).sum()
    return torch.stack(
        [
            torch.logsumexp(log_weights, 0) - math.log(log_weights.numel()),
            (weights * centred * centred).sum(),
            -torch.log((weights * weights).sum()),
        ]
    )


#: The samplers' and estimators' ladder pilot: the path derivative ``s_β`` of every chain.
_LADDER_MEASURE = PilotMeasure(
    features=lambda terms, beta: path_derivative(terms, beta)[:, None], combine=_ladder_combine
)


def smoothed_speed(pilot: LadderPilot, *, width: float = _SMOOTHING, floor: float = FLOOR) -> Tensor:
    """``√ĝ`` smoothed by a Gaussian kernel of ``width`` (in β) and floored at ``floor·max``; (n + 1,).

    The kernel average is normalised by the kernel mass inside [0, 1], so the ends are not
    shrunk; non-finite estimates are skipped. All ones (a uniform ladder) if ``ĝ`` is zero.
    """
    grid, g_hat = pilot.grid, pilot.g_hat
    known = torch.isfinite(g_hat)
    root = torch.where(known, g_hat.clamp_min(0.0), torch.zeros_like(g_hat)).sqrt()
    distance = (grid[:, None] - grid[None, :]) / width
    kernel = torch.exp(-0.5 * distance * distance) * known[None, :].to(torch.float64)
    speed = (kernel @ root) / kernel.sum(1).clamp_min(1e-300)
    top = float(speed.max())
    if not (math.isfinite(top) and top > 0.0):
        return torch.ones_like(speed)
    return speed.clamp_min(floor * top)


def place_ladder(
    pilot: LadderPilot,
    *,
    low: float = 0.0,
    n_levels: int | None = None,
    spacing: float = LEVEL_SPACING,
) -> PlacedLadder:
    """Levels from ``low`` to 1 at equal steps of thermodynamic length (module docstring).

    Parameters
    ----------
    pilot : LadderPilot
    low : float, default 0.0
        The hottest level (β = 0 is the base, where every mode is reachable).
    n_levels : int, optional
        ``K``; by default ``⌈Λ / spacing⌉ + 1`` within [``MIN_LEVELS``, ``MAX_LEVELS``].
    spacing : float, default ``LEVEL_SPACING``
        Target ``Δβ·√g`` between neighbours when ``n_levels`` is not given.

    Returns
    -------
    PlacedLadder
    """
    if not 0.0 <= float(low) < 1.0:
        raise ValidationError(f"low must be in [0, 1), got {low}")
    if not (math.isfinite(float(spacing)) and float(spacing) > 0.0):
        raise ValidationError(f"level_spacing must be a positive number, got {spacing!r}")
    speed = smoothed_speed(pilot)
    grid = pilot.grid
    arc = torch.cat([grid.new_zeros(1), torch.cumsum(0.5 * (speed[1:] + speed[:-1]) * grid.diff(), 0)])
    start = float(_interpolate(torch.tensor([float(low)], dtype=torch.float64), grid, arc)[0])
    length = float(arc[-1]) - start
    if n_levels is None:
        # (the 1e-9 keeps round-off in Λ from adding a level to an exact multiple of the spacing)
        n_levels = min(MAX_LEVELS, max(MIN_LEVELS, math.ceil(length / float(spacing) - 1e-9) + 1))
    elif isinstance(n_levels, bool) or not isinstance(n_levels, int) or n_levels < 2:
        raise ValidationError(f"n_levels must be an integer >= 2, got {n_levels!r}")
    targets = torch.linspace(start, float(arc[-1]), n_levels, dtype=torch.float64)
    betas = _interpolate(targets, arc, grid)
    betas[0], betas[-1] = float(low), 1.0
    # The floored speed is positive, so Λ is strictly increasing and so is its inverse; the
    # running maximum only guards round-off.
    betas = torch.cummax(betas, 0).values
    return PlacedLadder(
        ladder=Ladder(betas),
        initial_log_weights=pilot_log_weights(pilot, betas),
        thermodynamic_length=length,
        pilot=pilot,
    )


def pilot_log_weights(pilot: LadderPilot, betas: Tensor) -> Tensor:
    """The pilot's ``log Z`` at ``betas`` (ascending, last = 1), relative to the last; float64 (K,)."""
    log_z = _interpolate(betas.to(torch.float64).cpu(), pilot.grid, pilot.log_z)
    return log_z - log_z[-1]


def _interpolate(x: Tensor, xp: Tensor, fp: Tensor) -> Tensor:
    """Piecewise-linear interpolation of ``(xp, fp)`` (``xp`` increasing) at ``x``; float64."""
    index = torch.searchsorted(xp, x).clamp(1, xp.numel() - 1)
    left, right = xp[index - 1], xp[index]
    fraction = ((x - left) / (right - left).clamp_min(1e-300)).clamp(0.0, 1.0)
    return fp[index - 1] + fraction * (fp[index] - fp[index - 1])
