"""Tracking the log-likelihood during training with Rao-Blackwellized tempered sampling (RTS).

Carlson, Stinson, Pakman & Paninski (2016), *Partition functions from Rao-Blackwellized
tempered sampling*, ICML, §4.4 and eq. 9; docs/algorithms.md §4.3 ("Tracking log-likelihood during
training"); docs/open-questions.md items 10 and 11.

**The negative phase** ``"rts"`` (:class:`RTSTracking`) keeps ``n_chains`` simulated-tempering
chains on an ascending ladder ``0 = β_0 < … < β_{K−1} = 1`` from one parameter update to the
next. They sample the joint

    q(x, k) ∝ f_k(x)·r_k / Ẑ_k,        q(β_k | x) = softmax_k(log f_k(x) + log r_k − log Ẑ_k),

with the hidden-summed, normalised-base ``f_k`` of docs/algorithms.md §1.3 — the same function as the
RTS estimator (:mod:`boltzlab.estimators.tempered.rts`), so ``Ẑ_k`` estimates ``Z(β_k)`` with
``Z(0) = 1`` — and the prior ``r_k ∝ exp(2β_k)`` of the paper (more chains near β = 1, so more
model-term samples, at the price of a noisier ``log Ẑ``). Each update makes ``k`` sweeps with
the current parameters (the paper: 25 sweeps of 2,000 chains); one sweep
(:mod:`boltzlab.training.tracking_sweeps`) is

1. one operator sweep of every chain at its own β (any operator);
2. ``marginal_terms`` of the new states and ``log q(β_k | x)`` for all ``K`` levels;
3. ``q`` added, per chain and in log space, to this update's sums (for ``ĉ``);
4. a Gibbs draw of every chain's level from ``q(β | x)`` and a redraw of the summed-out layer
   at the new β — together a collapsed Gibbs move of (level, hidden) given the visibles, so
   state-dependent operators such as flip-the-state stay exact;
5. the chains now at the top level are kept: given the level, they are exact β = 1 states.

**Model term.** The β = 1 states of all ``k`` sweeps of the update (``target_samples=
"all-sweeps"``, default; ``"last-sweep"`` keeps only the last sweep's): about
``n_chains·k·r_{K−1}`` of them, a number that varies from update to update — the objective
averages over whatever it is given. An update in which no chain reached β = 1 reuses the β = 1
states of the latest update that had some (counted in ``n_reused``), so nothing divides by
zero; before any chain has reached β = 1 (only after an initial phase with few chains), the
chains at the highest level reached stand in for them.

**Keeping Ẑ current.** After the sweeps, ``ĉ_k = Σ q(β_k | x)/(n_chains·k)`` over the update's
sweeps, and the damped update of the paper is applied to every level
(:func:`~boltzlab.estimators.tempered.rts.rts_tracking_update`). Both are docs/open-questions.md item 10 — the
paper writes the update for ``Ẑ_K`` only and does not say whether ``ĉ`` uses all 25 sweeps —
and both alternatives are parameters (``update_levels="target"``, ``c_hat_sweeps="last-sweep"``):

    log Ẑ_k ← log Ẑ_k + α·(log r_1 − log r_k + log ĉ_k − log ĉ_1),      α = 0.2.

``α = 1`` would replace ``Ẑ`` by the RTS estimate of eq. 9; ``α < 1`` makes ``log Ẑ`` an
exponential moving average of the per-update estimates (``Ẑ`` cancels from the expectation of
each), each computed with the parameters of its update:

    log Ẑ_k(t + 1) ≈ (1 − α)·log Ẑ_k(t) + α·(log Z_k(θ_t) + noise_t).

Two consequences are worth knowing. (i) **Lag**: when ``log Z`` drifts by ``d`` nats per
update, ``log Ẑ_K`` trails it by about ``d/α`` (the average's lag plus one update); during
fast early learning that is the dominant error. (ii) **Noise**: the error bar
``rts_log_z_stderr`` is the delta method (Carlson et al. App. B) with independent chains as
units, carried through the average: each chain keeps the same moving average of its
*influence* ``a_uk/ĉ_k − a_u0/ĉ_0`` on ``log ĉ_k − log ĉ_0`` (``a_u`` its share of an update's
``ĉ``), and the variance is the spread of these averages over chains divided by their number.
Because a chain's averaged influence spans many updates, the correlation between consecutive
updates (the chains persist) is included. It starts from the last initial iteration's
influences (zero when ``initial_log_z`` is given without initial iterations, whose own error
is then left out).

**Start.** ``init`` draws the chains from the model's base and runs the initial iterations of
the paper's §2.4 (:mod:`boltzlab.training.tracking_start`): up to ``n_initial_iterations`` (10)
of ``initial_sweeps`` (50) sweeps, replacing ``Ẑ`` by the RTS estimate after each, stopping once
``max_k |ĉ_k/r_k − 1| < stop_tolerance`` (docs/open-questions.md item 11). They run with the
model as it is at the start of training (the paper pretrains with CD-1 first).

**The callback** :class:`~boltzlab.training.likelihood_tracker.RTSLikelihoodTracker` (its own module) turns the phase's ``log Ẑ_K`` into train and
validation log-likelihoods, ``mean log f(v) − log Ẑ_K`` (paper §4.4), every ``every`` updates,
for the history, the metrics CSV and :class:`~boltzlab.training.callbacks.EarlyStopping`.

**Cost.** A sweep costs the operator's two matrix products plus ``n_chains·K·J`` softplus
evaluations for ``log f_k(x)`` at every level (``J`` summed-out units) — the price of the
Gibbs level move, which RTS reuses for ``ĉ`` at no extra cost. On a CPU, the large ladders
of float32 models (``K·J`` from 2^14) go through the compiled kernel of
:mod:`boltzlab.level_sums` in the default ``density_dtype="float64"`` (about 20 times faster
than torch's float64, errors of a few 1e-6 nats); ``"float32"`` evaluates the softplus in
torch's single precision, about 2.5 times faster than float64 torch and slower than the
kernel: it is for accelerators.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import check_initial_log_z, resolve_log_prior
from boltzlab.estimators.tempered.rts import rts_tracking_update, stopping_statistic
from boltzlab.operators.base import Operator
from boltzlab.operators.base import resolve as resolve_operator
from boltzlab.tempering import ladders
from boltzlab.tempering.base import check_choice
from boltzlab.tempering.ladders import Ladder
from boltzlab.training.negative import NegativePhaseBase, register_phase
from boltzlab.training.rts_influence import chain_influence, influence_variance
from boltzlab.training.settings import setting_record
from boltzlab.training.tracking_start import start_tracking
from boltzlab.training.tracking_state import (
    RTSTrackingState,
    tracking_state_from_tensors,
    tracking_state_tensors,
)
from boltzlab.training.tracking_sweeps import LevelSweeper, pooled_log_c
from boltzlab.validation import check_nonnegative_int, check_positive_int

__all__ = [
    "RTSTracking",
    "RTSTrackingState",
]

DENSITY_DTYPES = {"float64": torch.float64, "float32": torch.float32}
SWEEP_CHOICES = ("all-sweeps", "last-sweep")
TARGET_SAMPLES = SWEEP_CHOICES
UPDATE_LEVELS = ("all", "target")
DEFAULT_LEVELS = 100  # the paper's K


@register_phase("rts")
class RTSTracking(NegativePhaseBase):
    """Simulated-tempering chains that train the model and keep ``log Ẑ`` current (``"rts"``).

    Parameters
    ----------
    operator : Operator
        Swept at each chain's β (Gibbs, flip, mixture, …).
    k : int, default 25
        Sweeps of every chain per update (the paper's 25).
    n_chains : int, default 2000
        Tempered chains (the paper's 2,000); at least 2 (the error bar needs two).
    ladder : Ladder or sequence of float, optional
        Ascending inverse temperatures from 0 to 1. Default ``n_levels`` equally spaced.
    n_levels : int, optional
        Levels of the default ladder (100, the paper's K, linear by docs/open-questions.md item 9).
    prior : "exp2beta", "uniform", callable or sequence of float, default "exp2beta"
        ``r_k`` (:func:`~boltzlab.estimators.tempered.levels.resolve_log_prior`); the paper's
        tracking prior ``r_k ∝ exp(2β_k)`` by default.
    step_size : float in (0, 1], default 0.2
        ``α`` of the damped update (the paper's 0.2; 0.05–0.5 behave alike). 1 replaces ``Ẑ``
        by each update's RTS estimate.
    initial_log_z : sequence of float, shape (K,), optional
        Starting ``log Ẑ`` (anchored at level 0); default zeros, as in the paper.
    n_initial_iterations : int >= 0, default 10
        At most this many initial iterations at ``init`` (0 skips them).
    initial_sweeps : int, default 50
        Sweeps per initial iteration.
    stop_tolerance : float, default 0.1
        The initial iterations stop once ``max_k |ĉ_k/r_k − 1| <`` this.
    target_samples : {"all-sweeps", "last-sweep"}, default "all-sweeps"
        Which β = 1 states form the model term: those of every sweep of the update, or only
        those after its last sweep.
    density_dtype : {"float64", "float32"}, default "float64"
        Precision of the ``n·K·J`` softplus evaluations of ``log f_k(x)``: float64, or float32
        summed over units in float32 and then used in float64
        (:func:`~boltzlab.estimators.tempered.levels.single_precision_log_f_all`: about 2.5 times faster
        than float64 torch, errors of order 1e-4 nats; on a CPU large ladders are faster in
        "float64", which goes through the compiled kernel of :mod:`boltzlab.level_sums`).
    update_log_z : bool, default True
        Apply the damped update after each update. ``False`` trains with fixed weights
        ``Ẑ`` (simulated-tempering learning without tracking; used to time the tracking).
    c_hat_sweeps : {"all-sweeps", "last-sweep"}, default "all-sweeps"
        ``ĉ`` from every sweep of the update, or only from the last one (the paper does not say
        which, docs/open-questions.md item 10; all sweeps is our default).
    update_levels : {"all", "target"}, default "all"
        Apply the damped update to every level (default: the sampler needs every ``Ẑ_k``,
        docs/open-questions.md item 10), or, as the paper writes it, to ``Ẑ_K`` alone (the other
        weights then stay at their initial values and the level occupancy drifts).

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> data = (torch.arange(140).view(20, 7) % 3 == 0).float()
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.train(model, data, algorithm="rts", k=5, n_chains=50, batch_size=10,
    ...                   n_updates=20, log_every=10, generator=0,
    ...                   algorithm_params={"n_levels": 8, "initial_sweeps": 20})
    >>> "rts_log_z" in result.history[-1].extra
    True
    """

    name = "rts"

    def __init__(
        self,
        *,
        operator: Operator,
        k: int = 25,
        n_chains: int = 2000,
        ladder: Ladder | Sequence[float] | Tensor | None = None,
        n_levels: int | None = None,
        prior: Any = "exp2beta",
        step_size: float = 0.2,
        initial_log_z: Sequence[float] | Tensor | None = None,
        n_initial_iterations: int = 10,
        initial_sweeps: int = 50,
        stop_tolerance: float = 0.1,
        target_samples: str = "all-sweeps",
        density_dtype: str = "float64",
        update_log_z: bool = True,
        c_hat_sweeps: str = "all-sweeps",
        update_levels: str = "all",
    ) -> None:
        operator = resolve_operator(operator)
        self.operator = operator
        self.k = check_positive_int(k, "k")
        self.n_chains = check_positive_int(n_chains, "n_chains")
        if self.n_chains < 2:
            raise ValidationError(f"n_chains must be at least 2 (the error bar needs two), got {n_chains}")
        self.ladder = ladders.resolve(ladder, n_levels=n_levels, default_levels=DEFAULT_LEVELS)
        if float(self.ladder.betas[0]) != 0.0:
            raise ValidationError(
                "ladder must start at beta = 0 (the normalised base anchors log Z_0 = 0), "
                f"got {float(self.ladder.betas[0])}"
            )
        self.prior = prior
        resolve_log_prior(prior, self.ladder.betas)  # refuses a bad prior here, at the door
        if isinstance(step_size, bool) or not isinstance(step_size, (int, float)) or not 0 < step_size <= 1:
            raise ValidationError(f"step_size must be a number in (0, 1], got {step_size!r}")
        self.step_size = float(step_size)
        self.initial_log_z = check_initial_log_z(initial_log_z, self.ladder.size)
        self.n_initial_iterations = check_nonnegative_int(n_initial_iterations, "n_initial_iterations")
        self.initial_sweeps = check_positive_int(initial_sweeps, "initial_sweeps")
        if (
            isinstance(stop_tolerance, bool)
            or not isinstance(stop_tolerance, (int, float))
            or stop_tolerance <= 0
        ):
            raise ValidationError(f"stop_tolerance must be a positive number, got {stop_tolerance!r}")
        self.stop_tolerance = float(stop_tolerance)
        self.target_samples = check_choice(target_samples, TARGET_SAMPLES, "target_samples")
        self.density_dtype = check_choice(density_dtype, tuple(DENSITY_DTYPES), "density_dtype")
        if not isinstance(update_log_z, bool):
            raise ValidationError(f"update_log_z must be True or False, got {update_log_z!r}")
        self.update_log_z = update_log_z
        self.c_hat_sweeps = check_choice(c_hat_sweeps, SWEEP_CHOICES, "c_hat_sweeps")
        self.update_levels = check_choice(update_levels, UPDATE_LEVELS, "update_levels")
        self._beta_cache: dict[tuple[torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}

    def __repr__(self) -> str:
        return (
            f"RTSTracking(operator={self.operator!r}, k={self.k}, n_chains={self.n_chains}, "
            f"n_levels={self.n_levels}, step_size={self.step_size})"
        )

    @property
    def n_levels(self) -> int:
        """``K``."""
        return self.ladder.size

    @property
    def top(self) -> int:
        """Index of the β = 1 level, ``K − 1``."""
        return self.ladder.size - 1

    def level_betas(self, model: Any) -> tuple[Tensor, Tensor]:
        """The ladder in the model's dtype, and the same values in float64; shapes ``(K,)``.

        Chains sweep at the first and densities are evaluated at the second, so the level move
        and the sweep target the same distributions.
        """
        key = (model.dtype, model.device)
        if key not in self._beta_cache:
            in_dtype = self.ladder.betas.to(device=model.device, dtype=model.dtype)
            self._beta_cache[key] = (in_dtype, in_dtype.to(torch.float64))
        return self._beta_cache[key]

    def log_prior(self, model: Any) -> Tensor:
        """Normalised ``log r_k`` on the model's device; shape ``(K,)``, float64."""
        return resolve_log_prior(self.prior, self.level_betas(model)[1].cpu()).to(model.device)

    def sweeper(self, model: Any, log_prior: Tensor) -> LevelSweeper:
        """The chains' sweeps under ``model``'s current parameters; ``log_prior`` shape ``(K,)``, float64."""
        betas, betas64 = self.level_betas(model)
        return LevelSweeper(
            operator=self.operator,
            betas=betas,
            betas64=betas64,
            log_prior=log_prior,
            density_dtype=self.density_dtype,
        )

    # ------------------------------------------------------------------ contract
    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> RTSTrackingState:
        """Chains from the base, then the initial iterations (module docstring); ``data`` unused."""
        log_prior = self.log_prior(model)
        start = start_tracking(
            model,
            self.sweeper(model, log_prior),
            n_chains=self.n_chains,
            log_z_hat=self.initial_log_z.to(model.device),
            n_iterations=self.n_initial_iterations,
            n_sweeps=self.initial_sweeps,
            stop_tolerance=self.stop_tolerance,
            generator=generator,
        )
        chains, levels = start.chains, start.levels
        at_top = levels == self.top
        if bool(at_top.any()):
            target = chains.select(at_top.nonzero().squeeze(1))
        else:  # no chain at β = 1 yet: the highest level reached stands in (module docstring)
            target = chains.select((levels == levels.max()).nonzero().squeeze(1))
        return RTSTrackingState(
            chains=chains,
            levels=levels,
            log_z_hat=start.log_z_hat,
            influence=start.influence,
            log_c=start.log_c,
            log_prior=log_prior,
            target=target.with_beta(1.0),
            n_updates=0,
            n_reused=0,
            initial_stop_statistics=start.stop_statistics,
        )

    def step(
        self,
        model: Any,
        state: RTSTrackingState,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[RTSTrackingState, Chains]:
        """``k`` tempered sweeps under the current parameters, then the damped ``Ẑ`` update.

        Returns the new state and the β = 1 states that form the model term.
        """
        accumulate_from = None
        if self.update_log_z:
            accumulate_from = 0 if self.c_hat_sweeps == "all-sweeps" else self.k - 1
        swept = self.sweeper(model, state.log_prior).sweeps(
            model,
            state.chains,
            state.levels,
            n_sweeps=self.k,
            log_z_hat=state.log_z_hat,
            accumulate_from=accumulate_from,
            collect=self.target_samples,
            generator=generator,
        )
        found = [chains for chains in swept.target if chains.n_chains > 0]
        n_reused = state.n_reused
        if found:
            target = found[0] if len(found) == 1 else Chains.concatenate(found)
        else:  # no chain reached β = 1 during this update: reuse the latest β = 1 states
            target, n_reused = state.target, n_reused + 1
        log_z_hat, influence, log_c = state.log_z_hat, state.influence, state.log_c
        if swept.log_sums is not None:
            log_c = pooled_log_c(swept.log_sums)
            updated = rts_tracking_update(log_z_hat, log_c, state.log_prior, step_size=self.step_size)
            # log Ẑ moves by α·(increment): each chain's influence follows the same average.
            averaged = torch.lerp(influence, chain_influence(swept.log_sums), self.step_size)
            if self.update_levels == "all":
                log_z_hat, influence = updated, averaged
            else:
                log_z_hat = torch.cat([log_z_hat[:-1], updated[-1:]])
                influence = torch.cat([influence[:, :-1], averaged[:, -1:]], 1)
        new_state = RTSTrackingState(
            chains=swept.chains,
            levels=swept.levels,
            log_z_hat=log_z_hat,
            influence=influence,
            log_c=log_c,
            log_prior=state.log_prior,
            target=target,
            n_updates=state.n_updates + 1,
            n_reused=n_reused,
            initial_stop_statistics=state.initial_stop_statistics,
        )
        return new_state, target

    def samples(self, state: RTSTrackingState) -> Chains | None:
        """The latest β = 1 states (the last model term's samples)."""
        return state.target

    def log_z(self, state: RTSTrackingState) -> float:
        """The tracked ``log Ẑ`` of the model (β = 1), nats."""
        return float(state.log_z_hat[-1])

    def log_z_stderr(self, state: RTSTrackingState) -> float:
        """Approximate standard error of :meth:`log_z` (module docstring)."""
        return math.sqrt(max(float(influence_variance(state.influence[:, -1:])[0]), 0.0))

    def metrics(self, state: RTSTrackingState) -> dict[str, float]:
        """``rts_log_z`` and its ``rts_log_z_stderr``; ``rts_balance`` = ``max_k |ĉ_k/r_k − 1|``
        of the last update (small while ``Ẑ`` keeps up); ``rts_target_samples`` (β = 1 states
        in the last model term) and ``rts_reused_updates``."""
        return {
            "rts_log_z": self.log_z(state),
            "rts_log_z_stderr": self.log_z_stderr(state),
            "rts_balance": stopping_statistic(state.log_c.cpu(), state.log_prior.cpu()),
            "rts_target_samples": float(state.target.n_chains),
            "rts_reused_updates": float(state.n_reused),
        }

    # ------------------------------------------------------------------ checkpoints
    def state_tensors(self, state: RTSTrackingState) -> dict[str, Tensor]:
        return tracking_state_tensors(state)

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> RTSTrackingState:
        return tracking_state_from_tensors(
            model,
            tensors,
            n_chains=self.n_chains,
            betas=self.level_betas(model)[0],
            log_prior=self.log_prior(model),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "operator": repr(self.operator),
            "k": self.k,
            "n_chains": self.n_chains,
            "ladder": [float(beta) for beta in self.ladder.betas.tolist()],
            "prior": setting_record(self.prior),
            "step_size": self.step_size,
            "initial_log_z": [float(value) for value in self.initial_log_z.tolist()],
            "n_initial_iterations": self.n_initial_iterations,
            "initial_sweeps": self.initial_sweeps,
            "stop_tolerance": self.stop_tolerance,
            "target_samples": self.target_samples,
            "density_dtype": self.density_dtype,
            "update_log_z": self.update_log_z,
            "c_hat_sweeps": self.c_hat_sweeps,
            "update_levels": self.update_levels,
        }
