"""Per-example AIS for the true ``log p(v)`` of a DBM, and its exact value for tiny models.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §4) estimate the
log-probability of a test case by running AIS on the DBM with ``v`` clamped: the unnormalised
marginal ``f(v) = Σ_h exp(−E(v, h))`` is the partition function of a Boltzmann machine over the
hidden layers alone, and ``log p(v) = log f(v) − log Z``. The CAST paper (Salakhutdinov 2010,
§5) uses it on 100 test cases to show how tight the variational bound is (−84.28 against a
bound of −84.76 on MNIST). docs/algorithms.md §4.1.

**The clamped model's tempered family.** With ``v`` fixed, layers of one parity of
``h¹, …, h^L`` are conditionally independent given the other, exactly as in the DBM. The base
is a factorial Bernoulli ``Q0(h) = Π σ(q_j)^{h_j} (1 − σ(q_j))^{1−h_j}`` and the path is the
geometric one of §1.3,

    log f_β(h) = β·(−E(v, h)) + (1 − β)·log Q0(h),      Z_0 = 1,   Z_1 = f(v).

The default base is the mean-field posterior ``Q(h | v)`` of the bound (its means mixed with
½ by ``base_mixing``, so that the base covers every state the posterior may need), which
starts the annealing next to its target; ``base_mixing = 1`` gives the uniform base, the
standard start. Any base with full support gives an unbiased ``f̂(v)``; the choice changes only
the variance (docs/open-questions.md item 26 leaves the 2009 paper's per-example schedule unrecovered:
schedule, length and base here are ours).

**Odd layers summed out** (as for the DBM's own AIS, :mod:`boltzlab.models.dbm`). The state is
the even hidden layers ``(h², h⁴, …)``; with ``a^l = b^l + h^{l−1}W^l + W^{l+1}h^{l+1}`` the
input of odd layer ``l`` (``h⁰ = v``),

    log f_β(x) = β·[b⁰·v + Σ_{even l≥2} b^l·h^l] + (1 − β)·[Σ_{even l≥2} q^l·h^l − Σ_{all l≥1} Σ_j softplus(q^l_j)]
                 + Σ_{odd l} Σ_j softplus(β a^l_j + (1 − β) q^l_j),

and one transition at β is a block sweep: odd layers with log-odds ``β a + (1 − β) q``, then
the even hidden layers with ``β(b^l + h^{l−1}W^l + W^{l+1}h^{l+1}) + (1 − β) q^l``. Any
layerwise operator (Gibbs, flip-the-state, the mixture) can make the sweep; for operators that
read a unit's current value the odd layers are first redrawn from their exact conditional, as
the summed-out weights require (:mod:`boltzlab.estimators.annealing.ais`).

Each example gets ``n_chains`` independent runs, all examples' runs advance together as one
batch, and log-weights are float64. ``log f̂(v)`` is a stochastic lower bound on ``log f(v)``
(Jensen), and AIS's ``log Ẑ`` one on ``log Z``, so ``log p̂(v) = log f̂(v) − log Ẑ`` has no fixed
bias sign.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import distributed, operators, progress
from boltzlab.errors import DivergenceError, ValidationError
from boltzlab.estimators.annealing.schedules import get_schedule
from boltzlab.estimators.exact import exact_log_z
from boltzlab.models.dbm import DBM
from boltzlab.models.mean_field import mean_field_posterior, variational_lower_bound_per_example
from boltzlab.numerics import log_mean_exp, softplus
from boltzlab.operators.base import LayerwiseOperator
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import as_model_data, check_positive_int, require

__all__ = ["DBMLikelihoodEstimate", "estimate_log_likelihood", "exact_log_likelihood"]

# The pure mean-field base (base_mixing = 0) keeps its means in [ε, 1 − ε]: full support.
_BASE_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class DBMLikelihoodEstimate:
    """Per-example AIS estimates of ``log p(v)`` of a DBM, with the variational bound beside them.

    Attributes
    ----------
    log_probability : Tensor, shape (n_examples,), float64
        ``log p̂(v) = log f̂(v) − log Z`` per example, nats.
    stderr : Tensor, shape (n_examples,), float64
        Standard error of each ``log f̂(v)`` (delta method over its ``n_chains`` runs); the
        error of ``log Z`` is not included (it is common to every example).
    log_unnormalized : Tensor, shape (n_examples,), float64
        ``log f̂(v) = log Σ_h exp(−E(v, h))`` estimated.
    variational_bound : Tensor, shape (n_examples,), float64
        The mean-field lower bound with the same ``log Z`` (the bound the estimate is compared with).
    ess : Tensor, shape (n_examples,), float64
        Kish's effective sample size of each example's final weights, in [1, n_chains].
    log_weights : Tensor, shape (n_examples, n_chains), float64
        Final log-weights; ``log f̂(v) = log mean exp`` of a row.
    log_z : float
    log_z_stderr : float
        The ``log Z`` used and its standard error (0 when exact).
    mean : float
        Mean of ``log_probability`` over the examples.
    mean_stderr : float
        Its standard error from the per-example errors and ``log_z_stderr`` (the AIS noise of
        this estimate, not the spread of log p(v) over the data).
    mean_bound : float
        Mean of ``variational_bound``.
    schedule : Tensor, shape (K + 1,), float64
    n_chains : int
    operator : str
    base_mixing : float
    cost_sweeps : int
        Chain-sweeps spent: ``n_examples · n_chains · (K − 1)``.
    """

    log_probability: Tensor
    stderr: Tensor
    log_unnormalized: Tensor
    variational_bound: Tensor
    ess: Tensor
    log_weights: Tensor
    log_z: float
    log_z_stderr: float
    mean: float
    mean_stderr: float
    mean_bound: float
    schedule: Tensor
    n_chains: int
    operator: str
    base_mixing: float
    cost_sweeps: int


def exact_log_likelihood(dbm: DBM, data: Any, *, log_z: float | None = None) -> Tensor:
    """Exact ``log p(v)`` per example by enumeration (tiny models: the test oracle); float64 ``(n,)``.

    The smaller parity of hidden layers is enumerated per example (at most 24 units,
    :meth:`DBM.free_energy`); ``log Z`` by :func:`~boltzlab.estimators.exact_log_z` unless given.
    """
    require(isinstance(dbm, DBM), f"dbm must be a boltzlab.DBM, got {type(dbm).__name__}")
    v = as_model_data(dbm, data, "data").to(torch.float64)
    log_z = exact_log_z(dbm) if log_z is None else float(log_z)
    return -dbm.free_energy(v) - log_z


def _check_log_z(log_z: Any) -> tuple[float, float]:
    if hasattr(log_z, "log_z"):  # a LogZEstimate
        value, stderr = log_z.log_z, log_z.stderr
    else:
        value, stderr = log_z, 0.0
    try:
        value, stderr = float(value), float(stderr)
    except (TypeError, ValueError):
        raise ValidationError(f"log_z must be a number or a LogZEstimate, got {log_z!r}") from None
    require(math.isfinite(value), f"log_z must be finite, got {value}")
    return value, stderr


def _reads_current_state(operator: LayerwiseOperator) -> bool:
    """Whether the operator's unit update depends on the unit's current value (probed)."""
    logits = torch.linspace(-6.0, 6.0, 13, dtype=torch.float64)[None, :]
    when_off = operator.probability_on(logits, torch.zeros_like(logits))
    when_on = operator.probability_on(logits, torch.ones_like(logits))
    return not torch.equal(when_off, when_on)


class _ClampedAnnealer:
    """AIS on ``f_β(h)`` of a DBM with ``v`` clamped, for one batch of rows (trusted inputs).

    Every row is one run: ``visible`` and ``base_logits`` hold each row's example and base.
    """

    def __init__(self, dbm: DBM, visible: Tensor, base_logits: list[Tensor]) -> None:
        self.dbm = dbm
        self.odd, self.even = dbm.update_groups[0], dbm.update_groups[1][1:]
        self.weights = [matrix.detach() for matrix in dbm.weights]
        self.biases = [vector.detach() for vector in dbm.biases]
        self.visible = visible
        # Layer 1's input from the clamped v never changes: one GEMM for the whole run.
        self.from_visible = torch.addmm(self.biases[1], dbm.visible_values(visible), self.weights[0])
        self.base_logits = [visible.new_zeros(0), *base_logits]  # index = layer
        self.base64 = [logits.to(torch.float64) for logits in self.base_logits]
        self.base_norm = sum(softplus(logits).sum(1) for logits in self.base64[1:])

    def layer_input(self, index: int, layers: list[Tensor]) -> Tensor:
        """``b^l + h^{l−1}W^l + h^{l+1}W^{l+1}ᵀ`` of hidden layer ``index`` (a new tensor)."""
        if index == 1:
            logits = self.from_visible.clone()
        else:
            logits = torch.addmm(self.biases[index], layers[index - 1], self.weights[index - 1])
        if index < len(self.weights):
            logits.addmm_(layers[index + 1], self.weights[index].t())
        return logits

    def kept_terms(self, layers: list[Tensor]) -> tuple[Tensor, Tensor]:
        """``(linear, base)`` of the even hidden layers, float64: the β- and (1 − β)-coefficients."""
        linear = torch.zeros(self.visible.shape[0], dtype=torch.float64, device=self.visible.device)
        base = -self.base_norm
        for index in self.even:
            state = layers[index].to(torch.float64)
            linear = linear + state @ self.biases[index].to(torch.float64)
            base = base + (state * self.base64[index]).sum(1)
        return linear, base

    def summed(self, inputs: list[Tensor], beta: float) -> Tensor:
        """``Σ_odd Σ_j softplus(β a + (1 − β) q)``; float64, shape ``(rows,)``."""
        total = torch.zeros(self.visible.shape[0], dtype=torch.float64, device=self.visible.device)
        for index, pre in zip(self.odd, inputs, strict=True):
            base = self.base64[index]
            total = total + softplus(base + beta * (pre - base)).sum(1)
        return total

    def tempered_logits(self, pre: Tensor, index: int, beta: float) -> Tensor:
        """``β a + (1 − β) q`` in the model's dtype, written into ``pre``."""
        return pre.mul_(beta).add_(self.base_logits[index], alpha=1.0 - beta)

    def initial_layers(self, generator: torch.Generator) -> list[Tensor]:
        layers = [self.visible]
        for logits in self.base_logits[1:]:
            layers.append(sample_bernoulli(torch.sigmoid(logits), generator=generator))
        return layers

    def run(
        self, betas: list[float], operator: LayerwiseOperator, refresh: bool, generator: torch.Generator
    ) -> Tensor:
        """Final log-weights, float64, shape ``(rows,)`` (without the constant ``b⁰·v``)."""
        layers = self.initial_layers(generator)
        log_weights = torch.zeros(self.visible.shape[0], dtype=torch.float64, device=self.visible.device)
        n_increments = len(betas) - 1
        for k in range(1, n_increments + 1):
            beta_from, beta_to = betas[k - 1], betas[k]
            inputs = [self.layer_input(index, layers) for index in self.odd]
            inputs64 = [pre.to(torch.float64) for pre in inputs]
            linear, base = self.kept_terms(layers)
            step = beta_to - beta_from
            log_weights += step * (linear - base)
            log_weights += self.summed(inputs64, beta_to) - self.summed(inputs64, beta_from)
            if k == n_increments:
                break
            for index, pre in zip(self.odd, inputs, strict=True):
                logits = self.tempered_logits(pre, index, beta_to)
                if refresh:
                    # Summed-out weights need the odd layers fresh from p_β(odd | even).
                    layers[index] = sample_bernoulli(torch.sigmoid(logits), generator=generator)
                layers[index] = operator.sample_layer_(logits, layers[index], generator=generator)
            for index in self.even:
                logits = self.tempered_logits(self.layer_input(index, layers), index, beta_to)
                layers[index] = operator.sample_layer_(logits, layers[index], generator=generator)
            progress.advance(self.visible.shape[0])  # one sweep of every row's chain
        return log_weights


