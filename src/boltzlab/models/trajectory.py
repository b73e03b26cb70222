"""A training trajectory: the parameters of one RBM saved along its training, as a path.

Trajectory AIS and parallel tempering across training checkpoints (Béreux, Decelle,
Furtlehner, Rosset & Seoane 2024, "Fast, accurate training and sampling of Restricted
Boltzmann Machines"; docs/algorithms.md §4.6) anneal through the parameters a model visited
while it learnt instead of along temperature.

**Path.** Points ``θ_0, …, θ_{P−1}`` with ``θ = (W, b, c)``; between two points the path is
the straight line in parameter space, so for ``t ∈ [i, i + 1]`` and ``s = t − i``

    θ(t) = (1 − s)·θ_i + s·θ_{i+1},
    log f_t(v) = b(t)·v + Σ_j softplus(c_j(t) + (v W(t))_j)        (hidden units summed out).

Because ``v W(t) = (1 − s)·v W_i + s·v W_{i+1}``, two matrix products per state give
``log f_t`` at every ``t`` of the segment (:mod:`boltzlab.estimators.trajectory.ais`).

**Anchor.** Point 0 always has ``W = 0``: the independent model ``p_0(v, h) ∝ exp(b_0·v +
c_0·h)`` with the exact ``log Z_0 = Σ_i softplus(b_0,i) + Σ_j softplus(c_0,j)`` and exact
draws. :meth:`Trajectory.from_snapshots` prepends it (with the first snapshot's biases and
update index ``−1``) when the first recorded snapshot has weights, as a freshly initialised
RBM does (Fernandez-de-Cossio-Diaz's RestrictedBoltzmannMachines.jl ``ptt.jl`` anchors its
checkpoints the same way).

**File.** ``trajectory.safetensors`` holds the stacked tensors ``weights (P, D, J)``,
``visible_bias (P, D)``, ``hidden_bias (P, J)``, ``updates (P,)`` int64 and optionally
``base_logits (D,)``, with the metadata ``format="boltzlab-trajectory"``, ``format_version``,
``n_points`` and ``metadata`` (JSON). Writes are atomic (:func:`boltzlab.io.write_atomic`);
reads never unpickle and check every shape, dtype and value first. A run directory keeps it
beside ``model.safetensors`` (``boltzlab train``) or in ``checkpoints/`` (``bl.train`` with a
``checkpoint_dir``); :func:`_resolve_trajectory_path` looks in both.

:func:`as_trajectory` reads whatever an estimator or sampler is given as ``trajectory=``: a
:class:`Trajectory`, its file, a run directory, or model files and RBMs in training order.
:meth:`Trajectory.save` and :meth:`Trajectory.load` call :func:`save_trajectory` and
:func:`load_trajectory`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.io import serialize, write_atomic
from boltzlab.io.safetensors_file import TRAJECTORY_FORMAT
from boltzlab.models.bipartite import CouplingSizes
from boltzlab.models.parameters import FLOAT_DTYPES, check_dtype
from boltzlab.models.rbm import RBM
from boltzlab.numerics import softplus
from boltzlab.rng import resolve_generator, sample_bernoulli
from boltzlab.validation import check_device, check_positive_int

__all__ = [
    "ANCHOR_UPDATE",
    "TRAJECTORY_FILE",
    "Trajectory",
    "as_trajectory",
    "find_trajectory_file",
    "load_trajectory",
    "save_trajectory",
]

TRAJECTORY_FILE = "trajectory.safetensors"
_TRAJECTORY_FORMAT = TRAJECTORY_FORMAT
_TRAJECTORY_FORMAT_VERSION = 1

#: Update index of an anchor that :meth:`Trajectory.from_snapshots` prepended (not a training state).
ANCHOR_UPDATE = -1

_PARAMETERS = ("weights", "visible_bias", "hidden_bias")
_MAX_HEADER_BYTES = 100_000_000


def _check_trajectory(
    weights: Tensor,
    visible_bias: Tensor,
    hidden_bias: Tensor,
    updates: Tensor,
    base_logits: Tensor | None,
) -> None:
    """Every invariant of a trajectory; :class:`ValidationError` naming the first one broken."""
    for name, tensor in zip(_PARAMETERS, (weights, visible_bias, hidden_bias), strict=True):
        if not isinstance(tensor, Tensor):
            raise ValidationError(f"trajectory {name} must be a torch.Tensor, got {type(tensor).__name__}")
    if weights.dim() != 3 or weights.shape[0] < 1 or min(weights.shape[1:]) < 1:
        raise ValidationError(
            f"trajectory weights must have shape (n_points, n_visible, n_hidden) with every size "
            f"positive, got {tuple(weights.shape)}"
        )
    n_points, n_visible, n_hidden = weights.shape
    expected = {"visible_bias": (n_points, n_visible), "hidden_bias": (n_points, n_hidden)}
    for name, tensor in (("visible_bias", visible_bias), ("hidden_bias", hidden_bias)):
        if tuple(tensor.shape) != expected[name]:
            raise ValidationError(
                f"trajectory {name} has shape {tuple(tensor.shape)}, expected {expected[name]} "
                f"for weights of shape {tuple(weights.shape)}"
            )
    dtypes = {weights.dtype, visible_bias.dtype, hidden_bias.dtype}
    if len(dtypes) != 1 or weights.dtype not in FLOAT_DTYPES:
        raise ValidationError(
            f"trajectory parameters must share one floating dtype, got {sorted(map(str, dtypes))}"
        )
    devices = {weights.device, visible_bias.device, hidden_bias.device}
    if len(devices) != 1:
        raise ValidationError(f"trajectory parameters must be on one device, got {sorted(map(str, devices))}")
    if not isinstance(updates, Tensor) or updates.dtype != torch.int64 or tuple(updates.shape) != (n_points,):
        shape = tuple(updates.shape) if isinstance(updates, Tensor) else type(updates).__name__
        dtype = updates.dtype if isinstance(updates, Tensor) else None
        raise ValidationError(
            f"trajectory updates must be an int64 tensor of shape ({n_points},), got {shape} of dtype {dtype}"
        )
    if n_points > 1 and not bool((updates[1:] > updates[:-1]).all()):
        where = int(torch.nonzero(updates[1:] <= updates[:-1])[0])
        raise ValidationError(
            "trajectory update indices must increase strictly, got "
            f"{int(updates[where])} then {int(updates[where + 1])} at points {where} and {where + 1}"
        )
    if bool((updates < ANCHOR_UPDATE).any()) or bool((updates[1:] < 0).any()):
        raise ValidationError(
            f"trajectory update indices must be >= 0 (the first may be {ANCHOR_UPDATE}, a prepended "
            f"anchor), got {updates.tolist()[:8]}"
        )
    for name, tensor in zip(_PARAMETERS, (weights, visible_bias, hidden_bias), strict=True):
        bad = ~torch.isfinite(tensor)
        if bool(bad.any()):
            point = int(torch.nonzero(bad.reshape(n_points, -1).any(1))[0])
            raise ValidationError(
                f"trajectory {name} contains NaN or infinite values (first at point {point}, update "
                f"{int(updates[point])}); training diverged there: cut the trajectory before it"
            )
    if bool((weights[0] != 0).any()):
        raise ValidationError(
            "the first point of a trajectory must have zero weights (the exactly normalisable anchor); "
            "build it with Trajectory.from_snapshots(...), which prepends one"
        )
    if base_logits is not None and not (
        isinstance(base_logits, Tensor)
        and tuple(base_logits.shape) == (n_visible,)
        and bool(torch.isfinite(base_logits).all())
    ):
        raise ValidationError(f"trajectory base_logits must be a finite tensor of shape ({n_visible},)")


@dataclass(frozen=True, eq=False)
class Trajectory(CouplingSizes):
    """Parameter snapshots of one RBM along its training; point 0 is the zero-weight anchor.

    Build one with :meth:`from_snapshots` (which stacks, copies and prepends the anchor when
    needed), read one with :meth:`load`, or let training record one
    (:class:`boltzlab.training.snapshots.SnapshotRecorder`). The tensors are not copied by
    the dataclass itself; do not modify them in place.

    Attributes
    ----------
    weights : Tensor, shape (n_points, n_visible, n_hidden)
        ``weights[0]`` is all zeros.
    visible_bias : Tensor, shape (n_points, n_visible)
    hidden_bias : Tensor, shape (n_points, n_hidden)
    updates : Tensor, shape (n_points,), int64
        Training update of each point, strictly increasing; ``−1`` marks a prepended anchor.
    base_logits : Tensor, shape (n_visible,), optional
        The trained model's base-rate log-odds, given to the models :meth:`model_at` builds.
    metadata : dict
        JSON-serialisable notes (e.g. the training config), saved with the file.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.models.trajectory import Trajectory
    >>> w = torch.ones(3, 2)
    >>> path = Trajectory.from_snapshots(
    ...     [0.5 * w, w], [torch.zeros(3)] * 2, [torch.zeros(2)] * 2, updates=[0, 10]
    ... )
    >>> path.n_points, path.updates.tolist()
    (3, [-1, 0, 10])
    >>> path.model_at(1.5).weights[0, 0].item()
    0.75
    """

    weights: Tensor
    visible_bias: Tensor
    hidden_bias: Tensor
    updates: Tensor
    base_logits: Tensor | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_trajectory(self.weights, self.visible_bias, self.hidden_bias, self.updates, self.base_logits)
        if not isinstance(self.metadata, dict):
            raise ValidationError(f"trajectory metadata must be a dict, got {type(self.metadata).__name__}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_snapshots(
        cls,
        weights: Sequence[Tensor] | Tensor,
        visible_bias: Sequence[Tensor] | Tensor,
        hidden_bias: Sequence[Tensor] | Tensor,
        *,
        updates: Sequence[int] | Tensor,
        base_logits: Tensor | None = None,
        metadata: Mapping[str, Any] | None = None,
        dtype: torch.dtype | None = None,
    ) -> Trajectory:
        """A trajectory from snapshots in training order (copies), anchored at zero weights.

        Parameters
        ----------
        weights : sequence of Tensor of shape (n_visible, n_hidden), or Tensor (n, n_visible, n_hidden)
        visible_bias : sequence of Tensor of shape (n_visible,), or Tensor (n, n_visible)
        hidden_bias : sequence of Tensor of shape (n_hidden,), or Tensor (n, n_hidden)
        updates : sequence of int or Tensor, shape (n,)
            Training update of each snapshot, strictly increasing, all ``>= 0``.
        base_logits : Tensor, shape (n_visible,), optional
        metadata : mapping, optional
        dtype : torch.dtype, optional
            Default: the weights' dtype (float32 for non-floating input).

        Returns
        -------
        Trajectory
            The snapshots, preceded by the anchor ``(W = 0, b_0, c_0)`` at update ``−1`` unless
            the first snapshot already has zero weights.
        """
        stacked = [
            _stack(values, name)
            for name, values in zip(_PARAMETERS, (weights, visible_bias, hidden_bias), strict=True)
        ]
        if dtype is None:
            dtype = stacked[0].dtype if stacked[0].dtype in FLOAT_DTYPES else torch.float32
        check_dtype(dtype)
        device = stacked[0].device
        w, b, c = (tensor.to(device=device, dtype=dtype).clone() for tensor in stacked)
        steps = torch.as_tensor(updates).detach().clone()
        if steps.dtype.is_floating_point or steps.dtype == torch.bool:
            raise ValidationError(f"updates must be integers, got dtype {steps.dtype}")
        steps = steps.to(device="cpu", dtype=torch.int64)
        if w.dim() != 3:
            raise ValidationError(
                "weights must be snapshots of shape (n_visible, n_hidden), got stacked shape "
                f"{tuple(w.shape)}"
            )
        if steps.dim() != 1 or steps.numel() != w.shape[0]:
            raise ValidationError(
                f"updates must have one entry per snapshot ({w.shape[0]}), got shape {tuple(steps.shape)}"
            )
        if bool((steps < 0).any()):
            raise ValidationError(f"snapshot update indices must be >= 0, got {steps.tolist()[:8]}")
        if bool((w[0] != 0).any()):
            w = torch.cat([torch.zeros_like(w[:1]), w])
            b = torch.cat([b[:1], b])
            c = torch.cat([c[:1], c])
            steps = torch.cat([torch.tensor([ANCHOR_UPDATE], dtype=torch.int64), steps])
        base = None
        if base_logits is not None:
            base = torch.as_tensor(base_logits).detach().to(device=device, dtype=dtype).clone()
        return cls(
            weights=w,
            visible_bias=b,
            hidden_bias=c,
            updates=steps,
            base_logits=base,
            metadata=dict(metadata or {}),
        )

    @classmethod
    def from_models(
        cls, models: Sequence[Any], *, updates: Sequence[int] | None = None, **options: Any
    ) -> Trajectory:
        """A trajectory through the parameters of ``models`` (RBMs of one size), in order.

        ``updates`` default to ``0, 1, …``; the last model's ``base_logits`` is kept when its
        base was fitted. Other options as :meth:`from_snapshots`.
        """
        models = list(models)
        if not models:
            raise ValidationError("from_models needs at least one model")
        for index, model in enumerate(models):
            if not isinstance(model, RBM):
                raise ValidationError(f"models[{index}] must be a boltzlab RBM, got {type(model).__name__}")
        last = models[-1]
        if "base_logits" not in options and getattr(last, "base_fitted", False):
            options["base_logits"] = last.base_logits.detach()
        return cls.from_snapshots(
            [model.weights.detach() for model in models],
            [model.visible_bias.detach() for model in models],
            [model.hidden_bias.detach() for model in models],
            updates=list(range(len(models))) if updates is None else updates,
            **options,
        )

    @property
    def n_points(self) -> int:
        """Number of points, the anchor included."""
        return self.weights.shape[0]

    @property
    def anchor_log_z(self) -> float:
        """Exact ``log Z`` of point 0: ``Σ_i softplus(b_0,i) + Σ_j softplus(c_0,j)`` (float64)."""
        b = self.visible_bias[0].detach().to(torch.float64)
        c = self.hidden_bias[0].detach().to(torch.float64)
        return float(softplus(b).sum() + softplus(c).sum())

    def __repr__(self) -> str:
        size = f"n_visible={self.n_visible}, n_hidden={self.n_hidden}"
        span = f"updates={int(self.updates[0])}..{int(self.updates[-1])}"
        return f"Trajectory(n_points={self.n_points}, {size}, {span}, dtype={self.dtype})"

    # ------------------------------------------------------------------ points on the path
    def check_position(self, t: float) -> float:
        """``t`` as a float in ``[0, n_points − 1]``; :class:`ValidationError` otherwise."""
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(float(t)):
            raise ValidationError(f"a trajectory position must be a finite number, got {t!r}")
        t = float(t)
        if not 0.0 <= t <= self.n_points - 1:
            raise ValidationError(f"trajectory position must be in [0, {self.n_points - 1}], got {t}")
        return t

    def parameters_at(self, t: float) -> tuple[Tensor, Tensor, Tensor]:
        """``(W(t), b(t), c(t))``: linear interpolation between points ``⌊t⌋`` and ``⌊t⌋ + 1``.

        At an integer ``t`` the stored snapshot itself (a copy, bit-exact). Shapes
        ``(n_visible, n_hidden)``, ``(n_visible,)``, ``(n_hidden,)``, in the trajectory's dtype.
        """
        t = self.check_position(t)
        index = min(math.floor(t), self.n_points - 1)
        fraction = t - index
        tensors = (self.weights, self.visible_bias, self.hidden_bias)
        if fraction == 0.0:
            return tuple(tensor[index].clone() for tensor in tensors)  # type: ignore[return-value]
        return tuple(
            torch.lerp(tensor[index].to(torch.float64), tensor[index + 1].to(torch.float64), fraction).to(
                self.dtype
            )
            for tensor in tensors
        )  # type: ignore[return-value]

    def model_at(
        self, t: float, *, dtype: torch.dtype | None = None, device: str | torch.device | None = None
    ) -> RBM:
        """The RBM with parameters ``θ(t)`` (see :meth:`parameters_at`), a new module.

        It gets the trajectory's ``base_logits`` (fitted base) when it has them.
        """
        weights, visible_bias, hidden_bias = self.parameters_at(t)
        model = RBM(
            weights=weights,
            visible_bias=visible_bias,
            hidden_bias=hidden_bias,
            dtype=self.dtype if dtype is None else dtype,
            device=self.device if device is None else device,
        )
        if self.base_logits is not None:
            with torch.no_grad():
                model.base_logits.copy_(self.base_logits.to(device=model.device, dtype=model.dtype))
            model.base_fitted = True
        return model

    def sample_anchor(
        self,
        n_chains: int,
        *,
        generator: torch.Generator | int | None = None,
        dtype: torch.dtype | None = None,
        device: str | torch.device | None = None,
    ) -> Chains:
        """``n_chains`` exact draws ``(v, h)`` of point 0 (independent units), at β = 1.

        ``v_i ~ Bernoulli(σ(b_0,i))``, ``h_j ~ Bernoulli(σ(c_0,j))``; shapes
        ``(n_chains, n_visible)`` and ``(n_chains, n_hidden)``.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        dtype = self.dtype if dtype is None else dtype
        device = self.device if device is None else torch.device(device)
        generator = resolve_generator(generator, device)
        p_visible = torch.sigmoid(self.visible_bias[0].to(device=device, dtype=dtype)).expand(n_chains, -1)
        p_hidden = torch.sigmoid(self.hidden_bias[0].to(device=device, dtype=dtype)).expand(n_chains, -1)
        v = sample_bernoulli(p_visible.contiguous(), generator=generator)
        h = sample_bernoulli(p_hidden.contiguous(), generator=generator)
        return Chains(layers=(v, h), beta=torch.ones(n_chains, dtype=dtype, device=device))

    # ------------------------------------------------------------------ derived trajectories
    def check_model(self, model: Any, *, name: str = "model") -> None:
        """Refuse a model that is not an RBM of this trajectory's sizes."""
        if not isinstance(model, RBM):
            raise ValidationError(
                f"{name} must be a boltzlab RBM to anneal along a trajectory, got {type(model).__name__}"
            )
        if (model.n_visible, model.n_hidden) != (self.n_visible, self.n_hidden):
            raise ValidationError(
                f"the trajectory holds a {self.n_visible}x{self.n_hidden} RBM but {name} is "
                f"{model.n_visible}x{model.n_hidden}; use the trajectory recorded while training this model"
            )

    def ends_at(self, model: RBM) -> bool:
        """Whether the last point equals ``model``'s parameters exactly (in the trajectory's dtype)."""
        self.check_model(model)
        pairs = zip(
            (self.weights[-1], self.visible_bias[-1], self.hidden_bias[-1]),
            (model.weights, model.visible_bias, model.hidden_bias),
            strict=True,
        )
        return all(
            torch.equal(point, parameter.detach().to(device=self.device, dtype=self.dtype))
            for point, parameter in pairs
        )

    def ending_at(self, model: RBM) -> Trajectory:
        """This trajectory if it ends at ``model``, else a copy with ``model`` appended.

        The appended point gets update index ``updates[-1] + 1``; sizes must match.
        """
        if self.ends_at(model):
            return self
        return Trajectory(
            weights=torch.cat([self.weights, model.weights.detach().to(self.device, self.dtype)[None]]),
            visible_bias=torch.cat(
                [self.visible_bias, model.visible_bias.detach().to(self.device, self.dtype)[None]]
            ),
            hidden_bias=torch.cat(
                [self.hidden_bias, model.hidden_bias.detach().to(self.device, self.dtype)[None]]
            ),
            updates=torch.cat([self.updates, self.updates[-1:] + 1]),
            base_logits=self.base_logits,
            metadata=dict(self.metadata),
        )

    def select(self, indices: Sequence[int]) -> Trajectory:
        """The points ``indices`` (ascending, starting at 0: the anchor is kept), copied."""
        index = torch.as_tensor(list(indices), dtype=torch.int64)
        if index.numel() == 0 or int(index[0]) != 0:
            raise ValidationError(f"select must keep point 0 (the anchor), got {index.tolist()[:8]}")
        if bool((index[1:] <= index[:-1]).any()) or int(index[-1]) >= self.n_points:
            raise ValidationError(
                f"select needs ascending indices in [0, {self.n_points - 1}], got {index.tolist()[:8]}"
            )
        on_device = index.to(self.device)
        return Trajectory(
            weights=self.weights[on_device].clone(),
            visible_bias=self.visible_bias[on_device].clone(),
            hidden_bias=self.hidden_bias[on_device].clone(),
            updates=self.updates[index].clone(),
            base_logits=self.base_logits,
            metadata=dict(self.metadata),
        )

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> Trajectory:
        """A copy on ``device`` in floating ``dtype`` (updates stay int64 on the CPU)."""
        device = self.device if device is None else check_device(device)
        dtype = self.dtype if dtype is None else dtype
        return Trajectory(
            weights=self.weights.to(device=device, dtype=dtype, copy=True),
            visible_bias=self.visible_bias.to(device=device, dtype=dtype, copy=True),
            hidden_bias=self.hidden_bias.to(device=device, dtype=dtype, copy=True),
            updates=self.updates.clone(),
            base_logits=None
            if self.base_logits is None
            else self.base_logits.to(device=device, dtype=dtype, copy=True),
            metadata=dict(self.metadata),
        )

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> Path:
        """Write ``trajectory.safetensors`` atomically; returns the file's path.

        See :func:`save_trajectory`.
        """
        return save_trajectory(self, path)

    @classmethod
    def load(
        cls, path: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ) -> Trajectory:
        """Read a trajectory file or run directory; see :func:`load_trajectory` (raises
        ``ModelFileError``)."""
        return load_trajectory(path, device=device, dtype=dtype)


