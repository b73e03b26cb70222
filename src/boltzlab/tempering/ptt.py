"""Parallel tempering across training snapshots (PTT): replicas at the parameters a model visited.

Béreux, Decelle, Furtlehner, Rosset & Seoane (2024, "Fast, accurate training and sampling of
Restricted Boltzmann Machines"): instead of a temperature ladder, replica ``k`` runs at
the parameters ``θ_k`` of the ``k``-th level taken from the training trajectory
(:class:`~boltzlab.models.trajectory.Trajectory`), from the zero-weight anchor (level 0, where
one Gibbs sweep is an exact draw) to the model itself (the last level). Neighbouring levels
exchange states with the Metropolis rule on the hidden-summed densities

    log A = log f_k(x_{k+1}) + log f_{k+1}(x_k) − log f_k(x_k) − log f_{k+1}(x_{k+1}),
    log f_θ(v) = b·v + Σ_j softplus(c_j + (v W)_j),

so the product ``Π_k p_{θ_k}`` is invariant and the last replicas sample the model
(docs/algorithms.md §4.6). Swaps need overlapping neighbours: late in a constant-rate PCD
run consecutive snapshots barely overlap (acceptance 0.001 between snapshots 1,000 updates
apart), and the verdict of ``bl.sample`` then reports too few round trips.

As in :mod:`boltzlab.tempering.parallel`: the swap round due after a sweep is performed at the
start of the next step and its summed-out pieces give that step's sweep its hidden
pre-activations; an exchanged state's hidden layer is redrawn from ``p_{θ_k}(h | v)`` at its
new level (the Metropolis step is on ``v`` alone), which keeps the joint product invariant;
pairs are ``"alternating"`` (even pairs on even rounds, odd on odd) or ``"all"`` (every pair,
from the lowest, in one round); a label travelling with each replica counts round trips
between the anchor and the model (the schedules, labels and counters are those of
:mod:`boltzlab.tempering.replica_swaps`). Replicas live level-major in one
:class:`~boltzlab.chains.Chains` batch (slot ``k·n_chains + i`` is level ``k`` of system ``i``),
all at β = 1; each level is swept with its own parameters.

**Which snapshots.** ``levels="all"`` uses every point of the trajectory. ``levels=
"acceptance"`` keeps a subset whose neighbours exchange with probability at least
``min_acceptance`` (0.3, the rule of RestrictedBoltzmannMachines.jl's ``ptt.jl``, which
keeps a checkpoint once the acceptance to the previous one falls below it), estimated by a
short pilot run over all points: greedily, from the anchor, the farthest next point still
above the threshold (the adjacent one when none is). Explicit positions (floats: a
non-integer ``t`` is the linear interpolation between points ``⌊t⌋`` and ``⌊t⌋ + 1``) are
accepted too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, log_f_marginal
from boltzlab.models.rbm import RBM
from boltzlab.models.trajectory import Trajectory, as_trajectory
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.tempering.base import check_state_chains, metropolis_accept, redraw_summed_layers
from boltzlab.tempering.ptt_state import (
    LevelSelection,
    TrajectoryTemperingInfo,
    TrajectoryTemperingState,
    TrajectoryTemperingSummary,
    state_from_tensors,
    state_tensors,
)
from boltzlab.tempering.registry import register_scheme
from boltzlab.tempering.replica_swaps import (
    SwapRound,
    check_pairs,
    fresh_counters,
    pair_groups,
    swap_due,
    swap_totals,
    units_changed,
)
from boltzlab.validation import check_positive_int, check_probability

__all__ = [
    "LevelSelection",
    "TrajectoryTempering",
    "TrajectoryTemperingInfo",
    "TrajectoryTemperingState",
    "TrajectoryTemperingSummary",
]

_LEVEL_CHOICES = ("all", "acceptance")


def _log_f(terms: MarginalTerms) -> Tensor:
    """``log f_θ(v)`` at β = 1 (base terms drop out); float64, shape ``(n,)``."""
    return log_f_marginal(terms, 1.0)


def _where_terms(accept: Tensor, new: MarginalTerms, old: MarginalTerms) -> MarginalTerms:
    return MarginalTerms(
        base=torch.where(accept, new.base, old.base),
        linear=torch.where(accept, new.linear, old.linear),
        preactivation=torch.where(accept[:, None], new.preactivation, old.preactivation),
    )


class TrajectoryTempering:
    """Parallel tempering across the snapshots of a training trajectory (module docstring).

    Parameters
    ----------
    operator : Operator
        Run at every level with that level's parameters.
    trajectory : Trajectory, str, Path, or sequence of RBMs or paths
        The model's training trajectory, in any form
        :func:`~boltzlab.models.trajectory.as_trajectory` reads (a ``trajectory.safetensors``
        file or run directory, a directory of model files, the snapshot models).
    levels : {"all", "acceptance"} or sequence of float, default "all"
        Trajectory points to use as levels below the model (see the module docstring);
        explicit positions must start at 0 and ascend within ``[0, n_points − 1]``.
    min_acceptance : float in [0, 1], default 0.3
        Threshold of ``levels="acceptance"``.
    pilot_chains : int, default 64
    pilot_steps : int, default 100
        Size of the pilot run of ``levels="acceptance"`` (steps over all points).
    swap_every : int, default 1
    pairs : {"alternating", "all"}, default "alternating"

    Notes
    -----
    One step sweeps all ``K·n_chains`` replicas (``K`` sweeps of ``n_chains`` chains). A swap
    round costs two extra matrix products per proposed pair (each state's density under its
    neighbour's parameters); its own-level pieces are reused by the sweep.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.models.trajectory import Trajectory
    >>> from boltzlab.tempering.ptt import TrajectoryTempering
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=1.0)
    >>> path = Trajectory.from_models([bl.RBM(weights=s * model.weights.detach()) for s in (0.3, 0.6)])
    >>> scheme = TrajectoryTempering(bl.operators.get("gibbs"), path)
    >>> state = scheme.init(model, 13, generator=bl.rng.make_generator(0))
    >>> state, info = scheme.step(model, state, generator=bl.rng.make_generator(1))
    >>> state.n_levels, tuple(scheme.samples(state).visible.shape)
    (4, (13, 7))
    """

    name = "ptt"

    def __init__(
        self,
        operator: Operator,
        trajectory: Trajectory | str | Path | Sequence[Any],
        *,
        levels: str | Sequence[float] = "all",
        min_acceptance: float = 0.3,
        pilot_chains: int = 64,
        pilot_steps: int = 100,
        swap_every: int = 1,
        pairs: str = "alternating",
    ) -> None:
        self.operator = resolve_operator(operator)
        trajectory = as_trajectory(trajectory)
        pairs = check_pairs(pairs)
        if isinstance(levels, str):
            if levels not in _LEVEL_CHOICES:
                raise ValidationError(
                    f"levels must be one of {', '.join(map(repr, _LEVEL_CHOICES))} or positions, "
                    f"got {levels!r}"
                )
        else:
            levels = tuple(trajectory.check_position(position) for position in levels)
            if not levels or levels[0] != 0.0 or any(b <= a for a, b in pairwise(levels)):
                raise ValidationError(
                    f"levels must start at 0 (the anchor) and ascend strictly, got {list(levels)[:8]}"
                )
        self.trajectory = trajectory
        self.levels = levels
        self.min_acceptance = check_probability(min_acceptance, "min_acceptance")
        self.pilot_chains = check_positive_int(pilot_chains, "pilot_chains")
        self.pilot_steps = check_positive_int(pilot_steps, "pilot_steps")
        self.swap_every = check_positive_int(swap_every, "swap_every")
        self.pairs = pairs
        self.selection: LevelSelection | None = None
        self._models: dict[tuple[Any, ...], list[RBM]] = {}

    def __repr__(self) -> str:
        levels = self.levels if isinstance(self.levels, str) else f"{len(self.levels)} positions"
        parts = f"levels={levels!r}, swap_every={self.swap_every}, pairs={self.pairs!r}"
        return f"TrajectoryTempering(operator={self.operator!r}, trajectory={self.trajectory!r}, {parts})"

    # ------------------------------------------------------------------ contract
    def init(self, model: RBM, n_chains: int, *, generator: torch.Generator) -> TrajectoryTemperingState:
        """``n_chains`` systems, every replica an exact draw of the zero-weight anchor.

        With ``levels="acceptance"`` the pilot runs first (from the same generator); its
        findings are kept in :attr:`selection`.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        self.trajectory.check_model(model)
        last_point = float(self.trajectory.n_points - 1)
        model_is_point = self.trajectory.n_points > 1 and self.trajectory.ends_at(model)
        candidates = self._candidates(model)
        if self.levels == "acceptance":
            positions = self._select(model, candidates, generator=generator)
        elif self.levels == "all":
            positions = candidates
        else:  # the model stands for the last point when it is that point
            positions = [p for p in self.levels if p < last_point or not model_is_point]
        positions.append(last_point if model_is_point else math.nan)
        return self._fresh_state(
            model, torch.tensor(positions, dtype=torch.float64), n_chains, generator=generator
        )

    def step(
        self, model: RBM, state: TrajectoryTemperingState, *, generator: torch.Generator
    ) -> tuple[TrajectoryTemperingState, TrajectoryTemperingInfo]:
        """The swap round due after the previous sweep (if any), then a sweep of every level.

        Returns a new state; ``state`` is not modified.
        """
        check_state_chains(model, state.chains)
        n_levels, n_chains = state.n_levels, state.n_chains
        device = state.chains.device
        level_models = self._level_models(model, state.positions)
        layers = [
            tuple(layer[k * n_chains : (k + 1) * n_chains] for layer in state.chains.layers)
            for k in range(n_levels)
        ]
        terms: list[MarginalTerms | None] = [None] * n_levels
        if swap_due(state, self.swap_every):
            groups = pair_groups(self.pairs, n_levels, state.n_rounds)
            layers, terms_done, order, accepted = self._swap_round(
                level_models, layers, groups, generator=generator
            )
            terms = list(terms_done)
            swaps = SwapRound.done(state, groups, order, accepted)
        else:
            swaps = SwapRound.skipped(state)
        ones = torch.ones(n_chains, dtype=state.chains.dtype, device=device)
        swept, flip_rate = [], torch.zeros(n_levels, dtype=torch.float64, device=device)
        for k, level_model in enumerate(level_models):
            before = Chains(layers=layers[k], beta=ones)
            after, _ = self.operator.step(level_model, before, generator=generator, terms=terms[k])
            swept.append(after.layers)
            changed = units_changed(before, after)
            flip_rate[k] = changed.to(torch.float64).mean() / sum(layer.shape[1] for layer in after.layers)
        chains = Chains(
            layers=tuple(torch.cat([level[index] for level in swept]) for index in range(len(swept[0]))),
            beta=state.chains.beta,
        )
        return swaps.advance(state, chains, flip_rate, TrajectoryTemperingInfo)

    def samples(self, state: TrajectoryTemperingState) -> Chains:
        """The last level's replicas (the model), shape ``(n_chains, ·)`` per layer."""
        n_chains = state.n_chains
        start = (state.n_levels - 1) * n_chains
        return state.chains.select(slice(start, start + n_chains))

    def summarize(
        self, step_infos: Sequence[TrajectoryTemperingInfo], state: TrajectoryTemperingState
    ) -> TrajectoryTemperingSummary:
        """Acceptance per pair, round trips and flip rates over ``step_infos``."""
        return TrajectoryTemperingSummary(
            positions=state.positions.clone(),
            updates=self._level_updates(state.positions),
            selection=self.selection,
            **swap_totals(step_infos, state),
        )

    def state_tensors(self, state: TrajectoryTemperingState) -> dict[str, Tensor]:
        """Every tensor of ``state`` (copies), for safetensors checkpoints."""
        return state_tensors(state)

    def state_from_tensors(self, model: RBM, tensors: dict[str, Tensor]) -> TrajectoryTemperingState:
        """The state saved by :meth:`state_tensors`, on the model's device and dtype.

        Raises :class:`ValidationError` when the tensors do not fit this trajectory or model.
        """
        return state_from_tensors(self.trajectory, model, tensors)

    # ------------------------------------------------------------------ levels
    def _candidates(self, model: RBM) -> list[float]:
        """Every trajectory point below the model (the last point is dropped when it *is* the model)."""
        n_points = self.trajectory.n_points
        last = n_points - 1 if self.trajectory.ends_at(model) and n_points > 1 else n_points
        return [float(index) for index in range(last)]

    def _level_models(self, model: RBM, positions: Tensor) -> list[RBM]:
        """One RBM per level below the model (built once per positions, dtype, device), then ``model``."""
        below = positions[:-1].tolist()
        key = (tuple(below), model.dtype, str(model.device))
        if key not in self._models:
            self._models[key] = [
                self.trajectory.model_at(position, dtype=model.dtype, device=model.device)
                for position in below
            ]
        return [*self._models[key], model]

    def _level_updates(self, positions: Tensor) -> Tensor:
        """Training update of each level (interpolated between points; NaN for an appended model)."""
        updates = self.trajectory.updates.to(torch.float64)
        last = self.trajectory.n_points - 1
        labels = []
        for position in positions.tolist():
            if math.isnan(position):
                labels.append(math.nan)
                continue
            index = min(math.floor(position), last)
            upper = updates[min(index + 1, last)]
            labels.append(float(updates[index] + (position - index) * (upper - updates[index])))
        return torch.tensor(labels, dtype=torch.float64)

    def _fresh_state(
        self, model: RBM, positions: Tensor, n_chains: int, *, generator: torch.Generator
    ) -> TrajectoryTemperingState:
        """``n_chains`` systems at ``positions``, every replica an exact draw of the anchor."""
        n_levels = positions.numel()
        start = self.trajectory.sample_anchor(
            n_levels * n_chains, generator=generator, dtype=model.dtype, device=model.device
        )
        return TrajectoryTemperingState(
            chains=start, positions=positions, **fresh_counters(n_levels, n_chains, model.device)
        )

    def _select(self, model: RBM, candidates: list[float], *, generator: torch.Generator) -> list[float]:
        """Greedy subset with pilot-estimated neighbour acceptance ≥ ``min_acceptance``."""
        positions = torch.tensor([*candidates, math.nan], dtype=torch.float64)
        state = self._fresh_state(model, positions, self.pilot_chains, generator=generator)
        for _ in range(self.pilot_steps):
            state, _ = self.step(model, state, generator=generator)
        level_models = self._level_models(model, positions)
        n = self.pilot_chains
        visible = [state.chains.layers[0][k * n : (k + 1) * n] for k in range(len(level_models))]
        own = [_log_f(level.marginal_terms(v)) for level, v in zip(level_models, visible, strict=True)]

        def acceptance(i: int, j: int) -> float:
            cross_i = _log_f(level_models[i].marginal_terms(visible[j]))  # x_j under θ_i
            cross_j = _log_f(level_models[j].marginal_terms(visible[i]))  # x_i under θ_j
            log_ratio = cross_i + cross_j - own[i] - own[j]
            return float(log_ratio.clamp_max(0.0).exp().mean())

        last = len(level_models) - 1
        kept, rates = [0], []
        while kept[-1] < last:
            current = kept[-1]
            chosen, rate = current + 1, acceptance(current, current + 1)
            while chosen < last:
                next_rate = acceptance(current, chosen + 1)
                if next_rate < self.min_acceptance:
                    break
                chosen, rate = chosen + 1, next_rate
            kept.append(chosen)
            rates.append(rate)
        self.selection = LevelSelection(
            candidates=torch.tensor([*candidates, math.nan], dtype=torch.float64),
            kept=torch.tensor(kept, dtype=torch.int64),
            acceptance=torch.tensor(rates, dtype=torch.float64),
            min_acceptance=self.min_acceptance,
            cost_sweeps=self.pilot_steps * len(level_models) * n,
        )
        return [candidates[index] for index in kept[:-1]]

    # ------------------------------------------------------------------ moves
    def _swap_round(
        self,
        level_models: list[RBM],
        layers: list[tuple[Tensor, ...]],
        groups: list[tuple[int, ...]],
        *,
        generator: torch.Generator,
    ) -> tuple[list[tuple[Tensor, ...]], list[MarginalTerms], Tensor, Tensor]:
        """Propose the exchanges of ``groups``; returns (layers, terms, order, accepted).

        ``terms[k]`` are level ``k``'s summed-out pieces of its new states under its own
        parameters; ``order[s]`` is the slot whose state now occupies slot ``s``.
        """
        n_levels = len(level_models)
        n_chains = layers[0][0].shape[0]
        device = layers[0][0].device
        visible = [level[0] for level in layers]
        hidden = [level[1] for level in layers]
        terms = [level_model.marginal_terms(v) for level_model, v in zip(level_models, visible, strict=True)]
        log_f = [_log_f(term) for term in terms]
        source = torch.arange(n_levels * n_chains, device=device).view(n_levels, n_chains).clone()
        accepted = torch.zeros(n_levels - 1, n_chains, dtype=torch.bool, device=device)
        for group in groups:
            for k in group:
                up_terms = level_models[k + 1].marginal_terms(visible[k])  # x_k under θ_{k+1}
                down_terms = level_models[k].marginal_terms(visible[k + 1])  # x_{k+1} under θ_k
                up, down = _log_f(up_terms), _log_f(down_terms)
                log_ratio = (down - log_f[k + 1]) + (up - log_f[k])
                accept = metropolis_accept(log_ratio, generator=generator)
                column = accept[:, None]
                visible[k], visible[k + 1] = (
                    torch.where(column, visible[k + 1], visible[k]),
                    torch.where(column, visible[k], visible[k + 1]),
                )
                hidden[k], hidden[k + 1] = (
                    torch.where(column, hidden[k + 1], hidden[k]),
                    torch.where(column, hidden[k], hidden[k + 1]),
                )
                terms[k], terms[k + 1] = (
                    _where_terms(accept, down_terms, terms[k]),
                    _where_terms(accept, up_terms, terms[k + 1]),
                )
                log_f[k], log_f[k + 1] = (
                    torch.where(accept, down, log_f[k]),
                    torch.where(accept, up, log_f[k + 1]),
                )
                source[k], source[k + 1] = (
                    torch.where(accept, source[k + 1], source[k]),
                    torch.where(accept, source[k], source[k + 1]),
                )
                accepted[k] = accept
        order = source.reshape(-1)
        moved = (order != torch.arange(order.numel(), device=device)).view(n_levels, n_chains)
        ones = torch.ones(n_chains, dtype=visible[0].dtype, device=device)
        new_layers = []
        for k, level_model in enumerate(level_models):
            chains = Chains(layers=(visible[k], hidden[k]), beta=ones)
            redrawn = redraw_summed_layers(level_model, chains, terms[k], generator=generator)
            new_hidden = torch.where(moved[k][:, None], redrawn.layers[1], hidden[k])
            new_layers.append((visible[k], new_hidden))
        return new_layers, terms, order, accepted


@register_scheme("ptt")
def _trajectory_tempering(operator: Operator, **options: Any) -> TrajectoryTempering:
    """``sample(model, sampler="ptt", trajectory=..., levels=..., min_acceptance=..., swap_every=...,
    pairs=...)``."""
    if "trajectory" not in options:
        raise ValidationError("sampler 'ptt' needs trajectory= (a Trajectory, its file or a run directory)")
    return TrajectoryTempering(operator, **options)
