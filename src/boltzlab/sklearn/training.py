"""Training settings of ``BernoulliRBM``, and its training through the library's loop.

The default, ``algorithm="pcd", operator="gibbs"``, is scikit-learn's own PCD and runs in the
tight loop of :mod:`boltzlab.sklearn.pcd` (:func:`uses_sklearn_loop`). Every other algorithm
and operator runs here: ``fit`` is one run of :class:`boltzlab.training.loop.TrainingLoop`
(the loop behind :func:`boltzlab.train`; docs/algorithms.md §3.1) and ``partial_fit`` a run of
one update. The loop is used directly rather than through ``train`` for two reasons: the data
term takes grey values in [0, 1] as they are (scikit-learn's meaning,
:mod:`boltzlab.sklearn.inputs`), which ``train`` refuses as non-binary, and what must carry
from one call to the next — the negative phase's chains, the momentum buffers, the
generator — is handed in and taken back here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab import operators
from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.sklearn.inputs import BernoulliStarts, check_real, is_binary
from boltzlab.training import TrainConfig, TrainRecord, get_phase, make_schedule, objective_for
from boltzlab.training.callbacks import Callback, ProgressBar
from boltzlab.training.loop import TrainingLoop
from boltzlab.training.settings import operator_record
from boltzlab.training.trainer import DEFAULT_CAST_CHAINS, DEFAULT_CHAINS
from boltzlab.validation import check_positive_int

__all__ = ["Carried", "Settings", "uses_sklearn_loop"]


@dataclass(frozen=True, slots=True)
class Settings:
    """The estimator's training parameters, checked (see ``BernoulliRBM``'s docstring)."""

    algorithm: Any
    algorithm_params: dict[str, Any]
    operator: operators.Operator
    k: int
    n_chains: int
    learning_rate: float
    momentum: float
    weight_decay: float
    verbose: bool
    shuffle: bool


@dataclass(frozen=True, slots=True)
class Carried:
    """What one call of :func:`run_updates` leaves for the next.

    Attributes
    ----------
    phase_tensors : dict of str to Tensor, optional
        The negative phase's state in its checkpoint form (picklable, like the estimator).
    phase_description : dict, optional
        The phase's ``describe()``: another one (after ``set_params``) starts new chains.
    momentum : list of Tensor or None, optional
        SGD's momentum buffers, one per parameter (the library loop's ``torch.optim.SGD``
        buffers, or :mod:`boltzlab.sklearn.pcd`'s velocities); reused only with the chains.
    chains : Chains, optional
        The β = 1 chains after the last update (``h_samples_``).
    """

    phase_tensors: dict[str, Tensor] | None = None
    phase_description: dict[str, Any] | None = None
    momentum: list[Tensor | None] | None = None
    chains: Chains | None = None


def uses_sklearn_loop(estimator: Any) -> bool:
    """Whether ``estimator`` trains with scikit-learn's PCD-k (:mod:`boltzlab.sklearn.pcd`).

    True for ``algorithm="pcd"`` and ``operator="gibbs"`` given by name, with no
    ``algorithm_params`` or ``operator_params`` (those are the library phase's options).
    """
    return (
        isinstance(estimator.algorithm, str)
        and estimator.algorithm == "pcd"
        and isinstance(estimator.operator, str)
        and estimator.operator == "gibbs"
        and not estimator.algorithm_params
        and not estimator.operator_params
    )


def default_chains(estimator: Any) -> int:
    """``n_chains`` when none is given: one per minibatch row for PCD (scikit-learn's), else the trainer's."""
    if estimator.algorithm == "pcd":
        return check_positive_int(estimator.batch_size, "batch_size")
    return DEFAULT_CAST_CHAINS if estimator.algorithm == "cast" else DEFAULT_CHAINS


def settings_of(estimator: Any) -> Settings:
    """The training parameters of ``estimator``, each checked (a ValidationError names it)."""
    n_chains = default_chains(estimator) if estimator.n_chains is None else estimator.n_chains
    if not isinstance(estimator.shuffle, (bool, np.bool_)):
        raise ValidationError(f"shuffle must be True or False, got {estimator.shuffle!r}")
    return Settings(
        algorithm=estimator.algorithm,
        algorithm_params=dict(estimator.algorithm_params or {}),
        operator=operators.resolve(estimator.operator, **(estimator.operator_params or {})),
        k=check_positive_int(estimator.k, "k"),
        n_chains=check_positive_int(n_chains, "n_chains"),
        learning_rate=check_real(estimator.learning_rate, "learning_rate", low=0.0, low_open=True),
        momentum=check_real(estimator.momentum, "momentum", low=0.0, high=1.0, low_open=False),
        weight_decay=check_real(estimator.weight_decay, "weight_decay", low=0.0, low_open=False),
        verbose=bool(estimator.verbose),
        shuffle=bool(estimator.shuffle),
    )


def run_updates(
    model: Any,
    data: Tensor,
    settings: Settings,
    carried: Carried,
    *,
    generator: torch.Generator,
    batch_size: int,
    n_updates: int,
    log_every: int,
) -> tuple[tuple[TrainRecord, ...], Carried]:
    """``n_updates`` updates of ``model`` on ``data``, continuing from ``carried``.

    Parameters
    ----------
    model : RBM
        Trained in place.
    data : Tensor, shape (n_examples, n_visible), values in [0, 1]
        In the model's dtype and on its device; grey values feed the data term as they are,
        and chains start at Bernoulli draws of them (:class:`BernoulliStarts`).
    settings : Settings
    carried : Carried
        From the previous call (``Carried()`` before the first: chains start from ``data``).
    generator : torch.Generator
        Advanced by the run.
    batch_size : int
        Rows per update; each pass over ``data`` is a fresh permutation of them.
    n_updates : int
        0 only sets up the chains.
    log_every : int
        Updates between history records.

    Returns
    -------
    history : tuple of TrainRecord
    carried : Carried
    """
    phase = get_phase(
        settings.algorithm,
        operator=settings.operator,
        k=settings.k,
        n_chains=settings.n_chains,
        **settings.algorithm_params,
    )
    # A phase that is its own gradient ("pl", the pseudo-likelihood) supplies the objective.
    own_objective = getattr(phase, "training_objective", None)
    objective = (
        objective_for(model) if not callable(own_objective) else own_objective(model, objective_for(model))
    )
    if not is_binary(data):
        if callable(own_objective):
            # The pseudo-likelihood conditions on each unit's 0/1 value: a probability has none.
            raise ValidationError(f"algorithm={settings.algorithm!r} needs 0/1 data; binarise X first")
        phase = BernoulliStarts(phase)
    config = TrainConfig(
        algorithm=settings.algorithm if isinstance(settings.algorithm, str) else repr(settings.algorithm),
        algorithm_params=settings.algorithm_params,
        operator=repr(settings.operator),
        k=settings.k,
        n_chains=settings.n_chains,
        batch_size=batch_size,
        n_updates=n_updates,
        n_epochs=None,
        learning_rate=settings.learning_rate,
        momentum=settings.momentum,
        weight_decay=settings.weight_decay,
        lr_schedule="constant",
        log_every=max(1, log_every),
        track_exact_every=None,
        checkpoint_every=None,
        fit_base_rate=False,  # the estimator fits the base from drawn rows: it needs 0/1 data
        model=type(model).__name__,
        readable={**operator_record(settings.operator), "lr_schedule": "constant", "lr_schedule_params": {}},
    )
    callbacks: list[Callback] = [ProgressBar(description="BernoulliRBM")] if settings.verbose else []
    loop = TrainingLoop(
        model=model,
        data=data,
        validation_data=None,
        config=config,
        phase=phase,
        objective=objective,
        schedule=make_schedule("constant", n_updates=max(1, n_updates)),
        generator=generator,
        callbacks=callbacks,
        checkpointer=None,
        run_dir=None,
    )
    description = loop.phase.describe()
    if carried.phase_tensors is not None and description == carried.phase_description:
        loop.phase_state = loop.phase.state_from_tensors(model, carried.phase_tensors)
    else:  # the first call, or set_params changed the negative phase: new chains from these rows
        with torch.no_grad():
            loop.phase_state = loop.phase.init(model, data, generator=generator)
    if carried.momentum is not None and settings.momentum > 0.0 and description == carried.phase_description:
        for parameter, buffer in zip(loop.parameters, carried.momentum, strict=True):
            if buffer is not None:
                loop.optimizer.state[parameter]["momentum_buffer"] = buffer
    result = loop.run()
    return result.history, Carried(
        phase_tensors=loop.phase.state_tensors(loop.phase_state),
        phase_description=description,
        momentum=[loop.optimizer.state[parameter].get("momentum_buffer") for parameter in loop.parameters],
        chains=loop.phase.samples(loop.phase_state),
    )
