"""The flip-the-state study: does flip-the-state beat Gibbs where Brügge et al. say it does?

Brügge, Fischer & Igel (2013), *The flip-the-state transition operator for restricted Boltzmann
machines*, Machine Learning 93(1); ALGORITHMS.md §2.2 ("Headline figures"). Four parts, each a
pure function of a configuration, data and a generator (or seed) that returns a frozen result (the command
``boltzlab reproduce flip-the-state`` writes the files):

* :func:`run_slem` — the fraction of random RBMs (weights ``U[−c, c]``, zero biases) whose exact
  flip sweep ``T_h T_v`` has a smaller SLEM than Gibbs' (paper's Fig. 3, upper).
* :func:`run_learning` — exact log-likelihood learning curves for CD-k, PCD-k and t-PT_k with
  Gibbs and with flip, repeated with seeds; :func:`wilcoxon_table` compares the per-seed maxima
  by the Wilcoxon signed-rank test (paired by seed: a repetition's initial weights and its
  generator seed are the same for both operators, and both draw one uniform per unit, so
  they also see the same minibatches).
* :func:`run_mixing` — integrated autocorrelation time of the energy for Gibbs and flip on
  MNIST-trained RBMs, by Sokal's window and by an AR fit (the paper's estimator), and the
  gain ``1 − τ_T/τ_G``; the paper reports 17.28 % for 784×500 RBMs trained with 20-PT10.
* :func:`run_mode_hopping` — on Artificial Modes with CD-5-trained RBMs, steps until the first
  class change from training examples and class changes of one chain from the all-ones
  state (nearest class template, ties discarded).

:func:`findings` turns the results into plain-language verdicts keyed off the numbers.
:meth:`FlipTheStateConfig.scaled` (the default) is sized for two CPU cores in a few minutes;
:meth:`FlipTheStateConfig.full` is the paper's protocol (days here); ``tiny`` is for tests.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from scipy import stats
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.data.registry import Dataset
from boltzlab.evaluation.autocorrelation import autocorrelation_function, integrated_autocorrelation_time
from boltzlab.evaluation.modes import (
    class_templates,
    count_mode_changes,
    nearest_template,
    steps_to_first_change,
)
from boltzlab.evaluation.slem_study import SlemStudyResult, slem_study
from boltzlab.models.rbm import RBM
from boltzlab.operators import Operator
from boltzlab.operators import get as get_operator
from boltzlab.rng import make_generator, resolve_generator
from boltzlab.sampling import initial_chains, iterate, sample
from boltzlab.training import train

__all__ = [
    "PAPER_TAU_GAIN",
    "DatasetSpec",
    "Finding",
    "FlipTheStateConfig",
    "LearningResult",
    "LearningRun",
    "LearningSetup",
    "MixingResult",
    "ModeHoppingResult",
    "WilcoxonRow",
    "findings",
    "run_learning",
    "run_mixing",
    "run_mode_hopping",
    "run_slem",
    "wilcoxon_table",
]

PAPER_TAU_GAIN = 0.1728  # "17.28 % fewer steps", MNIST, 500 hidden units
TAU_METHODS = ("sokal", "ar")
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset the study needs: ``boltzlab.data.load(source, **dict(options))`` under ``name``."""

    name: str
    source: str
    options: tuple[tuple[str, float | int | str], ...] = ()


@dataclass(frozen=True)
class LearningSetup:
    """One learning-curve setting: a dataset, the RBM's hidden units, minibatch and length.

    ``batch_size=None`` is full-batch learning (Bars & Stripes in the paper).
    """

    data: DatasetSpec
    n_hidden: int
    batch_size: int | None
    n_updates: int


def _artificial_modes(p_mut: float, n_samples: int = 1000) -> DatasetSpec:
    return DatasetSpec(
        f"artificial-modes-{p_mut:g}", "artificial-modes", (("p_mut", p_mut), ("n_samples", n_samples))
    )


_BARS = DatasetSpec("bars-and-stripes", "bars-and-stripes")


