"""Tempered transitions: one Metropolis–Hastings move through a ladder, up and back down.

Neal (1996), "Sampling from multimodal distributions using tempered transitions"; used for
the negative phase of Trans-SAP by Salakhutdinov (2009, 2010). docs/algorithms.md §2.6.

Write Neal's ladder ``p_0 = target, p_1, …, p_S = hottest``; boltzlab's ladders are
ascending (``β_0 < … < β_{K−1} = 1``), so Neal's level ``s`` is ladder index ``K − 1 − s``
and *heating walks the ladder downwards*. From the current state ``x̂_0 = x``:

    heat:  x̂_s     = T̂_s(x̂_{s−1}),   s = 1 … S        (one forward sweep at level s)
    cool:  x̌_{s−1} = Ť_s(x̌_s),       s = S … 1, x̌_S = x̂_S   (one reversed sweep)
    log A  = Σ_{s=0}^{S−1} [log f_{s+1}(x̂_s) − log f_s(x̂_s)]
           + Σ_{s=1}^{S}   [log f_{s−1}(x̌_{s−1}) − log f_s(x̌_{s−1})]

and ``x̌_0`` replaces ``x`` with probability ``min(1, e^{log A})``.

**Why the move is exact, and why the Z's cancel.** ``T̂_s`` is one operator sweep at β_s in
``model.update_groups`` order (hidden, then visible) and ``Ť_s`` the same sweep with the
groups in the opposite order (``op.step(..., reverse=True)``). Every group update leaves
``p_s`` invariant and is reversible with respect to it, so the two sweeps are each other's
time reversal: ``p_s(x)·T̂_s(x, y) = p_s(y)·Ť_s(y, x)``. Take a path
``x̂_0 → … → x̂_S = x̌_S → … → x̌_0`` and its reversal, which starts from ``x̌_0``, heats
through ``x̌_1, …, x̌_S`` with ``T̂`` and cools through ``x̂_{S−1}, …, x̂_0`` with ``Ť``.
Substituting the relation into every factor of the path's probability gives

    p_0(x̂_0)·P(path)·A(path) = p_0(x̌_0)·P(reversed path),    A(reversed) = 1 / A(path),

hence ``p_0(x̂_0)·P(path)·min(1, A) = p_0(x̌_0)·P(reversed)·min(1, 1/A)``; summed over the
intermediate states this is detailed balance of the whole move with respect to ``p_0``.
Within ``A`` every level's ``f_s`` appears as often in a numerator as in a denominator,
so its ``Z_s`` cancels and unnormalised densities suffice. The pairing matters: with two
forward sweeps, or a reversed sweep on the way up, the relation fails and so does exactness.

The densities are the **joint** ones, ``model.log_f(layers, β)`` (no layer summed out),
because the operator moves the joint state and the reversal relation holds for the joint
``p_s``. A summed-out density would pair a marginal ratio with a joint kernel.

**Cost and pitfall.** One move costs ``2S`` sweeps plus the joint densities of the ``2S``
visited states. ``log f_β`` is linear in β, so each term of log A is ``(β' − β)·Δ(x)`` with
``Δ = log f_1 − log f_0``; Δ of many visited states is evaluated in one batched call. The acceptance rate falls exponentially with model size unless
``S`` grows with it (Salakhutdinov 2010 notes large models need many levels); Trans-SAP's
ladder settings were not recovered (**[open]**, docs/open-questions.md item 18).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.tempering import ladders
from boltzlab.tempering.base import metropolis_accept
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.registry import register_scheme
from boltzlab.validation import check_positive_int

__all__ = [
    "TemperedTransitions",
    "TemperedTransitionsInfo",
    "TemperedTransitionsState",
    "TemperedTransitionsSummary",
]


@dataclass(frozen=True, slots=True)
class TemperedTransitionsState:
    """State of ``n_chains`` chains moved by tempered transitions.

    Attributes
    ----------
    chains : Chains
        The β = 1 chains, ``n_chains`` of them.
    accepted : Tensor, shape (n_chains,), int64
        Moves accepted per chain since ``init``.
    n_steps : int
        Moves proposed per chain since ``init``.
    """

    chains: Chains
    accepted: Tensor
    n_steps: int

    @property
    def n_chains(self) -> int:
        return self.chains.n_chains


@dataclass(frozen=True, slots=True)
class TemperedTransitionsInfo:
    """Diagnostics of one move; never carried forward.

    Attributes
    ----------
    accepted : Tensor, shape (n_chains,), bool
    log_acceptance : Tensor, shape (n_chains,), float64
        ``log A`` of each chain's proposal (nats); the move was accepted with ``min(1, e^{log A})``.
    """

    accepted: Tensor
    log_acceptance: Tensor


@dataclass(frozen=True, slots=True)
class TemperedTransitionsSummary:
    """Diagnostics of a run (from :meth:`TemperedTransitions.summarize`).

    Attributes
    ----------
    betas : Tensor, shape (K,), float64
        The ladder, ascending.
    acceptance_rate : float
        Fraction of proposed moves accepted, over steps and chains (NaN with no steps).
    acceptance_per_chain : Tensor, shape (n_chains,), float64
    mean_acceptance_probability : float
        Mean of ``min(1, e^{log A})``: the same expectation as ``acceptance_rate`` with less
        noise (it does not depend on the uniform draws).
    n_steps : int
    sweeps_per_step : int
        Operator sweeps per chain in one step: ``2(K − 1) + target_sweeps``.
    """

    betas: Tensor
    acceptance_rate: float
    acceptance_per_chain: Tensor
    mean_acceptance_probability: float
    n_steps: int
    sweeps_per_step: int


# Visited states whose densities are evaluated together: at most this many units (chains
# × units × states), about 16 MB in float32, so a move over many levels stays bounded in memory.
_DENSITY_BATCH_ELEMENTS = 1 << 22


def _weighted_path_derivatives(
    model: TemperedModel, pending: list[tuple[Tensor, tuple[Tensor, ...]]]
) -> Tensor:
    """``Σ_j w_j·Δ(x_j)`` per chain, ``Δ(x) = log f_1(x) − log f_0(x)``; float64, shape ``(n,)``.

    The joint ``log f_β = −βE + (1 − β)·log p1`` is linear in β, so every term of log A,
    ``log f_a(x) − log f_b(x)``, is ``(a − b)·Δ(x)``. Evaluating Δ for several visited states
    in one call turns many small float64 energy products into one large one (several times
    faster for a few dozen chains).
    """
    weights = torch.stack([weight for weight, _ in pending])
    n_layers = len(pending[0][1])
    layers = tuple(torch.cat([state[index] for _, state in pending]) for index in range(n_layers))
    derivative = model.log_f(layers, 1.0) - model.log_f(layers, 0.0)
    return (weights[:, None] * derivative.view(len(pending), -1)).sum(0)


class TemperedTransitions:
    """Tempered transitions with any layerwise operator inside (docs/algorithms.md §2.6).

    Parameters
    ----------
    operator : Operator
        Must support ``step(..., reverse=True)``, the time reversal of its forward sweep
        (every :class:`~boltzlab.operators.base.LayerwiseOperator` does).
    ladder : Ladder, sequence of float or Tensor, optional
        Ascending inverse temperatures ending at 1 (the target), at least two; the lowest is
        the hottest level the move reaches. Default ``ladders.uniform(n_levels)`` from 0.
    n_levels : int, default 10
        Levels of the default ladder (``S = n_levels − 1`` heating sweeps); ignored when
        ``ladder`` is given.
    target_sweeps : int, default 0
        Plain operator sweeps at β = 1 after each move. 0 gives the pure move of Neal (1996);
        interleaving ordinary sweeps, as a sampler usually does, keeps exactness (each leaves
        the target invariant) and lets chains move when the acceptance is low.

    Notes
    -----
    One step is one tempered-transition move per chain (plus ``target_sweeps``), costing
    ``2(K − 1)`` operator sweeps and the joint densities of the ``2(K − 1)`` visited states,
    evaluated in batches.

    Examples
    --------
    >>> import boltzlab as bl
    >>> from boltzlab.tempering import TemperedTransitions
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> scheme = TemperedTransitions(bl.operators.get("gibbs"), n_levels=4)
    >>> state = scheme.init(model, 13, generator=bl.rng.make_generator(0))
    >>> state, info = scheme.step(model, state, generator=bl.rng.make_generator(1))
    >>> tuple(info.accepted.shape)
    (13,)
    """

    name = "tt"

    def __init__(
        self,
        operator: Operator,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        *,
        n_levels: int = 10,
        target_sweeps: int = 0,
    ) -> None:
        operator = resolve_operator(operator)
        if isinstance(target_sweeps, bool) or not isinstance(target_sweeps, int) or target_sweeps < 0:
            raise ValidationError(f"target_sweeps must be a non-negative integer, got {target_sweeps!r}")
        self.operator = operator
        self.ladder = ladders.resolve(ladder, n_levels=None if ladder is not None else n_levels)
        self.target_sweeps = target_sweeps

    @property
    def n_levels(self) -> int:
        return self.ladder.size

    def __repr__(self) -> str:
        return (
            f"TemperedTransitions(operator={self.operator!r}, n_levels={self.n_levels}, "
            f"target_sweeps={self.target_sweeps})"
        )

    # ------------------------------------------------------------------ contract
    def init(
        self, model: TemperedModel, n_chains: int, *, generator: torch.Generator
    ) -> TemperedTransitionsState:
        """``n_chains`` chains at β = 1 started from exact samples of the base."""
        n_chains = check_positive_int(n_chains, "n_chains")
        # States the model drew itself (0/1 in its binary layers): flagged, so each step's
        # accept-or-keep choice between two checked states keeps the flag.
        chains = replace(model.init_chains(n_chains, generator=generator).with_beta(1.0), values_checked=True)
        return TemperedTransitionsState(
            chains=chains,
            accepted=torch.zeros(n_chains, dtype=torch.int64, device=model.device),
            n_steps=0,
        )

    def step(
        self, model: TemperedModel, state: TemperedTransitionsState, *, generator: torch.Generator
    ) -> tuple[TemperedTransitionsState, TemperedTransitionsInfo]:
        """One tempered-transition move of every chain (then ``target_sweeps`` plain sweeps).

        Returns a new state; ``state`` is not modified.
        """
        start = state.chains
        n_chains = start.n_chains
        # The sweeps run at the chains' β (the model's dtype); the densities use the same
        # values in float64, so both sides of the reversal relation are at the same p_s.
        betas = self.ladder.betas.to(device=start.device, dtype=start.dtype)
        betas64 = betas.to(torch.float64)
        top = self.n_levels - 1  # ladder index of the target, Neal's level 0
        log_acceptance = torch.zeros(n_chains, dtype=torch.float64, device=start.device)
        # Each term of log A is (β' − β)·Δ(x) for a visited state x (log f_β is linear in β);
        # states wait in `pending` so that Δ is evaluated in large batches (see _add_terms).
        n_units = sum(layer.shape[1] for layer in start.layers)
        batch_states = max(1, _DENSITY_BATCH_ELEMENTS // (n_chains * n_units))
        pending: list[tuple[Tensor, tuple[Tensor, ...]]] = []
        current = start
        for level in range(top - 1, -1, -1):  # heat: Neal's s = 1 … S
            pending.append((betas64[level] - betas64[level + 1], current.layers))
            if len(pending) == batch_states:
                log_acceptance += _weighted_path_derivatives(model, pending)
                pending = []
            current, _ = self.operator.step(model, current.with_beta(betas[level]), generator=generator)
        for level in range(top):  # cool: Neal's s = S … 1
            current, _ = self.operator.step(
                model, current.with_beta(betas[level]), generator=generator, reverse=True
            )
            pending.append((betas64[level + 1] - betas64[level], current.layers))
            if len(pending) == batch_states:
                log_acceptance += _weighted_path_derivatives(model, pending)
                pending = []
        if pending:
            log_acceptance += _weighted_path_derivatives(model, pending)
        accepted = metropolis_accept(log_acceptance, generator=generator)
        keep = accepted[:, None]
        layers = tuple(
            torch.where(keep, new, old) for old, new in zip(start.layers, current.layers, strict=True)
        )
        # Each chain keeps its start or its proposal: 0/1 whenever both were.
        chains = Chains(
            layers=layers, beta=start.beta, values_checked=start.values_checked and current.values_checked
        )
        for _ in range(self.target_sweeps):
            chains, _ = self.operator.step(model, chains, generator=generator)
        new_state = TemperedTransitionsState(
            chains=chains, accepted=state.accepted + accepted.to(torch.int64), n_steps=state.n_steps + 1
        )
        return new_state, TemperedTransitionsInfo(accepted=accepted, log_acceptance=log_acceptance)

    def samples(self, state: TemperedTransitionsState) -> Chains:
        """The β = 1 chains (the state's own tensors; do not modify)."""
        return state.chains

    def summarize(
        self, step_infos: list[TemperedTransitionsInfo], final_state: TemperedTransitionsState
    ) -> TemperedTransitionsSummary:
        """Acceptance rate over the given steps, overall and per chain."""
        n_steps = len(step_infos)
        device = final_state.chains.device
        if n_steps:
            accepted = torch.stack([info.accepted for info in step_infos]).to(torch.float64)
            probability = torch.stack([info.log_acceptance for info in step_infos]).clamp_max(0.0).exp()
            per_chain = accepted.mean(0)
            rate, mean_probability = float(accepted.mean()), float(probability.mean())
        else:
            per_chain = torch.full((final_state.n_chains,), math.nan, dtype=torch.float64, device=device)
            rate = mean_probability = math.nan
        return TemperedTransitionsSummary(
            betas=self.ladder.betas.clone(),
            acceptance_rate=rate,
            acceptance_per_chain=per_chain,
            mean_acceptance_probability=mean_probability,
            n_steps=n_steps,
            sweeps_per_step=2 * (self.n_levels - 1) + self.target_sweeps,
        )

    def state_tensors(self, state: TemperedTransitionsState) -> dict[str, Tensor]:
        """Every tensor of ``state`` (copies), for safetensors checkpoints."""
        tensors = {f"layer.{index}": layer.clone() for index, layer in enumerate(state.chains.layers)}
        tensors.update(
            beta=state.chains.beta.clone(),
            accepted=state.accepted.clone(),
            n_steps=torch.tensor(state.n_steps, dtype=torch.int64),
        )
        return tensors

    def state_from_tensors(
        self, model: TemperedModel, tensors: dict[str, Tensor]
    ) -> TemperedTransitionsState:
        """The state saved by :meth:`state_tensors`, on the model's device and dtype."""
        n_layers = len(model.layer_sizes)
        required = [f"layer.{index}" for index in range(n_layers)] + ["beta", "accepted", "n_steps"]
        missing = [key for key in required if key not in tensors]
        if missing:
            raise ValidationError(f"tensors lack the tempered-transitions entries {missing}")
        device, dtype = model.device, model.dtype
        accepted = tensors["accepted"].to(device=device, dtype=torch.int64)
        if accepted.dim() != 1:
            raise ValidationError(f"saved 'accepted' must be 1-D, got shape {tuple(accepted.shape)}")
        layers = tuple(tensors[f"layer.{index}"].to(device=device, dtype=dtype) for index in range(n_layers))
        for index, (layer, size) in enumerate(zip(layers, model.layer_sizes, strict=True)):
            if tuple(layer.shape) != (accepted.shape[0], size):
                raise ValidationError(
                    f"saved layer {index} has shape {tuple(layer.shape)}, expected ({accepted.shape[0]}, {size})"
                )
        return TemperedTransitionsState(
            chains=Chains(layers=layers, beta=tensors["beta"].to(device=device, dtype=dtype)),
            accepted=accepted,
            n_steps=int(tensors["n_steps"]),
        )


@register_scheme("tt")
def _tempered_transitions(operator: Operator, **options: Any) -> TemperedTransitions:
    """``sample(model, sampler="tt", ladder=..., n_levels=..., target_sweeps=...)``."""
    return TemperedTransitions(operator, **options)
