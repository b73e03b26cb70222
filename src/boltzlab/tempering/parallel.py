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
again. Replicas that have not touched the bottom yet carry no label. The pair schedules, the
labels and the counters are shared with trajectory tempering
(:mod:`boltzlab.tempering.replica_swaps`).
"""

from __future__ import annotations

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
    ParallelTemperingInfo,
    ParallelTemperingState,
    ParallelTemperingSummary,
    log_f_change,
)
from boltzlab.tempering.registry import register_scheme
from boltzlab.tempering.replica_swaps import (
    SwapRound,
    check_entries,
    check_pairs,
    counters_from_tensors,
    fresh_counters,
    layers_from_tensors,
    pair_groups,
    replica_state_tensors,
    swap_due,
    swap_totals,
    units_changed,
)
from boltzlab.validation import check_positive_int

__all__ = [
    "ParallelTempering",
    "ParallelTemperingInfo",
    "ParallelTemperingState",
    "ParallelTemperingSummary",
]


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
        pairs = check_pairs(pairs)
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
        return ParallelTemperingState(chains=chains, **fresh_counters(n_levels, n_chains, model.device))

    def step(
        self, model: TemperedModel, state: ParallelTemperingState, *, generator: torch.Generator
    ) -> tuple[ParallelTemperingState, ParallelTemperingInfo]:
        """The swap round due after the previous sweep (if any), then a sweep of every replica.

        A round is due when the number of sweeps done so far is a positive multiple of
        ``swap_every``. Returns a new state; ``state`` is not modified.
        """
        chains, terms = state.chains, None
        if swap_due(state, self.swap_every):
            groups = pair_groups(self.pairs, state.n_levels, state.n_rounds)
            chains, terms, order, accepted = self._swap_round(model, chains, groups, generator=generator)
            swaps = SwapRound.done(state, groups, order, accepted)
        else:
            swaps = SwapRound.skipped(state)
        swept, _ = self.operator.step(model, chains, generator=generator, terms=terms)
        flip_rate = self._flip_rate(chains, swept, state.n_levels)
        return swaps.advance(state, swept, flip_rate, ParallelTemperingInfo)

    def samples(self, state: ParallelTemperingState) -> Chains:
        """The β = 1 replicas, ``n_chains`` of them (views into the state; do not modify)."""
        n_chains = state.n_chains
        return state.chains.select(slice((state.n_levels - 1) * n_chains, state.n_levels * n_chains))

    def summarize(
        self, step_infos: list[ParallelTemperingInfo], final_state: ParallelTemperingState
    ) -> ParallelTemperingSummary:
        """Swap acceptance per pair, round trips and flip rates over the given steps."""
        return ParallelTemperingSummary(
            betas=self.ladder.betas.clone(), **swap_totals(step_infos, final_state)
        )

    def state_tensors(self, state: ParallelTemperingState) -> dict[str, Tensor]:
        """Every tensor of ``state`` (copies), for safetensors checkpoints."""
        return replica_state_tensors(state)

    def state_from_tensors(self, model: TemperedModel, tensors: dict[str, Tensor]) -> ParallelTemperingState:
        """The state saved by :meth:`state_tensors`, on the model's device and dtype.

        Raises :class:`ValidationError` when the tensors do not fit this scheme's ladder or
        the model's layer sizes.
        """
        check_entries(tensors, len(model.layer_sizes), scheme="parallel-tempering")
        device = model.device
        replica = tensors["replica"].to(device=device, dtype=torch.int64)
        if replica.dim() != 2 or replica.shape[0] != self.n_levels:
            raise ValidationError(
                f"the saved state has replica shape {tuple(replica.shape)}; this scheme has "
                f"{self.n_levels} levels"
            )
        n_chains = replica.shape[1]
        layers = layers_from_tensors(tensors, model, self.n_levels * n_chains)
        saved = tensors["beta"]
        # This ladder's β in the saved dtype: a state saved with a float32 model still fits a
        # float64 one (its β are the ladder's, rounded), and the β kept are the ladder's own.
        expected = self.ladder.betas.to(dtype=saved.dtype).repeat_interleave(n_chains)
        if saved.shape != expected.shape or not torch.equal(saved.cpu(), expected):
            raise ValidationError("the saved state was made with another ladder than this scheme's")
        beta = self._slot_betas(model, n_chains)
        return ParallelTemperingState(
            chains=Chains(layers=layers, beta=beta), replica=replica, **counters_from_tensors(tensors, device)
        )

    # ------------------------------------------------------------------ moves
    def _slot_betas(self, model: TemperedModel, n_chains: int) -> Tensor:
        """β of every slot, level-major, in the model's dtype; shape ``(K·n_chains,)``."""
        betas = self.ladder.betas.to(device=model.device, dtype=model.dtype)
        return betas.repeat_interleave(n_chains)

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
        permuted = Chains(
            layers=tuple(layer[order] for layer in chains.layers),
            beta=chains.beta,
            values_checked=chains.values_checked,
        )
        terms = select_terms(terms, order)
        redrawn = redraw_summed_layers(model, permuted, terms, generator=generator)
        summed = set(model.update_groups[0])
        layers = tuple(
            torch.where(moved[:, None], new, old) if index in summed else old
            for index, (old, new) in enumerate(zip(permuted.layers, redrawn.layers, strict=True))
        )
        return (
            Chains(layers=layers, beta=chains.beta, values_checked=redrawn.values_checked),
            terms,
            order,
            accepted,
        )

    @staticmethod
    def _flip_rate(before: Chains, after: Chains, n_levels: int) -> Tensor:
        """Mean fraction of units the sweep changed, per level; float64, shape ``(K,)``."""
        changed = units_changed(before, after)
        n_units = sum(layer.shape[1] for layer in after.layers)
        return changed.view(n_levels, -1).to(torch.float64).mean(1) / n_units


@register_scheme("pt")
def _parallel_tempering(operator: Operator, **options: Any) -> ParallelTempering:
    """``sample(model, sampler="pt", ladder=..., n_levels=..., swap_every=..., pairs=...)``."""
    return ParallelTempering(operator, **options)