def _stack(values: Sequence[Tensor] | Tensor, name: str) -> Tensor:
    if isinstance(values, Tensor):
        return values.detach()
    try:
        items = [torch.as_tensor(value).detach() for value in values]
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValidationError(f"{name} could not be read as tensors: {error}") from None
    if not items:
        raise ValidationError(f"{name} is empty: a trajectory needs at least one snapshot")
    shapes = {tuple(item.shape) for item in items}
    if len(shapes) != 1:
        raise ValidationError(f"{name} snapshots have different shapes {sorted(shapes)}")
    return torch.stack([item.to(items[0].device) for item in items])


# ---------------------------------------------------------------------------- the file
def save_trajectory(trajectory: Trajectory, path: str | Path) -> Path:
    """Write ``trajectory`` as ``trajectory.safetensors`` atomically; returns the file's path.

    ``path`` is a file path ending in ``.safetensors`` or a directory (created if needed),
    in which case the file is ``path/trajectory.safetensors``. The tensors are written in
    their own dtype, so :func:`load_trajectory` gives them back bit for bit.
    """
    target = _resolve_trajectory_path(path, for_writing=True)
    try:
        metadata_text = json.dumps(trajectory.metadata, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValidationError(
            f"trajectory metadata is not JSON-serialisable ({error}); keep only str, int, float, "
            "bool, None, lists and dicts there"
        ) from None
    tensors = {
        "weights": trajectory.weights,
        "visible_bias": trajectory.visible_bias,
        "hidden_bias": trajectory.hidden_bias,
        "updates": trajectory.updates,
    }
    if trajectory.base_logits is not None:
        tensors["base_logits"] = trajectory.base_logits
    payload = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in tensors.items()}
    header = {
        "format": _TRAJECTORY_FORMAT,
        "format_version": str(_TRAJECTORY_FORMAT_VERSION),
        "n_points": str(trajectory.n_points),
        "metadata": metadata_text,
    }
    return write_atomic(target, serialize(payload, header))


