"""The CAST paper's learning comparison, scaled: SAP, FPCD and CAST on binarised MNIST.

Salakhutdinov (2010, *Learning deep Boltzmann machines using adaptive MCMC*, ICML, §5 and
Table 1; docs/algorithms.md §3.1–3.4) trains a 784-500-1000 DBM for 200,000 updates with SAP (= PCD,
100 persistent chains), FPCD and CAST (50 slow + 50 fast chains, 20 temperatures from 1 down
to 0.9, swap lag 50), minibatches of 100, 5 mean-field updates, learning rate
``10/(2000 + t)``, and reports the variational lower bound on the test log-probability (AIS
for ``log Z``): SAP −87.23, FPCD −86.72, Trans-SAP −85.41, CAST −84.12 nats. Its Fig. 5 shows
SAP and FPCD oscillating late in learning while CAST's bound rises steadily.

:func:`run_cast_comparison` repeats that protocol at a size this machine can afford
(the ``scaled`` preset of :class:`~boltzlab_experiments.cast_comparison.config.CASTComparisonConfig`;
``full`` is the paper's size, for a GPU): every algorithm starts from the same DBM (optionally greedily pretrained,
:mod:`boltzlab.training.pretraining`) and uses the same seed, budget and schedule. It records

* the training-set bound every ``eval_every`` updates with ``log Z`` from AIS
  (:class:`~boltzlab.training.mean_field_objective.VariationalBoundTracker`);
* the final test bound with a larger AIS budget, and per-example AIS ``log p(v)`` on a few
  test cases (:mod:`boltzlab.estimators.dbm_likelihood`) to show how tight the bound is;
* samples of the CAST-trained model by plain Gibbs sweeps and by adaptive simulated tempering;
* the temperature trajectory of one of CAST's fast chains during learning;
* stability statistics of each bound curve (largest drop, mean absolute change late in
  learning), so a report can say whether CAST is steadier rather than assert it.

Nothing here prints or writes; :mod:`boltzlab_experiments.cast_comparison.command` writes the files.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from boltzlab import DBM, Chains, estimate_log_z, operators, sample, train, variational_lower_bound
from boltzlab.errors import ValidationError
from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood
from boltzlab.rng import make_generator, spawn
from boltzlab.training import SchemePhase, get_phase
from boltzlab.training.mean_field_objective import VariationalBoundTracker
from boltzlab.training.pretraining import pretrain_dbm
from boltzlab.validation import as_binary_tensor, require
from boltzlab_experiments.cast_comparison.config import CASTComparisonConfig

__all__ = [
    "AlgorithmRun",
    "CASTComparisonResult",
    "RecordingPhase",
    "curve_statistics",
    "run_cast_comparison",
]

# The trainer's name of each algorithm (SAP is PCD with mean-field data term).
_PHASE_NAMES = {"sap": "pcd", "fpcd": "fpcd", "cast": "cast"}

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class AlgorithmRun:
    """One algorithm's learning run and final evaluation.

    Attributes
    ----------
    algorithm : str
    updates : Tensor, shape (n_evaluations,), int64
        Update indices of the tracked bounds (0 = before learning).
    train_bounds : Tensor, shape (n_evaluations,), float64
        Mean bound on ``eval_examples`` training cases, nats.
    log_z : Tensor, shape (n_evaluations,), float64
    log_z_stderr : Tensor, shape (n_evaluations,), float64
        AIS ``log Z`` used for each bound and its standard error.
    final_log_z, final_log_z_stderr : float
        Final ``log Z`` (larger AIS budget).
    train_bound, test_bound : float
        Final mean bounds on the training and test sets with ``final_log_z``.
    max_drop : float
        Largest decrease of the tracked bound between consecutive evaluations (0 if none).
    late_mean_abs_change : float
        Mean ``|Δ bound|`` between consecutive evaluations in the second half of learning:
        the oscillation that the paper reports for SAP and FPCD.
    test_log_probability, test_log_probability_stderr, test_bound_subset : float
        Per-example AIS ``log p(v)`` averaged over ``likelihood_examples`` test cases, its
        standard error, and the bound on the same cases (NaN when skipped).
    seconds : float
        Learning time (without the evaluations' AIS).
    model : DBM
        The trained model.
    """

    algorithm: str
    updates: Tensor
    train_bounds: Tensor
    log_z: Tensor
    log_z_stderr: Tensor
    final_log_z: float
    final_log_z_stderr: float
    train_bound: float
    test_bound: float
    max_drop: float
    late_mean_abs_change: float
    test_log_probability: float
    test_log_probability_stderr: float
    test_bound_subset: float
    seconds: float
    model: DBM = field(repr=False)


@dataclass(frozen=True)
class CASTComparisonResult:
    """What :func:`run_cast_comparison` returns.

    Attributes
    ----------
    config : CASTComparisonConfig
    runs : tuple of AlgorithmRun
        In ``config.algorithms`` order.
    fast_chain_betas : Tensor, shape (n_updates,), float64
        β of CAST's first fast chain after every update (empty without CAST).
    gibbs_samples, tempered_samples : Tensor, shape (n_kept, sample_chains, n_visible)
        Visible states of the CAST model (else the last algorithm's) by plain sweeps and by
        adaptive simulated tempering (β = 1 chains), one every ``sample_keep_every`` sweeps.
    sampled_algorithm : str
        Which algorithm's model was sampled.
    tempered_acceptance : float
        Level-move acceptance of the adaptive-ST sampler.
    pretrain_seconds, seconds : float
        Pretraining time and total time.
    """

    config: CASTComparisonConfig
    runs: tuple[AlgorithmRun, ...]
    fast_chain_betas: Tensor
    gibbs_samples: Tensor
    tempered_samples: Tensor
    sampled_algorithm: str
    tempered_acceptance: float
    pretrain_seconds: float
    seconds: float


class RecordingPhase(SchemePhase):
    """A scheme phase that also remembers the β of fast chain 0 after every update (CAST)."""

    def __init__(self, inner: SchemePhase) -> None:
        self.__dict__.update(inner.__dict__)
        self.betas: list[Tensor] = []

    def step(self, model: Any, state: Any, **kwargs: Any) -> Any:
        new_state, samples = super().step(model, state, **kwargs)
        self.betas.append(new_state.scheme_state.fast.chains.beta[0].detach().clone())
        return new_state, samples


def curve_statistics(bounds: Tensor) -> tuple[float, float]:
    """``(max_drop, late_mean_abs_change)`` of a bound curve (see :class:`AlgorithmRun`)."""
    if bounds.numel() < 2:
        return 0.0, math.nan
    changes = bounds[1:] - bounds[:-1]
    max_drop = max(0.0, float(-changes.min()))
    late = changes[changes.numel() // 2 :]
    return max_drop, float(late.abs().mean())


def _phase(config: CASTComparisonConfig, algorithm: str) -> tuple[Any, dict[str, Any], int]:
    """``(algorithm or phase object, algorithm_params, n_chains)`` for the trainer."""
    operator = operators.get(config.operator)
    if algorithm == "cast":
        params = {"n_levels": config.cast_levels, "low": config.cast_low, "lag": config.cast_lag}
        inner = get_phase("cast", operator=operator, k=1, n_chains=config.cast_chains, **params)
        return RecordingPhase(inner), {}, config.cast_chains
    return _PHASE_NAMES[algorithm], {}, config.n_chains


def _final_log_z(model: DBM, config: CASTComparisonConfig, seed: int) -> Any:
    return estimate_log_z(
        model,
        method="ais",
        n_chains=config.final_ais_chains,
        n_temperatures=config.final_ais_temperatures,
        generator=make_generator(seed, model.device),
    )


def run_cast_comparison(
    config: CASTComparisonConfig,
    train_data: Any,
    test_data: Any,
    *,
    progress: Progress | None = None,
) -> CASTComparisonResult:
    """Train a DBM with each algorithm under the same budget and seed, and evaluate them.

    Parameters
    ----------
    config : CASTComparisonConfig
    train_data : Tensor, shape (n_examples, n_visible), values 0/1
        Only the first ``config.n_train`` rows are used.
    test_data : Tensor, shape (n_test_examples, n_visible), values 0/1
        Only the first ``config.n_test`` rows are used.
    progress : callable ``(done, total, label)``, optional
        Called after each stage (pretraining, each algorithm, sampling).

    Returns
    -------
    CASTComparisonResult

    Examples
    --------
    >>> import torch
    >>> from dataclasses import replace
    >>> from boltzlab_experiments.cast_comparison.config import CASTComparisonConfig
    >>> from boltzlab_experiments.cast_comparison.run import run_cast_comparison
    >>> g = torch.Generator().manual_seed(0)
    >>> data = (torch.rand(60, 784, generator=g) < 0.2).float()
    >>> config = CASTComparisonConfig.tiny()
    >>> result = run_cast_comparison(replace(config, n_updates=10, eval_every=5), data[:40], data[40:])
    >>> [run.algorithm for run in result.runs], result.fast_chain_betas.shape
    (['sap', 'fpcd', 'cast'], torch.Size([10]))
    """
    if not isinstance(config, CASTComparisonConfig):
        raise ValidationError(f"config must be a CASTComparisonConfig, got {type(config).__name__}")
    n_visible = config.layer_sizes[0]
    device = torch.device(config.device)
    train_set = as_binary_tensor(train_data, "train_data", n_units=n_visible, device=device)[: config.n_train]
    test_set = as_binary_tensor(test_data, "test_data", n_units=n_visible, device=device)[: config.n_test]
    require(train_set.shape[0] >= config.batch_size, "train_data needs at least batch_size examples")
    require(test_set.shape[0] >= 1, "test_data needs at least one example")
    started = time.perf_counter()
    stages = len(config.algorithms) + 2
    report = progress or (lambda done, total, label: None)
    # One stream per purpose, so adding an algorithm never changes another's run.
    init_generator, pretrain_generator, sample_generator = spawn(make_generator(config.seed, device), 3)

    pretrain_started = time.perf_counter()
    if config.pretrain_updates > 0:
        start = pretrain_dbm(
            config.layer_sizes,
            train_set,
            n_updates=config.pretrain_updates,
            batch_size=config.batch_size,
            generator=pretrain_generator,
            device=device,
        ).dbm
    else:
        start = DBM(layer_sizes=list(config.layer_sizes), generator=init_generator, device=device)
    pretrain_seconds = time.perf_counter() - pretrain_started
    report(1, stages, "pretrained" if config.pretrain_updates else "initialised")

    runs, fast_betas = [], torch.zeros(0, dtype=torch.float64)
    for index, algorithm in enumerate(config.algorithms):
        model = copy.deepcopy(start)
        phase, params, n_chains = _phase(config, algorithm)
        tracker = VariationalBoundTracker(
            config.eval_every,
            log_z="ais",
            ais_options={"n_chains": config.ais_chains, "n_temperatures": config.ais_temperatures},
            seed=config.seed,
            n_examples=config.eval_examples,
        )
        learn_started = time.perf_counter()
        result = train(
            model,
            train_set,
            algorithm=phase,
            algorithm_params=params,
            operator=config.operator,
            n_chains=n_chains,
            batch_size=config.batch_size,
            n_updates=config.n_updates,
            learning_rate=config.learning_rate,
            lr_schedule="inverse",
            generator=config.seed,  # the same seed for every algorithm
            callbacks=[tracker],
            log_every=config.eval_every,
        )
        seconds = time.perf_counter() - learn_started
        records = [record for record in result.history if "train_bound" in record.extra]
        bounds = torch.tensor([record.extra["train_bound"] for record in records], dtype=torch.float64)
        max_drop, late_change = curve_statistics(bounds)
        log_z_estimate = _final_log_z(model, config, config.seed + 1)
        log_z, log_z_stderr = log_z_estimate.log_z, log_z_estimate.stderr
        train_bound = variational_lower_bound(model, train_set[: config.eval_examples], log_z)
        test_bound = variational_lower_bound(model, test_set, log_z)
        likelihood = (math.nan, math.nan, math.nan)
        if config.likelihood_examples > 0:
            estimate = estimate_log_likelihood(
                model,
                test_set[: config.likelihood_examples],
                log_z=log_z_estimate,
                n_chains=config.likelihood_chains,
                n_temperatures=config.likelihood_temperatures,
                generator=make_generator(config.seed + 2, model.device),
            )
            likelihood = (estimate.mean, estimate.mean_stderr, estimate.mean_bound)
        if isinstance(phase, RecordingPhase) and phase.betas:
            fast_betas = torch.stack(phase.betas).to(torch.float64)
        runs.append(
            AlgorithmRun(
                algorithm=algorithm,
                updates=torch.tensor([record.update for record in records], dtype=torch.int64),
                train_bounds=bounds,
                log_z=torch.tensor([record.log_z for record in records], dtype=torch.float64),
                log_z_stderr=torch.tensor(
                    [record.extra["log_z_stderr"] for record in records], dtype=torch.float64
                ),
                final_log_z=log_z,
                final_log_z_stderr=log_z_stderr,
                train_bound=train_bound,
                test_bound=test_bound,
                max_drop=max_drop,
                late_mean_abs_change=late_change,
                test_log_probability=likelihood[0],
                test_log_probability_stderr=likelihood[1],
                test_bound_subset=likelihood[2],
                seconds=seconds,
                model=model,
            )
        )
        report(index + 2, stages, f"{algorithm}: test bound {test_bound:.2f}")

    sampled = next((run for run in runs if run.algorithm == "cast"), runs[-1])
    gibbs_samples, tempered_samples, acceptance = _sample_both(sampled.model, config, sample_generator)
    report(stages, stages, "sampled")
    return CASTComparisonResult(
        config=config,
        runs=tuple(runs),
        fast_chain_betas=fast_betas,
        gibbs_samples=gibbs_samples,
        tempered_samples=tempered_samples,
        sampled_algorithm=sampled.algorithm,
        tempered_acceptance=acceptance,
        pretrain_seconds=pretrain_seconds,
        seconds=time.perf_counter() - started,
    )


def _sample_both(
    model: DBM, config: CASTComparisonConfig, generator: torch.Generator
) -> tuple[Tensor, Tensor, float]:
    """Plain sweeps and adaptive ST from the same start, the same number of sweeps."""
    plain_generator, tempered_generator = spawn(generator, 2)
    common = {
        "operator": config.operator,
        "n_chains": config.sample_chains,
        "n_sweeps": config.sample_sweeps,
        "keep_every": config.sample_keep_every,
    }
    plain = sample(model, sampler="plain", generator=plain_generator, **common)
    tempered = sample(
        model,
        sampler="ast",
        generator=tempered_generator,
        low=config.cast_low,
        n_levels=config.cast_levels,
        **common,
    )
    summary = tempered.info.summary
    acceptance = float(getattr(summary, "acceptance_rate", math.nan))
    return _visible(plain.samples), _visible(tempered.samples), acceptance


def _visible(samples: Tensor | Chains | None) -> Tensor:
    if samples is None:
        return torch.zeros(0)
    return samples.detach().cpu()
