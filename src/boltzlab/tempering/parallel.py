"""Parallel tempering (replica exchange) around any transition operator.

Swendsen & Wang (1986), Geyer (1991); for RBMs Desjardins et al. (2010), the baseline of
Brügge, Fischer & Igel (2013) and Salakhutdinov (2010). docs/algorithms.md §2.5.

Each of ``n_chains`` independent *systems* holds one replica per level of an ascending
ladder ``β_0 < … < β_{K−1} = 1``. Every replica is swept once per step with the operator at
its level's β, and after every ``swap_every`` sweeps a round of exchanges of the states of
neighbouring levels ``(k, k+1)`` is proposed, accepted with the Metropolis rule on the
summed-out densities

    log A = log f_{β_k}(x_{k+1}) + log f_{β_{k+1}}(x_k) − log f_{β_k}(x_k) − log f_{β_{k+1}}(x_{k+1}),

``log f_β`` the hidden-summed tempered density (note ``softplus(β a)``, never ``β·F(v)``).
The product ``Π_k p_{β_k}`` is invariant, so the β = 1 replicas sample the model.

**Why the summed-out layers are redrawn.** The acceptance above is a Metropolis step for the
kept layers only. An accepted exchange therefore moves the kept layers and draws the
summed-out layer afresh from its conditional at the slot's β. As a move on the joint state
this is Metropolis–Hastings with the proposal ``p_{β_k}(h | v')·p_{β_{k+1}}(h' | v)``, whose
Hastings ratio is exactly the marginal ratio above, so the joint product ``Π_k p_{β_k}(v, h)``
is invariant. Without the redraw a replica would carry a hidden state drawn at another
temperature into a state-dependent operator (flip-the-state) and bias it
(:func:`boltzlab.tempering.base.redraw_summed_layers`).

**Pair schedules** (**[open]**, docs/open-questions.md item 18; ``pairs=``): ``"alternating"``
(default) proposes the even pairs ``(0,1), (2,3), …`` on even swap rounds and the odd pairs
on odd rounds, the deterministic even/odd scheme whose pairs are disjoint and hence
proposed at once; ``"all"`` proposes every pair in one round, sequentially from the lowest,
so a state may climb several levels in one round. The default ladder is uniform in [0, 1]
as in Brügge et al. (2013); Desjardins et al.'s values were not recovered.

**Step boundary.** The swap round that follows a sweep is performed at the start of the next
step, fused with that step's sweep: the ``marginal_terms`` it needs (one matrix product)
give the sweep its first group's logits, so a step costs the matrix products of one plain
sweep, and nothing computed from the model is carried between steps (a trainer may change
the parameters in between). The sequence of moves is sweep, swap round, sweep, …, as usual;
only the step at which a round is reported moves by one.

**Layout.** All ``K·n_chains`` replicas live in one :class:`~boltzlab.chains.Chains` batch,
level-major (slot ``k·n_chains + i`` is level ``k`` of system ``i``), so one operator call
sweeps every temperature and the β = 1 replicas are the last block, a free slice.

**Round trips.** A label travels with each replica: *up* once it has touched the bottom
(level 0, the hottest), *down* once an *up* replica reaches the top (β = 1). A *down*
replica that reaches the bottom completes a round trip bottom → top → bottom and is *up*
again. Replicas that have not touched the bottom yet carry no label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, TemperedModel
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.tempering import ladders
from boltzlab.tempering.base import metropolis_accept, redraw_summed_layers, select_terms
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.parallel_state import (
    DOWN,
    UNLABELLED,
    UP,
    ParallelTemperingInfo,
    ParallelTemperingState,
    ParallelTemperingSummary,
    log_f_change,
)
from boltzlab.tempering.registry import register_scheme
from boltzlab.validation import check_positive_int

__all__ = [
    "ParallelTempering",
    "ParallelTemperingInfo",
    "ParallelTemperingState",
    "ParallelTemperingSummary",
]

PAIR_SCHEDULES = ("alternating", "all")


class ParallelTempering:
    """Parallel tempering with any operator inside (docs/algorithms.md §2.5).

    Parameters
    ----------
    operator : Operator
        The transition operator run at every level (e.g. ``operators.get("flip")``).
    ladder : Ladder, sequence of float or Tensor, optional
        Ascending inverse temperatures ending at 1, at least two. Default
        ``ladders.uniform(n_levels)``: equally spaced from 0 (Brügge et al. 2013).
    n_levels : int, default 10
        Number of levels of the default ladder; ignored when ``ladder`` is given.
    swap_every : int, default 1
        Sweeps between swap rounds (the ``k`` of "t-PT_k"); a round follows every
        ``swap_every``-th sweep and is performed at the start of the next step.
    pairs : {"alternating", "all"}, default "alternating"
        **[open]** pair schedule: even pairs on even rounds and odd pairs on odd rounds, or
        every pair in one round, sequentially from the lowest (see the module docstring).

    Notes
    -----
    One step is one sweep of all ``K·n_chains`` replicas, so it costs ``K`` sweeps of
    ``n_chains`` chains. A swap round needs ``marginal_terms`` of every replica (one matrix
    product), which the sweep that follows reuses for its first group: swaps add no matrix
    product, only two summed-out densities per replica, the redraw and the bookkeeping.
    With ``pairs="alternating"`` and two levels the single pair is proposed on every other
    round (the odd rounds have no pair).

    Examples
    --------
    >>> import boltzlab as bl
    >>> from boltzlab.tempering import ParallelTempering
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> scheme = ParallelTempering(bl.operators.get("flip"), n_levels=5)
    >>> state = scheme.init(model, 13, generator=bl.rng.make_generator(0))
    >>> state, info = scheme.step(model, state, generator=bl.rng.make_generator(1))
    >>> tuple(scheme.samples(state).visible.shape), tuple(info.swap_accepted.shape)
    ((13, 7), (4, 13))
    """

    name = "pt"

    def __init__(
        self,
        operator: Operator,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        *,
        n_levels: int = 10,
        swap_every: int = 1,
        pairs: str = "alternating",
    ) -> None:
        operator = resolve_operator(operator)
        if pairs not in PAIR_SCHEDULES:
            raise ValidationError(
                f"pairs must be one of {', '.join(map(repr, PAIR_SCHEDULES))}, got {pairs!r}"
            )
        self.operator = operator
        self.ladder = ladders.resolve(ladder, n_levels=None if ladder is not None else n_levels)
        self.swap_every = check_positive_int(swap_every, "swap_every")
        self.pairs = pairs

    @property
    def n_levels(self) -> int:
        return self.ladder.size

    def __repr__(self) -> str:
        return (
            f"ParallelTempering(operator={self.operator!r}, n_levels={self.n_levels}, "
            f"swap_every={self.swap_every}, pairs={self.pairs!r})"
        )

    # ------------------------------------------------------------------ contract
    def init(
        self, model: TemperedModel, n_chains: int, *, generator: torch.Generator
    ) -> ParallelTemperingState:
        """``n_chains`` systems, every replica an exact sample of the base (β = 0).

        Parameters
        ----------
        model : TemperedModel
        n_chains : int
            Number of independent systems, i.e. of β = 1 chains that :meth:`samples` returns.
        generator : torch.Generator
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        n_levels = self.n_levels
        start = model.init_chains(n_levels * n_chains, generator=generator)
        chains = start.with_beta(self._slot_betas(model, n_chains))
        device = model.device
        replica = torch.arange(n_levels, device=device)[:, None].expand(n_levels, n_chains).clone()
        direction = torch.full((n_levels, n_chains), UNLABELLED, dtype=torch.int8, device=device)
        direction[0] = UP
        zeros = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
        return ParallelTemperingState(
            chains=chains,
            replica=replica,
            direction=direction,
            round_trips=torch.zeros(n_chains, dtype=torch.int64, device=device),
            swap_accepted=zeros,
            swap_attempted=zeros.clone(),
            n_steps=0,
            n_rounds=0,
        )

    def step(
        self, model: TemperedModel, state: ParallelTemperingState, *, generator: torch.Generator
    ) -> tuple[ParallelTemperingState, ParallelTemperingInfo]:
        """The swap round due after the previous sweep (if any), then a sweep of every replica.

        A round is due when the number of sweeps done so far is a positive multiple of
        ``swap_every``. Returns a new state; ``state`` is not modified.
        """
        n_levels, n_chains = state.n_levels, state.n_chains
        device = state.chains.device
        chains, terms = state.chains, None
        accepted = torch.zeros(n_levels - 1, n_chains, dtype=torch.bool, device=device)
        attempted = torch.zeros(n_levels - 1, dtype=torch.bool, device=device)
        completed = torch.zeros(n_chains, dtype=torch.int64, device=device)
        replica, direction, n_rounds = state.replica, state.direction, state.n_rounds
        if state.n_steps > 0 and state.n_steps % self.swap_every == 0:
            rounds = self._pair_groups(n_levels, n_rounds)
            chains, terms, order, accepted = self._swap_round(model, chains, rounds, generator=generator)
            for group in rounds:
                attempted[list(group)] = True
            replica = replica.reshape(-1)[order].view(n_levels, n_chains)
            direction, completed = self._update_directions(
                direction.reshape(-1)[order].view(n_levels, n_chains)
            )
            n_rounds += 1
        swept, _ = self.operator.step(model, chains, generator=generator, terms=terms)
        flip_rate = self._flip_rate(chains, swept, n_levels)
        new_state = ParallelTemperingState(
            chains=swept,
            replica=replica,
            direction=direction,
            round_trips=state.round_trips + completed,
            swap_accepted=state.swap_accepted + accepted.sum(1),
            swap_attempted=state.swap_attempted + attempted.to(torch.int64) * n_chains,
            n_steps=state.n_steps + 1,
            n_rounds=n_rounds,
        )
        info = ParallelTemperingInfo(
            swap_accepted=accepted, swap_attempted=attempted, round_trips=completed, flip_rate=flip_rate
        )
        return new_state, info

    def samples(self, state: ParallelTemperingState) -> Chains:
        """The β = 1 replicas, ``n_chains`` of them (views into the state; do not modify)."""
        n_chains = state.n_chains
        return state.chains.select(slice((state.n_levels - 1) * n_chains, state.n_levels * n_chains))

    def summarize(
        self, step_infos: list[ParallelTemperingInfo], final_state: ParallelTemperingState
    ) -> ParallelTemperingSummary:
        """Swap acceptance per pair, round trips and flip rates over the given steps."""
        n_levels, n_chains = final_state.n_levels, final_state.n_chains
        device = final_state.chains.device
        accepted = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
        attempts = torch.zeros(n_levels - 1, dtype=torch.int64, device=device)
        round_trips = torch.zeros(n_chains, dtype=torch.int64, device=device)
        flip_total = torch.zeros(n_levels, dtype=torch.float64, device=device)
        for info in step_infos:
            accepted += info.swap_accepted.sum(1)
            attempts += info.swap_attempted.to(torch.int64) * n_chains
            round_trips += info.round_trips
            flip_total += info.flip_rate
        n_steps = len(step_infos)
        rate = accepted.to(torch.float64) / attempts.to(torch.float64)  # NaN where never proposed
        per_level = flip_total / n_steps if n_steps else torch.full_like(flip_total, math.nan)
        return ParallelTemperingSummary(
            betas=self.ladder.betas.clone(),
            swap_acceptance=rate,
            swap_attempts=attempts,
            round_trips=round_trips,
            total_round_trips=int(round_trips.sum()),
            flip_rate=float(per_level.mean()),
            flip_rate_per_level=per_level,
            n_steps=n_steps,
        )

    def state_tensors(self, state: ParallelTemperingState) -> dict[str, Tensor]:
        """Every tensor of ``state`` (copies), for safetensors checkpoints."""
        tensors = {f"layer.{index}": layer.clone() for index, layer in enumerate(state.chains.layers)}
        tensors.update(
            beta=state.chains.beta.clone(),
            replica=state.replica.clone(),
            direction=state.direction.clone(),
            round_trips=state.round_trips.clone(),
            swap_accepted=state.swap_accepted.clone(),
            swap_attempted=state.swap_attempted.clone(),
            n_steps=torch.tensor(state.n_steps, dtype=torch.int64),
            n_rounds=torch.tensor(state.n_rounds, dtype=torch.int64),
        )
        return tensors

    def state_from_tensors(self, model: TemperedModel, tensors: dict[str, Tensor]) -> ParallelTemperingState:
        """The state saved by :meth:`state_tensors`, on the model's device and dtype.

        Raises :class:`ValidationError` when the tensors do not fit this scheme's ladder or
        the model's layer sizes.
        """
        n_layers = len(model.layer_sizes)
        required = [f"layer.{index}" for index in range(n_layers)] + [
            "beta",
            "replica",
            "direction",
            "round_trips",
            "swap_accepted",
            "swap_attempted",
            "n_steps",
            "n_rounds",
        ]
        missing = [key for key in required if key not in tensors]
        if missing:
            raise ValidationError(f"tensors lack the parallel-tempering entries {missing}")
        device, dtype = model.device, model.dtype
        replica = tensors["replica"].to(device=device, dtype=torch.int64)
        if replica.dim() != 2 or replica.shape[0] != self.n_levels:
            raise ValidationError(
                f"the saved state has replica shape {tuple(replica.shape)}; this scheme has "
                f"{self.n_levels} levels"
            )
        n_chains = replica.shape[1]
        layers = tuple(tensors[f"layer.{index}"].to(device=device, dtype=dtype) for index in range(n_layers))
        for index, (layer, size) in enumerate(zip(layers, model.layer_sizes, strict=True)):
            if tuple(layer.shape) != (self.n_levels * n_chains, size):
                raise ValidationError(
                    f"saved layer {index} has shape {tuple(layer.shape)}, expected "
                    f"({self.n_levels * n_chains}, {size})"
                )
        beta = tensors["beta"].to(device=device, dtype=dtype)
        if not torch.equal(beta, self._slot_betas(model, n_chains)):
            raise ValidationError("the saved state was made with another ladder than this scheme's")
        return ParallelTemperingState(
            chains=Chains(layers=layers, beta=beta),
            replica=replica,
            direction=tensors["direction"].to(device=device, dtype=torch.int8),
            round_trips=tensors["round_trips"].to(device=device, dtype=torch.int64),
            swap_accepted=tensors["swap_accepted"].to(device=device, dtype=torch.int64),
            swap_attempted=tensors["swap_attempted"].to(device=device, dtype=torch.int64),
            n_steps=int(tensors["n_steps"]),
            n_rounds=int(tensors["n_rounds"]),
        )

    # ------------------------------------------------------------------ moves
    def _slot_betas(self, model: TemperedModel, n_chains: int) -> Tensor:
        """β of every slot, level-major, in the model's dtype; shape ``(K·n_chains,)``."""
        betas = self.ladder.betas.to(device=model.device, dtype=model.dtype)
        return betas.repeat_interleave(n_chains)

    def _pair_groups(self, n_levels: int, n_rounds: int) -> list[tuple[int, ...]]:
        """The pairs (by lower level) of one swap round, as groups proposed one after another.

        Pairs within a group are disjoint and proposed at once.
        """
        if self.pairs == "all":
            return [(k,) for k in range(n_levels - 1)]
        lower = tuple(range(n_rounds % 2, n_levels - 1, 2))
        return [lower] if lower else []

    def _swap_round(
        self,
        model: TemperedModel,
        chains: Chains,
        groups: list[tuple[int, ...]],
        *,
        generator: torch.Generator,
    ) -> tuple[Chains, MarginalTerms, Tensor, Tensor]:
        """Propose the exchanges of ``groups``; returns (chains, terms, order, accepted).

        ``terms`` are the marginal terms of the returned chains; ``order[s]`` is the slot whose
        state now occupies slot ``s``, shape ``(K·n,)``; ``accepted`` has shape ``(K − 1, n)``.
        """
        n_levels = self.n_levels
        n_chains = chains.n_chains // n_levels
        device = chains.device
        # One summed-out evaluation serves every proposal of the round: a state's terms do not
        # depend on β or on the slot it sits in, so exchanges only permute their rows.
        terms = model.marginal_terms(chains.layers)
        level_beta = chains.beta.view(n_levels, n_chains)[:, 0].to(torch.float64)
        source = torch.arange(n_levels * n_chains, device=device).view(n_levels, n_chains)
        accepted = torch.zeros(n_levels - 1, n_chains, dtype=torch.bool, device=device)
        for group in groups:
            lower = torch.tensor(group, dtype=torch.int64, device=device)
            rows_lower = source[lower].reshape(-1)
            rows_upper = source[lower + 1].reshape(-1)
            beta_lower = level_beta[lower].repeat_interleave(n_chains)
            beta_upper = level_beta[lower + 1].repeat_interleave(n_chains)
            # log A = [log f_{β_{k+1}}(x_k) − log f_{β_k}(x_k)] + [log f_{β_k}(x_{k+1}) − log f_{β_{k+1}}(x_{k+1})]
            log_ratio = log_f_change(select_terms(terms, rows_lower), beta_lower, beta_upper) + log_f_change(
                select_terms(terms, rows_upper), beta_upper, beta_lower
            )
            accept = metropolis_accept(log_ratio, generator=generator).view(len(group), n_chains)
            old_lower, old_upper = source[lower], source[lower + 1]
            source = source.clone()
            source[lower] = torch.where(accept, old_upper, old_lower)
            source[lower + 1] = torch.where(accept, old_lower, old_upper)
            accepted[lower] = accept
        order = source.reshape(-1)
        moved = order != torch.arange(order.numel(), device=device)
        permuted = Chains(layers=tuple(layer[order] for layer in chains.layers), beta=chains.beta)
        terms = select_terms(terms, order)
        redrawn = redraw_summed_layers(model, permuted, terms, generator=generator)
        summed = set(model.update_groups[0])
        layers = tuple(
            torch.where(moved[:, None], new, old) if index in summed else old
            for index, (old, new) in enumerate(zip(permuted.layers, redrawn.layers, strict=True))
        )
        return Chains(layers=layers, beta=chains.beta), terms, order, accepted

    @staticmethod
    def _update_directions(direction: Tensor) -> tuple[Tensor, Tensor]:
        """Relabel replicas at the ends of the ladder; returns (direction, round trips completed)."""
        direction = direction.clone()
        bottom, top = direction[0], direction[-1]
        completed = (bottom == DOWN).to(torch.int64)
        direction[0] = torch.full_like(bottom, UP)
        direction[-1] = torch.where(top == UP, torch.full_like(top, DOWN), top)
        return direction, completed

    @staticmethod
    def _flip_rate(before: Chains, after: Chains, n_levels: int) -> Tensor:
        changed = sum(
            (old != new).sum(1, dtype=torch.int64)
            for old, new in zip(before.layers, after.layers, strict=True)
        )
        n_units = sum(layer.shape[1] for layer in after.layers)
        return changed.view(n_levels, -1).to(torch.float64).mean(1) / n_units


@register_scheme("pt")
def parallel_tempering(operator: Operator, **options: Any) -> ParallelTempering:
    """``sample(model, sampler="pt", ladder=..., n_levels=..., swap_every=..., pairs=...)``."""
    return ParallelTempering(operator, **options)
