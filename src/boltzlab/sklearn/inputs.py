"""What the scikit-learn estimator does with its input: arrays in, values in [0, 1], binary chains.

scikit-learn's ``BernoulliRBM`` reads every value in [0, 1] as the probability that the unit is
on; binary data are the special case. :class:`boltzlab.sklearn.BernoulliRBM` keeps that meaning
(docs/architecture.md, "scikit-learn"):

* the data term of training uses the values as they are (``⟨x p(h|x)ᵀ⟩``, exactly as
  scikit-learn's), and so does ``transform`` (``p(h = 1 | x)``);
* anything that must hold 0/1 states — the persistent chains started from data, CD's chains
  started at the minibatch, the rows that fit the base-rate base — starts at one
  Bernoulli(``x``) draw per value (binary rows are used as they are, drawing nothing);
* ``score_samples`` scores the binary rows ``x >= 0.5`` (the library's threshold rule,
  :func:`boltzlab.data.readers.binarize`), so it is deterministic and row by row;
* values outside [0, 1] are clipped with a warning (``out_of_range="clip"``, the default:
  scikit-learn's estimator checks feed arbitrary real data) or refused with one clear error
  (``out_of_range="error"``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.rng import sample_bernoulli
from boltzlab.training.negative import NegativePhase, NegativePhaseBase

try:  # scikit-learn >= 1.6: the public validation helper and __sklearn_tags__
    from sklearn.utils.validation import validate_data
except ImportError as error:  # pragma: no cover - depends on the installed scikit-learn
    import sklearn

    raise ImportError(
        f"boltzlab.sklearn needs scikit-learn >= 1.6 (found {sklearn.__version__}); "
        "upgrade it with `pip install -U scikit-learn`"
    ) from error

__all__ = ["BernoulliStarts", "check_choice", "is_binary"]

OUT_OF_RANGE = ("clip", "error")


def check_rows(estimator: Any, X: Any, *, reset: bool, out_of_range: str, method: str) -> np.ndarray:
    """``X`` checked by scikit-learn's rules, densified, with its values brought into [0, 1].

    Parameters
    ----------
    estimator : BaseEstimator
        Records ``n_features_in_`` (and ``feature_names_in_``) when ``reset``, else checks them.
    X : array-like or sparse matrix, shape (n_samples, n_features)
        Finite numbers; float32 stays float32, everything else becomes float64.
    reset : bool
        True in ``fit`` and the first ``partial_fit``.
    out_of_range : {"clip", "error"}
        What values outside [0, 1] get: clipped with a ``UserWarning``, or a ``ValidationError``.
    method : str
        Named in the warning or error (``"fit"``, ``"transform"``, ...).

    Returns
    -------
    numpy.ndarray, shape (n_samples, n_features), float32 or float64, values in [0, 1]
        A new array whenever anything was converted or clipped; ``X`` is never modified.
    """
    rows = validate_data(estimator, X, accept_sparse=True, dtype=(np.float64, np.float32), reset=reset)
    if sp.issparse(rows):
        rows = rows.toarray()
    low, high = (float(rows.min()), float(rows.max())) if rows.size else (0.0, 1.0)
    if low >= 0.0 and high <= 1.0:
        return rows
    message = (
        f"{type(estimator).__name__}.{method}: X must hold values in [0, 1] (probabilities that a unit "
        f"is on), got values from {low:g} to {high:g}"
    )
    if out_of_range == "error":
        raise ValidationError(f"{message}; scale it first (e.g. MinMaxScaler, or divide pixels by 255)")
    warnings.warn(
        f"{message}: clipped to [0, 1]; scale it first (e.g. MinMaxScaler, or divide pixels by 255), "
        "or pass out_of_range='error' to refuse such data",
        UserWarning,
        stacklevel=4,  # the caller of fit, transform, ... (through BernoulliRBM._rows)
    )
    return np.clip(rows, 0.0, 1.0)


def is_binary(rows: Tensor | np.ndarray) -> bool:
    """Whether every value is exactly 0 or 1."""
    if isinstance(rows, Tensor):
        return bool(((rows == 0) | (rows == 1)).all())
    return bool(np.isin(rows, (0.0, 1.0)).all())


def to_model_tensor(rows: np.ndarray, model: Any) -> Tensor:
    """``rows`` (values in [0, 1]) as a new tensor in the model's dtype, on its device."""
    return torch.tensor(rows, dtype=model.dtype, device=model.device)


class BernoulliStarts(NegativePhaseBase):
    """A negative phase whose chains start at one Bernoulli(``x``) draw of grey rows.

    The trainer hands a phase the training rows (``init``) and each minibatch (``step``: CD
    starts its chains there). Chains must hold 0/1 states — a state-dependent operator such
    as flip-the-state reads the current value — so this wrapper draws the rows before handing
    them on; everything else is the wrapped phase's, including its checkpoint form and its
    ``describe``, so chains continue across grey and binary batches alike.

    Parameters
    ----------
    phase : NegativePhase
        Any phase of :func:`boltzlab.training.get_phase`.
    """

    def __init__(self, phase: NegativePhase) -> None:
        self.phase = phase
        self.name = phase.name

    def __repr__(self) -> str:
        return f"BernoulliStarts({self.phase!r})"

    def for_run(self, *, learning_rate: float) -> BernoulliStarts:
        # The trainer resolves run-dependent defaults (FPCD's fast learning rate) through
        # for_run; keep the wrapper around the resolved phase.
        for_run = getattr(self.phase, "for_run", None)
        return BernoulliStarts(for_run(learning_rate=learning_rate)) if callable(for_run) else self

    def init(self, model: Any, data: Tensor, *, generator: torch.Generator) -> Any:
        return self.phase.init(model, sample_bernoulli(data, generator=generator), generator=generator)

    def step(
        self,
        model: Any,
        state: Any,
        *,
        batch: Tensor,
        positive: tuple[Tensor, ...],
        generator: torch.Generator,
    ) -> tuple[Any, Chains]:
        # The data term (positive) keeps the grey values; only the chains' start is drawn.
        drawn = sample_bernoulli(batch, generator=generator)
        return self.phase.step(model, state, batch=drawn, positive=positive, generator=generator)

    def after_update(self, model: Any, state: Any) -> Any:
        return self.phase.after_update(model, state)

    def samples(self, state: Any) -> Chains | None:
        return self.phase.samples(state)

    def metrics(self, state: Any) -> dict[str, float]:
        return self.phase.metrics(state)

    def state_tensors(self, state: Any) -> dict[str, Tensor]:
        return self.phase.state_tensors(state)

    def state_from_tensors(self, model: Any, tensors: dict[str, Tensor]) -> Any:
        return self.phase.state_from_tensors(model, tensors)

    def describe(self) -> dict[str, Any]:
        return self.phase.describe()


def check_real(value: Any, name: str, *, low: float, high: float = math.inf, low_open: bool) -> float:
    """``value`` as a float if it is finite and in (low, high) or [low, high), else a ValidationError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number, got {value!r}")
    if (value <= low if low_open else value < low) or value >= high:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g})"
        raise ValidationError(f"{name} must be in {interval}, got {value!r}")
    return float(value)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ValidationError naming them."""
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value
