"""Parallel tempering across trajectory snapshots (PTT): exact invariance, exact samples, bookkeeping.

The last replica samples the model only if ``Π_k p_{θ_k}`` (one distribution per snapshot)
is invariant under a whole step: the swap round (Metropolis on the summed-out densities of
the two snapshots, then the redraw of the hidden layer of exchanged replicas under their new
snapshot) and a sweep of every replica with its own parameters. :func:`harness.check_scheme_exact`
checks that with the exact kernel on the enumerated product space of tiny RBMs, built here
from each snapshot's own enumeration (independently of the scheme's code), and that the
sampler draws from it. Monte Carlo on a bimodal RBM checks the model's replicas.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from itertools import pairwise

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models.trajectory import Trajectory
from boltzlab.tempering import ptt as ptt_module
from boltzlab.tempering.ptt import TrajectoryTempering, TrajectoryTemperingSummary
from harness import (
    ExactKernel,
    Move,
    SchemeCase,
    apply_moves,
    assert_exact_samples,
    bimodal_rbm,
    check_scheme_exact,
    check_scheme_round_trip,
    random_rbm,
    run_scheme,
    state_codes,
)
from tolerances import INVARIANCE_ATOL, MAX_Z


def scaled_path(model: bl.RBM, scales: tuple[float, ...]) -> Trajectory:
    """Snapshots ``s·θ`` (weights and biases) ending at the model itself when the last scale is 1."""
    parameters = [model.weights.detach(), model.visible_bias.detach(), model.hidden_bias.detach()]
    return Trajectory.from_snapshots(
        *([scale * tensor for scale in scales] for tensor in parameters), updates=list(range(len(scales)))
    )


@dataclasses.dataclass(frozen=True, eq=False)
class TrajectoryCase:
    """A tiny float64 model, a trajectory ending at it, and one enumerated case per level.

    ``levels[k]`` is a :class:`harness.SchemeCase` of the level's own RBM at β = 1, which gives
    its exact distribution, summed-out density, hidden redraw and operator sweeps.
    """

    model: bl.RBM
    trajectory: Trajectory
    label: str

    @cached_property
    def levels(self) -> list[SchemeCase]:
        return [
            SchemeCase(
                model=self.trajectory.model_at(float(k)), betas=(1.0,), label=f"{self.label}, level {k}"
            )
            for k in range(self.trajectory.n_points)
        ]

    @property
    def n_levels(self) -> int:
        return self.trajectory.n_points

    @property
    def n_states(self) -> int:
        return self.levels[0].n_states

    def states(self, code: int, n_copies: int) -> tuple[torch.Tensor, ...]:
        return self.levels[0].states(code, n_copies)


def trajectory_cases() -> list[TrajectoryCase]:
    """Two levels of 3x2 (32 states each), three of 2x1 (8 each) and three of 2x2 (16 each),
    strong weights so that a wrong acceptance or a missing redraw moves the distribution."""
    cases = []
    for shape, scales, seed in (((3, 2), (1.0,), 20), ((2, 1), (0.5, 1.0), 21), ((2, 2), (0.4, 1.0), 22)):
        model = random_rbm(*shape, scale=3.0, seed=seed)
        cases.append(
            TrajectoryCase(
                model=model, trajectory=scaled_path(model, scales), label=f"{shape} scales {scales}"
            )
        )
    return cases


def swap_move(levels: list[SchemeCase], lower: int, *, redraw: bool = True, sign: float = 1.0) -> Move:
    """Exact kernel of proposing the exchange of levels ``(lower, lower + 1)``: accept with
    ``min(1, f_lo(b) f_hi(a) / (f_lo(a) f_hi(b)))`` on each snapshot's summed-out density,
    exchange, redraw both hidden layers under the new level's parameters. ``redraw=False``
    (keep the joint states) and ``sign=-1`` (the inverted ratio) are the wrong variants."""
    low, high = levels[lower], levels[lower + 1]
    n = low.n_states
    gain = high.marginal_log_f(0) - low.marginal_log_f(0)  # log f_hi − log f_lo, per state
    accept = (sign * (gain[:, None] - gain[None, :])).clamp_max(0.0).exp().reshape(-1)  # pair (a, b)
    exchange = torch.eye(n * n, dtype=torch.float64)[torch.arange(n * n).view(n, n).T.reshape(-1)]
    if redraw:
        exchange = exchange @ torch.kron(low.redraw(0), high.redraw(0))
    return Move(torch.diag(1.0 - accept) + accept[:, None] * exchange, (lower, lower + 1))


def product_target(levels: list[SchemeCase]) -> torch.Tensor:
    target = torch.ones(1, dtype=torch.float64)
    for level in levels:
        target = torch.kron(target, level.p(0))
    return target


def ptt_exact(pairs: str, swap_every: int):
    def exact(operator, case: TrajectoryCase) -> ExactKernel:
        """Four steps as the scheme makes them: a swap round before the sweep of every step
        after a positive multiple of ``swap_every`` sweeps (even pairs, then odd ones, for
        ``"alternating"``; every pair from the lowest for ``"all"``), then every level swept
        with its own parameters."""
        levels = case.levels
        sweeps = tuple(Move(level.sweep(operator, 0), (k,)) for k, level in enumerate(levels))
        swaps = [swap_move(levels, lower) for lower in range(len(levels) - 1)]
        steps, n_rounds = [], 0
        for n_sweeps_done in range(4):
            round_moves: tuple[Move, ...] = ()
            if n_sweeps_done > 0 and n_sweeps_done % swap_every == 0:
                round_moves = tuple(swaps) if pairs == "all" else tuple(swaps[n_rounds % 2 :: 2])
                n_rounds += 1
            steps.append(round_moves + sweeps)
        return ExactKernel(
            sizes=(case.n_states,) * len(levels),
            target=product_target(levels),
            steps=tuple(steps),
            reversible=tuple(swaps),
        )

    return exact


def place(state, case: TrajectoryCase, index: int):
    """Every system's level k at the k-th digit (base n_states, level 0 most significant) of ``index``."""
    codes = []
    for _ in range(case.n_levels):
        index, code = divmod(index, case.n_states)
        codes.append(code)
    per_level = [case.states(code, state.n_chains) for code in reversed(codes)]
    layers = tuple(torch.cat(parts) for parts in zip(*per_level, strict=True))
    return dataclasses.replace(state, chains=bl.Chains(layers=layers, beta=state.chains.beta))


