"""Simulated tempering with fixed log-weights, the scheme adaptive ST and CAST build on.

Simulated tempering (Marinari & Parisi 1992; Geyer & Thompson 1995; docs/algorithms.md §2.3)
gives every chain a temperature index ``k`` and samples the joint target

    q(x, k) ∝ f_{β_k}(x) · exp(−w_k),

where ``f_β`` is the model's tempered family and ``w`` are log-weights (float64). With
``w_k = log Z(β_k)`` every level is occupied equally often; ``q(x | k) = p_{β_k}(x)`` whatever
the weights. **Ladder order:** boltzlab ladders are ascending, ``β_0 < … < β_{K−1} = 1``, so
the target is the *last* level ``K − 1``. The CAST / Wang-Landau paper (Salakhutdinov 2010)
writes its ladder descending, ``β_1 = 1 > … > β_K``: its level ``j`` is our level ``K − j``.

One step of :class:`SimulatedTempering` is

1. a **level move** with the summed-out densities ``log f_β(x)`` (hidden units summed out,
   one ``marginal_terms`` call per step), either

   * ``"metropolis"`` (the WL/CAST move): propose ``k ± 1`` with probability ½ each, the only
     neighbour with probability 1 at the two ends, and accept with
     ``log A = log f_{k'}(x) − w_{k'} − log f_k(x) + w_k + log q(k|k') − log q(k'|k)``; the
     proposal ratio is 2 or ½ when an end is involved (the docs/algorithms.md §2.3 pitfall: dropping it
     biases the occupancy of the end levels), or
   * ``"gibbs"`` (the RTS move): draw ``k`` from ``q(k | x) = softmax_k(log f_k(x) − w_k)`` by
     inverse CDF with one uniform per chain;

   then the summed-out layer of every chain whose level changed is redrawn from its exact
   conditional at the new β (:func:`~boltzlab.tempering.base.redraw_summed_layers`: the move
   plus the redraw is a Metropolis-Hastings step on the joint state, so state-dependent
   operators such as flip-the-state stay exact);
2. one **operator sweep** of every chain at its own β. The sweep reuses the pre-activations
   of step 1 for the summed-out layer, so a step costs the two matrix products of a plain
   sweep. Moving first and sweeping second computes those pre-activations with the current
   parameters, which matters when a trainer changes the model between steps;
3. the **β = 1 record** (``last_target``, see below).

**The β = 1 samples.** How many chains sit at β = 1 varies from step to step, but a sampler
must hand ``n_chains`` β = 1 states to its consumers (``samples``; ``bl.sample`` stacks them).
So each chain carries one stored β = 1 state, ``last_target``, refreshed whenever the chain
is at the top level after its sweep, and ``samples(state)`` returns these ``n_chains`` states.
How the refresh is done matters:

* ``target_refresh="swap"`` (default): the chain's state and the stored one are *exchanged*.
  Under ``q(x, k)·p_1(y)`` the two are, given ``k = K − 1``, independent draws from ``p_1``,
  so exchanging them leaves that product invariant: with fixed weights every stored state is
  an exact ``p_1`` sample, independent of the chain (at stationarity). The chain continues
  from the stored state, which is as good a β = 1 state as its own. While a chain stays at
  the top its two states alternate, each swept every other step; the one it leaves with is
  carried down the ladder, so a stored state is renewed about every second visit to the top
  and needs a few bottom-to-top round trips of burn-in.
* ``target_refresh="copy"``: the stored state becomes a copy of the chain's state (the CAST
  paper's "last state with k = 1"). A stored state then survives until the chain next returns
  to the top, so states that leave the top quickly are over-represented (Kac's lemma: the
  stored state has density ``∝ p_1(x)·E[return time to the top | x]``). The bias vanishes
  only when a sweep mixes completely, and it is not small: 0.05–0.15 in total variation from
  ``p_1`` on the tiny multimodal RBMs of ``tests/tempering/test_simulated.py``.

The exact variable-size set of chains now at β = 1 is :meth:`SimulatedTempering.chains_at_target`.

The level moves live in :mod:`boltzlab.tempering.level_moves`, the per-step infos and run
summaries in :mod:`boltzlab.tempering.level_summary`. ``bl.sample(model, sampler="st")`` runs
this scheme with weights adapted on a placed ladder and then frozen
(:mod:`boltzlab.tempering.adaptation`) unless it is given ``log_weights``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab import operators as operator_registry
from boltzlab.chains import Chains, chains_from_tensors, chains_to_tensors
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel, log_f_marginal, log_f_marginal_all
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.rng import BlockGenerator, resolve_generator
from boltzlab.tempering import ladders
from boltzlab.tempering.base import (
    check_choice,
    check_state_chains,
    metropolis_accept,
    redraw_summed_layers,
    select_terms,
)
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.level_moves import log_proposal_ratio, propose_neighbours, sample_categorical
from boltzlab.tempering.level_summary import (
    SimulatedTemperingInfo,
    SimulatedTemperingSummary,
    summarize_levels,
)
from boltzlab.tempering.registry import register_scheme
from boltzlab.validation import check_positive_int

# The scheme's result types live in level_summary.py (shared with AST and CAST) and are
# re-exported here because they are what ``SimulatedTempering`` returns.
__all__ = [
    "SimulatedTempering",
    "SimulatedTemperingInfo",
    "SimulatedTemperingState",
    "SimulatedTemperingSummary",
]

_LEVEL_MOVES = ("metropolis", "gibbs")
_TARGET_REFRESHES = ("swap", "copy")


@dataclass(frozen=True, slots=True)
class SimulatedTemperingState:
    """State of ``n_chains`` simulated-tempering chains on a ladder of ``K`` levels.

    Attributes
    ----------
    chains : Chains
        Current states; ``chains.beta[i]`` is the inverse temperature of ``levels[i]`` (in the
        model's dtype).
    levels : Tensor, shape (n_chains,), int64
        Level index of each chain; ``K − 1`` is the target (β = 1).
    log_weights : Tensor, shape (K,) or (n_chains, K), float64
        ``w`` in ``q(x, k) ∝ f_k(x)·exp(−w_k)``, shared or one vector per chain, stored
        relative to the target level (``w[..., K − 1] = 0``).
    last_target : Chains
        One stored β = 1 state per chain (see the module docstring); ``beta`` all ones.
    visits : Tensor, shape (K,), int64
        Chain-steps spent at each level (after the level move) since ``init``.
    n_steps : int
        Steps taken since ``init``.
    """

    chains: Chains
    levels: Tensor
    log_weights: Tensor
    last_target: Chains
    visits: Tensor
    n_steps: int


class SimulatedTempering:
    """Simulated tempering with fixed log-weights around any operator (registered ``"st"``).

    Parameters
    ----------
    operator : Operator or str
        The transition operator swept at each chain's β (``"gibbs"``, ``"flip"``, …).
    ladder : Ladder or sequence of float, optional
        Ascending inverse temperatures ending at 1 (target = last level). Default
        ``ladders.uniform(n_levels)`` (0 to 1).
    n_levels : int, optional
        Number of levels of the default ladder (10); must match ``ladder`` if both are given.
    log_weights : sequence of float or Tensor, shape (K,), optional
        ``w_k`` in ``q(x, k) ∝ f_k(x)·exp(−w_k)``; default zeros. Set them to the exact
        ``log Z(β_k)`` for uniform occupancy. Only differences matter.
    level_move : {"metropolis", "gibbs"}, default "metropolis"
        Neighbour Metropolis move (with the end-level proposal ratio) or a Gibbs draw of the
        level from all ``K`` (module docstring).
    target_refresh : {"swap", "copy"}, default "swap"
        How the stored β = 1 state of a chain at the top is refreshed: exchanged with the
        chain's state (exact) or overwritten by a copy (the CAST paper; biased by return time).

    Notes
    -----
    Densities use the ladder rounded to the model's dtype, the same β at which the operator
    sweeps, so the level move and the sweep target the same distributions exactly.

    Examples
    --------
    >>> import boltzlab as bl
    >>> from boltzlab.tempering import SimulatedTempering, ladders
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> scheme = SimulatedTempering("flip", ladders.uniform(4))
    >>> g = bl.rng.make_generator(0)
    >>> state = scheme.init(model, 13, generator=g)
    >>> state, info = scheme.step(model, state, generator=g)
    >>> tuple(scheme.samples(state).visible.shape)
    (13, 7)
    """

    name = "st"

    def __init__(
        self,
        operator: Operator | str,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        *,
        n_levels: int | None = None,
        log_weights: Sequence[float] | Tensor | None = None,
        level_move: str = "metropolis",
        target_refresh: str = "swap",
    ) -> None:
        self.operator = _check_operator(operator)
        self.ladder = ladders.resolve(ladder, n_levels=n_levels, default_levels=10, low=0.0)
        self.log_weights = _check_log_weights(log_weights, self.ladder.size)
        self.level_move = check_choice(level_move, _LEVEL_MOVES, "level_move")
        self.target_refresh = check_choice(target_refresh, _TARGET_REFRESHES, "target_refresh")
        self._beta_cache: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def n_levels(self) -> int:
        """Number of levels ``K``."""
        return self.ladder.size

    @property
    def top(self) -> int:
        """Index of the target level (β = 1): ``K − 1``."""
        return self.ladder.size - 1

    def level_betas(self, model: TemperedModel) -> tuple[Tensor, Tensor]:
        """The ladder in the model's dtype and, from it, in float64; both shape ``(K,)``.

        Chains sweep at the first; densities are evaluated at the second (the same values), so
        the level move and the operator target the same distributions.
        """
        key = (model.dtype, model.device)
        if key not in self._beta_cache:
            in_dtype = self.ladder.betas.to(device=model.device, dtype=model.dtype)
            self._beta_cache[key] = (in_dtype, in_dtype.to(torch.float64))
        return self._beta_cache[key]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(operator={self.operator!r}, n_levels={self.n_levels}, "
            f"level_move={self.level_move!r}, target_refresh={self.target_refresh!r})"
        )

    # ------------------------------------------------------------------ contract
    def initial_log_weights(self, model: TemperedModel, n_chains: int) -> Tensor:
        """The ``log_weights`` a new state starts with: shape ``(K,)``, relative to the target."""
        weights = self.log_weights.to(model.device)
        return weights - weights[self.top]

    def init(
        self, model: TemperedModel, n_chains: int, *, generator: torch.Generator | int | None
    ) -> SimulatedTemperingState:
        """``n_chains`` chains at the target level, started from exact base samples.

        The stored β = 1 states are a second, independent set of base samples. Both need
        burn-in (the chains start at β = 1 with states drawn at β = 0).
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, model.device)
        betas, _ = self.level_betas(model)
        base = model.init_chains(2 * n_chains, generator=generator)
        levels = torch.full((n_chains,), self.top, dtype=torch.int64, device=model.device)
        # States the model drew itself: 0/1 in its binary layers, so the stored β = 1 states that
        # never pass through a sweep carry the flag, and the swept ones keep it.
        chains = Chains(
            layers=tuple(layer[:n_chains] for layer in base.layers), beta=betas[levels], values_checked=True
        )
        last_target = Chains(
            layers=tuple(layer[n_chains:] for layer in base.layers),
            beta=torch.ones(n_chains, dtype=model.dtype, device=model.device),
            values_checked=True,
        )
        return SimulatedTemperingState(
            chains=chains,
            levels=levels,
            log_weights=self.initial_log_weights(model, n_chains),
            last_target=last_target,
            visits=torch.zeros(self.n_levels, dtype=torch.int64, device=model.device),
            n_steps=0,
        )

    def step(
        self, model: TemperedModel, state: SimulatedTemperingState, *, generator: torch.Generator
    ) -> tuple[SimulatedTemperingState, SimulatedTemperingInfo]:
        """Level move, operator sweep at the new β, β = 1 record (module docstring).

        ``state`` is not modified; returns the new state and the level-move diagnostics.
        """
        check_state_chains(model, state.chains)
        terms = model.marginal_terms(state.chains.layers)
        moved, info = self.move_levels(model, state, terms=terms, generator=generator)
        swept, _ = self.operator.step(model, moved.chains, generator=generator, terms=terms)
        return self.after_sweep(moved, swept), info

    def samples(self, state: SimulatedTemperingState) -> Chains:
        """The ``n_chains`` stored β = 1 states (``last_target``; module docstring)."""
        return state.last_target

    def chains_at_target(self, state: SimulatedTemperingState) -> Chains:
        """The chains whose level is now the target: a variable number of β = 1 states."""
        return state.chains.select(state.levels == self.top)

    # ------------------------------------------------------------------ building blocks
    def move_levels(
        self,
        model: TemperedModel,
        state: SimulatedTemperingState,
        *,
        terms: MarginalTerms,
        generator: torch.Generator,
    ) -> tuple[SimulatedTemperingState, SimulatedTemperingInfo]:
        """The level move and the redraw of the summed-out layer of chains that moved.

        ``terms`` must be ``model.marginal_terms(state.chains.layers)``; they stay valid for
        the returned chains (only the summed-out layer changes). ``visits`` and ``n_steps``
        are left to :meth:`after_sweep`.
        """
        betas, betas64 = self.level_betas(model)
        levels = state.levels
        n_chains = levels.shape[0]
        weights = state.log_weights
        if weights.dim() == 1:
            weights = weights.expand(n_chains, -1)
        if self.level_move == "metropolis":
            proposed = propose_neighbours(levels, self.n_levels, generator=generator)
            log_ratio = (
                log_f_marginal(terms, betas64[proposed])
                - weights.gather(1, proposed[:, None]).squeeze(1)
                - log_f_marginal(terms, betas64[levels])
                + weights.gather(1, levels[:, None]).squeeze(1)
                + log_proposal_ratio(levels, proposed, self.n_levels)
            )
            accepted = metropolis_accept(log_ratio, generator=generator)
            new_levels = torch.where(accepted, proposed, levels)
        else:
            log_q = log_f_marginal_all(terms, betas64) - weights
            proposed = sample_categorical(log_q, generator=generator)
            new_levels = proposed
            accepted = new_levels != levels
        chains = Chains(
            layers=state.chains.layers, beta=betas[new_levels], values_checked=state.chains.values_checked
        )
        moved = (new_levels != levels).nonzero().squeeze(1)
        if isinstance(generator, BlockGenerator):
            # Chains sharded by block draw for every row (a subset would mix the blocks' streams).
            redrawn = redraw_summed_layers(model, chains, terms, generator=generator)
            keep = (new_levels != levels)[:, None]
            chains = Chains(
                layers=tuple(
                    torch.where(keep, new, layer)
                    for layer, new in zip(chains.layers, redrawn.layers, strict=True)
                ),
                beta=chains.beta,
                values_checked=redrawn.values_checked,
            )
        elif moved.numel() > 0:
            redrawn = redraw_summed_layers(
                model, chains.select(moved), select_terms(terms, moved), generator=generator
            )
            chains = Chains(
                layers=tuple(
                    layer.index_copy(0, moved, new)
                    for layer, new in zip(chains.layers, redrawn.layers, strict=True)
                ),
                beta=chains.beta,
                values_checked=redrawn.values_checked,
            )
        info = SimulatedTemperingInfo(
            previous_levels=levels, proposed_levels=proposed, levels=new_levels, accepted=accepted
        )
        return replace(state, chains=chains, levels=new_levels), info

    def after_sweep(self, state: SimulatedTemperingState, swept: Chains) -> SimulatedTemperingState:
        """Install the swept chains, refresh the stored β = 1 states, count visits and the step.

        ``state`` is the output of :meth:`move_levels`; ``swept`` its chains after the sweep.
        """
        at_top = (state.levels == self.top)[:, None]
        stored = state.last_target
        if self.target_refresh == "swap":
            chains = Chains(
                layers=tuple(
                    torch.where(at_top, old, new)
                    for new, old in zip(swept.layers, stored.layers, strict=True)
                ),
                beta=swept.beta,
                values_checked=swept.values_checked and stored.values_checked,
            )
        else:
            chains = swept
        last_target = Chains(
            layers=tuple(
                torch.where(at_top, new, old) for new, old in zip(swept.layers, stored.layers, strict=True)
            ),
            beta=stored.beta,
            values_checked=swept.values_checked and stored.values_checked,
        )
        visits = state.visits + torch.bincount(state.levels, minlength=self.n_levels)
        return replace(
            state, chains=chains, last_target=last_target, visits=visits, n_steps=state.n_steps + 1
        )

    # ------------------------------------------------------------------ diagnostics
    def summarize(
        self, step_infos: list[SimulatedTemperingInfo], final_state: SimulatedTemperingState
    ) -> SimulatedTemperingSummary:
        """Occupancy, trajectories, acceptance and round trips over ``step_infos``."""
        return summarize_levels(
            step_infos,
            final_state.log_weights,
            betas=self.ladder.betas,
            level_move=self.level_move,
            device=final_state.levels.device,
        )

    # ------------------------------------------------------------------ checkpoints
    def state_tensors(self, state: SimulatedTemperingState) -> dict[str, Tensor]:
        """Named tensors that rebuild ``state`` bit for bit (safetensors-ready copies)."""
        # β is rebuilt from the levels (chains) or is 1 (the stored states): not saved.
        tensors = chains_to_tensors(state.chains, "chains", with_beta=False)
        tensors.update(chains_to_tensors(state.last_target, "last_target", with_beta=False))
        tensors["levels"] = state.levels.clone()
        tensors["log_weights"] = state.log_weights.clone()
        tensors["visits"] = state.visits.clone()
        tensors["n_steps"] = torch.tensor([state.n_steps], dtype=torch.int64)
        return tensors

    def state_from_tensors(self, model: TemperedModel, tensors: dict[str, Tensor]) -> SimulatedTemperingState:
        """Inverse of :meth:`state_tensors`, on ``model``'s device and dtype."""
        betas, _ = self.level_betas(model)
        device = model.device
        for key in ("levels", "log_weights", "visits", "n_steps"):
            if key not in tensors:
                raise ValidationError(f"tensors has no {key!r}: not a {self.name} state")
        levels = tensors["levels"].to(device=device, dtype=torch.int64)
        chains = _chains_from_tensors(tensors, "chains", model)
        last_target = _chains_from_tensors(tensors, "last_target", model)
        n_chains = chains.n_chains
        if levels.shape != (n_chains,) or last_target.n_chains != n_chains:
            raise ValidationError(
                f"inconsistent state: {n_chains} chains, levels of shape {tuple(levels.shape)}, "
                f"{last_target.n_chains} stored beta = 1 states"
            )
        if n_chains and not bool(((levels >= 0) & (levels < self.n_levels)).all()):
            raise ValidationError(f"levels must lie in [0, {self.n_levels}) for this ladder")
        log_weights = tensors["log_weights"].to(device=device, dtype=torch.float64)
        if log_weights.shape not in ((self.n_levels,), (n_chains, self.n_levels)):
            raise ValidationError(
                f"log_weights has shape {tuple(log_weights.shape)}; this ladder has {self.n_levels} levels"
            )
        visits = tensors["visits"].to(device=device, dtype=torch.int64)
        if visits.shape != (self.n_levels,):
            raise ValidationError(f"visits has shape {tuple(visits.shape)}, expected ({self.n_levels},)")
        return SimulatedTemperingState(
            chains=Chains(layers=chains.layers, beta=betas[levels]),
            levels=levels,
            log_weights=log_weights,
            last_target=last_target,
            visits=visits,
            n_steps=int(tensors["n_steps"].reshape(-1)[0]),
        )


