"""Tempered sampling along a training trajectory: levels at positions of a parameter path.

The samplers of :mod:`boltzlab.estimators.tempered.samples` move chains between inverse
temperatures ``β_k`` of one model. On a model trained to sharpness that path can cross a
first-order-like transition: above it most of the mass sits in an ordered phase that chains
climbing from the base enter too rarely, and no weights fix that (docs/trust.md, "Open":
RTS with the exact ``log Z(β_k)`` as its weights was still 1.2 nats low on MNIST CD-25). The
parameters a model visited while it was trained form another path, along which the modes
grow gradually (docs/algorithms.md §4.6). Here the levels are positions ``t_0 = 0 < … <
t_{K−1} = P − 1`` on a piecewise-linear path through ``P`` parameter points
(:mod:`boltzlab.estimators.trajectory.path`): level ``k`` is the RBM ``θ(t_k)``, level 0 the
zero-weight anchor (exact samples, exact ``log Z_0``) and the last level the model.

Simulated tempering on these levels samples ``q(v, k) ∝ f_k(v)·r_k/Ẑ_k`` with the hidden
layer summed out, ``log f_k(v) = b(t_k)·v + Σ_j softplus(a_j(t_k))``. Each step is

1. ``h ~ p_{θ(t_k)}(h | v)`` and ``v ~ p_{θ(t_k)}(v | h)`` at each chain's level (one Gibbs
   sweep; the visible update groups chains by segment, two matrix products per segment);
2. ``c + vW`` and ``b·v`` at all ``P`` points (one matrix product), from which ``log f_k(v)``
   at every level is the softplus of the interpolated pre-activations;
3. a Gibbs draw of the level from ``q(k | v)``.

Collapsed over ``h``, steps 1 and 3 each leave ``q(v, k)`` invariant. The densities are
divided by the anchor's exact ``Z_0``, so level 0 is normalised as RTS's eq. 9 expects and
every level's estimate is an absolute ``log Z``. The initial iterations, the long run and the
statistics kept are those of :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples`
(a :class:`~boltzlab.estimators.tempered.samples.TemperedSamples` whose ``betas`` are the
positions divided by ``P − 1``), so RTS, TS and MBAR read them unchanged; path derivatives
(TI) are not recorded. One process runs all chains.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.tempered.levels import (
    check_initial_log_z,
    pooled_log_c,
    resolve_log_prior,
    rts_log_z,
    stopping_statistic,
)
from boltzlab.estimators.tempered.samples import TemperedSamples
from boltzlab.estimators.tempered.step import LongRunRecorder, SamplerState, TripCounter, accumulate_
from boltzlab.estimators.trajectory.path import Kernel, PathTensors, anneal
from boltzlab.models.trajectory import Trajectory
from boltzlab.numerics import softplus
from boltzlab.rng import rand, randint
from boltzlab.tempering.level_moves import sample_categorical
from boltzlab.validation import check_nonnegative_int, check_positive_int

__all__ = ["PathLevels", "collect_trajectory_samples", "pilot_level_log_z"]

# Work-space budget (elements of the (chains, K, n_hidden) pre-activations) per chunk of levels.
_CHUNK_ELEMENTS = 1 << 22


class PathLevels:
    """``K`` levels at ascending positions of a parameter path, with the hidden layer summed out.

    Parameters
    ----------
    path : Trajectory
        ``P ≥ 2`` points, from the zero-weight anchor to the model.
    positions : Tensor, shape (K,), float64
        Strictly ascending, from exactly 0 to exactly ``P − 1``.
    """

    def __init__(self, path: Trajectory, positions: Tensor) -> None:
        positions = torch.as_tensor(positions, dtype=torch.float64).cpu()
        n_points = path.n_points
        if n_points < 2:
            raise ValidationError("a path of levels needs at least two points (the anchor and the model)")
        if (
            positions.dim() != 1
            or positions.numel() < 2
            or float(positions[0]) != 0.0
            or float(positions[-1]) != float(n_points - 1)
            or not bool((positions[1:] > positions[:-1]).all())
        ):
            raise ValidationError(
                f"level positions must ascend strictly from 0 to {n_points - 1} (the path's last point)"
            )
        self.path, self.positions = path, positions
        self.n_points, self.n_levels = n_points, positions.numel()
        self.n_visible, self.n_hidden = path.n_visible, path.n_hidden
        device, dtype = path.device, path.dtype
        segment = positions.floor().clamp(max=n_points - 2).to(torch.int64)
        self.segment = segment.to(device)
        self.fraction = (positions - segment.to(torch.float64)).to(device)
        self.fraction_model = self.fraction.to(dtype)
        self.weights, self.visible_bias = path.weights, path.visible_bias
        # (V, P·H): c + vW at every point in one product.
        self.weights_flat = path.weights.permute(1, 0, 2).reshape(self.n_visible, n_points * self.n_hidden)
        self.hidden_flat = path.hidden_bias.reshape(-1)
        self.visible_bias_t = path.visible_bias.to(torch.float64).T.contiguous()
        # Normalises level 0: every level's log Z is then absolute.
        self.anchor_log_z = path.anchor_log_z

    @property
    def device(self) -> torch.device:
        return self.path.device

    @property
    def dtype(self) -> torch.dtype:
        return self.path.dtype

    def point_terms(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """``c + vW`` (``(n, P, H)``, model dtype) and ``b·v`` (``(n, P)``, float64) at every point."""
        pre = torch.addmm(self.hidden_flat, v, self.weights_flat).view(
            v.shape[0], self.n_points, self.n_hidden
        )
        return pre, v.to(torch.float64) @ self.visible_bias_t

    def log_f_all(self, pre: Tensor, linear: Tensor) -> Tensor:
        """``log f_k(v) − log Z_0`` at every level; shape ``(n, K)``, float64."""
        n = pre.shape[0]
        left, right = self.segment, self.segment + 1
        out = torch.lerp(linear[:, left], linear[:, right], self.fraction[None, :]) - self.anchor_log_z
        size = max(1, _CHUNK_ELEMENTS // max(1, n * self.n_hidden))
        for start in range(0, self.n_levels, size):
            chunk = slice(start, min(start + size, self.n_levels))
            a = torch.lerp(
                pre[:, left[chunk]].to(torch.float64),
                pre[:, right[chunk]].to(torch.float64),
                self.fraction[chunk][None, :, None],
            )
            out[:, chunk] += softplus(a).sum(2)
        return out

    def hidden_logits(self, pre: Tensor, levels: Tensor) -> Tensor:
        """``a(t_k)`` of each chain at its level ``k``; shape ``(n, H)``, model dtype."""
        rows = torch.arange(pre.shape[0], device=pre.device)
        segment = self.segment[levels]
        return torch.lerp(pre[rows, segment], pre[rows, segment + 1], self.fraction_model[levels][:, None])

    def visible_logits(self, h: Tensor, levels: Tensor) -> Tensor:
        """``b(t_k) + h W(t_k)ᵀ`` of each chain at its level; shape ``(n, V)``, model dtype.

        Chains are grouped by segment: two products per occupied segment.
        """
        out = torch.empty((h.shape[0], self.n_visible), dtype=self.dtype, device=self.device)
        segments = self.segment[levels]
        fractions = self.fraction_model[levels][:, None]
        for segment in torch.unique(segments).tolist():
            rows = (segments == segment).nonzero().squeeze(1)
            hidden = h[rows]
            left = torch.addmm(self.visible_bias[segment], hidden, self.weights[segment].T)
            right = torch.addmm(self.visible_bias[segment + 1], hidden, self.weights[segment + 1].T)
            out[rows] = torch.lerp(left, right, fractions[rows])
        return out

    def sweep(self, v: Tensor, pre: Tensor, levels: Tensor, generator: torch.Generator) -> Tensor:
        """One Gibbs sweep (hidden, then visible) of every chain at its level; the new ``v``."""
        h = _bernoulli_logits(self.hidden_logits(pre, levels), generator)
        return _bernoulli_logits(self.visible_logits(h, levels), generator)


def _bernoulli_logits(logits: Tensor, generator: torch.Generator) -> Tensor:
    uniform = rand(tuple(logits.shape), generator=generator, dtype=logits.dtype, device=logits.device)
    return (torch.sigmoid(logits) > uniform).to(logits.dtype)


def pilot_level_log_z(
    levels: PathLevels, *, n_chains: int, substeps: int, generator: torch.Generator
) -> tuple[Tensor, int]:
    """AIS's running ``log(Ẑ(t_k)/Z_0)`` at every level, from ``n_chains`` exact anchor draws.

    Trajectory AIS's annealing (:func:`~boltzlab.estimators.trajectory.path.anneal`, one Gibbs
    sweep per step) with ``substeps`` equal steps between neighbouring levels; returns the
    estimates (shape ``(K,)``, float64, CPU; level 0 exactly 0) and the chain-sweeps spent.
    The sampler's weights start there.
    """
    positions = levels.positions.tolist()
    fine = [0.0]
    for start, end in itertools.pairwise(positions):
        fine += [start + (end - start) * j / substeps for j in range(1, substeps)] + [end]
    chains = levels.path.sample_anchor(n_chains, generator=generator)
    kernel = Kernel(operators.resolve("gibbs"), 1, False)
    _, running = anneal(
        PathTensors.of(levels.path), kernel, fine, chains, record="log_z", generator=generator
    )
    assert running is not None  # record="log_z" keeps it
    marks = torch.arange(1, levels.n_levels) * substeps - 1  # increments ending at the levels
    return torch.cat([torch.zeros(1, dtype=torch.float64), running[marks]]), n_chains * (len(fine) - 2)


def collect_trajectory_samples(
    levels: PathLevels,
    *,
    n_chains: int = 100,
    n_sweeps: int = 1000,
    prior: object = None,
    generator: torch.Generator,
    initial_log_z: Sequence[float] | Tensor | None = None,
    n_initial_iterations: int = 10,
    initial_sweeps: int = 50,
    stop_tolerance: float = 0.1,
    record_log_densities: bool = False,
    max_log_densities: int = 1_000_000,
    start: SamplerState | None = None,
) -> TemperedSamples:
    """Simulated tempering over ``levels`` (module docstring) with RTS's statistics.

    The options mean what they mean for
    :func:`~boltzlab.estimators.tempered.samples.collect_tempered_samples` (initial iterations
    adapt ``log Ẑ`` with the Rao-Blackwellized ``ĉ``; the long run is one batch). ``start``
    continues a previous run's ``final_state`` on the same levels (its chains' β holds the
    level positions divided by ``P − 1``).
    """
    n_chains = check_positive_int(n_chains, "n_chains")
    n_sweeps = check_positive_int(n_sweeps, "n_sweeps")
    initial_sweeps = check_positive_int(initial_sweeps, "initial_sweeps")
    max_log_densities = check_positive_int(max_log_densities, "max_log_densities")
    check_nonnegative_int(n_initial_iterations, "n_initial_iterations")
    if not isinstance(stop_tolerance, (int, float)) or not stop_tolerance > 0:
        raise ValidationError(f"stop_tolerance must be a positive number, got {stop_tolerance!r}")
    n_levels, device = levels.n_levels, levels.device
    betas = levels.positions / (levels.n_points - 1)
    log_prior = resolve_log_prior(prior, betas)
    log_z_hat = check_initial_log_z(initial_log_z, n_levels)
    if start is None:
        v = levels.path.sample_anchor(n_chains, generator=generator).layers[0]
        level = torch.zeros(n_chains, dtype=torch.int64, device=device)
    else:
        v, level = start.chains.layers[0], torch.as_tensor(start.levels, dtype=torch.int64).to(device)
        if v.shape != (n_chains, levels.n_visible) or level.shape != (n_chains,):
            raise ValidationError(f"start must hold n_chains={n_chains} visible states and levels")
    pre, _ = levels.point_terms(v)
    log_prior_device = log_prior.to(device)

    def step(v: Tensor, pre: Tensor, level: Tensor, weights: Tensor) -> tuple[Tensor, ...]:
        v = levels.sweep(v, pre, level, generator)
        pre, linear = levels.point_terms(v)
        log_f = levels.log_f_all(pre, linear)
        log_q = log_f + weights[None, :]
        log_q = log_q - torch.logsumexp(log_q, 1, keepdim=True)
        return v, pre, sample_categorical(log_q, generator=generator), log_f, log_q

    n_blocks = n_initial_iterations + 1
    log_sums = torch.full((n_blocks, n_chains, n_levels), -math.inf, dtype=torch.float64, device=device)
    counts = torch.zeros((n_blocks, n_chains, n_levels), dtype=torch.int64, device=device)
    stage_log_z_hat, block_sweeps, stop_statistics = [], [], []
    for iteration in range(n_initial_iterations):
        stage_log_z_hat.append(log_z_hat)
        weights = log_prior_device - log_z_hat.to(device)
        level = randint(n_levels, (n_chains,), generator=generator, device=device)
        for _ in range(initial_sweeps):
            v, pre, level, _, log_q = step(v, pre, level, weights)
            accumulate_(log_sums[iteration], counts[iteration], log_q, level)
        block_sweeps.append(initial_sweeps)
        log_c = pooled_log_c(log_sums[iteration], counts[iteration], "rb")
        log_z_hat = rts_log_z(log_z_hat, log_prior, log_c)
        stop_statistics.append(stopping_statistic(log_c, log_prior))
        if stop_statistics[-1] < stop_tolerance:
            break
    n_run = len(stop_statistics)
    stage_log_z_hat.append(log_z_hat)

    recorder = LongRunRecorder(
        n_batches=1,
        n_chains=n_chains,
        betas=betas.to(device),
        derivatives=False,
        weighted_derivatives=False,
        thinning=max(1, math.ceil(n_chains * n_sweeps * n_levels / max_log_densities)),
        n_sweeps=n_sweeps if record_log_densities else 0,
    )
    trips = TripCounter(n_chains, n_levels, device)
    weights = log_prior_device - log_z_hat.to(device)
    block = n_initial_iterations
    for sweep in range(n_sweeps):
        v, pre, level, log_f, log_q = step(v, pre, level, weights)
        accumulate_(log_sums[block], counts[block], log_q, level)
        trips.update(level)
        recorder.record(0, sweep, None, level, log_f, log_q)
    block_sweeps.append(n_sweeps)

    keep = torch.cat([torch.arange(n_run), torch.arange(n_initial_iterations, n_blocks)]).to(device)
    final = Chains(layers=(v,), beta=betas.to(device=device, dtype=levels.dtype)[level])
    return TemperedSamples(
        betas=betas,
        log_prior=log_prior,
        stage_log_z_hat=torch.stack(stage_log_z_hat),
        block_stage=torch.tensor([*range(n_run), n_run], dtype=torch.int64),
        block_sweeps=torch.tensor(block_sweeps, dtype=torch.int64),
        log_probability_sums=log_sums.index_select(0, keep).cpu(),
        level_counts=counts.index_select(0, keep).cpu(),
        **recorder.results(),
        stop_statistics=torch.tensor(stop_statistics, dtype=torch.float64),
        stopped=n_run > 0 and stop_statistics[-1] < stop_tolerance,
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        operator="gibbs",
        adapt_with="rb",
        passages=trips.passages.cpu(),
        final_state=SamplerState(chains=final, levels=level),
    )
