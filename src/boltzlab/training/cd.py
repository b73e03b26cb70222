"""Contrastive divergence, CD-k (Hinton 2002, *Training products of experts by minimizing
contrastive divergence*, Neural Computation 14(8), §3–4).

Each update restarts the negative chains at the minibatch: ``v⁰ = v``, ``h⁰ ~ p(h|v)``, then
``k`` sweeps of any transition operator (Gibbs in the paper; flip-the-state or the α-mixture
as drop-in replacements, Brügge, Fischer & Igel 2013, §4). The model term uses ``v^k`` with
``p(h|v^k)`` (see :mod:`boltzlab.training.objective`). CD is biased — the chains are far
from stationarity — but cheap and has low variance.

The hidden start ``h⁰`` is drawn from the data-term layers the objective already computed
(for an RBM exactly ``p(h|v)``, for a DBM its mean-field posterior), so it costs no extra
matrix product. Gibbs ignores it (its first half-sweep redraws ``h`` given ``v``); the
flip-the-state operator moves away from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.operators.base import Operator
from boltzlab.rng import sample_bernoulli
from boltzlab.training.negative import (
    NegativePhaseBase,
    advance_chains,
    chains_from_tensors,
    chains_to_tensors,
    register_phase,
)
from boltzlab.validation import check_positive_int

__all__ = ["CDState", "ContrastiveDivergence"]


@dataclass(frozen=True, slots=True)
class CDState:
    """The state of CD: only the last negative chains, kept for ``TrainResult.final_chains``.

    Attributes
    ----------
    chains : Chains or None
        ``(v^k, h^k)`` of the last update, shape ``(batch_size, ·)``; ``None`` before the first.
    """

    chains: Chains | None = None


class ContrastiveDivergence(NegativePhaseBase):
    """CD-k with any operator.

    Parameters
    ----------
    operator : Operator
        The transition operator (``boltzlab.operators.get(...)``).
    k : int, default 1
        Sweeps per update.

    Examples
    --------
    >>> import boltzlab as bl
    >>> from boltzlab.training import ContrastiveDivergence
    >>> ContrastiveDivergence(operator=bl.operators.get("flip"), k=2)
    ContrastiveDivergence(operator=FlipOperator(), k=2)
    """

    name = "cd"

    def __init__(self, *, operator: Operator, k: int = 1) -> None:
        self.operator = operator
        self.k = check_positive_int(k, "k")

    def __repr__(self) -> str:
        return f"ContrastiveDivergence(operator={self.operator!r}, k={self.k})"

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> CDState:
        return CDState()

    def step(
        self,
        model: Any,
        state: CDState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[CDState, Chains]:
        """Start at ``(batch, h ~ positive)`` and run ``k`` sweeps; returns the end chains."""
        # Later layers start from the data-term expectations; the batch buffer itself is safe
        # to reference because every sweep replaces each layer with a new tensor.
        hidden = tuple(sample_bernoulli(layer, generator=generator) for layer in positive[1:])
        beta = torch.ones(batch.shape[0], dtype=batch.dtype, device=batch.device)
        chains = advance_chains(
            self.operator, model, Chains(layers=(batch, *hidden), beta=beta), self.k, generator=generator
        )
        return CDState(chains=chains), chains

    def samples(self, state: CDState) -> Chains | None:
        return state.chains

    def state_tensors(self, state: CDState) -> dict[str, Tensor]:
        # Nothing is needed to continue; the last chains are saved so that a resumed run that
        # has no update left still reports the same final_chains.
        return {} if state.chains is None else chains_to_tensors(state.chains)

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> CDState:
        if not tensors:
            return CDState()
        return CDState(chains=chains_from_tensors(tensors, dtype=model.dtype, device=model.device))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "operator": repr(self.operator), "k": self.k}


@register_phase("cd")
def _make_cd(*, operator: Operator, k: int, n_chains: int, **params: Any) -> ContrastiveDivergence:
    # CD runs one chain per minibatch example, so n_chains does not apply.
    return ContrastiveDivergence(operator=operator, k=k, **params)
