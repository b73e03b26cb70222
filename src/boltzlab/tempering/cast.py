"""CAST: coupled adaptive simulated tempering (Salakhutdinov 2010, §4; docs/algorithms.md §3.4).

Persistent chains at β = 1 (the *slow* chains, whose states feed a gradient) get stuck in
modes once the learning rate is small. CAST pairs each slow chain with a *fast* chain running
adaptive simulated tempering (:mod:`boltzlab.tempering.wang_landau`) and, every ``lag`` steps
(the paper's 50), exchanges the slow chain's state with its fast partner's stored β = 1 state
``last_target``. A step sweeps the slow chains at β = 1 and the fast chains at their own β in
**one** operator call on the concatenated batch, after one ``marginal_terms`` call on it (the
fast chains' level move and the sweep's first layer both use it), so a step costs what two
plain sweeps cost — the paper's "equal cost to two chains".

**Exchange** (docs/open-questions.md item 15). ``exchange="swap"`` (default) is a true exchange: the
slow chain takes the stored state and the store takes the old slow state, while the fast
chain's current ``(x, k)`` is unchanged. ``exchange="copy"`` copies the stored state into the
slow chain and leaves the store as it was (two chains may then hold the same state).

**Exactness.** With γ = 0, weights equal to the exact ``log Z_k``, ``target_refresh="swap"``
and ``exchange="swap"``, the whole scheme leaves ``p_1(slow)·q(x, k)·p_1(stored)`` invariant:
each sweep and level move does, the store refresh exchanges two independent ``p_1`` draws, and
so does the lag exchange. The slow chains are then exact samplers that mix through the fast
chains. With the default constant γ = 10 the fast chains are *adaptive*: their weights move
every step, so neither they nor the slow chains sample a fixed distribution exactly. That is
what learning wants (the model moves under the chains anyway, and the moving weights keep the
fast chains sweeping through the temperatures), but it is not an exact sampler. The paper's
literal store (``target_refresh="copy"``, the last state at β = 1) is biased even at γ = 0: a
stored state survives until the fast chain next reaches β = 1, so states that leave β = 1
quickly are over-represented (on tiny multimodal RBMs the stored states are 0.05–0.15 in total
variation from ``p_1``; see :mod:`boltzlab.tempering.simulated`). ``exchange="copy"`` keeps
each slow chain's marginal law exact (it copies an exact ``p_1`` draw) but makes a slow chain
and its partner's store duplicates until the next refresh.

**Ladder.** Default ``ladders.uniform(20, low=0.9)``: the paper's 20 temperatures from 1 down to
0.9, ascending in boltzlab (the paper's level 1 is our level ``K − 1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains, chains_from_tensors, chains_to_tensors
from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.rng import resolve_generator
from boltzlab.tempering.base import check_choice, check_state_chains, select_terms
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.level_summary import (
    SimulatedTemperingInfo,
    SimulatedTemperingSummary,
    summarize_levels,
)
from boltzlab.tempering.registry import register_scheme
from boltzlab.tempering.simulated import SimulatedTemperingState
from boltzlab.tempering.wang_landau import AdaptiveSimulatedTempering
from boltzlab.validation import check_positive_int

__all__ = ["CAST", "CASTInfo", "CASTState", "CASTSummary"]

_EXCHANGES = ("swap", "copy")


@dataclass(frozen=True, slots=True)
class CASTState:
    """State of CAST: ``n_chains`` slow chains and ``n_chains`` fast adaptive-ST chains.

    Attributes
    ----------
    slow : Chains
        The slow chains, all at β = 1 (what :meth:`CAST.samples` returns).
    fast : SimulatedTemperingState
        The fast chains' adaptive simulated-tempering state (levels, WL weights,
        ``last_target``).
    n_steps : int
        Steps taken since ``init``.
    n_exchanges : int
        Exchange rounds done since ``init`` (one every ``lag`` steps).
    """

    slow: Chains
    fast: SimulatedTemperingState
    n_steps: int
    n_exchanges: int


@dataclass(frozen=True, slots=True)
class CASTInfo:
    """Per-step diagnostics: the fast chains' level move and whether this step exchanged."""

    fast: SimulatedTemperingInfo
    exchanged: bool