@dataclass(frozen=True)
class FlipTheStateConfig:
    """Sizes of every part of the study; the defaults are :meth:`scaled`.

    SLEM: ``slem_sizes``, ``slem_scales`` (c), ``slem_models`` per (size, c). Learning:
    ``learning`` setups × ``learning_rates`` × ``n_seeds`` × ``algorithms`` × ``operators``,
    ``k`` sweeps (or PT steps) per update, ``pt_levels`` uniform in [0, 1], exact
    log-likelihood every ``evaluate_every`` updates, chains = minibatch size. Mixing:
    ``mixing_models`` RBMs with ``mixing_hidden`` units trained on ``mixing_data`` with
    ``mixing_algorithm`` (``mixing_algorithm_params``) then sampled by each operator with
    ``mixing_chains`` chains for ``mixing_burn_in + mixing_steps`` sweeps from training examples.
    Mode hopping: per ``mode_p_mut``, ``mode_models`` RBMs trained with CD-``mode_k``;
    ``mode_starts`` chains from training examples for at most ``mode_start_steps`` sweeps, and
    one chain from all-ones for ``mode_long_steps``.
    """

    slem_sizes: tuple[tuple[int, int], ...] = ((2, 2), (3, 3))
    slem_scales: tuple[float, ...] = tuple(float(c) for c in range(1, 11))
    slem_models: int = 100
    learning: tuple[LearningSetup, ...] = (
        LearningSetup(_BARS, 16, None, 1000),
        LearningSetup(_artificial_modes(0.1), 16, 100, 1000),
        LearningSetup(DatasetSpec("mnist", "mnist", (("n_train", 2000),)), 10, 100, 500),
    )
    learning_rates: tuple[float, ...] = (0.1,)
    n_seeds: int = 6
    algorithms: tuple[str, ...] = ("cd", "pcd", "pt")
    operators: tuple[str, ...] = ("gibbs", "flip")
    k: int = 1
    pt_levels: int = 5
    evaluate_every: int = 100
    mixing_data: DatasetSpec = DatasetSpec("mnist", "mnist", (("n_train", 2000),))
    mixing_models: int = 3
    mixing_hidden: int = 100
    mixing_algorithm: str = "pcd"
    mixing_algorithm_params: tuple[tuple[str, int], ...] = ()
    mixing_k: int = 1
    mixing_updates: int = 1000
    mixing_learning_rate: float = 0.05
    mixing_batch_size: int = 100
    mixing_chains: int = 20
    mixing_burn_in: int = 500
    mixing_steps: int = 5000
    mixing_max_lag: int = 200
    mode_p_mut: tuple[float, ...] = (0.01, 0.1)
    mode_models: int = 3
    mode_hidden: int = 16
    mode_k: int = 5
    mode_updates: int = 1000
    mode_learning_rate: float = 0.1
    mode_batch_size: int = 100
    mode_starts: int = 1000
    mode_start_steps: int = 1000
    mode_long_steps: int = 10_000
    label: str = "scaled"

    @classmethod
    def scaled(cls) -> FlipTheStateConfig:
        """About six minutes on two CPU cores: SLEMs of 2×2 and 3×3 RBMs (100 per c), one learning
        rate × 6 seeds × 500–1,000 updates, three 784×100 MNIST RBMs for τ."""
        return cls()

    @classmethod
    def full(cls) -> FlipTheStateConfig:
        """The paper's protocol (ALGORITHMS.md §2.2): 25 repetitions × 20,000 updates × 3 rates,
        SLEM up to 4×4 with 100 models, 24 RBMs 784×500 trained with 20-PT10 and sampled 10⁶ steps.
        Days on two cores; the PT ladder size for learning curves is not in our copy (10 here)."""
        mnist = DatasetSpec("mnist-full", "mnist")
        return cls(
            slem_sizes=((2, 2), (3, 3), (4, 4)),
            slem_models=100,
            learning=(
                LearningSetup(_BARS, 16, None, 20_000),
                LearningSetup(_artificial_modes(0.01), 16, 100, 20_000),
                LearningSetup(_artificial_modes(0.1), 16, 100, 20_000),
                LearningSetup(mnist, 10, 100, 20_000),
            ),
            learning_rates=(0.01, 0.05, 0.1),
            n_seeds=25,
            pt_levels=10,
            mixing_data=mnist,
            mixing_models=24,
            mixing_hidden=500,
            mixing_algorithm="pt",
            mixing_algorithm_params=(("n_levels", 20),),
            mixing_k=10,
            mixing_updates=2000,
            mixing_chains=1,
            mixing_burn_in=1000,
            mixing_steps=1_000_000,
            mixing_max_lag=1000,
            mode_models=25,
            mode_updates=20_000,
            label="full",
        )

    @classmethod
    def tiny(cls) -> FlipTheStateConfig:
        """Seconds: every part on toy sizes, to check the pipeline (the numbers mean nothing)."""
        bars = DatasetSpec("bars-and-stripes-3", "bars-and-stripes", (("size", 3),))
        modes = _artificial_modes(0.1, 100)
        return cls(
            slem_sizes=((2, 2),),
            slem_scales=(1.0, 10.0),
            slem_models=4,
            learning=(LearningSetup(bars, 4, None, 20), LearningSetup(modes, 5, 50, 20)),
            n_seeds=2,
            pt_levels=3,
            evaluate_every=10,
            mixing_data=bars,
            mixing_models=1,
            mixing_hidden=5,
            mixing_updates=20,
            mixing_batch_size=14,
            mixing_chains=3,
            mixing_burn_in=20,
            mixing_steps=300,
            mixing_max_lag=20,
            mode_p_mut=(0.1,),
            mode_models=1,
            mode_hidden=6,
            mode_updates=20,
            mode_batch_size=50,
            mode_starts=20,
            mode_start_steps=30,
            mode_long_steps=200,
            label="tiny",
        )

    def mode_data(self) -> tuple[DatasetSpec, ...]:
        """The Artificial Modes datasets of the mode-hopping part, one per ``mode_p_mut``."""
        return tuple(_artificial_modes(p_mut) for p_mut in self.mode_p_mut)

    def datasets(self, parts: Sequence[str] = ("learning", "mixing")) -> tuple[DatasetSpec, ...]:
        """Every dataset the given parts need, each once (``"slem"`` needs none)."""
        specs: list[DatasetSpec] = []
        if "learning" in parts:
            specs += [setup.data for setup in self.learning]
        if "mixing" in parts:
            specs += [self.mixing_data, *self.mode_data()]
        return tuple(dict.fromkeys(specs))


