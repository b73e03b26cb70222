"""The training loop behind :func:`boltzlab.train`: one run's mutable state and its updates.

Per update (docs/algorithms.md §3.1): the next minibatch of a per-epoch permutation (with
per-example weights: rows drawn with probability ∝ weight, with replacement); the data term
from the model's objective; the negative phase advanced with the current parameters (CD-k,
Hinton 2002; PCD-k, Tieleman 2008); ``model term − data term`` written into ``.grad``; the
penalties' gradient added and, with centring, the whole turned into the centred direction
(docs/training.md); one ``optimizer.step()`` and ``scheduler.step()``.

The hot path makes no host–device synchronisation. Parameter finiteness is accumulated on the
device (one fused flag per update) and read only when a record or a checkpoint is made, which
is also when a divergence is reported — at the exact update it happened, because parameters
that became non-finite stay non-finite under further updates. A checkpoint is built only after
that check, so none ever holds NaN or inf.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.errors import DivergenceError, ValidationError
from boltzlab.io import Checkpoint, load_checkpoint
from boltzlab.rng import get_state, set_state
from boltzlab.training.callbacks import Callback, Checkpointer
from boltzlab.training.centering import Centering, Offsets
from boltzlab.training.data_parallel import DataParallel
from boltzlab.training.negative import NegativePhase
from boltzlab.training.objective import Objective
from boltzlab.training.optim import Schedule, make_optimizer, make_scheduler
from boltzlab.training.penalties import Penalties
from boltzlab.training.state import (
    TrainConfig,
    TrainRecord,
    TrainResult,
    TrainState,
    data_fingerprint,
    decode_train_state,
    encode_train_state,
)

__all__ = ["TrainingLoop"]

_RECORD_METRICS = ("log_z", "train_log_likelihood", "validation_log_likelihood")


class TrainingLoop:
    """One training run: its mutable state, its update step, and the view callbacks get.

    It implements :class:`~boltzlab.training.callbacks.RunView`. Built by
    :func:`boltzlab.training.train`, which validates every argument first; inside, inputs are
    trusted.
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        data: Tensor,
        validation_data: Tensor | None,
        config: TrainConfig,
        phase: NegativePhase,
        objective: Objective,
        schedule: Schedule,
        generator: torch.Generator,
        callbacks: list[Callback],
        checkpointer: Checkpointer | None,
        run_dir: Path | None,
        parallel: DataParallel | None = None,
        optimizer: str = "sgd",
        run_id: str | None = None,
        sample_weights: Tensor | None = None,
    ) -> None:
        self._model = model
        self._data = data
        # Per-example weights (float64, validated by train): minibatch rows are drawn with
        # probability w_n / Σ w by inverting this cumulative sum with uniforms of the run's
        # generator, so a weighted run is as reproducible as a plain one.
        self._sample_weights = sample_weights
        self._cumulative_weights = None if sample_weights is None else torch.cumsum(sample_weights, 0)
        self._validation_data = validation_data
        self._config = config
        # A phase whose defaults depend on the run (FPCD's fast learning rate defaults to the
        # initial learning rate) resolves them here; phases without ``for_run`` pass through.
        for_run = getattr(phase, "for_run", None)
        self.phase = for_run(learning_rate=config.learning_rate) if callable(for_run) else phase
        self.objective = objective
        self._after_step = getattr(objective, "after_step_", None)
        self.schedule = schedule
        self.generator = generator
        self.callbacks = callbacks
        self.checkpointer = checkpointer
        self.run_dir = run_dir
        # Data-parallel share under torchrun (training/data_parallel.py); None in one process.
        self.parallel = parallel
        # With centring, weight decay leaves the optimiser for the penalties, so that the
        # centred direction covers it too and the fixed points stay those of the penalised
        # objective (training/centering.py); without, it stays SGD's own, bit for bit as before.
        self.centering = Centering(model) if config.centering else None
        self.offsets: Offsets | None = None
        self.penalties = self._penalties(config)
        self.optimizer = make_optimizer(
            model,
            learning_rate=config.learning_rate,
            momentum=config.momentum,
            weight_decay=0.0 if config.centering else config.weight_decay,
            optimizer=optimizer,
        )
        self.scheduler = make_scheduler(self.optimizer, schedule)
        self.parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        self._update = 0
        self.epoch = 0
        self.position = 0
        self.permutation: Tensor | None = None
        self.elapsed_before = 0.0
        self.started = time.perf_counter()
        self._history: list[TrainRecord] = []
        self.phase_state: Any = None
        self.stop_requested = False
        self.resumed = False
        batch_size = config.batch_size
        self.n_usable = (data.shape[0] // batch_size) * batch_size  # drop the ragged tail
        self.batch = torch.empty((batch_size, data.shape[1]), dtype=data.dtype, device=data.device)
        self.monitor = data[:batch_size]
        # Number of updates, since the last check, after which every parameter was finite.
        self.finite_count = torch.zeros((), dtype=torch.int64, device=data.device)
        self.checked_update = 0
        # The run's identity, written into every checkpoint: given (the CLI keeps one per run
        # folder), else a new one for a fresh run, else the resumed checkpoint's.
        self.requested_run_id = run_id
        self.run_id = run_id or ""

    # ------------------------------------------------------------------ RunView
    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def data(self) -> Tensor:
        return self._data

    @property
    def validation_data(self) -> Tensor | None:
        return self._validation_data

    @property
    def config(self) -> TrainConfig:
        return self._config

    @property
    def update(self) -> int:
        return self._update

    @property
    def n_updates(self) -> int:
        return self._config.n_updates

    @property
    def history(self) -> tuple[TrainRecord, ...]:
        return tuple(self._history)

    @property
    def sample_weights(self) -> Tensor | None:
        """Per-example weights of the training data (float64, shape ``(n_examples,)``), or ``None``."""
        return self._sample_weights

    def request_stop(self) -> None:
        self.stop_requested = True

    def checkpoint(self) -> Checkpoint:
        self.ensure_finite()
        state = TrainState(
            update=self._update,
            epoch=self.epoch,
            position=self.position,
            permutation=self.permutation,
            elapsed=self.elapsed,
            history=tuple(self._history),
            phase_state=self._full_phase_state(),
            generator_state=get_state(self.generator),
            optimizer_state=self.optimizer.state_dict(),
            scheduler_state=self.scheduler.state_dict(),
            model_state=dict(self._model.state_dict()),
            base_fitted=bool(getattr(self._model, "base_fitted", False)),
            callback_states=self._callback_states(),
            data_fingerprint=data_fingerprint(self._data, self._sample_weights),
            run_id=self.run_id,
            offsets={} if self.offsets is None else Centering.state_tensors(self.offsets),
        )
        return encode_train_state(state, config=self._config, phase=self.phase)

    @staticmethod
    def _penalties(config: TrainConfig) -> Penalties:
        return Penalties(
            l2=config.weight_decay if config.centering else 0.0, l1=config.l1, l1_squared=config.l1_squared
        )

    # ------------------------------------------------------------------ helpers
    def _full_phase_state(self) -> Any:
        """The phase state with every process's chains (a collective under torchrun)."""
        return self.phase_state if self.parallel is None else self.parallel.full_state(self.phase_state)

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + (time.perf_counter() - self.started)

    def _callback_keys(self) -> list[str]:
        seen: dict[str, int] = {}
        keys = []
        for callback in self.callbacks:
            name = type(callback).__name__
            keys.append(f"{name}:{seen.get(name, 0)}")
            seen[name] = seen.get(name, 0) + 1
        return keys

    def _callback_states(self) -> dict[str, Any]:
        return {
            key: state
            for key, callback in zip(self._callback_keys(), self.callbacks, strict=True)
            if (state := callback.state())
        }

    def ensure_finite(self) -> None:
        """Raise :class:`DivergenceError` if a parameter became non-finite since the last check."""
        n_since = self._update - self.checked_update
        if n_since == 0:
            return
        n_finite = int(self.finite_count)  # the only synchronisation, once per record/checkpoint
        if n_finite == n_since:
            self.checked_update = self._update
            self.finite_count.zero_()
            return
        bad_update = self.checked_update + n_finite + 1
        learning_rate = self._config.learning_rate * self.schedule(bad_update - 1)
        last = self.checkpointer.last_path if self.checkpointer is not None else None
        where = (
            f"the last good checkpoint is {last}"
            if last is not None
            else "no checkpoint was written (pass checkpoint_dir to keep one)"
        )
        # Non-finite values stay non-finite under further updates, so the tensors that hold
        # them now include the one that diverged at bad_update (others may have followed).
        named = [*self._model.named_parameters(), *self._model.named_buffers()]
        broken = [
            name for name, tensor in named if tensor.is_floating_point() and not bool(tensor.isfinite().all())
        ]
        raise DivergenceError(
            f"the parameters became non-finite at update {bad_update} (learning rate {learning_rate:g}; "
            f"NaN or ±inf now in {', '.join(repr(name) for name in broken) or 'the model'}): "
            f"lower learning_rate (--learning-rate); {where}",
            step=bad_update,
            partial=tuple(self._history),
        )

    # ------------------------------------------------------------------ start
    def start_fresh(self) -> None:
        self.run_id = self.requested_run_id or secrets.token_hex(8)
        # The base fits the weighted marginals when there are weights (train checked that the
        # model's set_base_rate takes them).
        weighted = {} if self._sample_weights is None else {"sample_weights": self._sample_weights}
        if self._config.fit_base_rate and hasattr(self._model, "set_witness"):
            self._model.set_base_rate(self._data, witness_rows=self._config.witness_rows, **weighted)
        elif self._config.fit_base_rate and hasattr(self._model, "set_base_rate"):
            self._model.set_base_rate(self._data, **weighted)
        start_fields = getattr(self._model, "start_fields_at_profile_", None)
        if self._config.fit_base_rate and callable(start_fields):
            start_fields()  # a Potts model's zero fields start at the profile (docs/training.md)
        if self.centering is not None:
            self.offsets = self.centering.init(self._model, self._data, self._sample_weights)
        with torch.no_grad():
            self.phase_state = self.phase.init(self._model, self._data, generator=self.generator)
            if self.parallel is not None:
                self.phase_state = self.parallel.local_state(self.phase_state)

    def restore(self, path: Path) -> None:
        checkpoint = load_checkpoint(path)
        saved = checkpoint.metadata.get("config", {})
        current = self._config.to_dict()
        different = [
            f"{name}: checkpoint {TrainConfig.saved_value(saved, name)!r}, now {current[name]!r}"
            for name in TrainConfig.STRUCTURAL
            if TrainConfig.saved_value(saved, name) != current[name]
        ]
        if saved.get("model") and saved["model"] != current["model"]:
            # An RBM's and a SpinRBM's tensors have the same names and shapes: only the class tells.
            different.append(f"model: checkpoint {saved['model']!r}, now {current['model']!r}")
        if different:
            raise ValidationError(f"cannot resume from {path}: settings differ ({'; '.join(different)})")
        state = decode_train_state(checkpoint, phase=self.phase, model=self._model, source=str(path))
        if self.requested_run_id and state.run_id and state.run_id != self.requested_run_id:
            raise ValidationError(
                f"cannot resume from {path}: it belongs to run {state.run_id}, and this run is "
                f"{self.requested_run_id}; a checkpoint copied from another run's folder cannot "
                "continue this one (start a new run, or resume in the folder the checkpoint came from)"
            )
        self.run_id = state.run_id or self.requested_run_id or secrets.token_hex(8)
        fingerprint = data_fingerprint(self._data, self._sample_weights)
        if state.data_fingerprint != fingerprint:
            what = (
                "the training data"
                if self._sample_weights is None
                else "the training data or their sample weights"
            )
            raise ValidationError(
                f"cannot resume from {path}: {what} differ from the checkpoint's ({state.data_fingerprint} vs {fingerprint})"
            )
        if self.centering is not None:
            self.offsets = Centering.state_from_tensors(self._model, state.offsets, source=str(path))
        if self._config.fit_base_rate and hasattr(self._model, "set_witness"):
            # The witness is not in the checkpoint: it is a fixed choice of the data's rows, and
            # the data are the checkpoint's (fingerprinted above), so it comes back bit for bit.
            self._model.set_witness(self._data, n_rows=self._config.witness_rows)
        try:
            self._model.load_state_dict(state.model_state)
        except RuntimeError as error:
            raise ValidationError(f"cannot resume from {path}: {error}") from None
        if hasattr(self._model, "base_fitted"):
            self._model.base_fitted = state.base_fitted
        self.optimizer.load_state_dict(state.optimizer_state)
        lambdas = [None] * len(self.scheduler.lr_lambdas)
        self.scheduler.load_state_dict({**state.scheduler_state, "lr_lambdas": lambdas})
        if any(TrainConfig.saved_value(saved, name) != current[name] for name in TrainConfig.OPTIMISATION):
            self._apply_hyperparameters(state.update)
        set_state(self.generator, state.generator_state)
        self._update = self.checked_update = state.update
        self.epoch, self.position = state.epoch, state.position
        self.permutation = None if state.permutation is None else state.permutation.to(self._data.device)
        self.elapsed_before = state.elapsed
        self._history = list(state.history)
        self.phase_state = state.phase_state
        if self.parallel is not None:
            self.phase_state = self.parallel.local_state(self.phase_state)
        for key, callback in zip(self._callback_keys(), self.callbacks, strict=True):
            if key in state.callback_states:
                callback.load_state(state.callback_states[key])
        self.resumed = True

    def _apply_hyperparameters(self, update: int) -> None:
        # The resumed run asks for other optimisation settings (e.g. a lower learning rate
        # after a divergence): keep the momentum buffers, replace the settings.
        config = self._config
        learning_rate = config.learning_rate * self.schedule(update)
        for group in self.optimizer.param_groups:
            group["initial_lr"] = config.learning_rate
            group["lr"] = learning_rate
            group["momentum"] = config.momentum
            if group.get("name") == "weights":
                group["weight_decay"] = 0.0 if config.centering else config.weight_decay
        n_groups = len(self.optimizer.param_groups)
        self.scheduler.base_lrs = [config.learning_rate] * n_groups
        self.scheduler.lr_lambdas = [self.schedule] * n_groups
        self.scheduler._last_lr = [learning_rate] * n_groups

    # ------------------------------------------------------------------ loop
    def make_record(self) -> TrainRecord:
        self.ensure_finite()
        metrics: dict[str, float] = {}
        for callback in self.callbacks:
            metrics.update(callback.measure(self))
        metrics.update(self.phase.metrics(self.phase_state))
        known = {name: float(metrics.pop(name)) for name in _RECORD_METRICS if name in metrics}
        record = TrainRecord(
            update=self._update,
            epoch=self.epoch,
            learning_rate=float(self.optimizer.param_groups[0]["lr"]),
            time=self.elapsed,
            reconstruction_error=float(self.objective.reconstruction_error(self._model, self.monitor)),
            extra={name: float(value) for name, value in metrics.items()},
            **known,
        )
        self._history.append(record)
        for callback in self.callbacks:
            callback.on_record(self, record)
        return record

    def _record_due(self) -> bool:
        if self._update % self._config.log_every == 0 or self._update == self._config.n_updates:
            return True
        return any(callback.wants_record(self._update) for callback in self.callbacks)

    def _step(self) -> None:
        """One parameter update (the hot path: no synchronisation, no per-update metrics)."""
        config, data, generator = self._config, self._data, self.generator
        batch_size = config.batch_size
        index = self._next_rows(batch_size)
        torch.index_select(data, 0, index, out=self.batch)
        self.position += batch_size
        batch, parallel = self.batch, self.parallel
        if parallel is not None:
            batch = batch[parallel.batch_rows[0] : parallel.batch_rows[1]]
            generator = parallel.chain_generator(generator, data.device)  # type: ignore[assignment]
        positive = self.objective.positive(self._model, batch)
        if self.centering is not None:
            means = self.centering.batch_means(positive)
            if parallel is not None:
                parallel.average_(means, "averaging the centring means")  # the whole minibatch's
            self.offsets = self.centering.update(self.offsets, means)  # type: ignore[arg-type]
        self.phase_state, samples = self.phase.step(
            self._model, self.phase_state, batch=batch, positive=positive, generator=generator
        )
        self.objective.write_gradient_(self._model, positive, self.objective.negative(self._model, samples))
        if parallel is not None:
            parallel.average_gradients_(self.parameters)
        if self.penalties.active:
            self.penalties.add_gradient_(self._model)
        if self.centering is not None:
            self.centering.transform_gradient_(self._model, self.offsets)  # type: ignore[arg-type]
        self.optimizer.step()
        if self._after_step is not None:
            self._after_step(self._model)  # e.g. a Potts RBM's gauge (training/potts_objective.py)
        self.scheduler.step()
        self.phase_state = self.phase.after_update(self._model, self.phase_state)
        self._update += 1
        # One finiteness flag per update, counted on the device (no synchronisation). Each
        # tensor is tested element by element: a sum would overflow to inf on large but finite
        # float32 weights (36 entries of 1e37) and report a divergence that did not happen.
        flags = torch.stack([parameter.isfinite().all() for parameter in self.parameters])
        self.finite_count.add_(flags.all())

    def _next_rows(self, batch_size: int) -> Tensor:
        """The indices of the next minibatch's rows, shape ``(batch_size,)``; advances the epoch.

        Plain: consecutive slices of a per-epoch permutation (the ragged tail dropped).
        Weighted: ``batch_size`` independent draws with probability ``w_n / Σ w`` (with
        replacement), by inverting the cumulative weights at uniforms of the run's generator;
        an "epoch" is then ``n_examples // batch_size`` updates, as in a plain run.
        """
        data, generator = self._data, self.generator
        if self._cumulative_weights is None:
            if self.permutation is None or self.position + batch_size > self.n_usable:
                self.permutation = torch.randperm(data.shape[0], generator=generator, device=data.device)
                self.position = 0
                self.epoch += 1
            return self.permutation[self.position : self.position + batch_size]
        if self.epoch == 0 or self.position + batch_size > self.n_usable:
            self.position = 0
            self.epoch += 1
        cumulative = self._cumulative_weights
        uniforms = torch.rand(batch_size, dtype=torch.float64, generator=generator, device=cumulative.device)
        # right=True: the first row whose cumulative weight exceeds u, so a zero weight is never drawn.
        index = torch.searchsorted(cumulative, uniforms.mul_(cumulative[-1]), right=True)
        return index.clamp_(max=data.shape[0] - 1)

    def run(self) -> TrainResult:
        self.started = time.perf_counter()
        try:
            with torch.no_grad():  # parameters are moved by hand-written gradients, never by autograd
                if self.parallel is not None:
                    self.parallel.check_agreement(self._model, data_fingerprint(self._data), self.generator)
                for callback in self.callbacks:
                    callback.on_train_begin(self)
                if not self.resumed:
                    self.make_record()
                while self._update < self._config.n_updates and not self.stop_requested:
                    self._step()
                    if self._record_due():
                        self.make_record()
                    for callback in self.callbacks:
                        callback.on_update(self)
                if not self._history or self._history[-1].update != self._update:
                    self.make_record()
                self.ensure_finite()
                for callback in self.callbacks:
                    callback.on_train_end(self)
        finally:
            for callback in self.callbacks:
                callback.close()
        metadata = getattr(self._model, "metadata", None)
        if isinstance(metadata, dict):
            metadata["training"] = self._config.to_record()
        return TrainResult(
            model=self._model,
            n_updates=self._update,
            history=tuple(self._history),
            final_chains=self.phase.samples(self._full_phase_state()),
            stopped_early=self.stop_requested and self._update < self._config.n_updates,
            run_dir=self.run_dir,
        )