def locate(state, case: TrajectoryCase) -> torch.Tensor:
    per_level = state_codes(state.chains.layers).view(case.n_levels, -1)
    index = torch.zeros(per_level.shape[1], dtype=torch.int64)
    for codes in per_level:
        index = index * case.n_states + codes
    return index


# ---------------------------------------------------------------------------- exact kernel
@pytest.mark.parametrize(("pairs", "swap_every"), [("alternating", 1), ("all", 1), ("alternating", 2)])
def test_exact_kernel_leaves_the_product_of_snapshots_invariant_and_the_sampler_follows_it(pairs, swap_every):
    check_scheme_exact(
        lambda operator, case: TrajectoryTempering(
            operator, case.trajectory, pairs=pairs, swap_every=swap_every
        ),
        ptt_exact(pairs, swap_every),
        place=place,
        locate=locate,
        cases=trajectory_cases(),
    )


def test_the_exact_check_has_power():
    # Exchanging whole joint states (hidden layers included) with the summed-out acceptance,
    # or inverting the acceptance ratio, moves the product far beyond the invariance tolerance.
    for case in trajectory_cases():
        levels = case.levels
        target = product_target(levels)
        sizes = (case.n_states,) * len(levels)
        for wrong in (swap_move(levels, 0, redraw=False), swap_move(levels, 0, sign=-1.0)):
            assert (apply_moves(target, [wrong], sizes) - target).abs().max().item() > 1e-4
        right = swap_move(levels, 0)
        assert (apply_moves(target, [right], sizes) - target).abs().max().item() < INVARIANCE_ATOL