@register_scheme("st")
def _simulated_tempering(operator: Operator, **options: Any) -> SimulatedTempering:
    """Factory behind ``bl.sample(model, sampler="st", ...)`` when it does not adapt first
    (``log_weights`` given, or ``adapt=False``) and behind ``sampling.make_scheme("st")``."""
    return SimulatedTempering(operator, **options)


def _chains_from_tensors(tensors: dict[str, Tensor], prefix: str, model: TemperedModel) -> Chains:
    """Chains saved without β, at β = 1, checked against the model's layer sizes."""
    return chains_from_tensors(
        tensors, prefix, dtype=model.dtype, device=model.device, layer_sizes=model.layer_sizes, beta=1.0
    )


# ---------------------------------------------------------------------- validation
def _check_operator(operator: Operator | str) -> Operator:
    if isinstance(operator, str):
        return operator_registry.get(operator)
    operator = resolve_operator(operator)
    return operator


def _check_log_weights(log_weights: Sequence[float] | Tensor | None, n_levels: int) -> Tensor:
    if log_weights is None:
        return torch.zeros(n_levels, dtype=torch.float64)
    try:
        weights = torch.as_tensor(log_weights, dtype=torch.float64).detach().clone().cpu()
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValidationError(f"log_weights could not be read as numbers: {error}") from None
    if weights.shape != (n_levels,):
        raise ValidationError(
            f"log_weights must have shape ({n_levels},), one per level, got {tuple(weights.shape)}"
        )
    if not bool(torch.isfinite(weights).all()):
        raise ValidationError("log_weights must be finite")
    return weights