def _base_logits(dbm: DBM, v: Tensor, base_mixing: float, n_mean_field_updates: int) -> list[Tensor]:
    """Per-example log-odds ``q^l`` of the base, one tensor ``(n, n_l)`` per hidden layer."""
    if base_mixing == 1.0:
        return [v.new_zeros(v.shape[0], size) for size in dbm.layer_sizes[1:]]
    means = mean_field_posterior(dbm, v, n_updates=n_mean_field_updates).means[1:]
    logits = []
    for mean in means:
        mixed = (1.0 - base_mixing) * mean.to(torch.float64) + 0.5 * base_mixing
        logits.append(torch.logit(mixed.clamp(_BASE_EPSILON, 1.0 - _BASE_EPSILON)).to(dbm.dtype))
    return logits


def estimate_log_likelihood(
    dbm: DBM,
    data: Any,
    *,
    log_z: Any,
    n_chains: int = 100,
    n_temperatures: int | None = 1000,
    schedule: str | Tensor | Sequence[float] = "linear",
    operator: str | LayerwiseOperator = "gibbs",
    base_mixing: float = 0.05,
    n_mean_field_updates: int = 10,
    generator: torch.Generator | int | None = None,
    chains_per_batch: int = 20_000,
    blocks: int | None = None,
) -> DBMLikelihoodEstimate:
    """Estimate ``log p(v)`` of each row of ``data`` by AIS with ``v`` clamped (module docstring).

    Parameters
    ----------
    dbm : DBM
    data : Tensor, shape (n_examples, n_visible), values 0/1
    log_z : float or LogZEstimate
        ``log Z`` of the DBM (exact, or an AIS/RTS estimate whose error is carried along).
    n_chains : int, default 100
        Independent runs per example.
    n_temperatures : int, optional, default 1000
        ``K`` of a named schedule (``None``: the schedule's default).
    schedule : {"linear", "sm08", ...} or Tensor, default "linear"
        Ascending βs from 0 (the base) to 1 (the clamped DBM), shape ``(K + 1,)``.
    operator : {"gibbs", "flip", "mixture"} or LayerwiseOperator, default "gibbs"
    base_mixing : float in [0, 1], default 0.05
        λ in the base means ``(1 − λ)·μ + λ/2``, μ the mean-field posterior: 0 is the pure
        mean-field base (means kept in [1e-6, 1 − 1e-6]), 1 the uniform base.
    n_mean_field_updates : int, default 10
        Mean-field updates for the base and for the reported bound.
    generator : torch.Generator or int, optional
    chains_per_batch : int, default 20,000
        Runs swept together (memory); examples are processed in batches of
        ``max(1, chains_per_batch // n_chains)``. The random stream depends on it.
    blocks : int, optional
        Cut the examples into this many blocks with their own random streams; in a
        ``torch.distributed`` process group each process anneals whole blocks and the weights
        are gathered, so the result does not depend on the number of processes
        (docs/architecture.md, "Scaling out"). Default: blocks only in a process group.

    Returns
    -------
    DBMLikelihoodEstimate

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood, exact_log_likelihood
    >>> dbm = bl.DBM(layer_sizes=[6, 4, 3], generator=0, weight_std=1.0)
    >>> v = (torch.arange(18).view(3, 6) % 4 == 0).float()
    >>> result = estimate_log_likelihood(dbm, v, log_z=bl.exact_log_z(dbm), n_chains=200,
    ...                                  n_temperatures=50, generator=0)
    >>> bool(((result.log_probability - exact_log_likelihood(dbm, v)).abs() < 4 * result.stderr + 1e-9).all())
    True
    """
    # Long because argument checks, the clamped annealing and the per-example sharding share one set
    # of locals; each part is short.
    require(isinstance(dbm, DBM), f"dbm must be a boltzlab.DBM, got {type(dbm).__name__}")
    v = as_model_data(dbm, data, "data")
    log_z_value, log_z_stderr = _check_log_z(log_z)
    n_chains = check_positive_int(n_chains, "n_chains")
    chains_per_batch = check_positive_int(chains_per_batch, "chains_per_batch")
    try:
        base_mixing = float(base_mixing)
    except (TypeError, ValueError):
        raise ValidationError(f"base_mixing must be a number in [0, 1], got {base_mixing!r}") from None
    require(0.0 <= base_mixing <= 1.0, f"base_mixing must be in [0, 1], got {base_mixing}")
    if isinstance(n_mean_field_updates, bool) or not isinstance(n_mean_field_updates, int):
        raise ValidationError(f"n_mean_field_updates must be an integer >= 0, got {n_mean_field_updates!r}")
    require(n_mean_field_updates >= 0, f"n_mean_field_updates must be >= 0, got {n_mean_field_updates}")
    transition = operators.get(operator)
    if not isinstance(transition, LayerwiseOperator):
        raise ValidationError(
            f"operator must be a layerwise operator (gibbs, flip, mixture), got {type(transition).__name__}"
        )
    betas = get_schedule(schedule, n_temperatures)
    generator = resolve_generator(generator, dbm.device)
    refresh = _reads_current_state(transition)

    beta_values = betas.tolist()
    examples_per_batch = max(1, chains_per_batch // n_chains)
    sharded = blocks is not None or distributed.topology().active
    streams = distributed.example_streams(v, generator, blocks) if sharded else [(v, generator)]
    all_weights = []
    with torch.no_grad():
        for examples, stream in streams:
            for batch in torch.split(examples, examples_per_batch):
                base = _base_logits(dbm, batch, base_mixing, n_mean_field_updates)
                annealer = _ClampedAnnealer(
                    dbm,
                    batch.repeat_interleave(n_chains, 0),
                    [logits.repeat_interleave(n_chains, 0) for logits in base],
                )
                weights = annealer.run(beta_values, transition, refresh, stream)
                all_weights.append(weights.view(batch.shape[0], n_chains))
        log_weights = torch.cat(all_weights)
        if sharded:
            log_weights = distributed.gather_rows(log_weights, what="gathering the per-example weights")
        # The visible bias term of −E is constant given v: added once, exactly.
        visible_term = dbm.visible_values(v.to(torch.float64)) @ dbm.biases[0].detach().to(torch.float64)
        log_weights = log_weights + visible_term[:, None]
    log_weights = log_weights.cpu()
    if not bool(torch.isfinite(log_weights).all()):
        raise DivergenceError(
            f"per-example AIS produced {int((~torch.isfinite(log_weights)).sum())} non-finite log-weights; "
            "check the model's parameters for NaN/inf or extreme values",
            partial=log_weights,
        )
    log_unnormalized = log_mean_exp(log_weights, dim=1)
    relative = torch.exp(log_weights - log_unnormalized[:, None])
    stderr = (
        relative.std(1, unbiased=True) / math.sqrt(n_chains)
        if n_chains > 1
        else torch.full((v.shape[0],), math.inf, dtype=torch.float64)
    )
    normalised = torch.softmax(log_weights, dim=1)
    ess = 1.0 / normalised.square().sum(1)
    log_probability = log_unnormalized - log_z_value
    bound = variational_lower_bound_per_example(dbm, v, log_z_value, n_updates=n_mean_field_updates).cpu()
    n_examples = v.shape[0]
    mean_stderr = math.sqrt(float(stderr.square().sum()) / n_examples**2 + log_z_stderr**2)
    return DBMLikelihoodEstimate(
        log_probability=log_probability,
        stderr=stderr,
        log_unnormalized=log_unnormalized,
        variational_bound=bound,
        ess=ess,
        log_weights=log_weights,
        log_z=log_z_value,
        log_z_stderr=log_z_stderr,
        mean=float(log_probability.mean()),
        mean_stderr=mean_stderr,
        mean_bound=float(bound.mean()),
        schedule=betas,
        n_chains=n_chains,
        operator=str(getattr(transition, "name", type(transition).__name__)),
        base_mixing=base_mixing,
        cost_sweeps=n_examples * n_chains * max(betas.numel() - 2, 0),
    )
