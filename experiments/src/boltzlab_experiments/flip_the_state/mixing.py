"""Mixing of the flip-the-state study: autocorrelation time of the energy, flip against Gibbs.

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2. :func:`run_mixing` trains RBMs on MNIST and
measures the integrated autocorrelation time of the energy under each operator, by Sokal's
window and by an AR fit (the paper's estimator), and the gain ``1 − τ_T/τ_G``; the paper
reports 17.28 % for 784×500 RBMs trained with 20-PT10.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM, sample, train
from boltzlab.data import Dataset
from boltzlab.evaluation import autocorrelation_function, integrated_autocorrelation_time
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.seeds import Progress, base_seed, derive_seed, report

__all__ = ["TAU_METHODS", "MixingResult", "run_mixing"]

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
        Mean absolute weight of each trained model.
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

    def gain(self, method: str, *, operator: str = "flip", reference: str = "gibbs") -> tuple[Tensor, Tensor]:
        """Per-model ``1 − τ_operator/τ_reference`` and its delta-method standard error; each (n_models,)."""
        m, o, r = self.methods.index(method), self.operators.index(operator), self.operators.index(reference)
        ratio = self.tau[:, o, m] / self.tau[:, r, m]
        relative = torch.sqrt(
            (self.tau_stderr[:, o, m] / self.tau[:, o, m]) ** 2
            + (self.tau_stderr[:, r, m] / self.tau[:, r, m]) ** 2
        )
        return 1.0 - ratio, ratio * relative


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
    shape = (n_models, n_operators, len(TAU_METHODS))
    tau, stderr = torch.empty(shape, dtype=torch.float64), torch.empty(shape, dtype=torch.float64)
    reliable = torch.empty(shape, dtype=torch.bool)
    acf = torch.empty(n_models, n_operators, config.mixing_max_lag + 1, dtype=torch.float64)
    flip_rate = torch.empty(n_models, n_operators, dtype=torch.float64)
    weight_scale = torch.empty(n_models, dtype=torch.float64)
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
        for operator_index, operator in enumerate(config.operators):
            result = sample(
                model,
                operator=operator,
                n_chains=config.mixing_chains,
                n_sweeps=config.mixing_steps,
                burn_in=config.mixing_burn_in,
                record_energy=True,
                init=train_data,
                generator=derive_seed(base, "mixing", model_index, "sample"),
            )
            energies = result.energies
            for method_index, method in enumerate(TAU_METHODS):
                estimate = integrated_autocorrelation_time(energies, method=method, warn=False)
                tau[model_index, operator_index, method_index] = estimate.tau
                stderr[model_index, operator_index, method_index] = estimate.stderr
                reliable[model_index, operator_index, method_index] = estimate.reliable
            max_lag = min(config.mixing_max_lag, energies.shape[0] - 1)
            acf[model_index, operator_index] = math.nan
            acf[model_index, operator_index, : max_lag + 1] = torch.from_numpy(
                autocorrelation_function(energies, max_lag=max_lag)
            )
            flip_rate[model_index, operator_index] = float(result.info.flip_rate.mean())
            done = model_index * (1 + n_operators) + 2 + operator_index
            report(progress, done, total, f"mixing model {model_index} {operator}")
    return MixingResult(
        operators=tuple(config.operators),
        methods=TAU_METHODS,
        layer_sizes=(train_data.shape[1], config.mixing_hidden),
        n_steps=config.mixing_steps,
        n_chains=config.mixing_chains,
        tau=tau,
        tau_stderr=stderr,
        reliable=reliable,
        autocorrelation=acf,
        flip_rate=flip_rate,
        weight_scale=weight_scale,
    )
