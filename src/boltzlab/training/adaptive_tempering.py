"""Learning with adaptive simulated tempering (docs/algorithms.md §3.3): the ``"ast"`` phase.

One set of chains moves over a ladder of temperatures with Wang–Landau weights adapted for
ever (the point, in learning, is to follow a moving model); their β = 1 visits give the model
term. The scheme-driven phases (PT, CAST, Trans-SAP) live in :mod:`boltzlab.training.tempered`;
this phase shares their scheme steps, moving rates and checkpoint helpers
(:mod:`boltzlab.training.scheme_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.operators.base import Operator
from boltzlab.tempering.simulated import SimulatedTemperingState
from boltzlab.tempering.wang_landau import AdaptiveSimulatedTempering
from boltzlab.training.negative import (
    NegativePhaseBase,
    advance_chains,
    chains_to_tensors,
    persistent_chains_from_tensors,
    register_phase,
)
from boltzlab.training.scheme_steps import (
    ST_METRICS,
    MovingRates,
    advance_scheme,
    scheme_tensors,
    st_metrics,
    with_scheme_prefix,
)
from boltzlab.validation import check_positive_int

__all__ = ["AdaptiveTemperingLearning", "AdaptiveTemperingLearningState"]


@dataclass(frozen=True, slots=True)
class AdaptiveTemperingLearningState:
    """The state of adaptive-ST learning.

    Attributes
    ----------
    chains : Chains
        The ``n_chains`` persistent chains at β = 1 (the model term's samples).
    scheme_state : SimulatedTemperingState
        The adaptive-ST state of the last run; its Wang–Landau ``log_weights`` (and step
        count) carry over to the next run, its chains are replaced by ``chains`` at its start.
    updates_since_run : int
        SAP updates since the last adaptive-ST run.
    metric_numerators, metric_denominators : Tensor, shape (2,), float64
        Moving sums of the runs' level-move diagnostics (:func:`st_metrics`).
    """

    chains: Chains
    scheme_state: SimulatedTemperingState
    updates_since_run: int
    metric_numerators: Tensor
    metric_denominators: Tensor


class AdaptiveTemperingLearning(NegativePhaseBase):
    """Adaptive-ST learning: SAP updates alternating with adaptive-ST runs (docs/algorithms.md §3.3).

    Every ``sap_updates + 1`` updates form a cycle: ``sap_updates`` updates each sweep the
    persistent chains ``k`` times at β = 1 with the operator (SAP); the next update instead
    runs adaptive simulated tempering for ``run_length`` steps, starting every chain at the
    target level from its persistent state, and the persistent chains become the run's stored
    β = 1 states (``last_target``: with the default ``target_refresh="swap"`` an exact
    β = 1 sample exchanged in at every visit to the target level, or the starting state if the
    chain never came back; see :mod:`boltzlab.tempering.simulated`). The Wang–Landau weights — one vector per chain by
    default — carry over from run to run.

    Parameters
    ----------
    scheme : AdaptiveSimulatedTempering
        The adaptive-ST sampler (its ladder, γ, weights sharing, level move).
    k : int, default 1
        Operator sweeps per SAP update.
    n_chains : int, default 100
    sap_updates : int, default 100
        ``N``: SAP updates between runs. The paper gives no value (docs/algorithms.md §3.3); ours.
    run_length : int, default 100
        Adaptive-ST steps per run (each one sweep of every chain plus a level move). Ours:
        long enough for round trips through the paper's 20-level ladder (a Wang–Landau walk
        needs well over ``2K`` steps for one); with the defaults adaptive-ST learning costs
        about twice SAP, as CAST does.
    metrics_horizon : float >= 1, default 100
        Horizon, in adaptive-ST steps, of the ``level_acceptance`` and ``bottom_occupancy``
        moving averages.
    """

    name = "ast"

    def __init__(
        self,
        *,
        scheme: AdaptiveSimulatedTempering,
        k: int = 1,
        n_chains: int = 100,
        sap_updates: int = 100,
        run_length: int = 100,
        metrics_horizon: float = 100.0,
    ) -> None:
        if not isinstance(scheme, AdaptiveSimulatedTempering):
            raise ValidationError(
                f"scheme must be an AdaptiveSimulatedTempering, got {type(scheme).__name__}"
            )
        self.scheme = scheme
        self.operator = scheme.operator
        self.k = check_positive_int(k, "k")
        self.n_chains = check_positive_int(n_chains, "n_chains")
        self.sap_updates = check_positive_int(sap_updates, "sap_updates")
        self.run_length = check_positive_int(run_length, "run_length")
        self.rates = MovingRates(ST_METRICS, st_metrics, metrics_horizon)

    def __repr__(self) -> str:
        return (
            f"AdaptiveTemperingLearning(scheme={self.scheme!r}, k={self.k}, n_chains={self.n_chains}, "
            f"sap_updates={self.sap_updates}, run_length={self.run_length})"
        )

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> AdaptiveTemperingLearningState:
        """The scheme's initial state; the persistent chains are its stored β = 1 base samples."""
        scheme_state = self.scheme.init(model, self.n_chains, generator=generator)
        numerators, denominators = self.rates.zeros(model.device)
        return AdaptiveTemperingLearningState(
            chains=self.scheme.samples(scheme_state),
            scheme_state=scheme_state,
            updates_since_run=0,
            metric_numerators=numerators,
            metric_denominators=denominators,
        )

    def step(
        self,
        model: Any,
        state: AdaptiveTemperingLearningState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[AdaptiveTemperingLearningState, Chains]:
        """``k`` SAP sweeps, or (every ``sap_updates + 1``-th update) one adaptive-ST run."""
        if state.updates_since_run < self.sap_updates:
            chains = advance_chains(self.operator, model, state.chains, self.k, generator=generator)
            return replace(state, chains=chains, updates_since_run=state.updates_since_run + 1), chains
        # The run starts every chain at the target level from its persistent state; only the
        # weights (and γ's step count and the visit counts) come from the previous run.
        levels = torch.full((self.n_chains,), self.scheme.top, dtype=torch.int64, device=state.chains.device)
        betas, _ = self.scheme.level_betas(model)
        scheme_state = replace(
            state.scheme_state,
            chains=Chains(layers=state.chains.layers, beta=betas[levels]),
            levels=levels,
            last_target=state.chains,
        )
        scheme_state, numerators, denominators = advance_scheme(
            self.scheme,
            model,
            scheme_state,
            self.run_length,
            rates=self.rates,
            numerators=state.metric_numerators,
            denominators=state.metric_denominators,
            generator=generator,
        )
        chains = self.scheme.samples(scheme_state)
        new_state = AdaptiveTemperingLearningState(
            chains=chains,
            scheme_state=scheme_state,
            updates_since_run=0,
            metric_numerators=numerators,
            metric_denominators=denominators,
        )
        return new_state, chains

    def samples(self, state: AdaptiveTemperingLearningState) -> Chains | None:
        return state.chains

    def metrics(self, state: AdaptiveTemperingLearningState) -> dict[str, float]:
        """Moving averages of the runs' level acceptance and hottest-level occupancy."""
        return self.rates.values(state.metric_numerators, state.metric_denominators)

    def state_tensors(self, state: AdaptiveTemperingLearningState) -> dict[str, Tensor]:
        tensors = chains_to_tensors(state.chains)
        tensors.update(with_scheme_prefix(self.scheme.state_tensors(state.scheme_state)))
        tensors["updates_since_run"] = torch.tensor([state.updates_since_run], dtype=torch.int64)
        tensors.update(self.rates.to_tensors(state.metric_numerators, state.metric_denominators))
        return tensors

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> AdaptiveTemperingLearningState:
        chains = persistent_chains_from_tensors(model, tensors, self.n_chains)
        scheme_state = self.scheme.state_from_tensors(model, scheme_tensors(tensors))
        if scheme_state.levels.shape[0] != self.n_chains:
            raise ValidationError(
                f"the checkpoint holds {scheme_state.levels.shape[0]} tempered chains, "
                f"this run asks for {self.n_chains}"
            )
        if "updates_since_run" not in tensors:
            raise ValidationError(
                "the checkpoint has no 'updates_since_run': not an adaptive-ST learning state"
            )
        numerators, denominators = self.rates.from_tensors(tensors, model.device)
        return AdaptiveTemperingLearningState(
            chains=chains,
            scheme_state=scheme_state,
            updates_since_run=int(tensors["updates_since_run"].reshape(-1)[0]),
            metric_numerators=numerators,
            metric_denominators=denominators,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scheme": repr(self.scheme),
            "operator": repr(self.operator),
            "k": self.k,
            "n_chains": self.n_chains,
            "sap_updates": self.sap_updates,
            "run_length": self.run_length,
            "metrics_horizon": self.rates.horizon,
        }


# ---------------------------------------------------------------------- registrations


@register_phase("ast")
def _make_ast(
    *,
    operator: Operator,
    k: int,
    n_chains: int,
    sap_updates: int = 100,
    run_length: int = 100,
    metrics_horizon: float = 100.0,
    **options: Any,
) -> AdaptiveTemperingLearning:
    """Adaptive-ST learning; ``options`` go to
    :class:`~boltzlab.tempering.wang_landau.AdaptiveSimulatedTempering` (``ladder``,
    ``n_levels`` = 20, ``low`` = 0.9, ``gamma`` = 10, ``gamma_decay``, ``shared_weights``,
    ``log_weights``, ``level_move``, ``target_refresh``)."""
    return AdaptiveTemperingLearning(
        scheme=AdaptiveSimulatedTempering(operator, **options),
        k=k,
        n_chains=n_chains,
        sap_updates=sap_updates,
        run_length=run_length,
        metrics_horizon=metrics_horizon,
    )