def load_trajectory(
    path: str | Path, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Trajectory:
    """Read a trajectory file (or ``path/trajectory.safetensors`` for a run directory).

    The same as :meth:`Trajectory.load`.

    Raises
    ------
    ModelFileError
        A missing, truncated or foreign file, another format or version, missing or extra
        tensors, inconsistent shapes, wrong dtypes, NaN/inf, update indices that do not
        increase, or a first point with weights; the message names the file and the problem.
    """
    source = _resolve_trajectory_path(path, for_writing=False)
    tensors, header = _read_trajectory_file(source)
    try:
        trajectory = Trajectory(
            weights=tensors["weights"],
            visible_bias=tensors["visible_bias"],
            hidden_bias=tensors["hidden_bias"],
            updates=tensors["updates"],
            base_logits=tensors.get("base_logits"),
            metadata=header,
        )
    except ValidationError as error:
        raise ModelFileError(f"{source} is not a valid trajectory file: {error}") from None
    if dtype is not None or torch.device(device) != trajectory.device:
        trajectory = trajectory.to(device=device, dtype=dtype)
    return trajectory


def _resolve_trajectory_path(path: str | Path, *, for_writing: bool) -> Path:
    """The trajectory file named by ``path``: the file itself, or ``path/trajectory.safetensors``.

    A run directory may also hold the file in ``checkpoints/``; reading looks there second.
    """
    if not isinstance(path, (str, Path)):
        raise ValidationError(f"a trajectory path must be a str or Path, got {type(path).__name__}")
    path = Path(path)
    if for_writing:
        return path if path.suffix == ".safetensors" else path / TRAJECTORY_FILE
    if path.is_dir():
        found = find_trajectory_file(path)
        if found is not None:
            return found
        raise ModelFileError(
            f"{path} holds no {TRAJECTORY_FILE}; bl.train and boltzlab train record one by default "
            "(snapshots=64), or build one with Trajectory.from_models(...)"
        )
    return path


def find_trajectory_file(directory: str | Path) -> Path | None:
    """``directory/trajectory.safetensors``, else ``directory/checkpoints/trajectory.safetensors``,
    else ``None``: where ``boltzlab train`` and ``bl.train(checkpoint_dir=...)`` put it."""
    directory = Path(directory)
    for candidate in (directory / TRAJECTORY_FILE, directory / "checkpoints" / TRAJECTORY_FILE):
        if candidate.is_file():
            return candidate
    return None


def as_trajectory(value: Any) -> Trajectory:
    """``value`` read as a :class:`Trajectory`: what estimators and samplers accept as ``trajectory=``.

    Accepted: a :class:`Trajectory`; the path of a ``trajectory.safetensors`` file; a run
    directory holding one (directly or in ``checkpoints/``); a directory of model files, one
    per snapshot (e.g. ``update-00000100.safetensors``), taken in the order of the number in
    their names; or a sequence of RBMs or of model-file paths in training order. Update
    indices come from the file names when each holds a number, else ``0, 1, …``.

    Raises
    ------
    ValidationError
        A value of another kind, or snapshots of different sizes.
    ModelFileError
        An unreadable file, or a directory with neither a trajectory nor model files.
    """
    if isinstance(value, Trajectory):
        return value
    if isinstance(value, (str, Path)):
        path = Path(value)
        if path.is_dir() and not any(
            (path / name).is_file() for name in (TRAJECTORY_FILE, f"checkpoints/{TRAJECTORY_FILE}")
        ):
            files = sorted(
                (
                    candidate
                    for candidate in path.glob("*.safetensors")
                    if candidate.name != "model.safetensors"
                ),
                key=lambda candidate: (
                    _number_in(candidate.name) is None,
                    _number_in(candidate.name) or 0,
                    candidate.name,
                ),
            )
            if files:
                return _from_model_files(files)
        return load_trajectory(path)
    if isinstance(value, Sequence) and value and not isinstance(value, (str, bytes)):
        items = list(value)
        if all(isinstance(item, (str, Path)) for item in items):
            return _from_model_files([Path(item) for item in items])
        if all(isinstance(item, RBM) for item in items):
            return Trajectory.from_models(items)
    raise ValidationError(
        "trajectory must be a Trajectory, a trajectory.safetensors file, a run directory, a directory of "
        f"model files, or a sequence of RBMs or model-file paths; got {type(value).__name__}"
    )


def _number_in(name: str) -> int | None:
    digits = re.findall(r"\d+", name)
    return int(digits[-1]) if digits else None


def _from_model_files(paths: list[Path]) -> Trajectory:
    models = [RBM.load(path) for path in paths]
    numbers = [_number_in(path.name) for path in paths]
    known = [number for number in numbers if number is not None]
    increasing = len(known) == len(numbers) and all(b > a for a, b in pairwise(known))
    return Trajectory.from_models(models, updates=numbers if increasing else None)


def _refuse(path: Path, problem: str) -> ModelFileError:
    return ModelFileError(
        f"{path} is not a valid trajectory file: {problem}; record it again (train with the snapshot "
        "recorder) or use another run's trajectory.safetensors"
    )


def _read_trajectory_file(path: Path) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Tensors and JSON metadata of a trajectory file; :class:`ModelFileError` for anything else."""
    if not path.exists():
        raise ModelFileError(f"trajectory file {path} does not exist; check the path")
    if not path.is_file():
        raise ModelFileError(f"trajectory file {path} is not a regular file; check the path")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ModelFileError(f"trajectory file {path} cannot be read ({error.strerror})") from None
    if len(data) < 8:
        raise _refuse(path, f"it has only {len(data)} bytes (empty or truncated)")
    header_length = int.from_bytes(data[:8], "little")
    if header_length > min(_MAX_HEADER_BYTES, len(data) - 8) or data[8:9] != b"{":
        raise _refuse(path, "it is not a safetensors file (bad or truncated header)")
    try:
        header = json.loads(data[8 : 8 + header_length])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise _refuse(path, f"its header is not valid JSON ({type(error).__name__})") from None
    if not isinstance(header, dict):
        raise _refuse(path, "its header is not a JSON object")
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict):
        raise _refuse(path, "its __metadata__ is not a table")
    found = metadata.get("format")
    if found != _TRAJECTORY_FORMAT:
        what = {
            "boltzlab-model": "a boltzlab model file (load it with boltzlab.RBM.load)",
            "boltzlab-checkpoint": "a boltzlab checkpoint",
        }.get(str(found), f"format {str(found)[:40]!r}")
        raise _refuse(path, f"it is {what}, expected format {_TRAJECTORY_FORMAT!r}")
    version = metadata.get("format_version")
    if version != str(_TRAJECTORY_FORMAT_VERSION):
        raise _refuse(
            path,
            f"format version {str(version)[:20]!r} is not supported "
            f"(this boltzlab reads {_TRAJECTORY_FORMAT_VERSION})",
        )
    try:
        tensors = safetensors_load(data)
    except Exception as error:  # the library's own checks; any failure means a bad file
        message = " ".join(str(error).split())[:200]
        raise _refuse(path, f"safetensors refused it ({message})") from None
    required = {"weights", "visible_bias", "hidden_bias", "updates"}
    missing = sorted(required - tensors.keys())
    extra = sorted(tensors.keys() - required - {"base_logits"})
    if missing:
        raise _refuse(path, f"tensors {missing} are missing")
    if extra:
        raise _refuse(path, f"unexpected tensors {extra[:5]}")
    n_points = metadata.get("n_points")
    if n_points != str(tensors["weights"].shape[0] if tensors["weights"].dim() == 3 else -1):
        raise _refuse(path, f"its n_points entry {str(n_points)[:20]!r} disagrees with the weights' shape")
    try:
        notes = json.loads(metadata.get("metadata", "{}"))
    except (json.JSONDecodeError, RecursionError):
        raise _refuse(path, "its metadata entry is not valid JSON") from None
    if not isinstance(notes, dict):
        raise _refuse(path, "its metadata entry is not a JSON object")
    return tensors, notes