# ---------------------------------------------------------------------------- Monte Carlo
# Gibbs in the fast tier, flip (3 s) in the slow tier: the exact-kernel test above samples PTT
# with both.
@pytest.mark.parametrize("operator_name", ["gibbs", pytest.param("flip", marks=pytest.mark.slow)])
def test_model_replicas_match_the_exact_distribution(operator_name):
    # A bimodal 5x4 RBM whose plain Gibbs chains stay at the half/half split of their starting
    # states (tests/tempering/test_parallel.py) is sampled exactly through its snapshots.
    model, pattern = bimodal_rbm(5, 4, seed=0)
    scheme = TrajectoryTempering(bl.operators.get(operator_name), scaled_path(model, (0.25, 0.5, 0.75, 1.0)))
    state, infos = run_scheme(scheme, model, n_chains=10_000, n_steps=80, seed=2)
    assert_exact_samples(
        model, scheme.samples(state).layers, pattern=pattern, label=f"PTT with {operator_name}"
    )
    summary = scheme.summarize(infos, state)
    assert isinstance(summary, TrajectoryTemperingSummary)
    assert summary.positions.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert summary.updates.tolist() == [-1.0, 0.0, 1.0, 2.0, 3.0]
    assert bool(((summary.swap_acceptance >= 0) & (summary.swap_acceptance <= 1)).all())
    assert summary.total_round_trips > 0


def test_swap_acceptance_matches_its_exact_expectation():
    # At equilibrium, pair (k, k+1) is accepted with probability E[min(1, r)] under
    # p_k ⊗ p_{k+1}, computable by enumeration of each snapshot's visible marginal.
    model, _ = bimodal_rbm(5, 4, seed=0)
    path = scaled_path(model, (0.3, 0.6, 1.0))
    scheme = TrajectoryTempering(bl.operators.get("gibbs"), path)
    n_systems = 8000
    state, _ = run_scheme(scheme, model, n_chains=n_systems, n_steps=61, seed=3)
    assert state.n_rounds % 2 == 0
    _, info = scheme.step(model, state, generator=torch.Generator().manual_seed(4))
    assert info.swap_attempted.tolist() == [True, False, True]
    visible = bl.estimators.joint_states((5,))[0]
    marginals = [
        torch.softmax(-path.model_at(float(k)).free_energy(visible), 0) for k in range(path.n_points)
    ]
    for lower in (0, 2):
        lo, hi = marginals[lower], marginals[lower + 1]
        ratio = (lo[None, :] * hi[:, None]) / (lo[:, None] * hi[None, :])  # [v at level k, v at level k+1]
        expected = float((lo[:, None] * hi[None, :] * ratio.clamp_max(1.0)).sum())
        observed = float(info.swap_accepted[lower].to(torch.float64).mean())
        z = (observed - expected) / math.sqrt(expected * (1 - expected) / n_systems)
        assert abs(z) < MAX_Z, (
            f"pair {lower}: acceptance {observed:.4f} vs exact {expected:.4f} (z = {z:.1f})"
        )


# ---------------------------------------------------------------------------- levels
@pytest.mark.slow
def test_acceptance_selection_keeps_neighbours_above_the_threshold():
    model, pattern = bimodal_rbm(5, 4, seed=0)
    path = scaled_path(model, tuple(k / 12 for k in range(1, 13)))  # 13 points, the last is the model
    scheme = TrajectoryTempering(bl.operators.get("gibbs"), path, levels="acceptance", pilot_steps=60)
    state, infos = run_scheme(scheme, model, n_chains=4000, n_steps=120, seed=5)
    selection = scheme.selection
    assert selection is not None and selection.cost_sweeps == 60 * 13 * 64
    kept = selection.kept.tolist()
    assert kept[0] == 0 and kept[-1] == 12 and kept == sorted(set(kept))
    assert 2 < len(kept) < 13  # a real subset
    for (first, second), rate in zip(pairwise(kept), selection.acceptance.tolist(), strict=True):
        assert rate >= 0.3 or second == first + 1, (first, second, rate)
    assert state.positions.tolist() == [float(index) for index in kept[:-1]] + [12.0]
    summary = scheme.summarize(infos, state)
    # The run's own acceptance agrees with the pilot's promise (up to its noise).
    assert float(summary.swap_acceptance.min()) > 0.2, summary.swap_acceptance
    assert_exact_samples(model, scheme.samples(state).layers, pattern=pattern, label="PTT, selected levels")