def _base_seed(generator: torch.Generator | int | None) -> int:
    """One draw from the study's generator; every run's seed is derived from it by :func:`_seed`."""
    return int(torch.randint(0, 2**62, (1,), generator=resolve_generator(generator)))


def _seed(base: int, *labels: object) -> int:
    """A 63-bit seed from the base seed and labels, stable across processes (unlike ``hash``).

    Deriving seeds from labels rather than drawing them in sequence keeps a run's randomness
    independent of which other runs were configured, and pairs the runs that share labels.
    """
    text = "/".join(str(label) for label in (base, *labels)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def _report(progress: Progress | None, done: int, total: int, label: str) -> None:
    if progress is not None:
        progress(done, total, label)


# ---------------------------------------------------------------------------------------- SLEM
def run_slem(
    config: FlipTheStateConfig, *, generator: torch.Generator | int | None = None
) -> SlemStudyResult:
    """Fig. 3 (upper): :func:`boltzlab.evaluation.slem_study` on the configured sizes and scales.

    ``generator`` (or an int seed) gives the base seed from which the weights' seed is derived.
    """
    return slem_study(
        config.slem_sizes,
        config.slem_scales,
        config.slem_models,
        generator=_seed(_base_seed(generator), "slem"),
    )


# ------------------------------------------------------------------------------------ learning
@dataclass(frozen=True)
class LearningRun:
    """The exact log-likelihood curve of one training run.

    Attributes
    ----------
    dataset, algorithm, operator : str
    learning_rate : float
    seed : int
        Repetition index (0-based); runs with the same index share initial weights and seed.
    updates : Tensor, shape (n_records,), int64
    log_likelihood : Tensor, shape (n_records,), float64
        Exact mean training log-likelihood (nats per example) after ``updates``.
    """

    dataset: str
    learning_rate: float
    algorithm: str
    operator: str
    seed: int
    updates: Tensor
    log_likelihood: Tensor

    @property
    def max_log_likelihood(self) -> float:
        return float(self.log_likelihood.max())

    @property
    def update_of_max(self) -> int:
        return int(self.updates[int(self.log_likelihood.argmax())])


@dataclass(frozen=True)
class LearningResult:
    """All learning runs, in the order they ran."""

    runs: tuple[LearningRun, ...]

    def select(self, **where: object) -> tuple[LearningRun, ...]:
        """Runs whose attributes equal the given values, e.g. ``select(dataset="mnist")``."""
        return tuple(
            run for run in self.runs if all(getattr(run, key) == value for key, value in where.items())
        )

    def settings(self) -> tuple[tuple[str, float, str], ...]:
        """Distinct ``(dataset, learning_rate, algorithm)`` in run order."""
        return tuple(dict.fromkeys((run.dataset, run.learning_rate, run.algorithm) for run in self.runs))


def run_learning(
    config: FlipTheStateConfig,
    datasets: Mapping[str, Dataset],
    *,
    generator: torch.Generator | int | None = None,
    progress: Progress | None = None,
) -> LearningResult:
    """Train every configured (setup, rate, repetition, algorithm, operator) with exact tracking.

    Parameters
    ----------
    config : FlipTheStateConfig
    datasets : mapping of DatasetSpec.name to Dataset
        Setups whose dataset is missing are left out (the caller reports why).
    generator : torch.Generator or int, optional
        The study's randomness: one base seed is drawn from it, and repetition ``r`` of a setup
        derives its initial weights and its training seed from ``(base, dataset, r)`` only, so
        all algorithms, operators and rates of a repetition start from the same RBM.
    progress : callable (done, total, label), optional
        Called after each run (and once with ``done = 0``).
    """
    base = _base_seed(generator)
    setups = [setup for setup in config.learning if setup.data.name in datasets]
    jobs = [
        (setup, rate, repetition, algorithm, operator)
        for setup in setups
        for rate in config.learning_rates
        for repetition in range(config.n_seeds)
        for algorithm in config.algorithms
        for operator in config.operators
    ]
    runs = []
    _report(progress, 0, len(jobs), "starting")
    for index, (setup, rate, repetition, algorithm, operator) in enumerate(jobs):
        data = datasets[setup.data.name].train
        batch_size = data.shape[0] if setup.batch_size is None else min(setup.batch_size, data.shape[0])
        model = RBM(data.shape[1], setup.n_hidden, generator=_seed(base, setup.data.name, repetition, "init"))
        result = train(
            model,
            data,
            algorithm=algorithm,
            algorithm_params={"n_levels": config.pt_levels} if algorithm == "pt" else None,
            operator=operator,
            k=config.k,
            n_chains=batch_size,
            batch_size=batch_size,
            n_updates=setup.n_updates,
            learning_rate=rate,
            generator=_seed(base, setup.data.name, repetition, "train"),
            track_exact_every=config.evaluate_every,
            log_every=config.evaluate_every,
        )
        tracked = [record for record in result.history if record.train_log_likelihood is not None]
        runs.append(
            LearningRun(
                dataset=setup.data.name,
                learning_rate=rate,
                algorithm=algorithm,
                operator=operator,
                seed=repetition,
                updates=torch.tensor([record.update for record in tracked], dtype=torch.int64),
                log_likelihood=torch.tensor(
                    [record.train_log_likelihood for record in tracked], dtype=torch.float64
                ),
            )
        )
        _report(progress, index + 1, len(jobs), f"{setup.data.name} {algorithm}-{config.k} {operator}")
    return LearningResult(runs=tuple(runs))


@dataclass(frozen=True)
class WilcoxonRow:
    """Wilcoxon signed-rank test of ``operator`` against ``reference`` on per-seed maxima.

    Attributes
    ----------
    dataset, algorithm : str
    learning_rate : float
    n_pairs : int
        Repetitions with both operators.
    median_reference, median_operator : float
        Median over repetitions of the maximum log-likelihood (nats).
    median_difference : float
        Median of the paired differences ``operator − reference``.
    operator_wins : int
        Repetitions where the operator's maximum is higher.
    statistic, p_value : float
        SciPy's two-sided test (exact distribution for small samples without ties).
    min_p_value : float
        Smallest two-sided p the exact test can give with ``n`` non-zero differences, ``2/2^n``:
        with 5 or fewer it is above 0.05, so no result can be significant at 5 %.
    alpha : float
    """

    dataset: str
    learning_rate: float
    algorithm: str
    n_pairs: int
    median_reference: float
    median_operator: float
    median_difference: float
    operator_wins: int
    statistic: float
    p_value: float
    min_p_value: float
    alpha: float = 0.05

    @property
    def verdict(self) -> str:
        """``"operator higher"``, ``"reference higher"``, ``"no significant difference"`` or
        ``"too few pairs"`` (the test cannot reach ``alpha``)."""
        if self.min_p_value >= self.alpha:
            return "too few pairs"
        if self.p_value < self.alpha:
            return "operator higher" if self.median_difference > 0 else "reference higher"
        return "no significant difference"


def wilcoxon_table(
    result: LearningResult, *, operator: str = "flip", reference: str = "gibbs", alpha: float = 0.05
) -> tuple[WilcoxonRow, ...]:
    """One :class:`WilcoxonRow` per (dataset, learning rate, algorithm), pairing runs by seed."""
    rows = []
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        by_operator = {
            name: {run.seed: run.max_log_likelihood for run in setting if run.operator == name}
            for name in (operator, reference)
        }
        seeds = sorted(set(by_operator[operator]) & set(by_operator[reference]))
        if not seeds:
            continue
        ours = torch.tensor([by_operator[operator][s] for s in seeds], dtype=torch.float64)
        theirs = torch.tensor([by_operator[reference][s] for s in seeds], dtype=torch.float64)
        difference = ours - theirs
        if bool((difference == 0).all()):
            statistic, p_value = math.nan, 1.0  # SciPy divides by zero here; nothing to test
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=RuntimeWarning)
                test = stats.wilcoxon(ours.numpy(), theirs.numpy(), alternative="two-sided")
            statistic, p_value = float(test.statistic), float(test.pvalue)
        rows.append(
            WilcoxonRow(
                dataset=dataset,
                learning_rate=rate,
                algorithm=algorithm,
                n_pairs=len(seeds),
                median_reference=_median(theirs),
                median_operator=_median(ours),
                median_difference=_median(difference),
                operator_wins=int((difference > 0).sum()),
                statistic=statistic,
                p_value=p_value,
                # SciPy drops zero differences before ranking ("wilcox" zero method).
                min_p_value=min(1.0, 2.0 / 2 ** int((difference != 0).sum())),
                alpha=alpha,
            )
        )
    return tuple(rows)


