"""The one level sampler of the tempered family: chains that each carry a level of a ladder.

Carlson, Stinson, Pakman & Paninski (2016), §2 (eqs. 4–9); docs/algorithms.md §2.3, §4.3. A
chain's state is ``(x, k)``: a configuration and a level of an ascending ladder whose level 0
is a normalised base. The joint target is

    q(x, k) ∝ f_k(x) · exp(w_k),        q(k | x) = softmax_k(log f_k(x) + w_k),

with log-weights ``w`` (``log r_k − log Ẑ_k`` for RTS). One **step** (:func:`level_step`) is

1. one sweep of every chain at its own level (which reuses what the space computed for the
   chain's state at the end of the previous step: the summed-out layer's pre-activations);
2. ``log f_k(x)`` of the new states at **all** ``K`` levels, from those terms;
3. a Gibbs draw of every chain's level from ``q(k | x)``, and the space's placement of the
   chain at its new level (for a model, a redraw of the summed-out layer at the new β, a
   valid collapsed Gibbs move that keeps state-dependent operators such as flip-the-state
   exact).

The step returns ``log f`` and ``log q`` of the swept states, which is what the estimators
keep (RTS's Rao-Blackwellized ``ĉ``, MBAR's densities, TI-RB's weights).

**Level spaces.** What a level *is* is the :class:`LevelSpace`'s business:

* :class:`ModelLevels`: levels are inverse temperatures β of a :class:`TemperedModel`, swept
  by any operator (the tempered estimators, the training tracker);
* :class:`~boltzlab.estimators.trajectory.tempered.PathLevels`: levels are positions on a
  parameter path of RBMs (trajectory RTS and MBAR).

Everything that runs a level sampler — the estimators' runs
(:func:`~boltzlab.estimators.tempered.samples.run_levels`), trajectory RTS and MBAR, and the
training tracker (:mod:`boltzlab.training.tracking_sweeps`) — goes through :func:`level_step`;
simulated tempering as a *sampling scheme* (:mod:`boltzlab.tempering.simulated`: neighbour
Metropolis moves, stored β = 1 states for its consumers) is a different chain on the same
target.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import (
    log_f_all,
    log_f_and_derivatives_all,
    path_derivative_all,
    single_precision_log_f_all,
)
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.tempering.base import redraw_summed_layers
from boltzlab.tempering.level_moves import sample_categorical
from boltzlab.validation import check_chains_match

__all__ = [
    "LevelSpace",
    "LevelState",
    "ModelLevels",
    "SamplerState",
    "level_step",
]

DENSITY_DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class LevelState:
    """Chains of a level sampler between two steps.

    Attributes
    ----------
    chains : Chains
        The states, each at its level (``beta`` holds the level's β, or for a path its position
        over ``P − 1``); layers ``(n_chains, n_units)``.
    terms : Any
        What the space computed from the states and the next sweep reuses (a model's
        :class:`~boltzlab.models.base.MarginalTerms`; ``None`` when nothing may be reused, e.g.
        after the parameters changed).
    levels : Tensor, shape (n_chains,), int64
        Each chain's level index.
    derivatives : Tensor, shape (n_chains, K), float64, or None
        The path derivatives ``s_k(x)`` of the states at every level, when the space computed
        them with the densities (:class:`ModelLevels` with ``derivatives=True``, for TI-RB: one
        pass of the level-sums kernel gives both).
    """

    chains: Chains
    terms: Any
    levels: Tensor
    derivatives: Tensor | None = None


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
        chains = self.chains.select(rows)
        return SamplerState(chains=chains, levels=self.levels[rows])


class LevelSpace(Protocol):
    """What a level sampler needs to know about its levels (module docstring)."""

    @property
    def n_levels(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def start(self, n_chains: int, start: SamplerState | None, *, generator: torch.Generator) -> LevelState:
        """Exact base samples at level 0, or ``start`` checked and placed on this ladder."""
        ...

    def sweep(self, state: LevelState, *, generator: torch.Generator) -> tuple[Tensor, ...]:
        """One sweep of every chain at its level; the new layers."""
        ...

    def terms(self, layers: tuple[Tensor, ...]) -> Any:
        """What ``log_f_all`` and the next sweep read from the states ``layers``."""
        ...

    def densities(self, terms: Any) -> tuple[Tensor, Tensor | None]:
        """``log f_k(x)`` at every level, normalised at level 0, shape ``(n, K)``, float64, and
        the path derivatives at every level when the space keeps them (else ``None``)."""
        ...

    def place(
        self,
        layers: tuple[Tensor, ...],
        terms: Any,
        levels: Tensor,
        *,
        generator: torch.Generator,
        values_checked: bool = False,
    ) -> LevelState:
        """The states ``layers`` placed at ``levels`` (shape ``(n,)``); ``values_checked``: the
        layers are known to be 0/1 states (an operator's output), which spares the next sweep its
        check (:attr:`boltzlab.chains.Chains.values_checked`)."""
        ...


def level_step(
    space: LevelSpace, state: LevelState, log_weights: Tensor, *, generator: torch.Generator
) -> tuple[LevelState, Tensor, Tensor]:
    """One step of the level sampler (module docstring): sweep, ``log f`` at all levels, level draw.

    Parameters
    ----------
    space : LevelSpace
    state : LevelState
    log_weights : Tensor, shape (K,), float64, on the space's device
        ``w_k`` in ``q(k | x) ∝ f_k(x)·exp(w_k)`` (``log r_k − log Ẑ_k``).
    generator : torch.Generator

    Returns
    -------
    state : LevelState
        The swept chains at their new levels.
    log_f, log_q : Tensor, shape (n_chains, K), float64
        ``log f_k`` of the swept states and ``log q(k | x)`` (rows normalised).
    """
    layers = space.sweep(state, generator=generator)
    terms = space.terms(layers)
    log_f, derivatives = space.densities(terms)
    log_q = log_f + log_weights[None, :]
    log_q = log_q - torch.logsumexp(log_q, 1, keepdim=True)
    levels = sample_categorical(log_q, generator=generator)
    placed = space.place(layers, terms, levels, generator=generator, values_checked=True)  # swept states
    if derivatives is not None:
        placed = dataclasses.replace(placed, derivatives=derivatives)
    return placed, log_f, log_q


@dataclass(frozen=True)
class ModelLevels:
    """Levels at inverse temperatures of a tempered model, swept by ``operator``.

    Attributes
    ----------
    model : TemperedModel
    operator : Operator
        Swept at each chain's β.
    betas : Tensor, shape (K,), model dtype, on the model's device
        The ladder, ascending from 0; chains sweep at these values.
    betas64 : Tensor, shape (K,), float64, on the model's device
        The same values widened; densities are evaluated at them, so the level draw and the
        sweep target the same distributions.
    density_dtype : {"float64", "float32"}, default "float64"
        Precision of the ``n·K·J`` softplus of ``log f_k(x)`` (float32: errors of order 1e-4
        nats for 500 units, :func:`~boltzlab.estimators.tempered.levels.single_precision_log_f_all`).
        On a CPU, the large ladders of float32 models go through the compiled kernel of
        :mod:`boltzlab.level_sums` in "float64" mode (errors of a few 1e-6 nats; ``β`` is then
        the float32 ladder itself, which ``betas64`` widens exactly).
    derivatives : bool, default False
        Also compute the path derivatives at every level with the densities (TI-RB).
    """

    model: TemperedModel
    operator: Operator
    betas: Tensor
    betas64: Tensor
    density_dtype: str = "float64"
    derivatives: bool = False

    def __post_init__(self) -> None:
        if self.density_dtype not in DENSITY_DTYPES:
            raise ValidationError(
                f"density_dtype must be one of {', '.join(DENSITY_DTYPES)}, got {self.density_dtype!r}"
            )

    @property
    def n_levels(self) -> int:
        """``K``."""
        return self.betas.shape[0]

    @property
    def device(self) -> torch.device:
        return self.model.device

    def start(self, n_chains: int, start: SamplerState | None, *, generator: torch.Generator) -> LevelState:
        """Exact base samples at level 0 (``init_chains`` labels them β = 0), or ``start`` checked."""
        model = self.model
        if start is None:
            chains = model.init_chains(n_chains, generator=generator)
            levels = torch.zeros(n_chains, dtype=torch.int64, device=model.device)
            return LevelState(chains=chains, terms=model.marginal_terms(chains.layers), levels=levels)
        check_chains_match(
            model,
            start.chains,
            name="start chains",
            fix="continue from the final_state of a run of this model, or pass "
            f"SamplerState(chains=start.chains.to(dtype={model.dtype}, device='{model.device}'), "
            "levels=start.levels)",
        )
        levels = torch.as_tensor(start.levels, dtype=torch.int64).to(model.device)
        if start.chains.n_chains != n_chains or levels.shape != (n_chains,):
            raise ValidationError(
                f"start holds {start.chains.n_chains} chains and {tuple(levels.shape)} levels; expected "
                f"n_chains={n_chains} of each"
            )
        if bool((levels < 0).any()) or bool((levels >= self.n_levels).any()):
            raise ValidationError(f"start levels must index the {self.n_levels}-level ladder")
        # The chains carry on at their levels' β of this ladder (a no-op when the ladder is theirs).
        chains = Chains(
            layers=start.chains.layers, beta=self.betas[levels], values_checked=start.chains.values_checked
        )
        return LevelState(chains=chains, terms=model.marginal_terms(chains.layers), levels=levels)

    def sweep(self, state: LevelState, *, generator: torch.Generator) -> tuple[Tensor, ...]:
        """One operator sweep at each chain's β, reusing ``state.terms`` when there are some."""
        swept, _ = self.operator.step(self.model, state.chains, generator=generator, terms=state.terms)
        return swept.layers

    def terms(self, layers: tuple[Tensor, ...]) -> MarginalTerms:
        """``model.marginal_terms`` of the states."""
        return self.model.marginal_terms(layers)

    def log_f_all(self, terms: MarginalTerms) -> Tensor:
        """``log f_k(x)`` at every level (the hidden-summed, normalised-base density)."""
        if self.density_dtype == "float64":
            return log_f_all(terms, self.betas64)
        return single_precision_log_f_all(terms, self.betas64)

    def densities(self, terms: MarginalTerms) -> tuple[Tensor, Tensor | None]:
        """:meth:`log_f_all` and, with ``derivatives``, the path derivatives at every level."""
        if not self.derivatives:
            return self.log_f_all(terms), None
        if self.density_dtype == "float64":
            return log_f_and_derivatives_all(terms, self.betas64)
        return single_precision_log_f_all(terms, self.betas64), path_derivative_all(terms, self.betas64)

    def place(
        self,
        layers: tuple[Tensor, ...],
        terms: MarginalTerms,
        levels: Tensor,
        *,
        generator: torch.Generator,
        values_checked: bool = False,
    ) -> LevelState:
        """The states at ``levels``' β with the summed-out layer redrawn there.

        Redrawing every chain's summed-out layer (moved or not) is a valid collapsed Gibbs
        move; ``terms`` do not depend on β and stay those of the placed chains.
        """
        chains = redraw_summed_layers(
            self.model,
            Chains(layers=layers, beta=self.betas[levels], values_checked=values_checked),
            terms,
            generator=generator,
        )
        return LevelState(chains=chains, terms=terms, levels=levels)