@dataclass(frozen=True)
class CASTSummary:
    """Diagnostics of a CAST run.

    Attributes
    ----------
    fast : SimulatedTemperingSummary
        Occupancy, trajectories, level acceptance and round trips of the fast chains.
    n_exchanges : int
        Exchange rounds during the run.
    lag : int
    acceptance_rate : float
        Level-move acceptance of the fast chains (``fast.acceptance_rate``).
    occupancy : Tensor, shape (K,), float64
        Fast-chain occupancy (``fast.occupancy``).
    """

    fast: SimulatedTemperingSummary
    n_exchanges: int
    lag: int
    acceptance_rate: float
    occupancy: Tensor


class CAST:
    """Coupled adaptive simulated tempering (registered ``"cast"``).

    Parameters
    ----------
    operator : Operator or str
        Swept on the slow chains at β = 1 and on the fast chains at their own β.
    ladder : Ladder or sequence of float, optional
        Fast chains' ladder, ascending to 1. Default ``ladders.uniform(n_levels, low=low)``.
    lag : int, default 50
        Exchange every ``lag`` steps (the paper's 50: exchanging at every visit to β = 1
        would trade the same states back and forth).
    exchange : {"swap", "copy"}, default "swap"
        True exchange of the slow state and the stored β = 1 state, or a copy into the slow
        chain (module docstring).
    **fast_options
        The fast chains' adaptive ST, passed to
        :class:`~boltzlab.tempering.wang_landau.AdaptiveSimulatedTempering` with its
        defaults: ``n_levels`` of the default ladder (20), ``low`` (0.9), ``gamma`` (10,
        constant), ``gamma_decay``, ``shared_weights`` (one weight vector per fast chain),
        ``log_weights``, ``level_move``, ``target_refresh``.

    Notes
    -----
    ``n_chains`` in :meth:`init` (and in ``bl.sample``) is the number of slow chains; there are
    as many fast chains, so a step sweeps ``2·n_chains`` chains.
    """

    name = "cast"

    def __init__(
        self,
        operator: Operator | str,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        *,
        lag: int = 50,
        exchange: str = "swap",
        **fast_options: Any,
    ) -> None:
        # The fast chains' options and their defaults are AdaptiveSimulatedTempering's own.
        self.fast = AdaptiveSimulatedTempering(operator, ladder, **fast_options)
        self.operator = self.fast.operator
        self.lag = check_positive_int(lag, "lag")
        self.exchange = check_choice(exchange, _EXCHANGES, "exchange")

    def __repr__(self) -> str:
        return f"CAST(lag={self.lag}, exchange={self.exchange!r}, fast={self.fast!r})"

    @property
    def ladder(self) -> Ladder:
        """The fast chains' ladder."""
        return self.fast.ladder

    def init(
        self, model: TemperedModel, n_chains: int, *, generator: torch.Generator | int | None
    ) -> CASTState:
        """``n_chains`` slow chains at β = 1 and ``n_chains`` fast chains at the target level.

        All start from exact base samples (so they need burn-in); the fast state is drawn first.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, model.device)
        fast = self.fast.init(model, n_chains, generator=generator)
        slow = model.init_chains(n_chains, generator=generator).with_beta(1.0)
        return CASTState(slow=slow, fast=fast, n_steps=0, n_exchanges=0)

    def step(
        self, model: TemperedModel, state: CASTState, *, generator: torch.Generator
    ) -> tuple[CASTState, CASTInfo]:
        """Fast level move, one sweep of slow and fast chains together, store refresh and
        Wang-Landau update, and every ``lag`` steps the exchange. ``state`` is not modified."""
        check_state_chains(model, state.slow)
        check_state_chains(model, state.fast.chains)
        n_chains = state.slow.n_chains
        both_layers = _concatenate(state.slow.layers, state.fast.chains.layers)
        terms = model.marginal_terms(both_layers)
        moved, fast_info = self.fast.move_levels(
            model, state.fast, terms=select_terms(terms, slice(n_chains, None)), generator=generator
        )
        # The level move changed only the fast chains' summed-out layer and β, so the terms
        # computed before it still hold for the concatenated batch.
        both = Chains(
            layers=_concatenate(state.slow.layers, moved.chains.layers),
            beta=torch.cat([state.slow.beta, moved.chains.beta]),
            values_checked=state.slow.values_checked and moved.chains.values_checked,
        )
        swept, _ = self.operator.step(model, both, generator=generator, terms=terms)
        slow = swept.select(slice(0, n_chains))
        fast = self.fast.after_sweep(moved, swept.select(slice(n_chains, None)))
        n_steps = state.n_steps + 1
        exchanged = n_steps % self.lag == 0
        n_exchanges = state.n_exchanges
        if exchanged:
            stored = fast.last_target
            if self.exchange == "swap":
                fast = replace(fast, last_target=slow)
            slow = stored
            n_exchanges += 1
        new_state = CASTState(slow=slow, fast=fast, n_steps=n_steps, n_exchanges=n_exchanges)
        return new_state, CASTInfo(fast=fast_info, exchanged=exchanged)

    def samples(self, state: CASTState) -> Chains:
        """The slow chains (β = 1): the states a trainer's gradient uses."""
        return state.slow

    def summarize(self, step_infos: list[CASTInfo], final_state: CASTState) -> CASTSummary:
        """Fast-chain occupancy, trajectories and level acceptance; exchanges during the run."""
        fast = summarize_levels(
            [info.fast for info in step_infos],
            final_state.fast.log_weights,
            betas=self.ladder.betas,
            level_move=self.fast.level_move,
            device=final_state.slow.device,
        )
        return CASTSummary(
            fast=fast,
            n_exchanges=sum(1 for info in step_infos if info.exchanged),
            lag=self.lag,
            acceptance_rate=fast.acceptance_rate,
            occupancy=fast.occupancy,
        )

    def state_tensors(self, state: CASTState) -> dict[str, Tensor]:
        """Named tensors that rebuild ``state`` bit for bit (fast-chain entries prefixed ``fast.``)."""
        tensors = chains_to_tensors(state.slow, "slow", with_beta=False)  # slow chains are at β = 1
        tensors.update({f"fast.{key}": value for key, value in self.fast.state_tensors(state.fast).items()})
        tensors["n_steps"] = torch.tensor([state.n_steps], dtype=torch.int64)
        tensors["n_exchanges"] = torch.tensor([state.n_exchanges], dtype=torch.int64)
        return tensors

    def state_from_tensors(self, model: TemperedModel, tensors: dict[str, Tensor]) -> CASTState:
        """Inverse of :meth:`state_tensors`, on ``model``'s device and dtype."""
        for key in ("n_steps", "n_exchanges"):
            if key not in tensors:
                raise ValidationError(f"tensors has no {key!r}: not a CAST state")
        fast = self.fast.state_from_tensors(
            model, {key[len("fast.") :]: value for key, value in tensors.items() if key.startswith("fast.")}
        )
        slow = chains_from_tensors(
            tensors, "slow", dtype=model.dtype, device=model.device, layer_sizes=model.layer_sizes, beta=1.0
        )
        if slow.n_chains != fast.chains.n_chains:
            raise ValidationError(
                f"inconsistent CAST state: {slow.n_chains} slow chains but {fast.chains.n_chains} fast chains"
            )
        return CASTState(
            slow=slow,
            fast=fast,
            n_steps=int(tensors["n_steps"].reshape(-1)[0]),
            n_exchanges=int(tensors["n_exchanges"].reshape(-1)[0]),
        )


@register_scheme("cast")
def _coupled_adaptive_simulated_tempering(operator: Operator, **options: Any) -> CAST:
    """Factory behind ``bl.sample(model, sampler="cast", ...)`` when it does not adapt first (a
    ``gamma`` schedule or ``log_weights`` given, or ``adapt=False``: the paper's scheme, as the
    trainer runs it) and behind ``sampling.make_scheme("cast")``; by default ``bl.sample``
    adapts, then freezes (:mod:`boltzlab.tempering.adaptation`)."""
    return CAST(operator, **options)


def _concatenate(first: tuple[Tensor, ...], second: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(torch.cat([a, b]) for a, b in zip(first, second, strict=True))
