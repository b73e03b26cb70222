"""scikit-learn's PCD-k for ``BernoulliRBM``, as a tight loop over minibatches.

Persistent contrastive divergence (Tieleman 2008, *Training restricted Boltzmann machines
using approximations to the likelihood gradient*, ICML, §3; docs/algorithms.md §3.1) the way
``sklearn.neural_network.BernoulliRBM._fit`` runs it, which is what the estimator does for
``algorithm="pcd", operator="gibbs"`` (its default):

* one persistent chain per minibatch row by default, started at ``h = 0``, so the first
  negative visible states are drawn from the visible biases alone;
* per update, ``k`` times: ``v⁻ ~ p(v | h)``, ``q = p(h = 1 | v⁻)``, ``h ~ Bernoulli(q)``;
* the gradient step, plain SGD on the minibatch-averaged log-likelihood::

      W += lr·(⟨x p(h|x)ᵀ⟩_batch − ⟨v⁻ qᵀ⟩_chains)
      b += lr·(⟨x⟩_batch − ⟨v⁻⟩_chains),    c += lr·(⟨p(h|x)⟩_batch − ⟨q⟩_chains)

  with grey values ``x`` in [0, 1] used as they are in the data term;
* each pass over the data takes the rows in order (``shuffle=False``, scikit-learn's) or in a
  fresh random order, in ``ceil(n / batch_size)`` minibatches, the last one ragged.

Why a loop of its own rather than :class:`boltzlab.training.loop.TrainingLoop`: that loop's
update goes through the negative-phase, operator and objective protocols, each with its checks,
about 2 ms of Python per update, which on scikit-learn's digits example (a 64×16 model, 3,600
updates) made ``fit`` 5–9× slower than scikit-learn's. Here every buffer is allocated once per
call, each update is 14 in-place tensor operations with no validation and no device
synchronisation, and the uniform numbers of many updates are drawn in one call
(:data:`NOISE_ELEMENTS`). The library's loop still runs every other algorithm and operator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains, chains_to_tensors
from boltzlab.errors import DivergenceError
from boltzlab.sklearn.training import Carried, Settings
from boltzlab.training import TrainRecord, objective_for

__all__ = ["LoopOptions", "run_one_update", "run_passes"]

#: Uniform numbers drawn in one call, at most (16 MB in float32): the draws for
#: ``NOISE_ELEMENTS // (k·n_chains·(n_visible + n_hidden))`` updates at a time.
NOISE_ELEMENTS = 1 << 22


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """The loop's settings, checked by the estimator (see ``BernoulliRBM``'s docstring).

    Attributes
    ----------
    batch_size : int
        Rows per update in ``fit`` (``partial_fit`` takes its whole ``X``).
    n_chains : int
        Persistent chains.
    k : int
        Gibbs steps ``h → v → h`` per update.
    learning_rate : float
    momentum : float in [0, 1)
        SGD momentum as ``torch.optim.SGD`` has it (``velocity = momentum·velocity + gradient``).
    weight_decay : float
        L2 coefficient on the weights (not the biases), as in the library's trainer.
    shuffle : bool
        A fresh random order of the rows on every pass instead of their order.
    """

    batch_size: int
    n_chains: int
    k: int
    learning_rate: float
    momentum: float
    weight_decay: float
    shuffle: bool

    @classmethod
    def of(cls, settings: Settings, batch_size: int) -> LoopOptions:
        """The loop's options from the estimator's checked settings."""
        return cls(
            batch_size=batch_size,
            n_chains=settings.n_chains,
            k=settings.k,
            learning_rate=settings.learning_rate,
            momentum=settings.momentum,
            weight_decay=settings.weight_decay,
            shuffle=settings.shuffle,
        )

    def describe(self) -> dict[str, Any]:
        """What the chains depend on: another description (after ``set_params``) starts new ones."""
        return {
            "name": "pcd",
            "loop": "scikit-learn",
            "operator": "gibbs",
            "k": self.k,
            "n_chains": self.n_chains,
        }


class _Loop:
    """Parameters, chains and work buffers of one call; :meth:`step` is one update.

    The parameters are the model's own storage (detached aliases), updated in place.
    """

    def __init__(self, model: Any, options: LoopOptions, carried: Carried, batch_rows: int) -> None:
        n_visible, n_hidden, n_chains = model.n_visible, model.n_hidden, options.n_chains
        factory = {"dtype": model.dtype, "device": model.device}
        self.options = options
        self.weights = model.weights.detach()
        self.weights_t = self.weights.t()  # a view: it follows the in-place updates
        self.visible_bias = model.visible_bias.detach()
        self.hidden_bias = model.hidden_bias.detach()
        description = options.describe()
        resumed = carried.chains is not None and carried.phase_description == description
        if resumed:
            visible, hidden = carried.chains.layers  # type: ignore[union-attr]
            self.visible, self.hidden = visible.clone(), hidden.clone()
        else:  # scikit-learn's start: h = 0 (its h_samples_ before the first update)
            self.visible = torch.zeros((n_chains, n_visible), **factory)
            self.hidden = torch.zeros((n_chains, n_hidden), **factory)
        self.hidden_probability = torch.zeros((n_chains, n_hidden), **factory)
        self.positive = torch.empty((batch_rows, n_hidden), **factory)
        self.ones = torch.ones(max(batch_rows, n_chains), **factory)
        self.velocity: tuple[Tensor, Tensor, Tensor] | None = None
        if options.momentum > 0.0:
            if resumed and carried.momentum is not None and all(v is not None for v in carried.momentum):
                self.velocity = tuple(v.clone() for v in carried.momentum)  # type: ignore[union-attr,assignment]
            else:
                self.velocity = (
                    torch.zeros_like(self.weights),
                    torch.zeros_like(self.visible_bias),
                    torch.zeros_like(self.hidden_bias),
                )
        self.description = description

    def noise(self, n_updates: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Uniforms for ``n_updates`` updates: shapes (n_updates, k, n_chains, n_visible / n_hidden)."""
        k, n_chains = self.options.k, self.options.n_chains
        factory = {"dtype": self.visible.dtype, "device": self.visible.device, "generator": generator}
        visible = torch.rand((n_updates, k, n_chains, self.visible.shape[1]), **factory)
        hidden = torch.rand((n_updates, k, n_chains, self.hidden.shape[1]), **factory)
        return visible, hidden

    def updates_per_draw(self) -> int:
        """Updates whose uniforms are drawn in one call (:data:`NOISE_ELEMENTS`)."""
        per_update = self.options.k * self.options.n_chains * (self.visible.shape[1] + self.hidden.shape[1])
        return max(1, NOISE_ELEMENTS // per_update)

    def step(self, batch: Tensor, noise_visible: Tensor, noise_hidden: Tensor) -> None:
        """One update from ``batch`` (rows, n_visible) with uniforms of shape (k, n_chains, ·)."""
        options = self.options
        weights, weights_t = self.weights, self.weights_t
        visible_bias, hidden_bias = self.visible_bias, self.hidden_bias
        visible, hidden, probability = self.visible, self.hidden, self.hidden_probability
        rows = batch.shape[0]
        positive = self.positive if rows == self.positive.shape[0] else self.positive[:rows]
        torch.addmm(hidden_bias, batch, weights, out=positive).sigmoid_()
        for step in range(options.k):
            torch.addmm(visible_bias, hidden, weights_t, out=visible).sigmoid_()
            torch.lt(noise_visible[step], visible, out=visible)  # v⁻ = 1 with probability p(v|h)
            torch.addmm(hidden_bias, visible, weights, out=probability).sigmoid_()
            # The next h from the probabilities before this update, as scikit-learn's h_samples_.
            torch.lt(noise_hidden[step], probability, out=hidden)
        # Minibatch averages: 1/rows for the data term, 1/n_chains for the model term.
        rate = options.learning_rate
        velocity = self.velocity
        if velocity is None:
            targets, scale = (weights, visible_bias, hidden_bias), rate
            if options.weight_decay:
                weights.mul_(1.0 - rate * options.weight_decay)  # SGD's λ·W term, applied first
        else:
            targets, scale = velocity, 1.0
            for buffer in velocity:
                buffer.mul_(options.momentum)
            if options.weight_decay:
                velocity[0].add_(weights, alpha=-options.weight_decay)
        data_scale, model_scale = scale / rows, -scale / options.n_chains
        ones_data, ones_model = self.ones[:rows], self.ones[: options.n_chains]
        target_weights, target_visible, target_hidden = targets
        target_weights.addmm_(batch.t(), positive, alpha=data_scale).addmm_(
            visible.t(), probability, alpha=model_scale
        )
        target_visible.addmv_(batch.t(), ones_data, alpha=data_scale).addmv_(
            visible.t(), ones_model, alpha=model_scale
        )
        target_hidden.addmv_(positive.t(), ones_data, alpha=data_scale).addmv_(
            probability.t(), ones_model, alpha=model_scale
        )
        if velocity is not None:
            weights.add_(velocity[0], alpha=rate)
            visible_bias.add_(velocity[1], alpha=rate)
            hidden_bias.add_(velocity[2], alpha=rate)

    def carried(self) -> Carried:
        """The chains and velocities for the next call."""
        chains = Chains(
            layers=(self.visible.clone(), self.hidden.clone()),
            beta=torch.ones(self.visible.shape[0], dtype=self.visible.dtype, device=self.visible.device),
        )
        momentum = None if self.velocity is None else [buffer.clone() for buffer in self.velocity]
        return Carried(
            phase_tensors=chains_to_tensors(chains),
            phase_description=self.description,
            momentum=momentum,  # type: ignore[arg-type]
            chains=chains,
        )


def run_passes(
    model: Any,
    data: Tensor,
    options: LoopOptions,
    carried: Carried,
    *,
    generator: torch.Generator,
    n_passes: int,
    verbose: bool = False,
) -> tuple[tuple[TrainRecord, ...], Carried]:
    """``n_passes`` passes over ``data``, ``ceil(n / batch_size)`` updates each; continues ``carried``.

    Parameters
    ----------
    model : RBM
        Trained in place.
    data : Tensor, shape (n_examples, n_visible), values in [0, 1]
        In the model's dtype and on its device.
    options : LoopOptions
    carried : Carried
        From the previous call; chains continue when its description matches ``options``.
    generator : torch.Generator
        On the model's device; advanced by the run.
    n_passes : int
        0 only sets up the chains (h = 0).
    verbose : bool
        Print one line per pass (reconstruction error, seconds), as scikit-learn's ``verbose`` does.

    Returns
    -------
    history : tuple of TrainRecord
        Before the first update, then after every pass: the reconstruction error of the first
        ``batch_size`` rows (the library's monitor batch), one device synchronisation per pass.
    carried : Carried

    Raises
    ------
    DivergenceError
        A parameter became NaN or infinite during a pass.
    """
    n_rows = data.shape[0]
    batch_size = min(options.batch_size, n_rows)
    n_batches = math.ceil(n_rows / batch_size)
    loop = _Loop(model, options, carried, batch_size)
    objective, monitor = objective_for(model), data[:batch_size]
    started = time.perf_counter()
    history: list[TrainRecord] = []

    def record(n_done: int, epoch: int) -> None:
        # One synchronisation: the error and a sum that is non-finite if any parameter is.
        error = objective.reconstruction_error(model, monitor)
        total = loop.weights.sum() + loop.visible_bias.sum() + loop.hidden_bias.sum()
        error_value, total_value = torch.stack([error.to(total.dtype), total]).tolist()
        if not math.isfinite(total_value):
            raise DivergenceError(
                f"BernoulliRBM: weights became non-finite during pass {epoch} (learning rate "
                f"{options.learning_rate:g}); lower learning_rate",
                step=n_done,
                partial=tuple(history),
            )
        seconds = time.perf_counter() - started
        history.append(
            TrainRecord(
                update=n_done,
                epoch=epoch,
                learning_rate=options.learning_rate,
                time=seconds,
                reconstruction_error=error_value,
            )
        )
        if verbose and epoch > 0:
            print(
                f"[BernoulliRBM] Iteration {epoch}, reconstruction error = {error_value:.2f}, time = {seconds:.2f}s"
            )

    with torch.no_grad():
        record(0, 0)
        per_draw = loop.updates_per_draw()
        for epoch in range(1, n_passes + 1):
            rows = data
            if options.shuffle:
                rows = data[torch.randperm(n_rows, generator=generator, device=data.device)]
            for first in range(0, n_batches, per_draw):
                count = min(per_draw, n_batches - first)
                noise_visible, noise_hidden = loop.noise(count, generator)
                for index in range(count):
                    start = (first + index) * batch_size
                    loop.step(rows[start : start + batch_size], noise_visible[index], noise_hidden[index])
            record(epoch * n_batches, epoch)
    return tuple(history), loop.carried()


def run_one_update(
    model: Any, batch: Tensor, options: LoopOptions, carried: Carried, *, generator: torch.Generator
) -> Carried:
    """One update with all of ``batch`` (n_rows, n_visible) as the minibatch (``partial_fit``).

    No record and no synchronisation; parameters as :func:`run_passes`.
    """
    loop = _Loop(model, options, carried, batch.shape[0])
    with torch.no_grad():
        noise_visible, noise_hidden = loop.noise(1, generator)
        loop.step(batch, noise_visible[0], noise_hidden[0])
    return loop.carried()
