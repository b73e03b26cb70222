"""Mixing of the flip-the-state study: autocorrelation time of the energy, flip against Gibbs.

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2. :func:`run_mixing` trains RBMs on MNIST and
measures the integrated autocorrelation time of the energy under each operator, by Sokal's
window and by an AR fit (the paper's estimator), and the gain ``1 − τ_T/τ_G``; the paper
reports 17.28 % for 784×500 RBMs trained with 20-PT10. :func:`measure_operator` is the
measurement on one model and operator, shared with the RBMs a user supplies
(:mod:`boltzlab_experiments.flip_the_state.model_files`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM, sample, train
from boltzlab.chains import Chains
from boltzlab.data import Dataset
from boltzlab.evaluation import autocorrelation_function, integrated_autocorrelation_time
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.seeds import Progress, base_seed, derive_seed, report

__all__ = ["TAU_METHODS", "MixingResult", "OperatorMixing", "measure_operator", "run_mixing"]

TAU_METHODS = ("sokal", "ar")


@dataclass(frozen=True)
class MixingResult:
    """Autocorrelation times of the energy under each operator on trained RBMs.

    Attributes
    ----------
    operators : tuple of str
    methods : tuple of str
        ``("sokal", "ar")``.
    layer_sizes : tuple of int
    n_steps, n_chains : int
        Recorded sweeps per chain (after burn-in) and chains per model and operator.
    tau, tau_stderr : Tensor, shape (n_models, n_operators, n_methods), float64
        Integrated autocorrelation time of the joint energy, in sweeps, and its standard error.
    reliable : Tensor, shape (n_models, n_operators, n_methods), bool
        False when the chain was shorter than 50 τ (or Sokal's window did not close).
    autocorrelation : Tensor, shape (n_models, n_operators, max_lag + 1), float64
        Pooled autocorrelation function of the energy.
    flip_rate : Tensor, shape (n_models, n_operators), float64
        Mean fraction of units changed per sweep.
    weight_scale : Tensor, shape (n_models,), float64
        Mean absolute weight of each model.
    model_names : tuple of str
        One name per model (the model files' names); empty for the RBMs the study trained.
    seconds : Tensor, shape (n_models, n_operators), float64, or None
        Wall-clock seconds of each sampling run, burn-in included.
    """

    operators: tuple[str, ...]
    methods: tuple[str, ...]
    layer_sizes: tuple[int, ...]
    n_steps: int
    n_chains: int
    tau: Tensor
    tau_stderr: Tensor
    reliable: Tensor
    autocorrelation: Tensor
    flip_rate: Tensor
    weight_scale: Tensor
    model_names: tuple[str, ...] = ()
    seconds: Tensor | None = None

    def model_name(self, model: int) -> str:
        """The name of model ``model``: its file's name, else its index."""
        return self.model_names[model] if self.model_names else str(model)

    def gain(self, method: str, *, operator: str = "flip", reference: str = "gibbs") -> tuple[Tensor, Tensor]:
        """Per-model ``1 − τ_operator/τ_reference`` and its delta-method standard error; each (n_models,)."""
        m, o, r = self.methods.index(method), self.operators.index(operator), self.operators.index(reference)
        ratio = self.tau[:, o, m] / self.tau[:, r, m]
        relative = torch.sqrt(
            (self.tau_stderr[:, o, m] / self.tau[:, o, m]) ** 2
            + (self.tau_stderr[:, r, m] / self.tau[:, r, m]) ** 2
        )
        return 1.0 - ratio, ratio * relative


@dataclass(frozen=True)
class OperatorMixing:
    """τ of the energy of one model under one operator (one entry of :class:`MixingResult`).

    Attributes
    ----------
    tau, tau_stderr : Tensor, shape (n_methods,), float64
        In sweeps, one per method of :data:`TAU_METHODS`.
    reliable : Tensor, shape (n_methods,), bool
    autocorrelation : Tensor, shape (max_lag + 1,), float64
        Pooled over chains; NaN beyond the chain length.
    flip_rate : float
        Mean fraction of units changed per sweep.
    seconds : float
        Wall-clock time of the sampling, burn-in included.
    """

    tau: Tensor
    tau_stderr: Tensor
    reliable: Tensor
    autocorrelation: Tensor
    flip_rate: float
    seconds: float


def mixing_result(
    measured: Sequence[Sequence[OperatorMixing]],
    *,
    operators: Sequence[str],
    layer_sizes: Sequence[int],
    n_steps: int,
    n_chains: int,
    weight_scale: Tensor,
    model_names: Sequence[str] = (),
) -> MixingResult:
    """The :class:`MixingResult` of ``measured[model][operator]``, stacked into its tensors."""
    return MixingResult(
        operators=tuple(operators),
        methods=TAU_METHODS,
        layer_sizes=tuple(layer_sizes),
        n_steps=n_steps,
        n_chains=n_chains,
        tau=torch.stack([torch.stack([m.tau for m in row]) for row in measured]),
        tau_stderr=torch.stack([torch.stack([m.tau_stderr for m in row]) for row in measured]),
        reliable=torch.stack([torch.stack([m.reliable for m in row]) for row in measured]),
        autocorrelation=torch.stack([torch.stack([m.autocorrelation for m in row]) for row in measured]),
        flip_rate=torch.tensor([[m.flip_rate for m in row] for row in measured], dtype=torch.float64),
        weight_scale=weight_scale,
        model_names=tuple(model_names),
        seconds=torch.tensor([[m.seconds for m in row] for row in measured], dtype=torch.float64),
    )


def measure_operator(
    model: RBM,
    operator: str,
    *,
    n_chains: int,
    n_steps: int,
    burn_in: int,
    max_lag: int,
    init: str | Tensor | Chains,
    generator: int,
    blocks: int | None = None,
) -> OperatorMixing:
    """Sample ``model`` with ``operator`` and estimate τ of the joint energy, pooled over chains.

    ``n_chains`` chains start from ``init`` (rows of data, ``"base"`` or given states), run
    ``burn_in`` sweeps unrecorded, then ``n_steps`` recorded ones; τ by
    :func:`~boltzlab.evaluation.integrated_autocorrelation_time` with every method of
    :data:`TAU_METHODS`. ``generator`` is a seed: the same seed for every operator starts them
    from the same states. ``blocks`` cuts the chains into that many blocks with their own
    random streams; in a ``torch.distributed`` process group the ranks then run whole blocks
    and the energies are gathered in chain order (:func:`boltzlab.sample`), so every rank
    returns the same numbers, the same as one process with the same ``blocks``. A collective
    in a process group: every rank calls it in the same order.
    """
    started = time.perf_counter()
    # The sampler needs no gradients; with the parameters of a trained or loaded model still
    # requiring them, every sweep would build an autograd graph for nothing (measured on a
    # 784×500 RBM with 100 chains: 7.3 ms per sweep with, 5.5 ms without).
    with torch.no_grad():
        result = sample(
            model,
            operator=operator,
            n_chains=n_chains,
            n_sweeps=n_steps,
            burn_in=burn_in,
            record_energy=True,
            init=init,
            generator=generator,
            **({} if blocks is None else {"blocks": blocks}),
        )
    seconds = time.perf_counter() - started
    energies = result.energies
    estimates = [
        integrated_autocorrelation_time(energies, method=method, warn=False) for method in TAU_METHODS
    ]
    acf = torch.full((max_lag + 1,), math.nan, dtype=torch.float64)
    lags = min(max_lag, energies.shape[0] - 1)
    acf[: lags + 1] = torch.from_numpy(autocorrelation_function(energies, max_lag=lags))
    return OperatorMixing(
        tau=torch.tensor([estimate.tau for estimate in estimates], dtype=torch.float64),
        tau_stderr=torch.tensor([estimate.stderr for estimate in estimates], dtype=torch.float64),
        reliable=torch.tensor([estimate.reliable for estimate in estimates], dtype=torch.bool),
        autocorrelation=acf,
        flip_rate=float(result.info.flip_rate.mean()),
        seconds=seconds,
    )


def run_mixing(
    config: FlipTheStateConfig,
    data: Dataset,
    *,
    generator: torch.Generator | int | None = None,
    progress: Progress | None = None,
) -> MixingResult:
    """Train ``mixing_models`` RBMs on ``data`` and measure τ of the energy under each operator.

    Each model is sampled by every operator from the same starting training examples and the
    same generator seed; τ by :func:`~boltzlab.evaluation.integrated_autocorrelation_time`
    with both estimators, pooled over chains. ``generator`` (or an int seed) gives one base
    seed from which every model's seeds are derived; ``progress`` is called after each step.
    """
    base = base_seed(generator)
    n_models, n_operators = config.mixing_models, len(config.operators)
    weight_scale = torch.empty(n_models, dtype=torch.float64)
    measured: list[list[OperatorMixing]] = []
    train_data = data.train
    total = n_models * (1 + n_operators)
    report(progress, 0, total, "starting")
    for model_index in range(n_models):
        model = RBM(
            train_data.shape[1],
            config.mixing_hidden,
            generator=derive_seed(base, "mixing", model_index, "init"),
        )
        batch_size = min(config.mixing_batch_size, train_data.shape[0])
        train(
            model,
            train_data,
            algorithm=config.mixing_algorithm,
            algorithm_params=dict(config.mixing_algorithm_params) or None,
            k=config.mixing_k,
            n_chains=batch_size,
            batch_size=batch_size,
            n_updates=config.mixing_updates,
            learning_rate=config.mixing_learning_rate,
            generator=derive_seed(base, "mixing", model_index, "train"),
        )
        weight_scale[model_index] = float(model.weights.detach().abs().mean())
        report(progress, model_index * (1 + n_operators) + 1, total, f"mixing model {model_index} trained")
        measured.append([])
        for operator_index, operator in enumerate(config.operators):
            measured[-1].append(
                measure_operator(
                    model,
                    operator,
                    n_chains=config.mixing_chains,
                    n_steps=config.mixing_steps,
                    burn_in=config.mixing_burn_in,
                    max_lag=config.mixing_max_lag,
                    init=train_data,
                    generator=derive_seed(base, "mixing", model_index, "sample"),
                )
            )
            done = model_index * (1 + n_operators) + 2 + operator_index
            report(progress, done, total, f"mixing model {model_index} {operator}")
    return mixing_result(
        measured,
        operators=config.operators,
        layer_sizes=(train_data.shape[1], config.mixing_hidden),
        n_steps=config.mixing_steps,
        n_chains=config.mixing_chains,
        weight_scale=weight_scale,
    )
