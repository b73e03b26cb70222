"""The sweeps of the ``"rts"`` tracking chains: collapsed Gibbs moves over a ladder with fixed Ẑ.

One sweep is steps 1–5 of :mod:`boltzlab.training.tracking` (module docstring; Carlson et al.
2016, §4.4; docs/algorithms.md §4.3): a step of the tempered family's level sampler
(:func:`~boltzlab.estimators.tempered.sampler.level_step` on the model's ladder: an operator
sweep of every chain at its own β, the level probabilities ``log q(β_k | x)`` of the new
states, a Gibbs draw of every chain's level and a redraw of the summed-out layer at the new
β), and the β = 1 states kept. The phase class owns the options, the ``Ẑ`` update and the
checkpoints; this module only moves chains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.estimators.tempered.sampler import LevelState, ModelLevels, level_step
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.tempering.level_moves import sample_categorical

__all__ = ["LevelSweeper", "SweepResult", "pooled_log_c"]


@dataclass(frozen=True, slots=True)
class SweepResult:
    """What :meth:`LevelSweeper.sweeps` hands back.

    Attributes
    ----------
    chains : Chains
        The chains after the last sweep, each at its level's β; layers ``(n_chains, n_units)``.
    levels : Tensor, shape (n_chains,), int64
        Each chain's level after the last sweep.
    log_sums : Tensor, shape (n_chains, K), float64, or None
        ``log Σ_t q(β_k | x_t)`` of each chain over the accumulated sweeps; ``None`` when the
        sweeps accumulated nothing.
    target : list of Chains
        The β = 1 states of each collected sweep, in sweep order (any may hold no chain).
    """

    chains: Chains
    levels: Tensor
    log_sums: Tensor | None
    target: list[Chains]


@dataclass(frozen=True, slots=True)
class LevelSweeper:
    """Tempered sweeps of the tracking chains under one set of parameters and fixed ``Ẑ``.

    Attributes
    ----------
    operator : Operator
        Swept at each chain's β.
    betas : Tensor, shape (K,), model dtype
        The ladder, ascending from 0 to 1; chains sweep at these values.
    betas64 : Tensor, shape (K,), float64
        The same values widened; densities are evaluated at them, so the level move and the
        sweep target the same distributions.
    log_prior : Tensor, shape (K,), float64
        Normalised ``log r_k``.
    density_dtype : {"float64", "float32"}
        Precision of the ``n·K·J`` softplus evaluations of ``log f_k(x)``.
    """

    operator: Operator
    betas: Tensor
    betas64: Tensor
    log_prior: Tensor
    density_dtype: str

    @property
    def top(self) -> int:
        """Index of the β = 1 level, ``K − 1``."""
        return self.betas.shape[0] - 1

    def levels_of(self, model: TemperedModel) -> ModelLevels:
        """The level space of ``model``'s current parameters on this ladder."""
        return ModelLevels(model, self.operator, self.betas, self.betas64, self.density_dtype)

    def level_log_probabilities(
        self, model: TemperedModel, terms: MarginalTerms, log_z_hat: Tensor
    ) -> Tensor:
        """``log q(β_k | x)`` of every state and level; shape ``(n, K)``, float64, rows normalised.

        Parameters
        ----------
        model : TemperedModel
        terms : MarginalTerms
            Summed-out terms of ``n`` states.
        log_z_hat : Tensor, shape (K,), float64
            The current ``log Ẑ_k``.
        """
        log_q = self.levels_of(model).log_f_all(terms) + (self.log_prior - log_z_hat)[None, :]
        return log_q - torch.logsumexp(log_q, 1, keepdim=True)

    def at_levels(
        self,
        model: TemperedModel,
        layers: tuple[Tensor, ...],
        levels: Tensor,
        terms: MarginalTerms,
        *,
        generator: torch.Generator,
    ) -> Chains:
        """``layers`` placed at the β of ``levels`` (shape ``(n,)``), the summed-out layer redrawn there.

        ``terms`` are the summed-out terms of ``layers``; they do not depend on β.
        """
        return self.levels_of(model).place(layers, terms, levels, generator=generator).chains

    def draw_levels(
        self,
        model: TemperedModel,
        layers: tuple[Tensor, ...],
        terms: MarginalTerms,
        log_q: Tensor,
        *,
        generator: torch.Generator,
    ) -> tuple[Tensor, Chains]:
        """A Gibbs draw of every chain's level from ``log_q`` (``(n, K)``), then :meth:`at_levels`.

        Returns the levels, shape ``(n,)`` int64, and the chains at them.
        """
        levels = sample_categorical(log_q, generator=generator)
        return levels, self.at_levels(model, layers, levels, terms, generator=generator)

    def sweeps(
        self,
        model: TemperedModel,
        chains: Chains,
        levels: Tensor,
        *,
        n_sweeps: int,
        log_z_hat: Tensor,
        accumulate_from: int | None,
        collect: str | None,
        generator: torch.Generator,
    ) -> SweepResult:
        """``n_sweeps`` tempered sweeps with fixed ``Ẑ`` (module docstring).

        Parameters
        ----------
        model : TemperedModel
            With the parameters of this update.
        chains : Chains
            ``n_chains`` chains, each at the β of its level.
        levels : Tensor, shape (n_chains,), int64
            Each chain's level.
        n_sweeps : int
            Sweeps of every chain, at least 1.
        log_z_hat : Tensor, shape (K,), float64
            The ``log Ẑ_k`` the level moves use.
        accumulate_from : int or None
            Add ``q(β | x)`` to the per-chain sums from this sweep (0-based) on; ``None`` adds
            nothing.
        collect : {"all-sweeps", "last-sweep"} or None
            Which sweeps' β = 1 states go into ``target``.
        generator : torch.Generator
        """
        log_sums = None
        if accumulate_from is not None:
            log_sums = torch.full(
                (chains.n_chains, self.betas.shape[0]), -math.inf, dtype=torch.float64, device=model.device
            )
        target: list[Chains] = []
        space = self.levels_of(model)
        log_weights = self.log_prior - log_z_hat
        # The parameters changed since the last sweep: no pre-activations to reuse.
        state = LevelState(chains=chains, terms=None, levels=levels)
        for sweep in range(n_sweeps):
            state, _, log_q = level_step(space, state, log_weights, generator=generator)
            if log_sums is not None and sweep >= accumulate_from:
                torch.logaddexp(log_sums, log_q, out=log_sums)
            if collect == "all-sweeps" or (collect == "last-sweep" and sweep == n_sweeps - 1):
                target.append(state.chains.select((state.levels == self.top).nonzero().squeeze(1)))
        chains, levels = state.chains, state.levels
        return SweepResult(chains=chains, levels=levels, log_sums=log_sums, target=target)


def pooled_log_c(log_sums: Tensor) -> Tensor:
    """Normalised ``log ĉ_k`` pooled over chains; shape ``(K,)``, float64.

    Parameters
    ----------
    log_sums : Tensor, shape (n_chains, K), float64
        ``log Σ_t q(β_k | x_t)`` of each chain (:attr:`SweepResult.log_sums`).
    """
    pooled = torch.logsumexp(log_sums, 0)
    return pooled - torch.logsumexp(pooled, 0)
