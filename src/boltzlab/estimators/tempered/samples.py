"""Tempered samples collected once for the RTS, TS, TI, TI-RB and MBAR estimators.

Carlson, Stinson, Pakman & Paninski (2016), "Partition functions from Rao-Blackwellized
tempered sampling", ICML, §2 (eqs. 4–9) and §2.4; docs/algorithms.md §2.3, §4.3–4.5. Simulated
tempering on an ascending ladder ``0 = β_1 < … < β_K = 1`` (boltzlab indexes it ``0 … K − 1``)
samples the joint

    q(x, β_k) ∝ f_k(x)·r_k / Ẑ_k,         q(β_k | x) = softmax_k(log f_k(x) + log r_k − log Ẑ_k),

with prior ``r`` and current guesses ``Ẑ``. The chains are the family's one level sampler
(:mod:`boltzlab.estimators.tempered.sampler`): each step sweeps every chain at its level,
evaluates ``log f_k(x)`` at all ``K`` levels (the hidden-summed, normalised-base density, the
same ``f_k`` in the sampler, in ``q(β | x)`` and in every estimator — docs/algorithms.md §4.3
pitfall 1; docs/open-questions.md item 9: ``q`` is collapsed over ``h``) and draws every
chain's level from ``q(β | x)``. :func:`run_levels` runs it over any level space (a model's
ladder here, a parameter path for trajectory RTS and MBAR) and keeps the statistics below;
:func:`collect_tempered_samples` is that run on a model's ladder.

**Why not** :class:`~boltzlab.tempering.simulated.SimulatedTempering` **with**
``level_move="gibbs"``: these estimators need, per chain and step, the pre-activations (for
path derivatives at every level, TI-RB) and ``log f_k(x)`` itself (MBAR), not only the level
draw; inside ST they are private to the step, and recomputing them would double the
``n·K·J`` softplus that dominates a step for ``K = 100``. They do not need ST's stored β = 1
states (which double the chains).

**Initial iterations** (paper §2.4): up to ``n_initial_iterations`` (10) of ``initial_sweeps``
(50) sweeps, each starting from the previous states with fresh uniformly drawn levels; after
each, ``log Ẑ`` is replaced by the RTS estimate from that iteration; they stop once
``max_k |ĉ_k/r_k − 1| < stop_tolerance`` (0.1) — for the uniform prior exactly the paper's
``max_k |ĉ_k − r_k| < 0.1/K``; for other priors docs/open-questions.md item 11. Then the **long run**
of ``n_sweeps`` sweeps with ``Ẑ`` fixed. ``ĉ`` is accumulated in log space (a logsumexp of
``log q``), so levels that a poor initial ``Ẑ`` leaves nearly unvisited do not underflow
(docs/algorithms.md §4.3 pitfall 2).

**What is kept** (:class:`TemperedSamples`): per block (an initial iteration, or one of
``n_batches`` equal batches of the long run) and per chain, ``log Σ_t q(β_k | x_t)`` and the
counts of drawn levels; for the long run, on request, the binned and ``q``-weighted path
derivatives ``s_{β_k}(x)`` (TI, TI-RB) and ``log f_k(x)`` of thinned sweeps (MBAR). The chains
are independent, so per-chain (or per-batch) sums give the error bars. Also kept: each chain's
passages between the two ends of the ladder in the long run (round trips, docs/trust.md) and
where the chains ended (:class:`SamplerState`), from which a longer run can continue
(:mod:`boltzlab.estimators.tempered.budget`).

:class:`RunPlan` holds the run's options, checked once; a private recorder accumulates the
optional statistics of the long run (TI, TI-RB, MBAR) and :class:`TripCounter` the passages of
each chain between the two ends of the ladder. The
level-space arithmetic (``q(β | x)``, eq. 9, the stopping statistic, priors) is in
:mod:`boltzlab.estimators.tempered.levels`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed, operators, progress
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import (
    ADAPT_STATISTICS,
    check_initial_log_z,
    path_derivative_all,
    pooled_log_c,
    resolve_log_prior,
    rts_log_z,
    stopping_statistic,
    validated_choice,
)
from boltzlab.estimators.tempered.sampler import (
    LevelSpace,
    LevelState,
    ModelLevels,
    SamplerState,
    level_step,
)
from boltzlab.models.base import MarginalTerms, TemperedModel, path_derivative
from boltzlab.operators.base import Operator
from boltzlab.rng import randint, resolve_generator
from boltzlab.tempering import ladders
from boltzlab.tempering.ladders import Ladder
from boltzlab.validation import check_nonnegative_int, check_positive_int

__all__ = [
    "RunPlan",
    "SamplerState",
    "TemperedSamples",
    "TripCounter",
    "collect_tempered_samples",
    "run_levels",
]


@dataclass(frozen=True)
class TemperedSamples:
    """Statistics of one tempered-sampling run, enough for every estimator of this family.

    Blocks ``0 … I − 1`` are the initial iterations actually run (stage ``j`` = block ``j``);
    blocks ``I … I + B − 1`` are the ``B`` batches of the long run (stage ``I``).

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder as swept (rounded to the model's dtype), ascending, ``β_0 = 0``, ``β_{K−1} = 1``.
    log_prior : Tensor, shape (K,), float64
        ``log r_k``, normalised.
    stage_log_z_hat : Tensor, shape (I + 1, K), float64
        ``log Ẑ`` used during each stage (anchored at ``log Ẑ_0 = 0``); the last row is the
        long run's fixed ``log Ẑ``.
    block_stage : Tensor, shape (I + B,), int64
    block_sweeps : Tensor, shape (I + B,), int64
        Sweeps per chain in each block.
    log_probability_sums : Tensor, shape (I + B, n_chains, K), float64
        ``log Σ_t q(β_k | x_t)`` over the block's sweeps, per chain.
    level_counts : Tensor, shape (I + B, n_chains, K), int64
        How often each level was drawn from ``q(β | x)``, per chain.
    derivative_sums : Tensor, shape (B, n_chains, K), float64, or None
        ``Σ_t 1[k_t = k]·s_{β_k}(x_t)``: path derivatives binned by the drawn level (TI).
    weighted_derivative_sums : Tensor, shape (B, n_chains, K), float64, or None
        ``Σ_t q(β_k | x_t)·s_{β_k}(x_t)`` (TI-RB).
    log_densities : Tensor, shape (n_kept, K), float64, or None
        ``log f_k(x_n)`` of every chain at every ``density_thinning``-th long-run sweep (MBAR).
    density_levels, density_chains : Tensor, shape (n_kept,), int64, or None
        Level drawn for each kept sample, and its chain.
    density_thinning : int
        Every how many long-run sweeps the densities were kept (1 = all).
    stop_statistics : Tensor, shape (I,), float64
        ``max_k |ĉ_k/r_k − 1|`` of each initial iteration.
    stopped : bool
        Whether the stopping rule triggered (``stop_statistics[-1] < stop_tolerance``).
    n_chains, n_sweeps : int
        Chains, and sweeps per chain in the long run.
    operator : str
    adapt_with : {"rb", "counts"}
        Statistic the initial iterations updated ``Ẑ`` with.
    passages : Tensor, shape (n_chains,), int64, or None
        One-way passages of each chain between level 0 and level ``K − 1`` in the long run
        (two make a round trip).
    final_state : SamplerState or None
        Where the chains ended, to continue from.
    budget : TemperedBudget or None
        How the run was sized, when :mod:`boltzlab.estimators.tempered.budget` sized it
        (pilot, rounds, why it stopped).
    earlier_cost_sweeps : int
        Chain-sweeps spent before this run on its behalf (a pilot, earlier rounds).
    """

    betas: Tensor
    log_prior: Tensor
    stage_log_z_hat: Tensor
    block_stage: Tensor
    block_sweeps: Tensor
    log_probability_sums: Tensor
    level_counts: Tensor
    derivative_sums: Tensor | None
    weighted_derivative_sums: Tensor | None
    log_densities: Tensor | None
    density_levels: Tensor | None
    density_chains: Tensor | None
    density_thinning: int
    stop_statistics: Tensor
    stopped: bool
    n_chains: int
    n_sweeps: int
    operator: str
    adapt_with: str
    passages: Tensor | None = None
    final_state: SamplerState | None = None
    budget: Any = None
    earlier_cost_sweeps: int = 0

    @property
    def n_levels(self) -> int:
        """``K``."""
        return self.betas.numel()

    def chain_subset(self, chains: Tensor) -> TemperedSamples:
        """The same run restricted to ``chains`` (indices, shape ``(m,)``), for group checks.

        Chains are independent, so the subset is itself a valid run of ``m`` chains; the
        initial iterations' ``Ẑ`` (shared by all chains) is kept as it was.
        """
        chains = torch.as_tensor(chains, dtype=torch.int64, device=self.log_probability_sums.device)
        log_densities, density_levels, density_chains = (
            self.log_densities,
            self.density_levels,
            self.density_chains,
        )
        if density_chains is not None and log_densities is not None and density_levels is not None:
            keep = torch.isin(density_chains, chains.to(density_chains.device))
            renumber = torch.full((self.n_chains,), -1, dtype=torch.int64, device=density_chains.device)
            renumber[chains.to(density_chains.device)] = torch.arange(
                chains.numel(), device=density_chains.device
            )
            log_densities, density_levels = log_densities[keep], density_levels[keep]
            density_chains = renumber[density_chains[keep]]

        def pick(values: Tensor | None) -> Tensor | None:
            return None if values is None else values[:, chains.to(values.device)]

        return dataclasses.replace(
            self,
            passages=None if self.passages is None else self.passages[chains.to(self.passages.device)],
            final_state=None if self.final_state is None else self.final_state.subset(chains),
            log_probability_sums=pick(self.log_probability_sums),
            level_counts=pick(self.level_counts),
            derivative_sums=pick(self.derivative_sums),
            weighted_derivative_sums=pick(self.weighted_derivative_sums),
            log_densities=log_densities,
            density_levels=density_levels,
            density_chains=density_chains,
            n_chains=int(chains.numel()),
        )

    @property
    def n_initial_iterations(self) -> int:
        """Initial iterations actually run."""
        return self.stop_statistics.numel()

    @property
    def n_batches(self) -> int:
        """Batches of the long run."""
        return self.block_sweeps.numel() - self.n_initial_iterations

    @property
    def log_z_hat(self) -> Tensor:
        """The long run's fixed ``log Ẑ``, shape ``(K,)``."""
        return self.stage_log_z_hat[-1]

    @property
    def cost_sweeps(self) -> int:
        """Single-chain sweeps spent: ``n_chains ×`` (initial + long-run sweeps), plus
        ``earlier_cost_sweeps``."""
        return self.n_chains * int(self.block_sweeps.sum()) + self.earlier_cost_sweeps

    @property
    def round_trips(self) -> Tensor:
        """Round trips of each chain between the ends of the ladder in the long run; float64,
        shape ``(n_chains,)`` (half-integers count a trip under way); ``NaN`` if not recorded."""
        if self.passages is None:
            return torch.full((self.n_chains,), math.nan, dtype=torch.float64)
        return self.passages.to(torch.float64) / 2.0

    @property
    def occupancy(self) -> Tensor:
        """Fraction of long-run level draws at each level; shape ``(K,)``, float64."""
        counts = self.level_counts[self.n_initial_iterations :].sum((0, 1)).to(torch.float64)
        return counts / counts.sum()


def collect_tempered_samples(
    model: TemperedModel,
    *,
    n_chains: int = 100,
    n_temperatures: int | None = None,
    ladder: Ladder | Sequence[float] | Tensor | None = None,
    n_sweeps: int = 1000,
    operator: str | Operator = "gibbs",
    prior: Any = None,
    generator: torch.Generator | int | None = None,
    initial_log_z: Sequence[float] | Tensor | None = None,
    n_initial_iterations: int = 10,
    initial_sweeps: int = 50,
    stop_tolerance: float = 0.1,
    adapt_with: str = "rb",
    n_batches: int = 1,
    record_derivatives: bool = False,
    record_weighted_derivatives: bool = False,
    record_log_densities: bool = False,
    max_log_densities: int = 1_000_000,
    start: SamplerState | None = None,
    blocks: int | None = None,
) -> TemperedSamples:
    """Run RTS's tempered sampler (module docstring) and keep the estimators' statistics.

    Parameters
    ----------
    model : TemperedModel
        Any model on the tempered-family protocol; its base should be fitted
        (``set_base_rate``) for data-trained RBMs.
    n_chains : int, default 100
        Independent chains ``M`` (the paper's 100).
    n_temperatures : int, optional
        ``K`` levels linear in β from 0 to 1 (default 100: the paper's K, linear by
        docs/open-questions.md item 9). Give either this or ``ladder``.
    ladder : Ladder or sequence of float, optional
        Explicit ascending ladder; it must start at 0 (the normalised base, ``log Z_0 = 0``, is
        the anchor) and end at 1.
    n_sweeps : int, default 1000
        Long-run sweeps per chain, with ``Ẑ`` fixed.
    operator : str or Operator, default "gibbs"
    prior : see :func:`resolve_log_prior`; default uniform.
    generator : torch.Generator or int, optional
    initial_log_z : sequence of float, shape (K,), optional
        Starting ``log Ẑ_k`` (anchored at level 0 on use); default zeros, as in the paper.
    n_initial_iterations : int, default 10
        At most this many initial iterations (0 skips them and keeps ``initial_log_z``).
    initial_sweeps : int, default 50
        Sweeps per initial iteration.
    stop_tolerance : float, default 0.1
        Stop the initial iterations once ``max_k |ĉ_k/r_k − 1| <`` this.
    adapt_with : {"rb", "counts"}, default "rb"
        ``ĉ`` of the initial iterations: Rao-Blackwellized (RTS) or counts with a 0.1
        pseudo-count per level (TS).
    n_batches : int, default 1
        Equal batches the long run is cut into (for batch-means error bars).
    record_derivatives, record_weighted_derivatives : bool, default False
        Keep binned (TI) / ``q``-weighted (TI-RB, ``n·K·J`` more sigmoids a step) path
        derivatives of the long run.
    record_log_densities : bool, default False
        Keep ``log f_k(x)`` of long-run samples for MBAR, thinned to every ``t``-th sweep with
        the smallest ``t`` such that at most ``max_log_densities`` values (``n_kept × K``) are
        kept. Consecutive sweeps of a chain are strongly correlated, so thinning loses little.
    max_log_densities : int, default 1,000,000
        8 MB of float64; MBAR's work space is a few times this.
    start : SamplerState, optional
        Continue from these ``n_chains`` states and levels (e.g. a previous run's
        ``final_state`` on the same ladder) instead of exact base samples at level 0.
    blocks : int, optional
        Cut the chains into this many blocks with their own random streams; in a
        ``torch.distributed`` process group each process runs whole blocks, the initial
        iterations pool every process's ``ĉ`` sums, and the statistics are gathered in chain
        order, so the samples do not depend on the number of processes (docs/architecture.md,
        "Scaling out"). Default: blocks only in a process group.

    Returns
    -------
    TemperedSamples
    """
    n_chains = check_positive_int(n_chains, "n_chains")
    plan = RunPlan(
        n_sweeps=n_sweeps,
        n_initial_iterations=n_initial_iterations,
        initial_sweeps=initial_sweeps,
        stop_tolerance=stop_tolerance,
        adapt_with=adapt_with,
        n_batches=n_batches,
        record_derivatives=record_derivatives,
        record_weighted_derivatives=record_weighted_derivatives,
        record_log_densities=record_log_densities,
        max_log_densities=max_log_densities,
    )
    transition = operators.resolve(operator)
    if n_temperatures is not None and ladder is None:
        n_temperatures = check_positive_int(n_temperatures, "n_temperatures")
    resolved = ladders.resolve(ladder, n_levels=n_temperatures, default_levels=100, name="ladder")
    if float(resolved.betas[0]) != 0.0:
        raise ValidationError(
            "the ladder must start at beta = 0 (the normalised base anchors log Z_0 = 0), "
            f"got {float(resolved.betas[0])}"
        )
    generator = resolve_generator(generator, model.device)
    # Chains sweep at the ladder rounded to the model's dtype; densities use the same values.
    betas_model = resolved.betas.to(device=model.device, dtype=model.dtype)
    betas = betas_model.to(torch.float64)
    log_prior = resolve_log_prior(prior, betas.cpu())
    log_z_hat = check_initial_log_z(initial_log_z, betas.numel())

    all_chains, sharded = n_chains, False
    part = distributed.shard_if_requested(n_chains, generator, blocks=blocks, device=model.device)
    if part is not None:
        if start is not None and start.chains.n_chains != n_chains:
            raise ValidationError(
                f"start holds {start.chains.n_chains} chains; expected n_chains={n_chains} (all processes' chains)"
            )
        generator, sharded = part.generator, True  # type: ignore[assignment]
        n_chains = part.rows
        if start is not None:
            rows = slice(part.start, part.stop)
            start = SamplerState(chains=start.chains.select(rows), levels=torch.as_tensor(start.levels)[rows])
    space = ModelLevels(model, transition, betas_model, betas)
    long_run_space = dataclasses.replace(space, derivatives=True) if record_weighted_derivatives else None
    state = space.start(n_chains, start, generator=generator)
    return run_levels(
        space,
        plan,
        state=state,
        betas=betas,
        log_prior=log_prior,
        log_z_hat=log_z_hat,
        generator=generator,
        all_chains=all_chains,
        sharded=sharded,
        operator=str(getattr(transition, "name", type(transition).__name__)),
        long_run_space=long_run_space,
    )


@dataclass(frozen=True)
class RunPlan:
    """How long a level sampler runs and what it keeps, checked once (defaults: the paper's).

    Attributes
    ----------
    n_sweeps : int, default 1000
        Long-run sweeps per chain, with ``Ẑ`` fixed.
    n_initial_iterations : int, default 10
        At most this many initial iterations (0 skips them).
    initial_sweeps : int, default 50
        Sweeps per initial iteration.
    stop_tolerance : float, default 0.1
        Stop the initial iterations once ``max_k |ĉ_k/r_k − 1| <`` this.
    adapt_with : {"rb", "counts"}, default "rb"
    n_batches : int, default 1
        Equal batches of the long run.
    record_derivatives, record_weighted_derivatives, record_log_densities : bool
    max_log_densities : int, default 1,000,000
    """

    n_sweeps: int = 1000
    n_initial_iterations: int = 10
    initial_sweeps: int = 50
    stop_tolerance: float = 0.1
    adapt_with: str = "rb"
    n_batches: int = 1
    record_derivatives: bool = False
    record_weighted_derivatives: bool = False
    record_log_densities: bool = False
    max_log_densities: int = 1_000_000

    def __post_init__(self) -> None:
        checked = {
            name: check_positive_int(getattr(self, name), name)
            for name in ("n_sweeps", "initial_sweeps", "n_batches", "max_log_densities")
        }
        check_nonnegative_int(self.n_initial_iterations, "n_initial_iterations")
        if checked["n_batches"] > checked["n_sweeps"]:
            raise ValidationError(f"n_batches={self.n_batches} is more than n_sweeps={self.n_sweeps}")
        if not isinstance(self.stop_tolerance, (int, float)) or not self.stop_tolerance > 0:
            raise ValidationError(f"stop_tolerance must be a positive number, got {self.stop_tolerance!r}")
        checked["adapt_with"] = validated_choice(self.adapt_with, ADAPT_STATISTICS, "adapt_with")
        for name, value in checked.items():  # frozen: the checked values replace the given ones
            object.__setattr__(self, name, value)


def run_levels(
    space: LevelSpace,
    plan: RunPlan,
    *,
    state: LevelState,
    betas: Tensor,
    log_prior: Tensor,
    log_z_hat: Tensor,
    generator: torch.Generator,
    all_chains: int,
    sharded: bool,
    operator: str,
    long_run_space: LevelSpace | None = None,
) -> TemperedSamples:
    """The initial iterations and the long run of the level sampler (module docstring).

    Parameters
    ----------
    space : LevelSpace
        The levels (a model's ladder, a parameter path).
    plan : RunPlan
    state : LevelState
        This process's chains to start from (``space.start``).
    betas : Tensor, shape (K,), float64
        The levels' β as the samples report them.
    log_prior, log_z_hat : Tensor, shape (K,), float64, CPU
        ``log r`` (normalised) and the starting ``log Ẑ``.
    generator : torch.Generator
        This process's stream.
    all_chains : int
        Chains over all processes (they size the thinning of the kept densities).
    sharded : bool
        Whether the chains are one process's share, to be gathered in chain order at the end.
    operator : str
        The operator's name, as the samples report it.
    long_run_space : LevelSpace, optional
        The same levels as ``space`` computing more for the long run (a model's levels with
        the path derivatives at every level, for TI-RB: one pass gives them with the densities).
    """
    # Long because the loop keeps its run-long buffers (sums, counts, recorder) in locals.
    device, n_levels = space.device, space.n_levels
    n_chains = state.levels.shape[0]

    log_prior_device = log_prior.to(device)
    n_blocks = plan.n_initial_iterations + plan.n_batches
    log_sums = torch.full((n_blocks, n_chains, n_levels), -math.inf, dtype=torch.float64, device=device)
    counts = torch.zeros((n_blocks, n_chains, n_levels), dtype=torch.int64, device=device)

    # Initial iterations (paper §2.4): fresh uniform levels, states carried over, Ẑ ← eq. 9.
    stage_log_z_hat, block_sweeps, stop_statistics = [], [], []
    for iteration in range(plan.n_initial_iterations):
        stage_log_z_hat.append(log_z_hat)
        log_weights = log_prior_device - log_z_hat.to(device)
        levels = randint(n_levels, (n_chains,), generator=generator, device=device)
        state = space.place(
            state.chains.layers,
            state.terms,
            levels,
            generator=generator,
            values_checked=state.chains.values_checked,
        )
        for _ in range(plan.initial_sweeps):
            state, _, log_q = level_step(space, state, log_weights, generator=generator)
            progress.advance(n_chains)
            _accumulate_(log_sums[iteration], counts[iteration], log_q, state.levels)
        block_sweeps.append(plan.initial_sweeps)
        block_sums, block_counts = log_sums[iteration], counts[iteration]
        if sharded:  # every process's chains pooled, so that every process gets the same Ẑ
            block_sums = distributed.gather_rows(block_sums, what="pooling the initial iteration's sums")
            block_counts = distributed.gather_rows(
                block_counts, what="pooling the initial iteration's counts"
            )
        log_c = pooled_log_c(block_sums, block_counts, plan.adapt_with)
        log_z_hat = rts_log_z(log_z_hat, log_prior, log_c)
        stop_statistics.append(stopping_statistic(log_c, log_prior))
        if stop_statistics[-1] < plan.stop_tolerance:
            break
    n_run = len(stop_statistics)
    stage_log_z_hat.append(log_z_hat)

    # The long run, with Ẑ fixed.
    n_sweeps, n_batches = plan.n_sweeps, plan.n_batches
    recorder = _LongRunRecorder(
        n_batches=n_batches,
        n_chains=n_chains,
        betas=betas.to(device),
        derivatives=plan.record_derivatives,
        weighted_derivatives=plan.record_weighted_derivatives,
        thinning=max(1, math.ceil(all_chains * n_sweeps * n_levels / plan.max_log_densities)),
        n_sweeps=n_sweeps if plan.record_log_densities else 0,
    )
    trips = TripCounter(n_chains, n_levels, device)
    log_weights = log_prior_device - log_z_hat.to(device)
    if long_run_space is not None:
        space = long_run_space
    boundaries = [(batch * n_sweeps) // n_batches for batch in range(n_batches + 1)]
    for batch in range(n_batches):
        block = plan.n_initial_iterations + batch
        for sweep in range(boundaries[batch], boundaries[batch + 1]):
            state, log_f, log_q = level_step(space, state, log_weights, generator=generator)
            progress.advance(n_chains)
            _accumulate_(log_sums[block], counts[block], log_q, state.levels)
            trips.update(state.levels)
            recorder.record(batch, sweep, state.terms, state.levels, log_f, log_q, state.derivatives)
        block_sweeps.append(boundaries[batch + 1] - boundaries[batch])

    chains, levels = state.chains, state.levels
    if sharded:
        # Every statistic back in the one-process chain order (chains are dimension 1).
        log_sums, counts = _gather_chain_statistic(log_sums), _gather_chain_statistic(counts)
        recorder.derivative_sums = _gather_chain_statistic(recorder.derivative_sums)
        recorder.weighted_sums = _gather_chain_statistic(recorder.weighted_sums)
        recorder.densities = _gather_chain_statistic(recorder.densities)
        recorder.density_levels = _gather_chain_statistic(recorder.density_levels)
        trips.passages = distributed.gather_rows(trips.passages, what="gathering the round trips")
        chains = distributed.gather_chains(chains)
        levels = distributed.gather_rows(levels)
        n_chains = all_chains
    # Drop the blocks of initial iterations that the stopping rule skipped.
    keep = torch.cat([torch.arange(n_run), torch.arange(plan.n_initial_iterations, n_blocks)]).to(device)
    return TemperedSamples(
        betas=betas.cpu(),
        log_prior=log_prior,
        stage_log_z_hat=torch.stack(stage_log_z_hat),
        block_stage=torch.tensor([*range(n_run), *([n_run] * n_batches)], dtype=torch.int64),
        block_sweeps=torch.tensor(block_sweeps, dtype=torch.int64),
        log_probability_sums=log_sums.index_select(0, keep).cpu(),
        level_counts=counts.index_select(0, keep).cpu(),
        **recorder.results(),
        stop_statistics=torch.tensor(stop_statistics, dtype=torch.float64),
        stopped=n_run > 0 and stop_statistics[-1] < plan.stop_tolerance,
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        operator=operator,
        adapt_with=plan.adapt_with,
        passages=trips.passages.cpu(),
        final_state=SamplerState(chains=chains, levels=levels),
    )


def _accumulate_(log_sums: Tensor, counts: Tensor, log_q: Tensor, levels: Tensor) -> None:
    """Add one step's ``q(β | x)`` (in log space) and drawn levels to a block, in place.

    ``log_sums`` and ``counts`` have shape ``(n_chains, K)``; ``log_q`` ``(n_chains, K)``;
    ``levels`` ``(n_chains,)``.
    """
    torch.logaddexp(log_sums, log_q, out=log_sums)
    counts.scatter_add_(1, levels[:, None], torch.ones_like(levels)[:, None])


class TripCounter:
    """One-way passages of each chain between level 0 and level ``K − 1``.

    A passage ends when a chain reaches the end opposite to the last end it visited; two
    passages are a round trip. The counts live on the model's device (no host sync per step).
    """

    def __init__(self, n_chains: int, n_levels: int, device: torch.device) -> None:
        self.top = n_levels - 1
        self.last_end = torch.full((n_chains,), -1, dtype=torch.int64, device=device)
        self.passages = torch.zeros(n_chains, dtype=torch.int64, device=device)

    def update(self, levels: Tensor) -> None:
        """Record the levels drawn in one step, shape ``(n_chains,)``."""
        end = torch.where(levels == 0, 0, torch.where(levels == self.top, 1, -1))
        arrived = end >= 0
        self.passages.add_((arrived & (self.last_end >= 0) & (end != self.last_end)).to(torch.int64))
        self.last_end = torch.where(arrived, end, self.last_end)


class _LongRunRecorder:
    """Accumulates the long run's optional statistics (TI, TI-RB, MBAR) in place."""

    def __init__(
        self,
        *,
        n_batches: int,
        n_chains: int,
        betas: Tensor,
        derivatives: bool,
        weighted_derivatives: bool,
        thinning: int,
        n_sweeps: int,
    ) -> None:
        shape, device = (n_batches, n_chains, betas.numel()), betas.device
        self.betas, self.thinning = betas, thinning
        self.derivative_sums = torch.zeros(shape, dtype=torch.float64, device=device) if derivatives else None
        self.weighted_sums = (
            torch.zeros(shape, dtype=torch.float64, device=device) if weighted_derivatives else None
        )
        n_kept = math.ceil(n_sweeps / thinning)
        self.densities = self.density_levels = None
        if n_kept:
            self.densities = torch.empty(
                (n_kept, n_chains, betas.numel()), dtype=torch.float64, device=device
            )
            self.density_levels = torch.empty((n_kept, n_chains), dtype=torch.int64, device=device)

    def record(
        self,
        batch: int,
        sweep: int,
        terms: MarginalTerms | None,
        levels: Tensor,
        log_f: Tensor,
        log_q: Tensor,
        derivatives: Tensor | None = None,
    ) -> None:
        """Add the long-run sweep ``sweep`` (of batch ``batch``) to the statistics kept.

        ``terms`` are read only for path derivatives (None when none are kept); the weighted
        ones come from ``derivatives`` (``(n_chains, K)``) when the sampler computed them.
        """
        if (self.weighted_sums is not None or self.derivative_sums is not None) and terms is None:
            raise ValidationError("path derivatives need the states' marginal terms")
        if self.weighted_sums is not None:
            if derivatives is None:
                derivatives = path_derivative_all(terms, self.betas)
            self.weighted_sums[batch].add_(torch.exp(log_q) * derivatives)
            current = derivatives.gather(1, levels[:, None]).squeeze(1)
        elif self.derivative_sums is not None:
            current = path_derivative(terms, self.betas[levels])
        if self.derivative_sums is not None:
            self.derivative_sums[batch].scatter_add_(1, levels[:, None], current[:, None])
        if self.densities is not None and self.density_levels is not None and sweep % self.thinning == 0:
            self.densities[sweep // self.thinning] = log_f
            self.density_levels[sweep // self.thinning] = levels

    def results(self) -> dict[str, Any]:
        """The :class:`~boltzlab.estimators.tempered.samples.TemperedSamples` fields filled here (CPU)."""
        densities = levels = chains = None
        if self.densities is not None and self.density_levels is not None:
            n_kept, n_chains, n_levels = self.densities.shape
            densities = self.densities.reshape(-1, n_levels).cpu()
            levels = self.density_levels.reshape(-1).cpu()
            chains = torch.arange(n_chains).repeat(n_kept)
        return {
            "derivative_sums": None if self.derivative_sums is None else self.derivative_sums.cpu(),
            "weighted_derivative_sums": None if self.weighted_sums is None else self.weighted_sums.cpu(),
            "log_densities": densities,
            "density_levels": levels,
            "density_chains": chains,
            "density_thinning": self.thinning,
        }


def _gather_chain_statistic(tensor: Tensor | None) -> Tensor | None:
    """Every process's chains of a ``(·, n_chains, ·)`` statistic, in chain order."""
    return None if tensor is None else distributed.gather_rows(tensor, dim=1, what="gathering the statistics")
