"""Train and validation log-likelihood tracked during learning from the ``"rts"`` phase's ``log Ẑ``.

The negative phase in :mod:`boltzlab.training.tracking` keeps an RTS estimate of every
level's ``log Z`` up to date as the parameters move (docs/algorithms.md §4.3, "Tracking
log-likelihood during training"); this callback turns its ``log Ẑ_K`` into the mean
log-likelihoods that the metrics CSV and early stopping read.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.likelihood import log_likelihood
from boltzlab.training.callbacks import Callback, RunView
from boltzlab.training.tracking import RTSTracking
from boltzlab.validation import as_model_data, check_positive_int

__all__ = ["RTSLikelihoodTracker"]


class RTSLikelihoodTracker(Callback):
    """Train and validation log-likelihood from the ``"rts"`` phase's tracked ``log Ẑ``.

    Every ``every`` updates (and before the first and after the last), the record gets
    ``rts_log_z`` and ``rts_log_z_stderr`` (extras) and the mean log-likelihoods
    ``mean log f(v) − log Ẑ_K`` (nats per example; paper §4.4) of the training data and of
    the validation data: in the record's ``train_log_likelihood`` and
    ``validation_log_likelihood`` fields — so :class:`~boltzlab.training.EarlyStopping` and
    the metrics CSV use them as they are — unless exact tracking (``track_exact_every``) is
    on, whose exact values keep those fields; the RTS ones then go to the extras
    ``rts_train_log_likelihood`` and ``rts_validation_log_likelihood``.

    Parameters
    ----------
    every : int
        Records every ``every`` updates.
    validation_data : Tensor or array, shape (n_examples, n_visible), optional
        Held-out data; default the trainer's ``validation_data`` (none: no validation value).

    Raises
    ------
    ValidationError
        At the start of training, unless the run's algorithm is ``"rts"`` (an
        :class:`RTSTracking` phase), or if ``validation_data`` does not fit the model.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training import EarlyStopping, RTSLikelihoodTracker
    >>> data = (torch.arange(140).view(20, 7) % 3 == 0).float()
    >>> model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    >>> result = bl.train(model, data[:15], algorithm="rts", k=5, n_chains=50, batch_size=5,
    ...                   n_updates=20, generator=0, algorithm_params={"n_levels": 8},
    ...                   callbacks=[RTSLikelihoodTracker(10, data[15:]), EarlyStopping(patience=3)])
    >>> [record.validation_log_likelihood is not None for record in result.history]
    [True, True, True]
    """

    def __init__(self, every: int, validation_data: Any = None) -> None:
        self.every = check_positive_int(every, "every")
        self._given_validation = validation_data
        self._validation: Tensor | None = None
        self._phase: RTSTracking | None = None

    def on_train_begin(self, run: RunView) -> None:
        phase = getattr(run, "phase", None)
        if not isinstance(phase, RTSTracking):
            raise ValidationError(
                "RTSLikelihoodTracker needs train(..., algorithm='rts') (an RTSTracking negative phase), "
                f"got {type(phase).__name__}"
            )
        self._phase = phase
        model = run.model
        if self._given_validation is None:
            self._validation = run.validation_data
        else:
            self._validation = as_model_data(model, self._given_validation, "validation_data")

    def wants_record(self, update: int) -> bool:
        return update % self.every == 0

    def measure(self, run: RunView) -> dict[str, float]:
        if run.update % self.every != 0 and run.update != run.n_updates:
            return {}
        # The trainer's loop exposes its phase and phase state beside the RunView protocol.
        phase, state = self._phase, getattr(run, "phase_state", None)
        if phase is None or state is None:
            raise ValidationError("RTSLikelihoodTracker measured before training began")
        log_z = phase.log_z(state)
        metrics = {"rts_log_z": log_z, "rts_log_z_stderr": phase.log_z_stderr(state)}
        exact_on = run.config.track_exact_every is not None
        train_name = "rts_train_log_likelihood" if exact_on else "train_log_likelihood"
        validation_name = "rts_validation_log_likelihood" if exact_on else "validation_log_likelihood"
        metrics[train_name] = log_likelihood(run.model, run.data, log_z)
        if self._validation is not None:
            metrics[validation_name] = log_likelihood(run.model, self._validation, log_z)
        return metrics


# ---------------------------------------------------------------------- helpers
