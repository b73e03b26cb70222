"""One step of RTS's tempered sampler, and what the long run keeps of each step.

Carlson, Stinson, Pakman & Paninski (2016), ICML, §2 (eqs. 4–9); docs/algorithms.md §4.3.
:class:`TemperedStep` is the kernel that
:func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples` repeats: an operator
sweep of every chain at its own level, ``log f_k(x)`` of the new states at all ``K`` levels,
a Gibbs draw of every chain's level from ``q(β | x)`` and a redraw of the summed-out layer at
the new β. :class:`LongRunRecorder` accumulates the optional statistics of the long run (TI,
TI-RB, MBAR) and :class:`TripCounter` the passages of each chain between the two ends of the
ladder (the round-trip diagnostic, docs/trust.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import log_f_all, path_derivative_all
from boltzlab.models.base import MarginalTerms, TemperedModel, path_derivative
from boltzlab.operators.base import Operator
from boltzlab.tempering.base import redraw_summed_layers
from boltzlab.tempering.level_moves import sample_categorical
from boltzlab.validation import check_chains_match

__all__ = [
    "LongRunRecorder",
    "SamplerState",
    "TemperedStep",
    "TripCounter",
    "accumulate_",
    "gather_chain_statistic",
    "starting_states",
]


@dataclass(frozen=True)
class SamplerState:
    """Where a tempered run left its chains, so that a longer run can continue from there.

    Attributes
    ----------
    chains : Chains
        The states, each at its level's β (model dtype, model device).
    levels : Tensor, shape (n_chains,), int64
        Each chain's level index on the ladder.
    """

    chains: Chains
    levels: Tensor

    def subset(self, rows: Tensor) -> SamplerState:
        """The states of the chains ``rows`` (indices, shape ``(m,)``)."""
        rows = rows.to(self.levels.device)
        chains = Chains(
            layers=tuple(layer[rows] for layer in self.chains.layers), beta=self.chains.beta[rows]
        )
        return SamplerState(chains=chains, levels=self.levels[rows])


class TemperedStep:
    """One step of the tempered sampler with its fixed ingredients (module docstring)."""

    def __init__(
        self,
        model: TemperedModel,
        transition: Operator,
        betas_model: Tensor,
        betas: Tensor,
        log_prior: Tensor,
        generator: torch.Generator,
    ) -> None:
        self.model, self.transition, self.generator = model, transition, generator
        self.betas_model, self.betas = betas_model, betas
        self.log_prior = log_prior.to(model.device)
        self._weights_for: Tensor | None = None
        self._log_weights = self.log_prior

    def __call__(
        self, chains: Chains, terms: MarginalTerms, log_z_hat: Tensor
    ) -> tuple[Chains, MarginalTerms, Tensor, Tensor, Tensor]:
        """Sweep, then draw levels from ``q(β | x)``; returns chains, terms, levels, log f, log q.

        ``terms`` are those of ``chains`` (reused by the sweep); the returned terms are those of
        the returned chains. ``log_z_hat`` (CPU, shape ``(K,)``) is the current ``log Ẑ``.
        """
        if self._weights_for is not log_z_hat:  # one host-to-device copy per stage, not per step
            self._weights_for, self._log_weights = (
                log_z_hat,
                self.log_prior - log_z_hat.to(self.log_prior.device),
            )
        swept, _ = self.transition.step(self.model, chains, generator=self.generator, terms=terms)
        terms = self.model.marginal_terms(swept.layers)
        log_f = log_f_all(terms, self.betas)
        log_q = log_f + self._log_weights[None, :]
        log_q = log_q - torch.logsumexp(log_q, 1, keepdim=True)
        levels = sample_categorical(log_q, generator=self.generator)
        # Redrawing the summed-out layer of every chain (moved or not) at its new β is a valid
        # collapsed Gibbs move and keeps state-dependent operators exact.
        moved = Chains(layers=swept.layers, beta=self.betas_model[levels])
        moved = redraw_summed_layers(self.model, moved, terms, generator=self.generator)
        return moved, terms, levels, log_f, log_q


def accumulate_(log_sums: Tensor, counts: Tensor, log_q: Tensor, levels: Tensor) -> None:
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


class LongRunRecorder:
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
    ) -> None:
        """Add the long-run sweep ``sweep`` (of batch ``batch``) to the statistics kept.

        ``terms`` are read only for path derivatives (None when none are kept).
        """
        if (self.weighted_sums is not None or self.derivative_sums is not None) and terms is None:
            raise ValidationError("path derivatives need the states' marginal terms")
        if self.weighted_sums is not None:
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


def gather_chain_statistic(tensor: Tensor | None) -> Tensor | None:
    """Every process's chains of a ``(·, n_chains, ·)`` statistic, in chain order."""
    return None if tensor is None else distributed.gather_rows(tensor, dim=1, what="gathering the statistics")


def starting_states(
    model: TemperedModel,
    start: SamplerState | None,
    n_chains: int,
    betas_model: Tensor,
    generator: torch.Generator,
) -> tuple[Chains, Tensor]:
    """Exact base samples at level 0 (``init_chains`` labels them β = 0), or ``start`` checked."""
    if start is None:
        chains = model.init_chains(n_chains, generator=generator)
        return chains, torch.zeros(n_chains, dtype=torch.int64, device=model.device)
    check_chains_match(
        model,
        start.chains,
        name="start chains",
        fix="continue from the final_state of a run of this model, or pass "
        f"SamplerState(chains=start.chains.to(dtype={model.dtype}, device='{model.device}'), levels=start.levels)",
    )
    levels = torch.as_tensor(start.levels, dtype=torch.int64).to(model.device)
    if start.chains.n_chains != n_chains or levels.shape != (n_chains,):
        raise ValidationError(
            f"start holds {start.chains.n_chains} chains and {tuple(levels.shape)} levels; expected "
            f"n_chains={n_chains} of each"
        )
    if bool((levels < 0).any()) or bool((levels >= betas_model.numel()).any()):
        raise ValidationError(f"start levels must index the {betas_model.numel()}-level ladder")
    # The chains carry on at their levels' β of this ladder (a no-op when the ladder is theirs).
    return Chains(layers=start.chains.layers, beta=betas_model[levels]), levels
