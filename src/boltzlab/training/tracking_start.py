"""The start of the ``"rts"`` tracking chains: the initial iterations that calibrate ``Ẑ``.

Carlson, Stinson, Pakman & Paninski (2016), §2.4; :mod:`boltzlab.training.tracking`, module
docstring, "Start"; docs/open-questions.md item 11. The chains are drawn from the model's base;
each initial iteration gives every chain a fresh uniformly drawn level, makes a run of tempered
sweeps with ``Ẑ`` fixed, and replaces ``Ẑ`` by the RTS estimate of that run, until
``max_k |ĉ_k/r_k − 1|`` falls below a tolerance. A last level draw then puts the chains at
levels that follow ``q(β | x)`` under the final ``Ẑ``.

:func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples` does the same for
estimation but does not hand back its chains, so the loop here is its own, built from the same
pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.estimators.tempered.rts import rts_log_z, stopping_statistic
from boltzlab.models.base import TemperedModel
from boltzlab.training.rts_influence import chain_influence
from boltzlab.training.tracking_sweeps import LevelSweeper, pooled_log_c

__all__ = ["TrackingStart"]


@dataclass(frozen=True, slots=True)
class TrackingStart:
    """Where the tracking chains and ``Ẑ`` stand after the initial iterations.

    Attributes
    ----------
    chains : Chains
        ``n_chains`` chains, each at the β of its level; layers ``(n_chains, n_units)``.
    levels : Tensor, shape (n_chains,), int64
        Each chain's level, drawn from ``q(β | x)`` under ``log_z_hat``.
    log_z_hat : Tensor, shape (K,), float64
        ``log Ẑ_k`` after the last initial iteration (the starting values if none ran).
    influence : Tensor, shape (n_chains, K), float64
        Each chain's influence on the last iteration's ``log ĉ`` (zero if none ran).
    log_c : Tensor, shape (K,), float64
        Normalised ``log ĉ`` of the last iteration (``log r`` if none ran).
    stop_statistics : Tensor, shape (n_iterations_run,), float64
        ``max_k |ĉ_k/r_k − 1|`` after each iteration.
    """

    chains: Chains
    levels: Tensor
    log_z_hat: Tensor
    influence: Tensor
    log_c: Tensor
    stop_statistics: Tensor


def start_tracking(
    model: TemperedModel,
    sweeper: LevelSweeper,
    *,
    n_chains: int,
    log_z_hat: Tensor,
    n_iterations: int,
    n_sweeps: int,
    stop_tolerance: float,
    generator: torch.Generator,
) -> TrackingStart:
    """Base samples, up to ``n_iterations`` initial iterations, and a last level draw.

    Parameters
    ----------
    model : TemperedModel
        With the parameters at the start of training.
    sweeper : LevelSweeper
        The chains' sweeps (operator, ladder, ``log r``, density precision).
    n_chains : int
        Tempered chains to start.
    log_z_hat : Tensor, shape (K,), float64
        Starting ``log Ẑ_k``, on the model's device.
    n_iterations : int
        At most this many initial iterations (0 skips them).
    n_sweeps : int
        Sweeps per initial iteration.
    stop_tolerance : float
        The iterations stop once ``max_k |ĉ_k/r_k − 1|`` is below it.
    generator : torch.Generator
    """
    device = model.device
    n_levels = sweeper.betas.shape[0]
    influence = torch.zeros((n_chains, n_levels), dtype=torch.float64, device=device)
    log_c = sweeper.log_prior.clone()
    chains = model.init_chains(n_chains, generator=generator)
    stop_statistics = []
    for _ in range(n_iterations):
        levels = torch.randint(n_levels, (n_chains,), generator=generator, device=device)
        terms = model.marginal_terms(chains.layers)
        chains = sweeper.at_levels(model, chains.layers, levels, terms, generator=generator)
        swept = sweeper.sweeps(
            model,
            chains,
            levels,
            n_sweeps=n_sweeps,
            log_z_hat=log_z_hat,
            accumulate_from=0,
            collect=None,
            generator=generator,
        )
        chains, log_sums = swept.chains, swept.log_sums
        if log_sums is None:  # accumulating always returns sums; this keeps the types honest
            raise RuntimeError("tempered sweeps returned no level-probability sums")
        log_c = pooled_log_c(log_sums)
        log_z_hat = rts_log_z(log_z_hat, sweeper.log_prior, log_c)
        influence = chain_influence(log_sums)
        statistic = stopping_statistic(log_c, sweeper.log_prior)
        stop_statistics.append(statistic)
        if statistic < stop_tolerance:
            break
    # One level draw given the states, so the levels follow q(β | x) under the final Ẑ
    # (without initial iterations the chains are base samples that need a level).
    terms = model.marginal_terms(chains.layers)
    log_q = sweeper.level_log_probabilities(model, terms, log_z_hat)
    levels, chains = sweeper.draw_levels(model, chains.layers, terms, log_q, generator=generator)
    return TrackingStart(
        chains=chains,
        levels=levels,
        log_z_hat=log_z_hat,
        influence=influence,
        log_c=log_c,
        stop_statistics=torch.tensor(stop_statistics, dtype=torch.float64),
    )