def test_model_appended_and_explicit_positions():
    model, _ = bimodal_rbm(5, 4, seed=1)
    short = scaled_path(model, (0.3, 0.6))  # does not reach the model
    scheme = TrajectoryTempering(bl.operators.get("gibbs"), short, levels=[0.0, 1.5, 2.0])
    state = scheme.init(model, 7, generator=torch.Generator().manual_seed(0))
    positions = state.positions.tolist()
    assert positions[:3] == [0.0, 1.5, 2.0] and math.isnan(positions[3])
    state, _ = scheme.step(model, state, generator=torch.Generator().manual_seed(1))
    summary = scheme.summarize([], state)
    assert summary.updates[:3].tolist() == [-1.0, 0.5, 1.0] and math.isnan(float(summary.updates[3]))
    # When the trajectory ends at the model, its last point is the model's level, not a copy.
    full = scaled_path(model, (0.3, 0.6, 1.0))
    state = TrajectoryTempering(bl.operators.get("gibbs"), full, levels=[0.0, 2.0, 3.0]).init(
        model, 7, generator=torch.Generator().manual_seed(0)
    )
    assert state.positions.tolist() == [0.0, 2.0, 3.0]


# ---------------------------------------------------------------------------- contract
def test_step_contract_and_checkpoint_round_trip():
    model = random_rbm(7, 3, scale=2.0, seed=4, dtype=torch.float32)
    scheme = TrajectoryTempering(bl.operators.get("flip"), scaled_path(model, (0.3, 0.7, 1.0)), pairs="all")
    generator = torch.Generator().manual_seed(0)
    state = scheme.init(model, 13, generator=generator)
    before = {key: value.clone() for key, value in scheme.state_tensors(state).items()}
    new_state, info = scheme.step(model, state, generator=generator)
    new_state, info = scheme.step(model, new_state, generator=generator)
    for key, value in scheme.state_tensors(state).items():
        assert torch.equal(value, before[key]), f"step modified its input ({key})"
    assert tuple(scheme.samples(new_state).visible.shape) == (13, 7)
    assert scheme.samples(new_state).dtype == torch.float32
    assert info.swap_accepted.shape == (3, 13) and info.flip_rate.shape == (4,)
    assert info.swap_attempted.tolist() == [True, True, True]
    check_scheme_round_trip(scheme, model, seed=3, steps_before=5, steps_after=4)
    with pytest.raises(ValidationError, match="saved levels"):
        scheme.state_from_tensors(
            model, {**scheme.state_tensors(new_state), "positions": torch.tensor([0.0, 9.0, 1.0])}
        )


def test_sample_door_and_refusals():
    model, _ = bimodal_rbm(5, 4, seed=0)
    path = scaled_path(model, (0.5, 1.0))
    assert "ptt" in bl.sampling.samplers()
    result = bl.sample(model, sampler="ptt", trajectory=path, n_chains=11, n_sweeps=5, generator=0)
    assert tuple(result.chains.visible.shape) == (11, 5)
    assert result.info.summary.swap_acceptance.shape == (2,)
    with pytest.raises(ValidationError, match="needs trajectory="):
        bl.sample(model, sampler="ptt", n_chains=3, n_sweeps=1, generator=0)
    with pytest.raises(ValidationError, match="levels must"):
        TrajectoryTempering(bl.operators.get("gibbs"), path, levels="some")
    with pytest.raises(ValidationError, match="start at 0"):
        TrajectoryTempering(bl.operators.get("gibbs"), path, levels=[1.0, 2.0])
    with pytest.raises(ValidationError, match="must be in"):
        TrajectoryTempering(bl.operators.get("gibbs"), path, levels=[0.0, 7.0])
    with pytest.raises(ValidationError, match="pairs"):
        TrajectoryTempering(bl.operators.get("gibbs"), path, pairs="odd")
    with pytest.raises(ValidationError, match="holds a 5x4 RBM"):
        TrajectoryTempering(bl.operators.get("gibbs"), path).init(
            random_rbm(3, 2), 4, generator=torch.Generator()
        )
    assert ptt_module.TrajectoryTempering.name == "ptt"
