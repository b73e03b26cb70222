"""The benchmark RBMs of the accuracy benchmarks: trained, cached, with their exact log Z.

784×20 RBMs trained on binarised MNIST by CD-1, CD-25 and PCD (20 hidden units, so ``log Z`` is
enumerable: 2^20 hidden states). :func:`train_benchmark_model` starts the visible biases at the
log-odds of the smoothed data marginals (Hinton's recipe): from zero biases, a few thousand
updates leave the all-hidden-off state holding nearly all the mass of a 784×20 RBM — a noise
mode no tempered chain started near the data finds — and AIS and RTS then miss log Z by tens of
nats (as measured while writing this module); that is a property of under-trained models, not
of the estimators being compared. A saved model records how it was made
(:func:`training_metadata`), so that :func:`benchmark_model_from` recognises a cached copy.

The RTS-paper benchmarks also run on an RBM the user supplies (the papers' 784×500), whose
``log Z`` cannot be enumerated: :func:`supplied_benchmark_model` scores it against a reference
``log Z`` with its standard error (from long AIS runs, say), given by the user.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import RBM, exact_log_z, train
from boltzlab.errors import ValidationError
from boltzlab.validation import as_binary_tensor
from boltzlab_experiments.presets import load_preset

__all__ = [
    "METADATA_KEY",
    "MODEL_SPECS",
    "BenchmarkModel",
    "ModelSpec",
    "TrainingConfig",
    "benchmark_model_from",
    "supplied_benchmark_model",
    "train_benchmark_model",
    "training_metadata",
]

# Metadata key under which a cached benchmark model records how it was made.
METADATA_KEY = "accuracy_benchmark"


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

    The values are the ``[training]`` table of the accuracy presets (``presets/*.toml``), shared
    by the three benchmarks so that they reuse one cache of trained models.

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
    learning_rate: float
    batch_size: int
    n_chains: int

    @classmethod
    def preset(cls, name: str) -> TrainingConfig:
        """The ``[training]`` table of the preset ``name``."""
        return load_preset(cls, __package__, name, section="training")

    @classmethod
    def scaled(cls) -> TrainingConfig:
        """A few minutes on one core for all three models (CD-25 dominates: 100 s on a busy 2-core machine)."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> TrainingConfig:
        """Ten times longer (the paper's 250,000 updates are hours here)."""
        return cls.preset("full")

    @classmethod
    def tiny(cls) -> TrainingConfig:
        """Seconds on toy data; checks the pipeline only."""
        return cls.preset("tiny")


@dataclass(frozen=True)
class BenchmarkModel:
    """A benchmark RBM with the ``log Z`` its estimates are scored against, and what it cost.

    Attributes
    ----------
    name, label : str
    model : RBM
    exact_log_z : float
        Nats: exact (enumerated) for a trained benchmark model, the reference's value for a
        supplied one (``reference_stderr`` given).
    train_seconds, exact_seconds : float
        Training and enumeration time (0 for a supplied model).
    reference_stderr : float, optional
        ``None`` when ``exact_log_z`` is exact; else the reference's standard error, nats.
    reference_source : str
        Where the reference comes from, in words, for the reports ("" when exact).
    """

    name: str
    label: str
    model: RBM
    exact_log_z: float
    train_seconds: float
    exact_seconds: float
    reference_stderr: float | None = None
    reference_source: str = ""

    @property
    def is_exact(self) -> bool:
        """Whether :attr:`exact_log_z` is exact (not a reference)."""
        return self.reference_stderr is None


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


def supplied_benchmark_model(
    model: Any,
    name: str,
    *,
    reference_log_z: float,
    reference_stderr: float,
    reference_source: str,
) -> BenchmarkModel:
    """A user's saved RBM as a :class:`BenchmarkModel` scored against a reference ``log Z``.

    Parameters
    ----------
    model : RBM
        As loaded by :func:`boltzlab.io.load_model`; any other kind is refused.
    name : str
        Short name for the reports (the file's name); the label is the layer sizes, "784×500".
    reference_log_z, reference_stderr : float
        The reference ``log Z`` and its standard error, nats (finite; the error ``≥ 0``).
    reference_source : str
        Where the reference comes from, in words (e.g. "long AIS runs").
    """
    if not isinstance(model, RBM):
        raise ValidationError(
            f"the RTS-paper benchmarks need a binary RBM, got a {type(model).__name__} from {name}"
        )
    if not math.isfinite(reference_log_z):
        raise ValidationError(f"the reference log Z must be finite, got {reference_log_z}")
    if not (math.isfinite(reference_stderr) and reference_stderr >= 0):
        raise ValidationError(
            f"the reference's standard error must be finite and ≥ 0, got {reference_stderr}"
        )
    label = f"{model.n_visible}×{model.n_hidden}"
    return BenchmarkModel(
        name,
        label,
        model,
        float(reference_log_z),
        0.0,
        0.0,
        reference_stderr=float(reference_stderr),
        reference_source=reference_source,
    )