# -------------------------------------------------------------------------------------- mixing
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
    base = _base_seed(generator)
    n_models, n_operators = config.mixing_models, len(config.operators)
    shape = (n_models, n_operators, len(TAU_METHODS))
    tau, stderr = torch.empty(shape, dtype=torch.float64), torch.empty(shape, dtype=torch.float64)
    reliable = torch.empty(shape, dtype=torch.bool)
    acf = torch.empty(n_models, n_operators, config.mixing_max_lag + 1, dtype=torch.float64)
    flip_rate = torch.empty(n_models, n_operators, dtype=torch.float64)
    weight_scale = torch.empty(n_models, dtype=torch.float64)
    train_data = data.train
    total = n_models * (1 + n_operators)
    _report(progress, 0, total, "starting")
    for model_index in range(n_models):
        model = RBM(
            train_data.shape[1], config.mixing_hidden, generator=_seed(base, "mixing", model_index, "init")
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
            generator=_seed(base, "mixing", model_index, "train"),
        )
        weight_scale[model_index] = float(model.weights.detach().abs().mean())
        _report(progress, model_index * (1 + n_operators) + 1, total, f"mixing model {model_index} trained")
        for operator_index, operator in enumerate(config.operators):
            result = sample(
                model,
                operator=operator,
                n_chains=config.mixing_chains,
                n_sweeps=config.mixing_steps,
                burn_in=config.mixing_burn_in,
                record_energy=True,
                init=train_data,
                generator=_seed(base, "mixing", model_index, "sample"),
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
            _report(progress, done, total, f"mixing model {model_index} {operator}")
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


# -------------------------------------------------------------------------------- mode hopping
@dataclass(frozen=True)
class ModeHoppingResult:
    """Class changes of chains on CD-k-trained Artificial Modes RBMs.

    Attributes
    ----------
    p_mut : tuple of float
    operators : tuple of str
    start_steps, long_steps : int
        Longest run of the chains started at training examples; length of the all-ones chain.
    first_change : Tensor, shape (n_p_mut, n_models, n_operators, n_starts), int64
        Sweeps until the first class change of each chain started at a training example; −1
        when it did not change within ``start_steps`` (censored).
    class_changes : Tensor, shape (n_p_mut, n_models, n_operators), int64
        Class changes of the chain started at all-ones (tied steps discarded).
    """

    p_mut: tuple[float, ...]
    operators: tuple[str, ...]
    start_steps: int
    long_steps: int
    first_change: Tensor
    class_changes: Tensor

    def changed_fraction(self) -> Tensor:
        """Fraction of started chains that changed class within ``start_steps``; (n_p_mut, n_operators)."""
        return (self.first_change >= 0).to(torch.float64).mean(dim=(1, 3))

    def median_first_change(self) -> Tensor:
        """Median steps to the first change over models and starts, censored chains counted as
        never (+inf); (n_p_mut, n_operators), float64."""
        steps = self.first_change.to(torch.float64)
        steps = torch.where(self.first_change >= 0, steps, torch.full_like(steps, math.inf))
        flat = steps.transpose(1, 2).reshape(len(self.p_mut), len(self.operators), -1)
        # The lower median of a sample with infinities stays well defined (torch.median).
        return flat.median(dim=2).values


def _track_classes(
    model: RBM,
    chains: Chains,
    operator: Operator,
    templates: Tensor,
    n_steps: int,
    generator: torch.Generator,
) -> Tensor:
    """Nearest-template class of every chain before and after each of ``n_steps`` sweeps; (n_steps + 1, n)."""
    states = [chains.layers[0]]
    for state, _ in iterate(model, operator, chains, generator=generator, n_sweeps=n_steps):
        states.append(state.layers[0])
    return nearest_template(torch.stack(states), templates)


def run_mode_hopping(
    config: FlipTheStateConfig,
    datasets: Mapping[float, Dataset],
    *,
    generator: torch.Generator | int | None = None,
    progress: Progress | None = None,
) -> ModeHoppingResult:
    """Mode hopping on Artificial Modes (Brügge et al. 2013, §5.3; ALGORITHMS.md §2.2).

    Parameters
    ----------
    config : FlipTheStateConfig
    datasets : mapping of p_mut to Dataset
        Labelled Artificial Modes data; the values of ``config.mode_p_mut`` missing here are
        left out.
    generator : torch.Generator or int, optional
        One base seed is drawn from it; each model's training, starts and runs derive their
        seeds from it and their labels.
    progress : callable (done, total, label), optional

    Notes
    -----
    Classes are the nearest thresholded class means (Hamming distance; ties discarded). Both
    operators start from the same training examples and hidden states with the same seed.
    """
    base = _base_seed(generator)
    p_values = tuple(p_mut for p_mut in config.mode_p_mut if p_mut in datasets)
    n_ops = len(config.operators)
    first = torch.empty(len(p_values), config.mode_models, n_ops, config.mode_starts, dtype=torch.int64)
    changes = torch.empty(len(p_values), config.mode_models, n_ops, dtype=torch.int64)
    total, done = len(p_values) * config.mode_models, 0
    _report(progress, 0, total, "starting")
    for p_index, p_mut in enumerate(p_values):
        data = datasets[p_mut]
        templates = class_templates(data.train, data.train_labels)
        for model_index in range(config.mode_models):
            labels = ("modes", p_mut, model_index)
            model = RBM(data.n_visible, config.mode_hidden, generator=_seed(base, *labels, "init"))
            batch_size = min(config.mode_batch_size, data.train.shape[0])
            train(
                model,
                data.train,
                algorithm="cd",
                k=config.mode_k,
                batch_size=batch_size,
                n_updates=config.mode_updates,
                learning_rate=config.mode_learning_rate,
                generator=_seed(base, *labels, "train"),
            )
            start_generator = make_generator(_seed(base, *labels, "starts"))
            starts = initial_chains(model, config.mode_starts, init=data.train, generator=start_generator)
            ones = initial_chains(model, 1, init=torch.ones(1, data.n_visible), generator=start_generator)
            for op_index, name in enumerate(config.operators):
                operator = get_operator(name)
                classes = _track_classes(
                    model,
                    starts,
                    operator,
                    templates,
                    config.mode_start_steps,
                    make_generator(_seed(base, *labels, "run")),
                )
                first[p_index, model_index, op_index] = steps_to_first_change(classes)
                long = _track_classes(
                    model,
                    ones,
                    operator,
                    templates,
                    config.mode_long_steps,
                    make_generator(_seed(base, *labels, "long")),
                )
                changes[p_index, model_index, op_index] = int(count_mode_changes(long[:, 0]))
            done += 1
            _report(progress, done, total, f"modes p_mut={p_mut:g} model {model_index}")
    return ModeHoppingResult(
        p_mut=p_values,
        operators=tuple(config.operators),
        start_steps=config.mode_start_steps,
        long_steps=config.mode_long_steps,
        first_change=first,
        class_changes=changes,
    )


# ------------------------------------------------------------------------------------ findings
@dataclass(frozen=True)
class Finding:
    """A paper claim, what was measured, and whether the measurement agrees.

    ``verdict`` is ``"confirmed"``, ``"contradicted"`` or ``"inconclusive"``; ``text`` says it in
    plain words with the numbers.
    """

    part: str
    claim: str
    verdict: str
    text: str
    details: tuple[str, ...] = field(default=())


def _median(values: Tensor) -> float:
    # torch.median returns the lower middle value; the median of an even sample is their mean.
    return float(torch.quantile(values.to(torch.float64), 0.5))


def _slem_finding(result: SlemStudyResult) -> Finding:
    fraction, stderr = result.fraction, result.fraction_stderr
    low, high = result.scales[0], result.scales[-1]
    rising, falling, details = [], [], []
    for index, (n_visible, n_hidden) in enumerate(result.sizes):
        first, last = float(fraction[index, 0]), float(fraction[index, -1])
        spread = math.hypot(float(stderr[index, 0]), float(stderr[index, -1]))
        # Rising: a z-score above 2 (a change from 0 % to 100 % has zero binomial SE and counts).
        rising.append(last > first and last - first > 2.0 * spread)
        falling.append(last <= first)
        details.append(f"{n_visible}×{n_hidden}: {first:.0%} at c = {low:g}, {last:.0%} at c = {high:g}")
    listed = "; ".join(details)
    if all(rising):
        verdict = "confirmed"
        text = f"Flip-the-state's SLEM beats Gibbs' more often as the weights grow, as the paper says ({listed})."
    elif all(falling):
        verdict = "contradicted"
        text = f"The fraction of models where flip has the smaller SLEM does not rise with c ({listed})."
    else:
        verdict = "inconclusive"
        text = f"The fraction does not rise clearly (by 2 standard errors) for every size ({listed})."
    if len(result.sizes) > 1:
        # The paper: the effect grows with model size. Compare the largest and smallest size at
        # the largest c by the z-score of the difference of two binomial fractions.
        small, large = float(fraction[0, -1]), float(fraction[-1, -1])
        spread = math.hypot(float(stderr[0, -1]), float(stderr[-1, -1]))
        names = [f"{v}×{h}" for v, h in (result.sizes[0], result.sizes[-1])]
        compared = f"{large:.0%} for {names[1]} against {small:.0%} for {names[0]} at c = {high:g}"
        if large - small > 2.0 * spread:
            text += f" It is higher for the larger model, as the paper says ({compared})."
        elif small - large > 2.0 * spread:
            text += f" Contrary to the paper, it is lower for the larger model ({compared})."
        else:
            text += f" The sizes do not differ beyond two standard errors ({compared})."
    claim = "the fraction of RBMs with SLEM(flip) < SLEM(Gibbs) is near 0 at c = 1 and rises with c"
    return Finding("slem", claim, verdict, text, tuple(details))


def _early_lead(result: LearningResult) -> str:
    """Which operator is ahead at the first evaluation after the start, counted over settings."""
    gibbs_ahead, n = 0, 0
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        early = {}
        for operator in ("flip", "gibbs"):
            values = [
                float(run.log_likelihood[1])
                for run in setting
                if run.operator == operator and run.updates.numel() > 1
            ]
            if values:
                early[operator] = sum(values) / len(values)
        if len(early) == 2:
            n += 1
            gibbs_ahead += early["gibbs"] > early["flip"]
    return f"at the first evaluation Gibbs' mean log-likelihood was ahead in {gibbs_ahead} of {n} settings"


def _stalled(result: LearningResult) -> str:
    """Settings where one operator's runs barely learned: a median gain over the initial RBM
    below 1 % of the other operator's (e.g. CD-1 with flip from near-zero weights)."""
    found = []
    for dataset, rate, algorithm in result.settings():
        setting = result.select(dataset=dataset, learning_rate=rate, algorithm=algorithm)
        gains = {}
        for operator in dict.fromkeys(run.operator for run in setting):
            runs = [run for run in setting if run.operator == operator]
            gains[operator] = _median(
                torch.tensor([run.max_log_likelihood - float(run.log_likelihood[0]) for run in runs])
            )
        best = max(gains.values())
        for operator, gain in gains.items():
            if best > 0 and gain < 0.01 * best:
                others = ", ".join(f"{name} {value:.3g}" for name, value in gains.items() if name != operator)
                found.append(
                    f"{operator} with {algorithm} on {dataset} (lr {rate:g}) gained {gain:.3g} nats over the "
                    f"initial RBM (median over seeds; {others})"
                )
    return "; ".join(found)


def _learning_finding(result: LearningResult) -> Finding:
    claim = "in most settings flip reaches a higher median maximum log-likelihood (Wilcoxon, p < 0.05)"
    rows = wilcoxon_table(result)
    if not rows:
        return Finding("learning", claim, "inconclusive", "No paired learning runs.")
    n = len(rows)
    better = sum(row.verdict == "operator higher" for row in rows)
    worse = sum(row.verdict == "reference higher" for row in rows)
    higher_median = sum(row.median_operator > row.median_reference for row in rows)
    details = tuple(
        f"{row.dataset}, {row.algorithm}, lr {row.learning_rate:g}: flip − Gibbs median {row.median_difference:+.3f} "
        f"nats, flip higher in {row.operator_wins}/{row.n_pairs} seeds, p = {row.p_value:.3g} ({row.verdict})"
        for row in rows
    )
    counts = (
        f"flip's median maximum was higher in {higher_median} of {n} settings; significantly higher "
        f"(p < {rows[0].alpha:g}) in {better}, significantly lower in {worse}"
    )
    if all(row.verdict == "too few pairs" for row in rows):
        verdict = "inconclusive"
        text = (
            f"With {rows[0].n_pairs} seeds the signed-rank test cannot reach p < {rows[0].alpha:g} "
            f"(smallest possible p = {rows[0].min_p_value:.3g}); descriptively, {counts}"
        )
    elif better > n / 2:
        verdict, text = "confirmed", f"Flip beat Gibbs in most settings: {counts}"
    elif better == 0 and worse > 0:
        verdict, text = "contradicted", f"Where the test found a difference, Gibbs came out ahead: {counts}"
    else:
        verdict = "inconclusive"
        text = (
            f"Flip did not beat Gibbs in most settings: {counts}; with {rows[0].n_pairs} seeds the test "
            f"has little power (smallest possible p = {rows[0].min_p_value:.3g})"
        )
    text += f". The paper also says Gibbs is slightly better early in training: {_early_lead(result)}."
    stalled = _stalled(result)
    if stalled:
        text += f" Some runs barely learned: {stalled}."
    return Finding("learning", claim, verdict, text, details)


def _mixing_finding(result: MixingResult) -> Finding:
    claim = f"flip needs {PAPER_TAU_GAIN:.2%} fewer steps than Gibbs for the same variance (MNIST, 784×500)"
    details, signs = [], []
    for method in result.methods:
        gain, gain_stderr = result.gain(method)
        n = gain.numel()
        mean = float(gain.mean())
        # Across models when there are several; else the single model's delta-method error.
        spread = float(gain.std() / math.sqrt(n)) if n > 1 else float(gain_stderr[0])
        signs.append(1 if mean > 2 * spread else -1 if mean < -2 * spread else 0)
        details.append(
            f"{method}: mean gain 1 − τ_flip/τ_Gibbs = {mean:+.1%} ± {spread:.1%} over {n} model(s)"
        )
    sizes = "×".join(str(size) for size in result.layer_sizes)
    where = f"on {sizes} RBMs ({'; '.join(details)})"
    if all(sign > 0 for sign in signs):
        verdict = "confirmed"
        text = f"Flip mixed faster than Gibbs {where}; the paper reports {PAPER_TAU_GAIN:.2%} on 784×500."
    elif all(sign < 0 for sign in signs):
        verdict, text = "contradicted", f"Gibbs mixed faster than flip {where}."
    elif 1 in signs and -1 in signs:
        verdict, text = "inconclusive", f"The two τ estimators point in opposite directions {where}."
    elif any(signs):
        verdict = "inconclusive"
        text = f"Only one τ estimator shows a difference beyond two standard errors {where}."
    else:
        verdict, text = "inconclusive", f"No difference beyond two standard errors {where}."
    flip, gibbs = result.operators.index("flip"), result.operators.index("gibbs")
    lower = int((result.tau[:, flip] < result.tau[:, gibbs]).sum())
    text += f" Flip's τ was the lower in {lower} of {result.tau[:, 0].numel()} (model, estimator) pairs."
    if not bool(result.reliable.all()):
        text += " Some chains were shorter than 50 τ, so those τ are rough."
    return Finding("mixing", claim, verdict, text, tuple(details))


def _modes_finding(result: ModeHoppingResult) -> Finding:
    """More changes: Poisson z-score of the all-ones chains' counts above 2. Earlier: Mann-Whitney
    U on steps to the first change (censored chains tied beyond the window), p < 0.05."""
    claim = "flip produces more and earlier class changes on Artificial Modes"
    flip, gibbs = result.operators.index("flip"), result.operators.index("gibbs")
    changed = result.changed_fraction()
    medians = result.median_first_change()
    favours, against, details = [], [], []
    for index, p_mut in enumerate(result.p_mut):
        counts = result.class_changes[index].sum(0)
        n_flip, n_gibbs = int(counts[flip]), int(counts[gibbs])
        count_z = (n_flip - n_gibbs) / math.sqrt(n_flip + n_gibbs) if n_flip + n_gibbs else 0.0
        steps = torch.where(
            result.first_change[index] >= 0, result.first_change[index], result.start_steps + 1
        )
        flip_steps, gibbs_steps = steps[:, flip].flatten().numpy(), steps[:, gibbs].flatten().numpy()
        if (flip_steps == flip_steps[0]).all() and (gibbs_steps == flip_steps[0]).all():
            p_value = 1.0  # every chain identical: nothing to rank
        else:
            p_value = float(stats.mannwhitneyu(flip_steps, gibbs_steps, alternative="two-sided").pvalue)
        sooner = float(medians[index, flip]) < float(medians[index, gibbs]) or (
            float(medians[index, flip]) == float(medians[index, gibbs])
            and flip_steps.mean() < gibbs_steps.mean()
        )
        favours.append(count_z > 2 and p_value < 0.05 and sooner)
        against.append(count_z < -2 or (p_value < 0.05 and not sooner))
        details.append(
            f"p_mut {p_mut:g}: class changes in {result.long_steps} steps from all-ones flip {n_flip} vs Gibbs "
            f"{n_gibbs} (z = {count_z:+.1f}); chains from training examples that changed within "
            f"{result.start_steps} steps flip {float(changed[index, flip]):.1%} vs Gibbs "
            f"{float(changed[index, gibbs]):.1%}, median first change flip {float(medians[index, flip]):g} vs "
            f"Gibbs {float(medians[index, gibbs]):g} steps (Mann-Whitney p = {p_value:.3g})"
        )
    if all(favours):
        verdict, text = "confirmed", "Flip changed class more often and sooner than Gibbs"
    elif all(against):
        verdict, text = "contradicted", "Flip changed class less often or later than Gibbs"
    else:
        verdict, text = (
            "inconclusive",
            "Flip did not change class both more often and sooner in every setting",
        )
    return Finding("modes", claim, verdict, f"{text} ({'; '.join(details)}).", tuple(details))


def findings(
    *,
    slem: SlemStudyResult | None = None,
    learning: LearningResult | None = None,
    mixing: MixingResult | None = None,
    modes: ModeHoppingResult | None = None,
) -> tuple[Finding, ...]:
    """Plain-language verdicts on the paper's claims, one per part that ran."""
    found = []
    if slem is not None:
        found.append(_slem_finding(slem))
    if learning is not None:
        found.append(_learning_finding(learning))
    if mixing is not None:
        found.append(_mixing_finding(mixing))
    if modes is not None:
        found.append(_modes_finding(modes))
    return tuple(found)
