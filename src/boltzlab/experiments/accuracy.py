"""Accuracy of the log Z estimators at matched cost, on RBMs whose exact log Z is known.

Three benchmarks from the source papers, on 784×20 RBMs trained on binarised MNIST by CD-1,
CD-25 and PCD (20 hidden units, so ``log Z`` is enumerable: 2^20 hidden states):

* :func:`run_rts_vs_ais` — Carlson, Stinson, Pakman & Paninski (2016, ICML), Fig. 3 and
  ALGORITHMS.md §4.3 "Headline figures": bias and RMSE of RTS (K = 100 temperatures), AIS and
  RAISE against the number of Gibbs sweeps per chain, 100 chains each, AIS and RAISE given as
  many temperatures as RTS's total sweeps. The paper's claim: RTS at 1,000 sweeps beats AIS at
  10,000. The paper's "truth" was a long-run average; ours is the exact value.
* :func:`run_estimators_vs_k` — the same paper's Fig. 4: RMSE against the number of
  temperatures K of RTS, TS, TI, TI-RB and MBAR, all computed from the same tempered samples
  (one sampler run per K and repeat, a fixed budget of sweeps). The paper bootstrapped one
  3-million-sample run; we repeat independent runs.
* :func:`run_varopt` — Kiwaki (2015), Table 1 (ALGORITHMS.md §5.4, ALGORITHMS-OPEN items 5
  and 12): log Ẑ and Kish's ESS of AIS with the LINEAR, SM08 (Salakhutdinov & Murray 2008),
  GMS13 (Grosse et al. 2013), VAROPT and decelerated VAROPT (δ = 0.003, 0.006, 0.009)
  schedules for K from 10^3 up, per training algorithm. The paper's claim: VAROPT
  (decelerated, δ = .009) has the highest ESS at the largest K. Its M was lost (ESS values up
  to 873 suggest 1,000); the scaled default uses M = 100.

**Cost** is counted in single-chain sweeps (the estimators' ``cost_sweeps``): AIS with K
temperatures makes ``K − 1`` sweeps per chain, RAISE ``K`` per reverse chain, RTS its initial
iterations plus the long run (:func:`tempered_budget` splits a total between them).
Independent AIS (or RAISE) repetitions are run as one batch of chains split into groups of
``n_chains``: each group is exactly an AIS run with ``n_chains`` chains, and the batch only
shares matrix products. RTS repetitions are separate runs, since its initial iterations pool
all chains to adapt ``Ẑ``.

**Models.** :func:`train_benchmark_model` starts the visible biases at the log-odds of the
smoothed data marginals (Hinton's recipe): from zero biases, a few thousand updates leave the
all-hidden-off state holding nearly all the mass of a 784×20 RBM — a noise mode no tempered
chain started near the data finds — and AIS and RTS then miss log Z by tens of nats (as
measured while writing this module); that is a property of under-trained models, not of the
estimators being compared.

Everything here returns frozen dataclasses and neither prints nor writes; ``boltzlab
reproduce rts-vs-ais | estimators-vs-k | varopt`` (:mod:`boltzlab.cli.reproduce_estimators`)
caches the trained models and writes the tables, plots and ``summary.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.adaptive_schedules import decelerated, gms13, schedule_from_g, varopt
from boltzlab.estimators.ais import ais
from boltzlab.estimators.exact import exact_log_z
from boltzlab.estimators.mbar import mbar_from_samples
from boltzlab.estimators.raise_ import raise_log_likelihood
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.rts import rts_from_samples
from boltzlab.estimators.schedules import get_schedule
from boltzlab.estimators.tempered_samples import collect_tempered_samples
from boltzlab.estimators.ti import ti_from_samples, ti_rb_from_samples
from boltzlab.experiments.flip_the_state import Finding
from boltzlab.models.rbm import RBM
from boltzlab.numerics import log_ess, log_mean_exp, log_mean_exp_stderr
from boltzlab.training import train
from boltzlab.validation import as_binary_tensor, check_positive_int

__all__ = [
    "ANNEALING_METHODS",
    "MODEL_SPECS",
    "TEMPERED_METHODS",
    "BenchmarkModel",
    "EstimateTable",
    "EstimatorsVsKConfig",
    "EstimatorsVsKResult",
    "ModelSpec",
    "RTSvsAISConfig",
    "RTSvsAISResult",
    "TrainingConfig",
    "VaroptConfig",
    "VaroptResult",
    "benchmark_model_from",
    "estimators_vs_k_finding",
    "matched_options",
    "rts_vs_ais_finding",
    "run_estimators_vs_k",
    "run_rts_vs_ais",
    "run_varopt",
    "schedule_label",
    "tempered_budget",
    "train_benchmark_model",
    "training_metadata",
    "varopt_finding",
]

Progress = Callable[[int, int, str], None]

ANNEALING_METHODS = ("ais", "raise")
TEMPERED_METHODS = ("rts", "ts", "ti", "ti-rb", "mbar")
# A difference counts as real when it exceeds this many standard errors (about 95 %).
Z_DECISIVE = 2.0
# Metadata key under which a cached benchmark model records how it was made.
METADATA_KEY = "accuracy_benchmark"


def _quiet(done: int, total: int, label: str) -> None:
    """The default progress callback: report nothing."""


def _seed(seed: int, *parts: int) -> int:
    """A distinct, reproducible seed for each (benchmark part, setting, repeat)."""
    value = int(seed)
    for part in parts:
        value = value * 1_000_003 + int(part) + 1
    return value % (2**62)


# ------------------------------------------------------------------------------------ models
@dataclass(frozen=True)
class ModelSpec:
    """How one benchmark RBM is trained: ``algorithm`` ("cd" or "pcd") with ``k`` sweeps."""

    name: str
    label: str
    algorithm: str
    k: int


MODEL_SPECS: dict[str, ModelSpec] = {
    "cd1": ModelSpec("cd1", "CD-1", "cd", 1),
    "cd25": ModelSpec("cd25", "CD-25", "cd", 25),
    "pcd": ModelSpec("pcd", "PCD", "pcd", 1),
}


@dataclass(frozen=True)
class TrainingConfig:
    """Training of the benchmark RBMs (SGD at a fixed learning rate, as in Kiwaki 2015).

    Attributes
    ----------
    n_hidden : int
        20 in the papers' "exact log Z" models.
    n_updates : int
        Parameter updates (the paper: 250,000; scaled: 3,000, five epochs of MNIST).
    learning_rate : float
    batch_size : int
    n_chains : int
        Persistent chains of PCD.
    """

    n_hidden: int
    n_updates: int
    learning_rate: float = 0.05
    batch_size: int = 100
    n_chains: int = 100

    @classmethod
    def scaled(cls) -> TrainingConfig:
        """A few minutes on one core for all three models (CD-25 dominates: 100 s on a busy 2-core machine)."""
        return cls(n_hidden=20, n_updates=3000)

    @classmethod
    def full(cls) -> TrainingConfig:
        """Ten times longer (the paper's 250,000 updates are hours here)."""
        return cls(n_hidden=20, n_updates=30_000)

    @classmethod
    def tiny(cls) -> TrainingConfig:
        """Seconds on toy data; checks the pipeline only."""
        return cls(n_hidden=4, n_updates=30, learning_rate=0.1, batch_size=10, n_chains=10)


@dataclass(frozen=True)
class BenchmarkModel:
    """A trained benchmark RBM with its exact ``log Z`` (nats) and what it cost."""

    name: str
    label: str
    model: RBM
    exact_log_z: float
    train_seconds: float
    exact_seconds: float


def training_metadata(name: str, training: TrainingConfig, *, dataset: str, seed: int) -> dict[str, Any]:
    """What identifies a cached benchmark model: spec, training settings, dataset and seed."""
    spec = MODEL_SPECS[name]
    return {
        "model": name,
        "algorithm": spec.algorithm,
        "k": spec.k,
        **asdict(training),
        "dataset": dataset,
        "seed": seed,
    }


def train_benchmark_model(
    name: str, training: TrainingConfig, data: Tensor, *, seed: int = 0, dataset: str = "data"
) -> BenchmarkModel:
    """Train one benchmark RBM (see :data:`MODEL_SPECS`) and enumerate its exact ``log Z``.

    The visible biases start at the log-odds of the smoothed data marginals (module
    docstring); the base-rate base is fitted by the trainer. ``model.metadata`` records
    :func:`training_metadata` plus the exact ``log Z`` and the times, so that a saved copy can
    be recognised by :func:`benchmark_model_from`.

    Parameters
    ----------
    name : {"cd1", "cd25", "pcd"}
    training : TrainingConfig
    data : Tensor, shape (n_examples, n_visible), values 0/1
    seed : int, default 0
    dataset : str
        Name recorded in the metadata.
    """
    if name not in MODEL_SPECS:
        raise ValidationError(f"unknown benchmark model {name!r}; choose one of {', '.join(MODEL_SPECS)}")
    spec = MODEL_SPECS[name]
    data = as_binary_tensor(data, "data", dtype=torch.float32)
    marginals = 0.95 * data.to(torch.float64).mean(0) + 0.025  # as set_base_rate's smoothing
    model = RBM(
        n_visible=data.shape[1],
        n_hidden=training.n_hidden,
        visible_bias=torch.logit(marginals).to(torch.float32),
        generator=seed,
    )
    started = time.perf_counter()
    train(
        model,
        data,
        algorithm=spec.algorithm,
        k=spec.k,
        n_chains=training.n_chains,
        batch_size=min(training.batch_size, data.shape[0]),
        n_updates=training.n_updates,
        learning_rate=training.learning_rate,
        generator=seed,
    )
    train_seconds = time.perf_counter() - started
    started = time.perf_counter()
    exact = exact_log_z(model)
    exact_seconds = time.perf_counter() - started
    model.metadata[METADATA_KEY] = {
        **training_metadata(name, training, dataset=dataset, seed=seed),
        "exact_log_z": exact,
        "train_seconds": train_seconds,
        "exact_seconds": exact_seconds,
    }
    return BenchmarkModel(name, spec.label, model, exact, train_seconds, exact_seconds)


def benchmark_model_from(
    model: Any, name: str, training: TrainingConfig, *, dataset: str, seed: int
) -> BenchmarkModel | None:
    """A loaded model as a :class:`BenchmarkModel` if its metadata says it was made this way.

    Returns ``None`` when ``model`` is not an RBM of the expected sizes trained with exactly
    these settings (then it must be trained again).
    """
    recorded = getattr(model, "metadata", {}).get(METADATA_KEY)
    if not isinstance(model, RBM) or not isinstance(recorded, dict):
        return None
    expected = training_metadata(name, training, dataset=dataset, seed=seed)
    if any(recorded.get(key) != value for key, value in expected.items()):
        return None
    if model.n_hidden != training.n_hidden or not isinstance(recorded.get("exact_log_z"), float):
        return None
    return BenchmarkModel(
        name,
        MODEL_SPECS[name].label,
        model,
        float(recorded["exact_log_z"]),
        float(recorded.get("train_seconds", math.nan)),
        float(recorded.get("exact_seconds", math.nan)),
    )


# ------------------------------------------------------------------------- matched budgets
def tempered_budget(
    total_sweeps: int, *, n_initial_iterations: int = 10, initial_sweeps: int = 50
) -> dict[str, int]:
    """Options of the tempered-sampling estimators that spend at most ``total_sweeps`` per chain.

    The paper's initial phase (``n_initial_iterations`` of ``initial_sweeps``, 10 × 50) is
    shrunk to at most half of the total, and the long run gets the rest. The initial phase may
    stop early, so the cost actually spent (the estimate's ``cost_sweeps``) can be lower.

    Parameters
    ----------
    total_sweeps : int
        Sweeps per chain, at least ``2·n_initial_iterations``.
    """
    total_sweeps = check_positive_int(total_sweeps, "total_sweeps")
    if total_sweeps < 2 * n_initial_iterations:
        raise ValidationError(
            f"a tempered estimator needs at least {2 * n_initial_iterations} sweeps per chain "
            f"({n_initial_iterations} initial iterations and a long run), got {total_sweeps}"
        )
    per_iteration = min(initial_sweeps, total_sweeps // (2 * n_initial_iterations))
    return {
        "n_initial_iterations": n_initial_iterations,
        "initial_sweeps": per_iteration,
        "n_sweeps": total_sweeps - n_initial_iterations * per_iteration,
    }


def matched_options(method: str, sweeps_per_chain: int) -> dict[str, int]:
    """Estimator options that cost ``sweeps_per_chain`` Gibbs sweeps per chain (the papers' x-axis).

    AIS and RAISE get that many temperatures (RTS paper, Fig. 3: "as many temperatures as RTS's
    total sweeps"); the tempered-sampling methods get :func:`tempered_budget`; ``"exact"``
    takes none.
    """
    method = method.lower()
    if method == "exact":
        return {}
    if method in ANNEALING_METHODS:
        return {"n_temperatures": check_positive_int(sweeps_per_chain, "sweeps_per_chain")}
    if method in TEMPERED_METHODS:
        return tempered_budget(sweeps_per_chain)
    raise ValidationError(
        f"no matched budget is defined for method {method!r}; it is defined for exact, "
        f"{', '.join(ANNEALING_METHODS + TEMPERED_METHODS)}"
    )


# ---------------------------------------------------------------------- repeated estimates
@dataclass(frozen=True)
class EstimateTable:
    """Repeated estimates of one ``log Z`` by several methods at several settings.

    Attributes
    ----------
    methods : tuple of str
    settings : tuple of int
        Sweeps per chain (RTS vs AIS) or numbers of temperatures (estimators vs K).
    exact_log_z : float
    log_z, stderr : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Estimates and their own reported standard errors, nats.
    cost_sweeps : Tensor, shape (n_methods, n_settings, n_repeats), float64
        Single-chain sweeps each estimate spent.
    seconds : Tensor, shape (n_methods, n_settings), float64
        Mean wall-clock seconds per estimate.
    """

    methods: tuple[str, ...]
    settings: tuple[int, ...]
    exact_log_z: float
    log_z: Tensor
    stderr: Tensor
    cost_sweeps: Tensor
    seconds: Tensor

    @property
    def n_repeats(self) -> int:
        return int(self.log_z.shape[2])

    @property
    def errors(self) -> Tensor:
        """``log Ẑ − log Z``, shape (n_methods, n_settings, n_repeats)."""
        return self.log_z - self.exact_log_z

    def bias(self) -> Tensor:
        """Mean error, shape (n_methods, n_settings)."""
        return self.errors.mean(2)

    def bias_stderr(self) -> Tensor:
        """Standard error of :meth:`bias` (NaN with one repeat)."""
        if self.n_repeats < 2:
            return torch.full(self.log_z.shape[:2], math.nan, dtype=torch.float64)
        return self.errors.std(2) / math.sqrt(self.n_repeats)

    def rmse(self) -> Tensor:
        """Root mean squared error against the exact value, shape (n_methods, n_settings)."""
        return self.errors.square().mean(2).sqrt()

    def rmse_stderr(self) -> Tensor:
        """Delta-method standard error of :meth:`rmse`: ``sd(e²)/√n / (2·RMSE)`` (NaN with one repeat)."""
        if self.n_repeats < 2:
            return torch.full(self.log_z.shape[:2], math.nan, dtype=torch.float64)
        squared = self.errors.square()
        return squared.std(2) / math.sqrt(self.n_repeats) / (2.0 * self.rmse().clamp_min(1e-300))

    def mean_stderr(self) -> Tensor:
        """Mean of the estimators' own standard errors, shape (n_methods, n_settings)."""
        return self.stderr.mean(2)

    def coverage(self) -> Tensor:
        """Fraction of estimates within 2 of their own standard errors of the exact value."""
        return (self.errors.abs() <= 2.0 * self.stderr).to(torch.float64).mean(2)

    def mean_cost(self) -> Tensor:
        """Mean single-chain sweeps per estimate, shape (n_methods, n_settings)."""
        return self.cost_sweeps.mean(2)

    def index(self, method: str) -> int:
        return self.methods.index(method)


def _empty(n_methods: int, n_settings: int, n_repeats: int) -> dict[str, Tensor]:
    shape = (n_methods, n_settings, n_repeats)
    return {
        "log_z": torch.full(shape, math.nan, dtype=torch.float64),
        "stderr": torch.full(shape, math.nan, dtype=torch.float64),
        "cost_sweeps": torch.zeros(shape, dtype=torch.float64),
        "seconds": torch.zeros(shape[:2], dtype=torch.float64),
    }


def _grouped_log_z(log_weights: Tensor, n_groups: int) -> tuple[Tensor, Tensor, Tensor]:
    """``log mean exp``, its delta-method error and Kish's ESS of each of ``n_groups`` equal groups."""
    grouped = log_weights.reshape(n_groups, -1)
    stderr = torch.tensor([log_mean_exp_stderr(row) for row in grouped], dtype=torch.float64)
    return log_mean_exp(grouped, dim=1), stderr, log_ess(grouped.t()).exp()


# ------------------------------------------------------------------------------ RTS vs AIS
@dataclass(frozen=True)
class RTSvsAISConfig:
    """Sizes of the RTS-vs-AIS/RAISE benchmark (RTS paper, Fig. 3).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    model : str
        Which benchmark RBM (:data:`MODEL_SPECS`); the paper's was trained with CD-25.
    budgets : tuple of int
        Gibbs sweeps per chain; AIS and RAISE get that many temperatures.
    n_chains : int
        Chains of RTS and AIS, and reverse chains of RAISE in all.
    rts_levels : int
        RTS's K (linear ladder).
    raise_examples, raise_chains : int
        RAISE runs ``raise_chains`` reverse chains from each of ``raise_examples`` held-out
        examples (a fresh random subset per repeat); their product is its chain count.
    n_repeats : int
        Independent estimates per method and budget.
    schedule : str
        Schedule of AIS and RAISE (the library's default, the SM08 shape scaled to K).
    claim_rts_sweeps, claim_ais_sweeps : int
        The paper's claim compares RTS at the first with AIS at the second (1,000 vs 10,000).
    """

    label: str
    training: TrainingConfig
    model: str
    budgets: tuple[int, ...]
    n_chains: int
    rts_levels: int
    raise_examples: int
    raise_chains: int
    n_repeats: int
    schedule: str = "sm08"
    claim_rts_sweeps: int = 1000
    claim_ais_sweeps: int = 10_000

    @classmethod
    def scaled(cls) -> RTSvsAISConfig:
        return cls(
            label="scaled",
            training=TrainingConfig.scaled(),
            model="cd25",
            budgets=(300, 1000, 3000, 10_000),
            n_chains=100,
            rts_levels=100,
            raise_examples=10,
            raise_chains=10,
            # Four repeats keep the run under 8 minutes on a shared 2-core machine (RTS at
            # 10,000 sweeps dominates: about 5 ms per sweep of 100 chains × 100 levels).
            n_repeats=4,
        )

    @classmethod
    def full(cls) -> RTSvsAISConfig:
        return cls(
            label="full",
            training=TrainingConfig.full(),
            model="cd25",
            budgets=(300, 1000, 3000, 10_000, 30_000),
            n_chains=100,
            rts_levels=100,
            raise_examples=10,
            raise_chains=10,
            n_repeats=20,
        )

    @classmethod
    def tiny(cls) -> RTSvsAISConfig:
        return cls(
            label="tiny",
            training=TrainingConfig.tiny(),
            model="cd1",
            budgets=(40, 100),
            n_chains=8,
            rts_levels=6,
            raise_examples=2,
            raise_chains=4,
            n_repeats=3,
            claim_rts_sweeps=40,
            claim_ais_sweeps=100,
        )


@dataclass(frozen=True)
class RTSvsAISResult:
    """What :func:`run_rts_vs_ais` measured: methods ``("rts", "ais", "raise")`` × budgets × repeats."""

    config: RTSvsAISConfig
    model_name: str
    model_label: str
    table: EstimateTable


def run_rts_vs_ais(
    config: RTSvsAISConfig,
    benchmark: BenchmarkModel,
    held_out: Tensor,
    *,
    seed: int = 0,
    progress: Progress = _quiet,
) -> RTSvsAISResult:
    """RTS, AIS and RAISE at each budget of sweeps per chain, ``n_repeats`` times each.

    Parameters
    ----------
    config : RTSvsAISConfig
    benchmark : BenchmarkModel
    held_out : Tensor, shape (n_examples, n_visible), values 0/1
        Test examples for RAISE (at least ``raise_examples`` of them).
    seed : int, default 0
    progress : callable ``(done, total, label)``, optional
    """
    model = benchmark.model
    held_out = as_binary_tensor(held_out, "held_out", n_units=model.n_visible, dtype=model.dtype)
    if held_out.shape[0] < config.raise_examples:
        raise ValidationError(
            f"RAISE needs {config.raise_examples} held-out examples per repeat, got {held_out.shape[0]}"
        )
    methods = ("rts", "ais", "raise")
    n_budgets, n_repeats = len(config.budgets), config.n_repeats
    out = _empty(len(methods), n_budgets, n_repeats)
    total, done = n_budgets * (n_repeats + 2), 0
    for b, budget in enumerate(config.budgets):
        started = time.perf_counter()
        estimate = ais(
            model,
            n_chains=config.n_chains * n_repeats,
            n_temperatures=budget,
            schedule=config.schedule,
            generator=_seed(seed, 1, b),
            record_ess=False,
        )
        log_z, stderr, _ = _grouped_log_z(estimate.info.log_weights, n_repeats)
        out["log_z"][1, b], out["stderr"][1, b] = log_z, stderr
        out["cost_sweeps"][1, b] = config.n_chains * (budget - 1)
        out["seconds"][1, b] = (time.perf_counter() - started) / n_repeats
        done += 1
        progress(done, total, f"AIS K={budget}")

        started = time.perf_counter()
        generator = torch.Generator().manual_seed(_seed(seed, 2, b))
        picks = torch.cat(
            [
                torch.randperm(held_out.shape[0], generator=generator)[: config.raise_examples]
                for _ in range(n_repeats)
            ]
        )
        result = raise_log_likelihood(
            model,
            held_out[picks],
            n_chains=config.raise_chains,
            n_temperatures=budget,
            schedule=config.schedule,
            generator=_seed(seed, 3, b),
        )
        per_example = result.log_z_per_example.reshape(n_repeats, config.raise_examples)
        out["log_z"][2, b] = per_example.mean(1)
        out["stderr"][2, b] = (
            per_example.std(1) / math.sqrt(config.raise_examples)
            if config.raise_examples > 1
            else result.stderrs.reshape(n_repeats)
        )
        out["cost_sweeps"][2, b] = config.raise_examples * config.raise_chains * budget
        out["seconds"][2, b] = (time.perf_counter() - started) / n_repeats
        done += 1
        progress(done, total, f"RAISE K={budget}")

        started = time.perf_counter()
        for r in range(n_repeats):
            estimate = estimate_log_z(
                model,
                method="rts",
                n_chains=config.n_chains,
                n_temperatures=config.rts_levels,
                generator=_seed(seed, 4, b, r),
                **tempered_budget(budget),
            )
            out["log_z"][0, b, r], out["stderr"][0, b, r] = estimate.log_z, estimate.stderr
            out["cost_sweeps"][0, b, r] = estimate.cost_sweeps
            done += 1
            progress(done, total, f"RTS {budget} sweeps")
        out["seconds"][0, b] = (time.perf_counter() - started) / n_repeats
    table = EstimateTable(methods, tuple(config.budgets), benchmark.exact_log_z, **out)
    return RTSvsAISResult(config, benchmark.name, benchmark.label, table)


def _closest(settings: Sequence[int], target: int) -> int:
    """Index of the setting closest to ``target`` on a log scale."""
    return min(range(len(settings)), key=lambda i: abs(math.log(settings[i] / target)))


def _compare(low: float, low_se: float, high: float, high_se: float) -> str:
    """``"smaller"``, ``"larger"`` or ``"tie"``: ``low`` against ``high``, decisive beyond 2 s.e."""
    spread = math.hypot(low_se, high_se)
    if not math.isfinite(spread):
        return "tie"
    if low + Z_DECISIVE * spread < high:
        return "smaller"
    if low - Z_DECISIVE * spread > high:
        return "larger"
    return "tie"


def rts_vs_ais_finding(result: RTSvsAISResult) -> Finding:
    """Does RTS at ~1,000 sweeps per chain beat AIS at ~10,000? Keyed off the RMSEs and their errors.

    ``"confirmed"`` when RTS's RMSE is below AIS's by more than 2 standard errors of the
    difference, ``"contradicted"`` when above by more, ``"inconclusive"`` otherwise (always
    with a single repeat).
    """
    table, config = result.table, result.config
    rmse, rmse_se, bias = table.rmse(), table.rmse_stderr(), table.bias()
    rts, ais_row = table.index("rts"), table.index("ais")
    b_rts = _closest(table.settings, config.claim_rts_sweeps)
    b_ais = _closest(table.settings, config.claim_ais_sweeps)
    r1, s1, r2, s2 = (
        float(rmse[rts, b_rts]),
        float(rmse_se[rts, b_rts]),
        float(rmse[ais_row, b_ais]),
        float(rmse_se[ais_row, b_ais]),
    )
    outcome = _compare(r1, s1, r2, s2)
    verdict = {"smaller": "confirmed", "larger": "contradicted", "tie": "inconclusive"}[outcome]
    rts_sweeps = float(table.mean_cost()[rts, b_rts]) / config.n_chains
    words = {
        "confirmed": "Yes: RTS's error is smaller by more than two standard errors.",
        "contradicted": "No: AIS's error is smaller by more than two standard errors.",
        "inconclusive": "Not decided: the two RMSEs differ by less than two standard errors of the difference"
        + (" (one repeat: no error bars)." if table.n_repeats < 2 else "."),
    }[verdict]
    text = (
        f"RTS with {table.settings[b_rts]:,} sweeps per chain (K = {config.rts_levels}; "
        f"{rts_sweeps:,.0f} spent on average) has RMSE {r1:.3f} ± {s1:.3f} nats (bias "
        f"{float(bias[rts, b_rts]):+.3f}); AIS with {table.settings[b_ais]:,} temperatures has RMSE "
        f"{r2:.3f} ± {s2:.3f} (bias {float(bias[ais_row, b_ais]):+.3f}), over {table.n_repeats} repeats "
        f"against the exact log Z {table.exact_log_z:.3f}. {words}"
    )
    matching = [
        b
        for b in range(len(table.settings))
        if _compare(float(rmse[ais_row, b]), float(rmse_se[ais_row, b]), r1, s1) != "larger"
    ]
    if matching:
        text += (
            f" AIS first matches that RMSE (within 2 s.e.) at {table.settings[matching[0]]:,} temperatures "
            f"({table.settings[matching[0]] / table.settings[b_rts]:.3g}× RTS's sweeps)."
        )
    else:
        text += f" AIS does not match it at any budget up to {table.settings[-1]:,} temperatures."
    return Finding(
        part="rts-vs-ais",
        claim=f"RTS at {config.claim_rts_sweeps:,} sweeps beats AIS at {config.claim_ais_sweeps:,} (RMSE)",
        verdict=verdict,
        text=text,
    )


# -------------------------------------------------------------------------- estimators vs K
ESTIMATORS_FROM_SAMPLES: dict[str, Callable[[Any], Any]] = {
    "rts": lambda samples: rts_from_samples(samples),
    "ts": lambda samples: rts_from_samples(samples, statistic="counts"),
    "ti": ti_from_samples,
    "ti-rb": ti_rb_from_samples,
    "mbar": mbar_from_samples,
}


@dataclass(frozen=True)
class EstimatorsVsKConfig:
    """Sizes of the RMSE-vs-K benchmark (RTS paper, Fig. 4).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    model : str
    levels : tuple of int
        Numbers of temperatures K (linear ladders).
    n_chains, n_sweeps : int
        Chains and long-run sweeps of each sampler run (the fixed budget; the initial
        iterations, at most 10 × 50 sweeps, come on top).
    n_repeats : int
    max_log_densities : int
        MBAR's cap on kept ``N × K`` log-densities.
    """

    label: str
    training: TrainingConfig
    model: str
    levels: tuple[int, ...]
    n_chains: int
    n_sweeps: int
    n_repeats: int
    max_log_densities: int = 1_000_000

    @classmethod
    def scaled(cls) -> EstimatorsVsKConfig:
        return cls("scaled", TrainingConfig.scaled(), "cd25", (5, 10, 20, 50, 100, 200), 100, 1500, 4)

    @classmethod
    def full(cls) -> EstimatorsVsKConfig:
        return cls("full", TrainingConfig.full(), "cd25", (5, 10, 20, 50, 100, 200, 500), 100, 10_000, 20)

    @classmethod
    def tiny(cls) -> EstimatorsVsKConfig:
        return cls("tiny", TrainingConfig.tiny(), "cd1", (3, 6), 8, 60, 3, 20_000)


@dataclass(frozen=True)
class EstimatorsVsKResult:
    """What :func:`run_estimators_vs_k` measured.

    Attributes
    ----------
    config : EstimatorsVsKConfig
    model_name, model_label : str
    table : EstimateTable
        Methods ``("rts", "ts", "ti", "ti-rb", "mbar")`` × K × repeats; ``seconds`` is each
        method's analysis time only.
    sampling_seconds : Tensor, shape (n_levels,), float64
        Mean wall-clock seconds of one sampler run (shared by all five methods).
    stopped : Tensor, shape (n_levels,), float64
        Fraction of runs whose initial iterations met the stopping rule.
    """

    config: EstimatorsVsKConfig
    model_name: str
    model_label: str
    table: EstimateTable
    sampling_seconds: Tensor
    stopped: Tensor


def run_estimators_vs_k(
    config: EstimatorsVsKConfig, benchmark: BenchmarkModel, *, seed: int = 0, progress: Progress = _quiet
) -> EstimatorsVsKResult:
    """For each K and repeat: one tempered-sampler run, and all five estimates from its samples."""
    methods = tuple(ESTIMATORS_FROM_SAMPLES)
    n_levels, n_repeats = len(config.levels), config.n_repeats
    out = _empty(len(methods), n_levels, n_repeats)
    sampling = torch.zeros(n_levels, dtype=torch.float64)
    stopped = torch.zeros(n_levels, dtype=torch.float64)
    done = 0
    for k_index, n_temperatures in enumerate(config.levels):
        for r in range(n_repeats):
            started = time.perf_counter()
            samples = collect_tempered_samples(
                benchmark.model,
                n_chains=config.n_chains,
                n_temperatures=n_temperatures,
                n_sweeps=config.n_sweeps,
                record_derivatives=True,
                record_weighted_derivatives=True,
                record_log_densities=True,
                max_log_densities=config.max_log_densities,
                generator=_seed(seed, 5, k_index, r),
            )
            sampling[k_index] += (time.perf_counter() - started) / n_repeats
            stopped[k_index] += float(samples.stopped) / n_repeats
            for m, method in enumerate(methods):
                started = time.perf_counter()
                estimate = ESTIMATORS_FROM_SAMPLES[method](samples)
                out["seconds"][m, k_index] += (time.perf_counter() - started) / n_repeats
                out["log_z"][m, k_index, r], out["stderr"][m, k_index, r] = estimate.log_z, estimate.stderr
                out["cost_sweeps"][m, k_index, r] = estimate.cost_sweeps
            done += 1
            progress(done, n_levels * n_repeats, f"K={n_temperatures}")
    table = EstimateTable(methods, tuple(config.levels), benchmark.exact_log_z, **out)
    return EstimatorsVsKResult(config, benchmark.name, benchmark.label, table, sampling, stopped)


def estimators_vs_k_finding(result: EstimatorsVsKResult) -> Finding:
    """The paper's Fig. 4 reading: is RTS the most accurate (within 2 s.e.) at every K?

    ``"confirmed"`` when at every K no other method's RMSE is below RTS's by more than 2
    standard errors of the difference; ``"contradicted"`` when some method is decisively
    better at some K; TI's discretisation bias at the smallest K is reported alongside.
    """
    table = result.table
    rmse, rmse_se, bias, bias_se = table.rmse(), table.rmse_stderr(), table.bias(), table.bias_stderr()
    rts = table.index("rts")
    beaten = []
    for k_index, n_temperatures in enumerate(table.settings):
        for m, method in enumerate(table.methods):
            if (
                m != rts
                and _compare(
                    float(rmse[m, k_index]),
                    float(rmse_se[m, k_index]),
                    float(rmse[rts, k_index]),
                    float(rmse_se[rts, k_index]),
                )
                == "smaller"
            ):
                beaten.append(f"{method.upper()} at K = {n_temperatures}")
    verdict = "contradicted" if beaten else "confirmed"
    if table.n_repeats < 2:
        verdict = "inconclusive"
    best = [table.methods[int(rmse[:, k].argmin())].upper() for k in range(len(table.settings))]
    ti = table.index("ti")
    first = 0
    ti_bias, ti_se = float(bias[ti, first]), float(bias_se[ti, first])
    significant = math.isfinite(ti_se) and abs(ti_bias) > Z_DECISIVE * ti_se
    text = (
        "Lowest RMSE at each K: "
        + ", ".join(f"K = {k}: {name}" for k, name in zip(table.settings, best, strict=True))
        + ". "
        + (
            f"Decisively better than RTS (beyond 2 s.e.): {', '.join(beaten)}. "
            if beaten
            else "No method beats RTS by more than 2 standard errors at any K. "
        )
        + f"TI's bias at K = {table.settings[first]} is {ti_bias:+.3f} ± {ti_se:.3f} nats"
        + (" (discretisation error, beyond 2 s.e.)" if significant else " (not distinguishable from zero)")
        + f"; RTS's is {float(bias[rts, first]):+.3f} ± {float(bias_se[rts, first]):.3f}."
    )
    return Finding(
        part="estimators-vs-k",
        claim="RTS is at least as accurate as TS, TI, TI-RB and MBAR at every K; TI has discretisation error",
        verdict=verdict,
        text=text,
    )


# ----------------------------------------------------------------------------------- VAROPT
def schedule_label(name: str) -> str:
    """Display name of a schedule key: ``"varopt_0.009"`` → ``"VAROPT_.009"``, as in Kiwaki's tables."""
    if name.startswith("varopt_"):
        return "VAROPT_" + name.removeprefix("varopt_").removeprefix("0")
    return name.upper()


@dataclass(frozen=True)
class VaroptConfig:
    """Sizes of the schedule comparison (Kiwaki 2015, Table 1).

    Attributes
    ----------
    label : str
    training : TrainingConfig
    models : tuple of str
        Benchmark RBMs (:data:`MODEL_SPECS`), one table row each.
    temperatures : tuple of int
        K values; the verdict is read at the largest.
    n_chains : int
        M, chains per AIS run (the paper's was probably 1,000).
    n_repeats : int
        Independent AIS runs per schedule and K (same schedule: the pilot is run once per model).
    deltas : tuple of float
        Deceleration caps of the decelerated VAROPT schedules (need ``K·δ ≥ 1``).
    varopt_options, gms13_options : mapping
        Options of the adaptive builders (pilot sizes, knots).
    """

    label: str
    training: TrainingConfig
    models: tuple[str, ...]
    temperatures: tuple[int, ...]
    n_chains: int
    n_repeats: int
    deltas: tuple[float, ...] = (0.009, 0.006, 0.003)
    varopt_options: Mapping[str, Any] = field(default_factory=dict)
    gms13_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def schedules(self) -> tuple[str, ...]:
        """Schedule keys in table order: VAROPT, its decelerated versions, LINEAR, SM08, GMS13."""
        return ("varopt", *(f"varopt_{delta:g}" for delta in self.deltas), "linear", "sm08", "gms13")

    @classmethod
    def scaled(cls) -> VaroptConfig:
        # Two runs of M = 100 per point keep it under 8 minutes on a shared 2-core machine
        # (each AIS at K = 10,000 with 200 chains took about 13 s there).
        return cls("scaled", TrainingConfig.scaled(), ("pcd", "cd1", "cd25"), (1000, 10_000), 100, 2)

    @classmethod
    def full(cls) -> VaroptConfig:
        return cls(
            "full",
            TrainingConfig.full(),
            ("pcd", "cd1", "cd25"),
            (1000, 10_000, 100_000),
            1000,
            1,
            varopt_options={"pilot_chains": 1000, "pilot_temperatures": 1000},
        )

    @classmethod
    def tiny(cls) -> VaroptConfig:
        return cls(
            "tiny",
            TrainingConfig.tiny(),
            ("cd1", "pcd"),
            (40, 100),
            8,
            2,
            deltas=(0.09, 0.06),
            varopt_options={"pilot_chains": 8, "pilot_temperatures": 20},
            gms13_options={"n_knots": 3, "knot_chains": 4, "knot_sweeps": 20, "burn_in": 5},
        )


@dataclass(frozen=True)
class VaroptResult:
    """What :func:`run_varopt` measured.

    Attributes
    ----------
    config : VaroptConfig
    model_names, model_labels : tuple of str
    exact_log_z : Tensor, shape (n_models,), float64
    schedules : tuple of str
        Schedule keys (see :func:`schedule_label`).
    log_z, stderr, ess : Tensor, shape (n_models, n_schedules, n_temperatures, n_repeats), float64
        AIS estimates, their standard errors, and Kish's ESS ``(Σw)²/Σw²`` of the final
        weights of each run of ``n_chains`` chains.
    seconds : Tensor, shape (n_models, n_schedules, n_temperatures), float64
        Mean wall-clock seconds per AIS run.
    pilot_sweeps : Tensor, shape (n_models, 2), float64
        Sweeps spent measuring the model for VAROPT (column 0) and GMS13 (column 1).
    betas : tuple of tuple of Tensor
        ``betas[model][schedule]``: the schedule at the smallest K, shape (K + 1,).
    """

    config: VaroptConfig
    model_names: tuple[str, ...]
    model_labels: tuple[str, ...]
    exact_log_z: Tensor
    schedules: tuple[str, ...]
    log_z: Tensor
    stderr: Tensor
    ess: Tensor
    seconds: Tensor
    pilot_sweeps: Tensor
    betas: tuple[tuple[Tensor, ...], ...]

    def mean_ess(self) -> Tensor:
        """Mean ESS over repeats, shape (n_models, n_schedules, n_temperatures)."""
        return self.ess.mean(3)

    def ess_stderr(self) -> Tensor:
        """Standard error of :meth:`mean_ess` (NaN with one repeat)."""
        n = self.ess.shape[3]
        if n < 2:
            return torch.full(self.ess.shape[:3], math.nan, dtype=torch.float64)
        return self.ess.std(3) / math.sqrt(n)

    def mean_error(self) -> Tensor:
        """Mean ``log Ẑ − log Z`` over repeats, shape (n_models, n_schedules, n_temperatures)."""
        return (self.log_z - self.exact_log_z[:, None, None, None]).mean(3)


def _schedules_at(
    config: VaroptConfig, n_temperatures: int, varopt_info: Any, gms13_info: Any
) -> dict[str, Tensor]:
    """Every schedule of the comparison at ``K = n_temperatures``."""
    optimal = schedule_from_g(varopt_info.curve_grid, varopt_info.g_curve, n_temperatures)
    betas = {"varopt": optimal}
    for delta in config.deltas:
        betas[f"varopt_{delta:g}"] = decelerated(optimal, delta)
    betas["linear"] = get_schedule("linear", n_temperatures)
    betas["sm08"] = get_schedule("sm08", n_temperatures)
    betas["gms13"] = schedule_from_g(gms13_info.curve_grid, gms13_info.g_curve, n_temperatures)
    return betas


def run_varopt(
    config: VaroptConfig, benchmarks: Sequence[BenchmarkModel], *, seed: int = 0, progress: Progress = _quiet
) -> VaroptResult:
    """AIS with every schedule at every K on every model, ``n_repeats`` runs of ``n_chains`` each.

    The VAROPT pilot and the GMS13 knot runs are made once per model at the largest K; their
    measured g curves give the schedules at every K (:func:`schedule_from_g`).
    """
    largest = max(config.temperatures)
    for delta in config.deltas:
        if min(config.temperatures) * delta < 1.0:
            raise ValidationError(
                f"deceleration delta={delta} needs K*delta >= 1, but the smallest K is {min(config.temperatures)}"
            )
    schedules = config.schedules
    shape = (len(benchmarks), len(schedules), len(config.temperatures), config.n_repeats)
    log_z = torch.full(shape, math.nan, dtype=torch.float64)
    stderr, ess = log_z.clone(), log_z.clone()
    seconds = torch.zeros(shape[:3], dtype=torch.float64)
    pilot = torch.zeros(len(benchmarks), 2, dtype=torch.float64)
    plotted: list[tuple[Tensor, ...]] = []
    total, done = len(benchmarks) * len(schedules) * len(config.temperatures), 0
    for m, benchmark in enumerate(benchmarks):
        varopt_info = varopt(benchmark.model, largest, generator=_seed(seed, 6, m), **config.varopt_options)
        gms13_info = gms13(benchmark.model, largest, generator=_seed(seed, 7, m), **config.gms13_options)
        pilot[m] = torch.tensor([varopt_info.cost_sweeps, gms13_info.cost_sweeps], dtype=torch.float64)
        for k_index, n_temperatures in enumerate(config.temperatures):
            betas = _schedules_at(config, n_temperatures, varopt_info, gms13_info)
            if k_index == 0:
                plotted.append(tuple(betas[name] for name in schedules))
            for s, name in enumerate(schedules):
                started = time.perf_counter()
                estimate = ais(
                    benchmark.model,
                    n_chains=config.n_chains * config.n_repeats,
                    schedule=betas[name],
                    generator=_seed(seed, 8, m, s, k_index),
                    record_ess=False,
                )
                grouped = _grouped_log_z(estimate.info.log_weights, config.n_repeats)
                log_z[m, s, k_index], stderr[m, s, k_index], ess[m, s, k_index] = grouped
                seconds[m, s, k_index] = (time.perf_counter() - started) / config.n_repeats
                done += 1
                progress(done, total, f"{benchmark.label} {schedule_label(name)} K={n_temperatures}")
    return VaroptResult(
        config=config,
        model_names=tuple(b.name for b in benchmarks),
        model_labels=tuple(b.label for b in benchmarks),
        exact_log_z=torch.tensor([b.exact_log_z for b in benchmarks], dtype=torch.float64),
        schedules=schedules,
        log_z=log_z,
        stderr=stderr,
        ess=ess,
        seconds=seconds,
        pilot_sweeps=pilot,
        betas=tuple(plotted),
    )


def varopt_finding(result: VaroptResult) -> Finding:
    """Does a VAROPT schedule (plain or decelerated) have the highest ESS at the largest K?

    Per model: the best VAROPT-family mean ESS against the best of LINEAR, SM08 and GMS13;
    ``"confirmed"`` when higher by more than 2 standard errors, ``"contradicted"`` when lower
    by more, else ``"inconclusive"`` (always with a single repeat). Overall: the per-model
    verdict when all agree, else ``"mixed"``.
    """
    k_index = len(result.config.temperatures) - 1
    largest = result.config.temperatures[k_index]
    mean, stderr = result.mean_ess()[:, :, k_index], result.ess_stderr()[:, :, k_index]
    family = [s for s, name in enumerate(result.schedules) if name.startswith("varopt")]
    others = [s for s in range(len(result.schedules)) if s not in family]
    verdicts, parts = [], []
    for m, label in enumerate(result.model_labels):
        best_family = max(family, key=lambda s: float(mean[m, s]))
        best_other = max(others, key=lambda s: float(mean[m, s]))
        outcome = _compare(
            float(mean[m, best_other]),
            float(stderr[m, best_other]),
            float(mean[m, best_family]),
            float(stderr[m, best_family]),
        )
        verdicts.append({"smaller": "confirmed", "larger": "contradicted", "tie": "inconclusive"}[outcome])
        best = int(mean[m].argmax())
        parts.append(
            f"{label}: highest ESS {schedule_label(result.schedules[best])} ({float(mean[m, best]):.1f}); best VAROPT "
            f"{schedule_label(result.schedules[best_family])} {float(mean[m, best_family]):.1f} ± "
            f"{float(stderr[m, best_family]):.1f} vs best other {schedule_label(result.schedules[best_other])} "
            f"{float(mean[m, best_other]):.1f} ± {float(stderr[m, best_other]):.1f} → {verdicts[-1]}"
        )
    verdict = verdicts[0] if len(set(verdicts)) == 1 else "mixed"
    n = result.ess.shape[3]
    text = (
        f"At K = {largest:,} with M = {result.config.n_chains} chains ({n} run(s) per schedule; ESS of "
        f"{result.config.n_chains} at most): " + "; ".join(parts) + "."
    )
    if n < 2:
        text += " One run per schedule gives no error bar, so no verdict is decisive."
    return Finding(
        part="varopt",
        claim=f"VAROPT (plain or decelerated) has the highest ESS at the largest K ({largest:,})",
        verdict=verdict,
        text=text,
    )
