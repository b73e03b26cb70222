"""Persistent contrastive divergence, PCD-k (Tieleman 2008, *Training restricted Boltzmann
machines using approximations to the likelihood gradient*, ICML, §3), the stochastic
approximation procedure of Younes (1988) also called SAP (docs/algorithms.md §3.1).

``n_chains`` negative chains persist across updates; each update advances them by ``k``
sweeps of any transition operator *with the current parameters*, then the model term uses
their visible states with ``p(h|v)``. Because the parameters change slowly, the chains stay
near the model's distribution and the gradient estimate is asymptotically unbiased
(Robbins–Monro conditions on the learning rate).

The chains start either at randomly chosen training examples with ``h ~ p(h|v)`` (the
default: early model terms then resemble CD's) or at exact samples of the model's base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.operators.base import Operator
from boltzlab.training.negative import (
    NegativePhaseBase,
    advance_chains,
    chains_to_tensors,
    persistent_chains_from_tensors,
    register_phase,
)
from boltzlab.validation import check_positive_int

__all__ = ["PersistentContrastiveDivergence", "PersistentState"]

_INITS = ("data", "base")


@dataclass(frozen=True, slots=True)
class PersistentState:
    """The persistent chains of PCD.

    Attributes
    ----------
    chains : Chains
        ``n_chains`` chains at β = 1; layers of shape ``(n_chains, n_units)``.
    """

    chains: Chains


@register_phase("pcd")
class PersistentContrastiveDivergence(NegativePhaseBase):
    """PCD-k (SAP) with any operator.

    Parameters
    ----------
    operator : Operator
    k : int, default 1
        Sweeps of every persistent chain per update.
    n_chains : int, default 100
    init : {"data", "base"}, default "data"
        Start the chains at random training examples (with ``h ~ p(h|v)``) or at exact
        samples of the model's base (base-rate visibles, uniform hiddens).
    """

    name = "pcd"

    def __init__(self, *, operator: Operator, k: int = 1, n_chains: int = 100, init: str = "data") -> None:
        self.operator = operator
        self.k = check_positive_int(k, "k")
        self.n_chains = check_positive_int(n_chains, "n_chains")
        if init not in _INITS:
            raise ValidationError(f"init must be one of {', '.join(_INITS)}, got {init!r}")
        self.init_from = init

    def __repr__(self) -> str:
        return (
            f"PersistentContrastiveDivergence(operator={self.operator!r}, k={self.k}, "
            f"n_chains={self.n_chains}, init={self.init_from!r})"
        )

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> PersistentState:
        """``n_chains`` chains from the data or from the base, at β = 1."""
        if self.init_from == "data":
            index = torch.randint(data.shape[0], (self.n_chains,), generator=generator, device=data.device)
            chains = model.chains_from(data[index], generator=generator, beta=1.0)
        else:
            chains = model.init_chains(self.n_chains, generator=generator).with_beta(1.0)
        return PersistentState(chains=chains)

    def step(
        self,
        model: Any,
        state: PersistentState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[PersistentState, Chains]:
        """``k`` sweeps of the persistent chains under the current parameters."""
        chains = advance_chains(self.operator, model, state.chains, self.k, generator=generator)
        return PersistentState(chains=chains), chains

    def samples(self, state: PersistentState) -> Chains | None:
        return state.chains

    def state_tensors(self, state: PersistentState) -> dict[str, Tensor]:
        return chains_to_tensors(state.chains)

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> PersistentState:
        return PersistentState(chains=persistent_chains_from_tensors(model, tensors, self.n_chains))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "operator": repr(self.operator),
            "k": self.k,
            "n_chains": self.n_chains,
            "init": self.init_from,
        }
