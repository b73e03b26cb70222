"""The CAST paper's learning comparison, scaled: SAP, FPCD and CAST on binarised MNIST.

Salakhutdinov (2010, *Learning deep Boltzmann machines using adaptive MCMC*, ICML, §5 and
Table 1; ALGORITHMS.md §3.1–3.4) trains a 784-500-1000 DBM for 200,000 updates with SAP (= PCD,
100 persistent chains), FPCD and CAST (50 slow + 50 fast chains, 20 temperatures from 1 down
to 0.9, swap lag 50), minibatches of 100, 5 mean-field updates, learning rate
``10/(2000 + t)``, and reports the variational lower bound on the test log-probability (AIS
for ``log Z``): SAP −87.23, FPCD −86.72, Trans-SAP −85.41, CAST −84.12 nats. Its Fig. 5 shows
SAP and FPCD oscillating late in learning while CAST's bound rises steadily.

:func:`run_cast_comparison` repeats that protocol at a size this machine can afford
(:meth:`CASTComparisonConfig.scaled`; :meth:`~CASTComparisonConfig.full` is the paper's
size, for a GPU): every algorithm starts from the same DBM (optionally greedily pretrained,
:mod:`boltzlab.training.pretraining`) and uses the same seed, budget and schedule. It records

* the training-set bound every ``eval_every`` updates with ``log Z`` from AIS
  (:class:`~boltzlab.training.mean_field_objective.VariationalBoundTracker`);
* the final test bound with a larger AIS budget, and per-example AIS ``log p(v)`` on a few
  test cases (:mod:`boltzlab.estimators.dbm_likelihood`) to show how tight the bound is;
* samples of the CAST-trained model by plain Gibbs sweeps and by adaptive simulated tempering;
* the temperature trajectory of one of CAST's fast chains during learning;
* stability statistics of each bound curve (largest drop, mean absolute change late in
  learning), so a report can say whether CAST is steadier rather than assert it.

Nothing here prints or writes; :mod:`boltzlab.cli.reproduce_cast` writes the files.
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

from boltzlab import operators
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.models.dbm import DBM
from boltzlab.models.mean_field import variational_lower_bound
from boltzlab.rng import make_generator, spawn
from boltzlab.sampling import sample
from boltzlab.training.mean_field_objective import VariationalBoundTracker
from boltzlab.training.negative import get_phase
from boltzlab.training.pretraining import pretrain_dbm
from boltzlab.training.tempered import SchemePhase
from boltzlab.training.trainer import train
from boltzlab.validation import as_binary_tensor, check_positive_int, require

__all__ = [
    "PAPER_TEST_BOUNDS",
    "AlgorithmRun",
    "CASTComparisonConfig",
    "CASTComparisonResult",
    "run_cast_comparison",
]

ALGORITHMS = ("sap", "fpcd", "cast")
# Table 1 of the CAST paper, MNIST 784-500-1000: test lower bound, nats per image.
PAPER_TEST_BOUNDS = {"sap": -87.23, "fpcd": -86.72, "trans-sap": -85.41, "cast": -84.12}
# The trainer's name of each algorithm (SAP is PCD with mean-field data term).
_PHASE_NAMES = {"sap": "pcd", "fpcd": "fpcd", "cast": "cast"}

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class CASTComparisonConfig:
    """Settings of the comparison; defaults are the CAST paper's where it gives them.

    Attributes
    ----------
    layer_sizes : tuple of int
        DBM layer sizes; ``layer_sizes[0]`` must match the data (784 for MNIST).
    algorithms : tuple of str
        Among ``"sap"``, ``"fpcd"``, ``"cast"``.
    n_updates : int
        Parameter updates of every algorithm (the same budget).
    batch_size : int
        Minibatch size (paper: 100).
    learning_rate : float
        Initial rate of the ``"inverse"`` schedule ``lr·c/(c + t)`` with ``c = 2000``
        (paper: 0.005, i.e. ``10/(2000 + t)``).
    n_chains : int
        SAP and FPCD persistent chains (paper: 100).
    cast_chains : int
        CAST slow chains, and as many fast ones (paper: 50 + 50).
    cast_levels, cast_low, cast_lag : int, float, int
        CAST ladder size, lowest β and exchange lag (paper: 20, 0.9, 50).
    operator : str
        Transition operator of every chain (``"gibbs"``, ``"flip"``, ``"mixture"``).
    n_train, n_test : int or None
        Examples used (``None``: all).
    pretrain_updates : int
        Updates per RBM of greedy pretraining before any algorithm runs (0: random init).
    eval_every : int
        Updates between bound evaluations during learning.
    eval_examples : int
        Training examples in each tracked bound.
    ais_chains, ais_temperatures : int
        AIS budget for ``log Z`` while tracking.
    final_ais_chains, final_ais_temperatures : int
        AIS budget for the final ``log Z``.
    likelihood_examples : int
        Test cases of per-example AIS for ``log p(v)`` (0: skip).
    likelihood_chains, likelihood_temperatures : int
        Its runs per case and schedule length.
    sample_chains, sample_sweeps, sample_keep_every : int
        Gibbs vs adaptive-ST sampling of the CAST model after learning.
    seed : int
    device : str
        Torch device of the models and data (``"cuda"`` for :meth:`full`).
    """

    layer_sizes: tuple[int, ...] = (784, 200, 200)
    algorithms: tuple[str, ...] = ALGORITHMS
    n_updates: int = 2000
    batch_size: int = 100
    learning_rate: float = 0.005
    n_chains: int = 100
    cast_chains: int = 50
    cast_levels: int = 20
    cast_low: float = 0.9
    cast_lag: int = 50
    operator: str = "gibbs"
    n_train: int | None = 10_000
    n_test: int | None = 2_000
    pretrain_updates: int = 600
    eval_every: int = 200
    eval_examples: int = 2_000
    ais_chains: int = 100
    ais_temperatures: int = 1_000
    final_ais_chains: int = 100
    final_ais_temperatures: int = 4_000
    likelihood_examples: int = 10
    likelihood_chains: int = 50
    likelihood_temperatures: int = 1_000
    sample_chains: int = 10
    sample_sweeps: int = 2_000
    sample_keep_every: int = 200
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        require(len(self.layer_sizes) >= 3, f"layer_sizes needs L >= 2 hidden layers, got {self.layer_sizes}")
        for name in self.algorithms:
            require(name in ALGORITHMS, f"algorithms must be among {', '.join(ALGORITHMS)}, got {name!r}")
        require(len(self.algorithms) >= 1, "algorithms must name at least one algorithm")
        for name in (
            "n_updates",
            "batch_size",
            "n_chains",
            "cast_chains",
            "cast_levels",
            "cast_lag",
            "eval_every",
            "eval_examples",
            "ais_chains",
            "ais_temperatures",
            "final_ais_chains",
            "final_ais_temperatures",
            "sample_chains",
            "sample_sweeps",
            "sample_keep_every",
        ):
            check_positive_int(getattr(self, name), name)
        require(self.pretrain_updates >= 0, f"pretrain_updates must be >= 0, got {self.pretrain_updates}")
        require(
            self.likelihood_examples >= 0, f"likelihood_examples must be >= 0, got {self.likelihood_examples}"
        )
        require(0.0 < self.cast_low < 1.0, f"cast_low must be in (0, 1), got {self.cast_low}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")

    @classmethod
    def tiny(cls) -> CASTComparisonConfig:
        """Seconds: a 784-12-10 DBM, 60 updates (a smoke test of the pipeline, not a result)."""
        return cls(
            layer_sizes=(784, 12, 10), n_updates=60, batch_size=20, n_chains=10, cast_chains=6,
            cast_levels=5, cast_lag=10, n_train=200, n_test=50, pretrain_updates=20, eval_every=30,
            eval_examples=50, ais_chains=10, ais_temperatures=30, final_ais_chains=10,
            final_ais_temperatures=50, likelihood_examples=3, likelihood_chains=5,
            likelihood_temperatures=20, sample_chains=3, sample_sweeps=20, sample_keep_every=10,
        )  # fmt: skip

    @classmethod
    def scaled(cls) -> CASTComparisonConfig:
        """Minutes on 2 CPU cores: a 784-200-200 DBM, 2,000 updates (the class defaults)."""
        return cls()

    @classmethod
    def full(cls) -> CASTComparisonConfig:
        """The paper's size (784-500-1000, 200,000 updates, all of MNIST): for a GPU."""
        return cls(
            layer_sizes=(784, 500, 1000), n_updates=200_000, n_train=None, n_test=None,
            pretrain_updates=20_000, eval_every=4_000, eval_examples=10_000, ais_chains=100,
            ais_temperatures=20_000, final_ais_chains=100, final_ais_temperatures=20_000,
            likelihood_examples=100, likelihood_chains=100, likelihood_temperatures=10_000,
        )  # fmt: skip


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


class _RecordingPhase(SchemePhase):
    """A scheme phase that also remembers the β of fast chain 0 after every update (CAST)."""

    def __init__(self, inner: SchemePhase) -> None:
        self.__dict__.update(inner.__dict__)
        self.betas: list[Tensor] = []

    def step(self, model: Any, state: Any, **kwargs: Any) -> Any:
        new_state, samples = super().step(model, state, **kwargs)
        self.betas.append(new_state.scheme_state.fast.chains.beta[0].detach().clone())
        return new_state, samples


def _curve_statistics(bounds: Tensor) -> tuple[float, float]:
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
        return _RecordingPhase(inner), {}, config.cast_chains
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
    >>> from boltzlab.experiments.cast_comparison import CASTComparisonConfig, run_cast_comparison
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
        max_drop, late_change = _curve_statistics(bounds)
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
        if isinstance(phase, _RecordingPhase) and phase.betas:
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
