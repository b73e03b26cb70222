"""The trainer's configuration, history records, resumable state and result.

A checkpoint holds everything that determines the rest of a run — model parameters and base,
optimiser state (momentum buffers), scheduler state, the negative phase's state (persistent
chains), the generator's state, the update and epoch counters with the epoch's permutation
and the position inside it, the history so far and the configuration — so that resuming
gives, bit for bit, the run that was not interrupted (docs/architecture.md, "Files"). Tensors go into
the safetensors payload, everything else into its JSON header; this module only converts
between :class:`TrainState` and :class:`boltzlab.io.Checkpoint`, it writes nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.chains import Chains
from boltzlab.errors import ModelFileError
from boltzlab.io import Checkpoint
from boltzlab.models.witness import DEFAULT_WITNESS_ROWS
from boltzlab.training.negative import NegativePhase

__all__ = [
    "TrainConfig",
    "TrainRecord",
    "TrainResult",
    "TrainState",
    "checkpoint_path",
    "find_latest_checkpoint",
]

_STATE_KIND = "boltzlab-train-state"
_STATE_VERSION = 1
_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)\.safetensors$")


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """The settings of a training run, as plain JSON-able values (saved in checkpoints).

    ``algorithm``, ``operator`` and ``lr_schedule`` are names or, for objects and callables,
    their ``repr``. ``n_updates`` is the resolved total (from ``n_epochs`` when that was given).
    """

    algorithm: str
    algorithm_params: dict[str, Any]
    operator: str
    k: int
    n_chains: int
    batch_size: int
    n_updates: int
    n_epochs: int | None
    learning_rate: float
    momentum: float
    weight_decay: float
    lr_schedule: str
    log_every: int
    track_exact_every: int | None
    checkpoint_every: int | None
    fit_base_rate: bool
    #: Rows of the data the model keeps as its verdict's witness (0: none; docs/trust.md).
    witness_rows: int = DEFAULT_WITNESS_ROWS
    #: Centred gradients (training/centering.py); the offsets are part of the checkpoint.
    centering: bool = False
    #: L1 and L1² penalties on the weight matrices (training/penalties.py).
    l1: float = 0.0
    l1_squared: float = 0.0
    #: Whether minibatch rows are drawn with probability ∝ per-example weights (the weights
    #: themselves are fingerprinted with the data: a resumed run must have the same).
    weighted: bool = False
    #: The model's class name (``"RBM"``, ``"SpinRBM"``, …): a checkpoint resumes only into the
    #: same class, since an RBM and a SpinRBM hold tensors of the same names and shapes that
    #: mean different distributions. Empty in checkpoints written before it was recorded.
    model: str = ""
    #: The operator and the learning-rate schedule by name and parameters (``operator``,
    #: ``operator_params``, ``lr_schedule``, ``lr_schedule_params``) for :meth:`to_record`;
    #: ``operator`` and ``lr_schedule`` above keep the repr that a resumed run is compared on.
    readable: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_record(self) -> dict[str, Any]:
        """What a model file and a trajectory record of the run (``info`` shows it): the
        settings with the operator and schedule by name, not as Python reprs."""
        record = {name: value for name, value in self.to_dict().items() if name != "readable"}
        record.update(self.readable)
        return record

    # Settings that fix the shape of the saved state: a checkpoint resumes only with the same.
    STRUCTURAL = (
        "algorithm",
        "algorithm_params",
        "operator",
        "k",
        "n_chains",
        "batch_size",
        "centering",
        "weighted",
    )
    # Settings a resumed run may change (e.g. a lower learning rate after a divergence).
    OPTIMISATION = ("learning_rate", "momentum", "weight_decay", "lr_schedule", "l1", "l1_squared")

    @classmethod
    def saved_value(cls, saved: dict[str, Any], name: str) -> Any:
        """Setting ``name`` of a checkpoint's config: its value, or the default for a setting
        added after the checkpoint was written (so older checkpoints keep resuming)."""
        if name in saved:
            return saved[name]
        default = next(f.default for f in fields(cls) if f.name == name)
        return None if default is MISSING else default


@dataclass(frozen=True, slots=True)
class TrainRecord:
    """One row of the training history.

    Attributes
    ----------
    update : int
        Parameter updates done when the record was taken (0 = before training).
    epoch : int
        Passes over the data started so far.
    learning_rate : float
        The learning rate of the next update (the schedule at ``update``).
    time : float
        Wall-clock seconds of training so far (summed over resumed segments).
    reconstruction_error : float
        Mean squared mean-field reconstruction error of a fixed monitor batch (the first
        ``batch_size`` training examples), summed over units.
    log_z : float or None
        Exact ``log Z`` (nats) when the exact tracker ran at this update.
    train_log_likelihood, validation_log_likelihood : float or None
        Exact mean log-likelihood per example (nats) of the training / validation data.
    extra : dict of str to float
        Further metrics from callbacks or the negative phase.
    """

    update: int
    epoch: int
    learning_rate: float
    time: float
    reconstruction_error: float
    log_z: float | None = None
    train_log_likelihood: float | None = None
    validation_log_likelihood: float | None = None
    extra: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        """The metric called ``name``: a field, else an ``extra`` entry, else ``None``."""
        if name in _RECORD_FIELDS and name != "extra":
            return getattr(self, name)
        return self.extra.get(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; non-finite floats become ``None``."""
        data = {name: _finite_or_none(getattr(self, name)) for name in _RECORD_FIELDS if name != "extra"}
        data["extra"] = {name: _finite_or_none(value) for name, value in self.extra.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainRecord:
        return cls(**{name: data[name] for name in _RECORD_FIELDS if name in data})


_RECORD_FIELDS = tuple(f.name for f in fields(TrainRecord))


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class TrainResult:
    """What :func:`boltzlab.train` returns.

    Attributes
    ----------
    model : nn.Module
        The trained model (the object passed in, trained in place).
    n_updates : int
        Parameter updates done in total (including those before a resume).
    history : tuple of TrainRecord
        One record per logged update, in order.
    final_chains : Chains or None
        The negative phase's last β = 1 chains (PCD: the persistent chains).
    stopped_early : bool
        Whether a callback (e.g. early stopping) ended the run before ``n_updates``.
    run_dir : Path or None
        Where the run wrote files: the checkpoint directory, else the metrics file's directory.
    trajectory : Trajectory or None
        Parameter snapshots recorded along the run (an RBM trained with ``snapshots`` on),
        for ``estimate_log_z(..., method="trajectory-ais", trajectory=...)``.
    """

    model: nn.Module
    n_updates: int
    history: tuple[TrainRecord, ...]
    final_chains: Chains | None
    stopped_early: bool
    run_dir: Path | None
    trajectory: Any = None


@dataclass(frozen=True)
class TrainState:
    """Everything that determines the rest of a run after ``update`` updates.

    Attributes
    ----------
    update, epoch, position : int
        Updates done, epochs started, and the next index into ``permutation``.
    permutation : Tensor or None, shape (n_examples,), int64
        This epoch's order of the training examples (``None`` before the first epoch).
    elapsed : float
        Training seconds so far.
    history : tuple of TrainRecord
    phase_state : Any
        The negative phase's state.
    generator_state : Tensor, uint8
    optimizer_state, scheduler_state : dict
        ``state_dict()`` of the optimiser and of the scheduler.
    model_state : dict of str to Tensor
        ``model.state_dict()`` (parameters and the base's buffers).
    base_fitted : bool
    callback_states : dict
        JSON state of stateful callbacks (e.g. early stopping), keyed by position and class.
    data_fingerprint : dict
        Size and a weighted checksum of the training data, to refuse resuming on other data.
    run_id : str
        The run's identity (``""`` in checkpoints written before it existed): a run resumes
        only its own checkpoints (:class:`~boltzlab.training.loop.TrainingLoop`).
    offsets : dict of str to Tensor
        The centring offsets by layer index (:mod:`boltzlab.training.centering`); empty
        without centring.
    """

    update: int
    epoch: int
    position: int
    permutation: Tensor | None
    elapsed: float
    history: tuple[TrainRecord, ...]
    phase_state: Any
    generator_state: Tensor
    optimizer_state: dict[str, Any]
    scheduler_state: dict[str, Any]
    model_state: dict[str, Tensor]
    base_fitted: bool
    callback_states: dict[str, Any]
    data_fingerprint: dict[str, Any]
    run_id: str = ""
    offsets: dict[str, Tensor] = field(default_factory=dict)


def checkpoint_path(directory: str | Path, update: int) -> Path:
    """``directory/checkpoint-<update, 9 digits>.safetensors``."""
    return Path(directory) / f"checkpoint-{update:09d}.safetensors"


def find_latest_checkpoint(directory: str | Path) -> Path | None:
    """The checkpoint with the highest update number in ``directory``, or ``None``."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    found = [
        (int(match.group(1)), path)
        for path in directory.iterdir()
        if (match := _CHECKPOINT_NAME.match(path.name)) is not None
    ]
    return max(found)[1] if found else None


def _encode_optimizer(state_dict: dict[str, Any], tensors: dict[str, Tensor]) -> dict[str, Any]:
    state = {}
    for param_id, param_state in state_dict["state"].items():
        entry = {}
        for key, value in param_state.items():
            if isinstance(value, Tensor):
                name = f"optimizer.state.{param_id}.{key}"
                tensors[name] = value
                entry[key] = {"__tensor__": name}
            else:
                entry[key] = value
        state[str(param_id)] = entry
    return {"state": state, "param_groups": state_dict["param_groups"]}


def _decode_optimizer(encoded: dict[str, Any], tensors: dict[str, Tensor]) -> dict[str, Any]:
    state = {}
    for param_id, entry in encoded["state"].items():
        state[int(param_id)] = {
            key: tensors[value["__tensor__"]] if isinstance(value, dict) and "__tensor__" in value else value
            for key, value in entry.items()
        }
    return {"state": state, "param_groups": encoded["param_groups"]}


def encode_train_state(state: TrainState, *, config: TrainConfig, phase: NegativePhase) -> Checkpoint:
    """The tensors and JSON metadata of a checkpoint of ``state``."""
    tensors: dict[str, Tensor] = {f"model.{name}": value for name, value in state.model_state.items()}
    tensors.update({f"phase.{name}": value for name, value in phase.state_tensors(state.phase_state).items()})
    tensors.update({f"centering.{name}": value for name, value in state.offsets.items()})
    tensors["generator"] = state.generator_state
    if state.permutation is not None:
        tensors["permutation"] = state.permutation
    scheduler_state = {key: value for key, value in state.scheduler_state.items() if key != "lr_lambdas"}
    metadata = {
        "kind": _STATE_KIND,
        "version": _STATE_VERSION,
        "config": config.to_dict(),
        "phase": phase.describe(),
        "update": state.update,
        "epoch": state.epoch,
        "position": state.position,
        "elapsed": state.elapsed,
        "history": [record.to_dict() for record in state.history],
        "optimizer": _encode_optimizer(state.optimizer_state, tensors),
        "scheduler": scheduler_state,
        "base_fitted": state.base_fitted,
        "callbacks": state.callback_states,
        "data": state.data_fingerprint,
        "run": state.run_id,
    }
    return Checkpoint(tensors=tensors, metadata=metadata)


def decode_train_state(
    checkpoint: Checkpoint, *, phase: NegativePhase, model: Any, source: str
) -> TrainState:
    """Rebuild a :class:`TrainState` from a checkpoint read back from ``source``."""
    metadata, tensors = checkpoint.metadata, checkpoint.tensors
    if metadata.get("kind") != _STATE_KIND or metadata.get("version") != _STATE_VERSION:
        raise ModelFileError(
            f"{source} is not a training checkpoint of version {_STATE_VERSION} "
            f"(kind {metadata.get('kind')!r}, version {metadata.get('version')!r})"
        )
    try:
        phase_tensors = {
            name.removeprefix("phase."): value for name, value in tensors.items() if name.startswith("phase.")
        }
        model_state = {
            name.removeprefix("model."): value for name, value in tensors.items() if name.startswith("model.")
        }
        offsets = {
            name.removeprefix("centering."): value
            for name, value in tensors.items()
            if name.startswith("centering.")
        }
        scheduler_state = dict(metadata["scheduler"])
        return TrainState(
            update=int(metadata["update"]),
            epoch=int(metadata["epoch"]),
            position=int(metadata["position"]),
            permutation=tensors.get("permutation"),
            elapsed=float(metadata["elapsed"]),
            history=tuple(TrainRecord.from_dict(record) for record in metadata["history"]),
            phase_state=phase.state_from_tensors(model, phase_tensors),
            generator_state=tensors["generator"],
            optimizer_state=_decode_optimizer(metadata["optimizer"], tensors),
            scheduler_state=scheduler_state,
            model_state=model_state,
            base_fitted=bool(metadata["base_fitted"]),
            callback_states=dict(metadata.get("callbacks", {})),
            data_fingerprint=dict(metadata["data"]),
            run_id=str(metadata.get("run", "")),
            offsets=offsets,
        )
    except KeyError as error:
        raise ModelFileError(f"{source} is missing {error} (corrupt or foreign checkpoint)") from None


def data_fingerprint(data: Tensor, sample_weights: Tensor | None = None) -> dict[str, Any]:
    """Shape and an order-sensitive checksum ``Σ_n (n+1)·Σ_i (i+1)·x_ni`` (float64); with
    per-example weights, also ``Σ_n (n+1)·w_n`` (without them the record is as it always was)."""
    n_examples, n_units = data.shape
    rows = data.to(torch.float64) @ torch.arange(1, n_units + 1, dtype=torch.float64, device=data.device)
    positions = torch.arange(1, n_examples + 1, dtype=torch.float64, device=data.device)
    checksum = float(rows @ positions)
    fingerprint: dict[str, Any] = {
        "n_examples": int(n_examples),
        "n_units": int(n_units),
        "checksum": checksum,
    }
    if sample_weights is not None:
        fingerprint["weights_checksum"] = float(sample_weights.to(torch.float64) @ positions)
    return fingerprint
