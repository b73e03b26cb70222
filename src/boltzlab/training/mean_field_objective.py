"""The DBM's training objective: a mean-field data term minus a sampled model term.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §3) learn a DBM by
stochastic gradient ascent on the variational lower bound of §1.2 of docs/algorithms.md,

    B(θ) = ⟨E_Q[−E(v, h; θ)] + H(Q)⟩_data − log Z(θ),

with ``Q(h | v)`` the factorial mean-field posterior. Its gradient is, for each weight
matrix ``W^l`` and bias ``b^l`` (docs/algorithms.md §3.1),

    ∂B/∂W^l = ⟨μ^{l−1} μ^{lᵀ}⟩_data − ⟨h^{l−1} h^{lᵀ}⟩_model,    ∂B/∂b^l = ⟨μ^l⟩_data − ⟨h^l⟩_model,

where ``μ⁰ = v`` and ``μ^l`` are the posterior means. The data term is the partial derivative
of ``E_Q[−E]`` with ``μ`` held fixed; at a fixed point of the mean-field equations it is also
the total derivative of the bound's data part (the bound is stationary in μ there), and after
the paper's 5 updates it is the gradient the paper uses. The model term is the gradient of
``log Z``, estimated from the negative phase's β = 1 chains (SAP/PCD, FPCD, adaptive ST, CAST:
any :class:`~boltzlab.training.negative.NegativePhase`).

**Rao-Blackwellised model term** (``rao_blackwellise=True``, the default). Given the even
layers ``(v, h², …)`` the odd layers are independent Bernoulli with means
``σ(b^l + h^{l−1}W^l + W^{l+1}h^{l+1})``, and every sufficient statistic is linear in each
odd layer (no two odd layers are adjacent), so replacing the sampled odd layers by these
means gives the same expectation with lower variance — the DBM analogue of the RBM's
``p(h|v⁻)`` (:class:`~boltzlab.training.objective.RBMObjective`). ``False`` uses the sampled
odd layers as they are. The means use the model's parameters θ; under FPCD the chains were
run with θ + θ_f, as for the RBM.

:class:`VariationalBoundTracker` is the callback that reports this objective during
training: the mean bound on the training (and validation) data with ``log Z`` exact (small
models) or from AIS, every ``every`` updates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import gemm
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.annealing.chain_budget import without_budget
from boltzlab.estimators.exact import exact_log_z
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.models.dbm import DBM
from boltzlab.models.mean_field import mean_field_fixed_point, variational_lower_bound
from boltzlab.rng import make_generator
from boltzlab.training.callbacks import Callback, RunView
from boltzlab.training.objective import register_objective
from boltzlab.validation import check_nonnegative_int, check_positive_int, require

__all__ = ["DBMStatistics", "MeanFieldObjective", "VariationalBoundTracker"]

_INITS = ("bottom_up", "zeros")
_LOG_Z_METHODS = ("exact", "ais")


@dataclass(frozen=True, slots=True)
class DBMStatistics:
    """Averages of a DBM's sufficient statistics over a batch of layers.

    Attributes
    ----------
    weights : tuple of Tensor
        ``weights[l] = ⟨h^l h^{l+1}ᵀ⟩``, shape ``(n_l, n_{l+1})``; one per weight matrix.
    biases : tuple of Tensor
        ``biases[l] = ⟨h^l⟩``, shape ``(n_l,)``; one per layer.
    """

    weights: tuple[Tensor, ...]
    biases: tuple[Tensor, ...]


def _grad_buffer(parameter: Tensor) -> Tensor:
    # Reuse the .grad tensor between updates: the hot path writes into it with out=.
    if parameter.grad is None:
        parameter.grad = torch.zeros_like(parameter)
    return parameter.grad


class MeanFieldObjective:
    """Data term from mean field, model term from the chains (module docstring).

    Parameters
    ----------
    n_updates : int >= 0, default 5
        Mean-field updates per minibatch (the CAST paper's 5).
    init : {"bottom_up", "zeros"}, default "bottom_up"
        Mean-field initialisation (docs/open-questions.md item 17; see :mod:`boltzlab.models.mean_field`).
    rao_blackwellise : bool, default True
        Replace the chains' odd layers by their conditional means given the even layers.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> dbm = bl.DBM(layer_sizes=[7, 3, 2], generator=0)
    >>> objective = bl.training.objective_for(dbm)
    >>> data = (torch.rand(11, 7, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    >>> [tuple(layer.shape) for layer in objective.positive(dbm, data)]
    [(11, 7), (11, 3), (11, 2)]
    """

    # The trainer's defaults for a model with this objective (``bl.train`` without
    # ``learning_rate``/``lr_schedule``): the CAST paper's lr_t = 0.005·2000/(2000 + t) = 10/(2000 + t).
    default_learning_rate = 0.005
    default_lr_schedule = "inverse"

    def __init__(self, *, n_updates: int = 5, init: str = "bottom_up", rao_blackwellise: bool = True) -> None:
        check_nonnegative_int(n_updates, "n_updates")
        require(init in _INITS, f"init must be one of {', '.join(map(repr, _INITS))}, got {init!r}")
        require(
            isinstance(rao_blackwellise, bool),
            f"rao_blackwellise must be True or False, got {rao_blackwellise!r}",
        )
        self.n_updates = n_updates
        self.init = init
        self.rao_blackwellise = rao_blackwellise

    def __repr__(self) -> str:
        return (
            f"MeanFieldObjective(n_updates={self.n_updates}, init={self.init!r}, "
            f"rao_blackwellise={self.rao_blackwellise})"
        )

    @torch.no_grad()
    def positive(self, model: DBM, data: Tensor) -> tuple[Tensor, ...]:
        """``(v, μ¹, …, μ^L)`` for a minibatch ``v`` of shape ``(batch_size, n_visible)``.

        ``data`` is trusted (the trainer validated the whole training set once).
        """
        return mean_field_fixed_point(model, data, self.n_updates, self.init).means

    @torch.no_grad()
    def negative(self, model: DBM, samples: Chains) -> tuple[Tensor, ...]:
        """The chains' layers, odd layers replaced by ``E[h^odd | even layers]`` at β = 1.

        Parameters
        ----------
        model : DBM
        samples : Chains
            β = 1 chains; layers of shape ``(n_chains, n_l)``. Not modified.

        Returns
        -------
        tuple of Tensor
            One tensor per layer, shapes ``(n_chains, n_l)``.
        """
        layers = samples.layers
        if not self.rao_blackwellise:
            return layers
        ones = torch.ones(samples.n_chains, dtype=model.dtype, device=model.device)
        expected = list(layers)
        for index in model.update_groups[0]:
            # Every odd layer's neighbours are even, so all read the sampled even layers.
            expected[index] = model.conditional_logits(index, layers, ones).sigmoid_()
        return tuple(expected)

    @staticmethod
    @torch.no_grad()
    def statistics(layers: tuple[Tensor, ...]) -> DBMStatistics:
        """Averages ``⟨h^l h^{l+1}ᵀ⟩`` and ``⟨h^l⟩`` over axis 0 of ``layers``."""
        n = layers[0].shape[0]
        weights = tuple(lower.t() @ upper / n for lower, upper in itertools.pairwise(layers))
        return DBMStatistics(weights=weights, biases=tuple(layer.mean(0) for layer in layers))

    @torch.no_grad()
    def write_gradient_(self, model: DBM, positive: tuple[Tensor, ...], negative: tuple[Tensor, ...]) -> None:
        """Write ``model term − data term`` into every weight's and bias's ``.grad``.

        Parameters
        ----------
        model : DBM
        positive : tuple of Tensor
            From :meth:`positive`, shapes ``(batch_size, n_l)``.
        negative : tuple of Tensor
            From :meth:`negative`, shapes ``(n_chains, n_l)``.
        """
        n_data, n_model = positive[0].shape[0], negative[0].shape[0]
        for index, matrix in enumerate(model.weights):
            grad = _grad_buffer(matrix)
            # (1/M)·h⁻ᵀh⁻ − (1/B)·μᵀμ: two GEMMs into the reused buffer.
            gemm.mm_into(grad, negative[index].t(), negative[index + 1])
            grad.mul_(1.0 / n_model)
            gemm.addmm_(grad, positive[index].t(), positive[index + 1], alpha=-1.0 / n_data)
        for index, vector in enumerate(model.biases):
            grad = _grad_buffer(vector)
            torch.mean(negative[index], 0, out=grad)
            grad.sub_(positive[index].mean(0))

    @torch.no_grad()
    def reconstruction_error(self, model: DBM, data: Tensor) -> Tensor:
        """``mean_n Σ_i (v_ni − σ(b⁰ + W¹μ¹_n)_i)²`` with μ¹ the mean-field posterior: deterministic."""
        means = mean_field_fixed_point(model, data, self.n_updates, self.init).means
        ones = torch.ones(data.shape[0], dtype=model.dtype, device=model.device)
        reconstruction = model.conditional_logits(0, means, ones).sigmoid_()
        return (data - reconstruction).square_().sum(1).mean()


class VariationalBoundTracker(Callback):
    """The mean variational lower bound (nats per example) every ``every`` updates.

    Adds to the history record ``log_z`` (exact or estimated), ``log_z_stderr`` (0 when
    exact), ``train_bound`` and, with validation data, ``validation_bound``: the bound of
    :func:`boltzlab.variational_lower_bound` with that ``log Z``. With an AIS ``log Z``,
    which tends to be low, the bound tends to be high by the same amount.

    Parameters
    ----------
    every : int
        Measure after every ``every``-th update (and before training).
    log_z : {"exact", "ais"}, default "exact"
        Exact enumeration (small models) or :func:`boltzlab.estimate_log_z` with ``"ais"``.
    ais_options : dict, optional
        Options of the AIS estimate, e.g. ``{"n_chains": 100, "n_temperatures": 1000}``; AIS's
        chains default to a fixed 100 here (no chain budget) unless ``n_chains``,
        ``max_chains`` or ``target_stderr`` is given.
    seed : int, default 0
        The AIS estimate at update ``t`` uses its own generator seeded from ``(seed, t)``, so
        tracking never touches the trainer's random stream and a resumed run measures the same.
    n_examples : int, optional
        Use only the first ``n_examples`` training and validation examples (speed).
    n_mean_field_updates : int, default 5

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> data = (torch.rand(40, 6, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    >>> dbm = bl.DBM(layer_sizes=[6, 4, 3], generator=0)
    >>> result = bl.train(dbm, data, algorithm="pcd", n_chains=13, batch_size=10, n_updates=20,
    ...                   log_every=10, callbacks=[VariationalBoundTracker(10)], generator=0)
    >>> sorted(result.history[-1].extra)
    ['log_z_stderr', 'train_bound']
    >>> result.history[-1].extra["train_bound"] > result.history[0].extra["train_bound"]
    True
    """

    def __init__(
        self,
        every: int,
        *,
        log_z: str = "exact",
        ais_options: dict[str, Any] | None = None,
        seed: int = 0,
        n_examples: int | None = None,
        n_mean_field_updates: int = 5,
    ) -> None:
        self.every = check_positive_int(every, "every")
        require(log_z in _LOG_Z_METHODS, f"log_z must be 'exact' or 'ais', got {log_z!r}")
        require(
            ais_options is None or log_z == "ais",
            "ais_options are used only with log_z='ais'; leave them out",
        )
        require(
            isinstance(seed, int) and not isinstance(seed, bool), f"seed must be an integer, got {seed!r}"
        )
        self.log_z_method = log_z
        # A tracker measures every few updates: a fixed cost, not AIS's growing chain budget.
        self.ais_options = without_budget(ais_options or {})
        self.seed = seed
        self.n_examples = None if n_examples is None else check_positive_int(n_examples, "n_examples")
        if isinstance(n_mean_field_updates, bool) or not isinstance(n_mean_field_updates, int):
            raise ValidationError(
                f"n_mean_field_updates must be an integer >= 0, got {n_mean_field_updates!r}"
            )
        require(n_mean_field_updates >= 0, f"n_mean_field_updates must be >= 0, got {n_mean_field_updates}")
        self.n_mean_field_updates = n_mean_field_updates

    def on_train_begin(self, run: RunView) -> None:
        if not isinstance(run.model, DBM):
            raise ValidationError(
                f"VariationalBoundTracker needs a DBM, got {type(run.model).__name__}; "
                "for an RBM use track_exact_every"
            )

    def wants_record(self, update: int) -> bool:
        return update % self.every == 0

    def _log_z(self, model: DBM, update: int) -> tuple[float, float]:
        if self.log_z_method == "exact":
            return exact_log_z(model), 0.0
        # A seed per (tracker seed, update): deterministic, independent of the trainer's stream.
        generator = make_generator(self.seed * 1_000_003 + update, model.device)
        estimate = estimate_log_z(model, method="ais", generator=generator, **self.ais_options)
        return estimate.log_z, estimate.stderr

    def measure(self, run: RunView) -> dict[str, float]:
        if run.update % self.every != 0:
            return {}
        model = run.model
        log_z, stderr = self._log_z(model, run.update)
        metrics = {"log_z": log_z, "log_z_stderr": stderr}
        for name, data in (("train_bound", run.data), ("validation_bound", run.validation_data)):
            if data is None:
                continue
            subset = data if self.n_examples is None else data[: self.n_examples]
            bound = variational_lower_bound(model, subset, log_z, n_updates=self.n_mean_field_updates)
            metrics[name] = bound if math.isfinite(bound) else math.nan
        return metrics


register_objective(DBM)(MeanFieldObjective)
