"""``BernoulliRBM``: a drop-in for ``sklearn.neural_network.BernoulliRBM`` built on boltzlab.

Same constructor, methods and fitted attributes as scikit-learn's (Tieleman 2008's PCD-1 there),
with boltzlab underneath: the model is a :class:`boltzlab.RBM`; the default training is
scikit-learn's own PCD in a tight loop (:mod:`boltzlab.sklearn.pcd`: the same initial weights
for the same ``random_state``, one chain per minibatch row started at ``h = 0``, the rows in
order), any other negative phase or operator runs in the library's training loop
(docs/algorithms.md §3.1); ``score_samples`` is ``log p(v) = −F(v) − log Z`` with ``log Z``
exact or estimated by :func:`boltzlab.estimate_log_z` (:mod:`boltzlab.sklearn.log_z`) — not
scikit-learn's stochastic pseudo-likelihood — so a row's score never depends on the other rows,
and ``score`` is its mean. How values in [0, 1] are read: :mod:`boltzlab.sklearn.inputs`; the
conventions: docs/architecture.md, "scikit-learn".

The learning rate means what scikit-learn's does: the gradient is averaged over the minibatch
(scikit-learn divides its summed update by the batch size; the trainer's objective averages),
and there is no momentum or weight decay unless asked for.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from boltzlab import distributed, operators
from boltzlab.errors import ValidationError
from boltzlab.estimators import LogZEstimate
from boltzlab.models import RBM
from boltzlab.rng import get_state, make_generator, sample_bernoulli, set_state
from boltzlab.sampling import sample as sample_model
from boltzlab.sklearn.inputs import (
    OUT_OF_RANGE,
    check_choice,
    check_rows,
    is_binary,
)
from boltzlab.sklearn.inputs import to_model_tensor as _tensor
from boltzlab.sklearn.log_z import MAX_ANCHOR_ROWS, estimate_for, parameter_fingerprint
from boltzlab.sklearn.pcd import LoopOptions, run_one_update, run_passes
from boltzlab.sklearn.training import Carried, Settings, run_updates, settings_of, uses_sklearn_loop
from boltzlab.training import TrainRecord
from boltzlab.validation import check_device, check_nonnegative_int, check_positive_int

__all__ = ["BernoulliRBM"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class BernoulliRBM(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Bernoulli restricted Boltzmann machine with scikit-learn's interface, trained by boltzlab.

    Parameters
    ----------
    n_components : int, default 256
        Hidden units.
    learning_rate : float, default 0.1
        Step of plain SGD on the minibatch-averaged log-likelihood gradient (scikit-learn's
        convention).
    batch_size : int, default 10
        Rows per update (at most the number of rows given to ``fit``).
    n_iter : int, default 10
        Passes over the data in ``fit``. With the default PCD and Gibbs operator each pass
        makes ``ceil(n_samples / batch_size)`` updates, the last minibatch ragged, as
        scikit-learn's; the library's loop (other algorithms and operators) makes
        ``n_samples // batch_size`` updates of a fresh random permutation.
    verbose : int, default 0
        Above 0: a progress bar over the updates.
    random_state : int, RandomState instance or None, default None
        Seeds the weights, the chains, the log Z estimate and the sampling methods; an int
        makes everything reproducible. The initial weights are drawn as scikit-learn draws
        them (``RandomState.normal(0, 0.01)``), so the same int gives both estimators the same
        starting weights.
    algorithm : str, default "pcd"
        The negative phase. ``"pcd"`` with ``operator="gibbs"`` (and no ``algorithm_params``
        or ``operator_params``) is scikit-learn's PCD-k, run in :mod:`boltzlab.sklearn.pcd`'s
        tight loop; any other of ``boltzlab.training.available_phases()`` — ``"cd"``,
        ``"fpcd"``, ``"pt"``, ``"cast"``, ``"trans-sap"``, ``"ast"``, ``"rts"``, ``"pl"`` (maximum
        pseudo-likelihood, no chains), or ``"pcd"`` with another operator — runs in the
        library's training loop.
    operator : str, default "gibbs"
        How chains move: ``"gibbs"``, ``"flip"`` (flip-the-state) or ``"mixture"``.
    k : int, default 1
        Operator sweeps (or scheme steps) per update.
    n_chains : int, optional
        Persistent chains; default ``batch_size`` for PCD (scikit-learn's ``h_samples_``: one
        chain per minibatch row), else the trainer's (100, or 50 for CAST).
    momentum : float in [0, 1), default 0
    weight_decay : float >= 0, default 0
        L2 coefficient on the weights.
    shuffle : bool, default False
        With the default PCD: take the rows of each pass in their order, as scikit-learn does
        (False), or in a fresh random order (True; better for data sorted by class). The
        library's loop always shuffles.
    algorithm_params, operator_params : dict, optional
        Passed on, e.g. ``{"n_levels": 10}`` for PT, ``{"alpha": 0.5}`` for the mixture.
    log_z_method : str, default "auto"
        How ``score_samples`` gets log Z: ``"auto"`` is ``"exact"`` when the smaller layer has at
        most ``boltzlab.sklearn.log_z.MAX_EXACT_UNITS`` (20) units, else a short AIS run judged
        by the library's checks (``boltzlab.sklearn.log_z.FAST_AIS``: 100 chains, 500
        temperatures, the schedule check, a witness from 1,000 training rows); any method of
        :func:`boltzlab.estimate_log_z` may be named, and then runs with its own defaults.
    log_z_params : dict, optional
        Options of that method, over the defaults (e.g. ``{"n_temperatures": 5000}``).
    out_of_range : {"clip", "error"}, default "clip"
        Values outside [0, 1] are clipped with a warning, or refused.
    dtype : {"float32", "float64"}, default "float32"
        Of the parameters and chains.
    device : str, optional
        ``None`` is the CPU; e.g. ``"cuda"``.

    Attributes
    ----------
    model_ : boltzlab.RBM
        The fitted model, for everything else boltzlab does (samplers, estimators, ``save``).
    components_ : ndarray, shape (n_components, n_features)
        The weights; on the CPU a view of ``model_.weights``, so writing into it (or assigning
        it) changes the model.
    intercept_hidden_ : ndarray, shape (n_components,)
    intercept_visible_ : ndarray, shape (n_features,)
    h_samples_ : ndarray, shape (n_chains, n_components)
        Hidden states of the negative phase's chains after the last update (0/1).
    history_ : tuple of boltzlab.training.TrainRecord
        One record per pass of the last ``fit`` (reconstruction error, learning rate, time).
    log_z_estimate_ : boltzlab.LogZEstimate
        log Z of the current parameters, computed at first use and kept until they change
        (``fit``, ``partial_fit``, ``set_params`` or a write into the parameters).
    log_z_, log_z_stderr_, log_z_method_, log_z_reliable_, log_z_verdict_, log_z_reason_ : float, float, str, bool, str, str
        Its value (nats), standard error (0 when exact), the method that produced it, whether
        it can be trusted, the estimator's verdict — ``"reliable"``, ``"unchecked"`` (no
        witness reached data) or ``"unreliable"`` (docs/trust.md) — and why it is not
        reliable (the first failed check, or what was not checked; ``""`` when reliable).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``fit`` was given column names.

    Examples
    --------
    >>> import numpy as np
    >>> from boltzlab.sklearn import BernoulliRBM
    >>> X = np.array([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]])
    >>> rbm = BernoulliRBM(n_components=2, random_state=0).fit(X)
    >>> rbm.transform(X).shape, rbm.log_z_method_
    ((4, 2), 'exact')
    """

    def __init__(
        self,
        n_components: int = 256,
        *,
        learning_rate: float = 0.1,
        batch_size: int = 10,
        n_iter: int = 10,
        verbose: int = 0,
        random_state: Any = None,
        algorithm: Any = "pcd",
        operator: Any = "gibbs",
        k: int = 1,
        n_chains: int | None = None,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        shuffle: bool = False,
        algorithm_params: dict[str, Any] | None = None,
        operator_params: dict[str, Any] | None = None,
        log_z_method: str = "auto",
        log_z_params: dict[str, Any] | None = None,
        out_of_range: str = "clip",
        dtype: str = "float32",
        device: str | None = None,
    ) -> None:
        self.n_components = n_components
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.verbose = verbose
        self.random_state = random_state
        self.algorithm = algorithm
        self.operator = operator
        self.k = k
        self.n_chains = n_chains
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.shuffle = shuffle
        self.algorithm_params = algorithm_params
        self.operator_params = operator_params
        self.log_z_method = log_z_method
        self.log_z_params = log_z_params
        self.out_of_range = out_of_range
        self.dtype = dtype
        self.device = device

    # ------------------------------------------------------------------ scikit-learn protocol
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # densified: an RBM's visible layer is dense anyway
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "model_")

    def set_params(self, **params: Any) -> BernoulliRBM:
        """scikit-learn's ``set_params``; forgets the cached log Z."""
        super().set_params(**params)
        self.__dict__.pop("_log_z_cache", None)
        return self

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """Fit a new model to ``X`` (n_samples, n_features), values in [0, 1]; ``y`` is ignored."""
        rows = self._rows(X, reset=True, method="fit")
        settings = settings_of(self)
        batch_size = min(check_positive_int(self.batch_size, "batch_size"), rows.shape[0])
        n_passes = check_nonnegative_int(self.n_iter, "n_iter")
        self._initialise(rows)
        self.history_ = self._train(rows, settings, batch_size=batch_size, n_passes=n_passes)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> BernoulliRBM:
        """One update with ``X`` as the minibatch, continuing the chains (scikit-learn's meaning).

        The first call makes the model (its weights and base from ``X``; the chains as ``fit``
        starts them).
        """
        first = not hasattr(self, "model_")
        rows = self._rows(X, reset=first, method="partial_fit")
        settings = settings_of(self)
        if first:
            self._initialise(rows)
        self._train(rows, settings, batch_size=rows.shape[0], n_passes=None)
        if not first:  # the newest rows anchor log Z estimates from now on
            drawn = self._binary(_tensor(rows, self.model_)).to(torch.uint8).cpu()
            self._anchor_rows = torch.cat([self._anchor_rows, drawn])[-MAX_ANCHOR_ROWS:]
        return self

    def _rows(self, X: Any, *, reset: bool, method: str) -> np.ndarray:
        return check_rows(
            self,
            X,
            reset=reset,
            out_of_range=check_choice(self.out_of_range, "out_of_range", OUT_OF_RANGE),
            method=method,
        )

    def _initialise(self, rows: np.ndarray) -> None:
        """A fresh model for ``rows``: scikit-learn's initial weights, zero biases, base rate, seeds."""
        n_components = check_positive_int(self.n_components, "n_components")
        dtype = _DTYPES.get(str(self.dtype).removeprefix("torch."))
        if dtype is None:
            raise ValidationError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        device = check_device("cpu" if self.device is None else self.device)
        random_state = check_random_state(self.random_state)
        # scikit-learn's first draw, in its shape (n_components, n_features): the same int
        # random_state starts both estimators at the same weights. The digits example's test
        # accuracy varies by a standard deviation of 0.015-0.02 from seed to seed, much of it
        # the starting weights': with them shared, the seed-by-seed difference between the two
        # estimators varied by 0.012 (24 seeds), so a comparison over a few seeds says more.
        components = random_state.normal(0.0, 0.01, (n_components, rows.shape[1]))
        seeds = [int(seed) for seed in random_state.randint(0, 2**31 - 1, size=3)]
        generator = make_generator(seeds[0], device)
        model = RBM(weights=torch.as_tensor(components.T), dtype=dtype, device=device)
        drawn = self._binary(_tensor(rows, model), generator=make_generator(seeds[2], device))
        model.set_base_rate(drawn)
        keep = torch.randperm(drawn.shape[0], generator=torch.Generator().manual_seed(seeds[2]))
        self.model_ = model
        self._n_features_out = n_components
        self._rng_state = get_state(generator)
        self._log_z_seed = seeds[1]
        self._carried = Carried()
        self._anchor_rows = drawn[keep[:MAX_ANCHOR_ROWS].to(drawn.device)].to(torch.uint8).cpu()

    def _binary(self, data: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``data`` if binary, else one Bernoulli draw of it (by default from the estimator's stream)."""
        if is_binary(data):
            return data
        if generator is not None:
            return sample_bernoulli(data, generator=generator)
        own = self._generator()
        drawn = sample_bernoulli(data, generator=own)
        self._rng_state = get_state(own)
        return drawn

    def _generator(self) -> torch.Generator:
        return set_state(torch.Generator(device=self.model_.device), self._rng_state)

    def _train(
        self, rows: np.ndarray, settings: Settings, *, batch_size: int, n_passes: int | None
    ) -> tuple[TrainRecord, ...]:
        """Train from where the last call stopped: ``n_passes`` passes (``fit``) or, with
        ``None``, one update with all of ``rows`` (``partial_fit``); returns the history."""
        generator = self._generator()
        data = _tensor(rows, self.model_)
        history: tuple[TrainRecord, ...] = ()
        if uses_sklearn_loop(self):
            options = LoopOptions.of(settings, batch_size)
            if n_passes is None:
                self._carried = run_one_update(self.model_, data, options, self._carried, generator=generator)
            else:
                history, self._carried = run_passes(
                    self.model_,
                    data,
                    options,
                    self._carried,
                    generator=generator,
                    n_passes=n_passes,
                    verbose=settings.verbose,
                )
        else:
            per_pass = 1 if n_passes is None else rows.shape[0] // batch_size
            history, self._carried = run_updates(
                self.model_,
                data,
                settings,
                self._carried,
                generator=generator,
                batch_size=batch_size,
                n_updates=1 if n_passes is None else n_passes * per_pass,
                log_every=per_pass,
            )
        self._rng_state = get_state(generator)
        chains = self._carried.chains
        self.h_samples_ = (
            np.zeros((0, self.model_.n_hidden)) if chains is None else chains.layers[1].cpu().numpy()
        )
        self.__dict__.pop("_log_z_cache", None)
        return history

    # ------------------------------------------------------------------ fitted parameters
    def _parameter_array(self, name: str, transpose: bool = False) -> np.ndarray:
        check_is_fitted(self)
        tensor = getattr(self.model_, name).detach()
        tensor = tensor.t() if transpose else tensor
        # On the CPU a view, as scikit-learn's arrays are the model itself; elsewhere a copy.
        return tensor.numpy() if tensor.device.type == "cpu" else tensor.cpu().numpy()

    def _set_parameter(self, name: str, value: Any, transpose: bool = False) -> None:
        check_is_fitted(self)
        parameter = getattr(self.model_, name)
        array = torch.as_tensor(np.asarray(value, dtype=np.float64))
        array = array.t() if transpose else array
        if tuple(array.shape) != tuple(parameter.shape):
            shape = tuple(parameter.shape)[::-1] if transpose else tuple(parameter.shape)
            raise ValidationError(f"{name}: expected an array of shape {shape}, got {tuple(np.shape(value))}")
        with torch.no_grad():
            parameter.copy_(array)
        self.__dict__.pop("_log_z_cache", None)

    components_ = property(
        lambda self: self._parameter_array("weights", transpose=True),
        lambda self, value: self._set_parameter("weights", value, transpose=True),
        doc="The weights, shape (n_components, n_features).",
    )
    intercept_hidden_ = property(
        lambda self: self._parameter_array("hidden_bias"),
        lambda self, value: self._set_parameter("hidden_bias", value),
        doc="Hidden biases, shape (n_components,).",
    )
    intercept_visible_ = property(
        lambda self: self._parameter_array("visible_bias"),
        lambda self, value: self._set_parameter("visible_bias", value),
        doc="Visible biases, shape (n_features,).",
    )

    # ------------------------------------------------------------------ log Z
    @property
    def log_z_estimate_(self) -> LogZEstimate:
        """log Z of the current parameters (computed once, then kept until they change)."""
        check_is_fitted(self)
        key = (parameter_fingerprint(self.model_), repr(self.log_z_method), repr(self.log_z_params))
        cached = self.__dict__.get("_log_z_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        estimate = estimate_for(
            self.model_,
            self.log_z_method,
            self.log_z_params,
            anchor_rows=self._anchor_rows,
            seed=self._log_z_seed,
        )
        self._log_z_cache = (key, estimate)
        return estimate

    log_z_ = property(lambda self: self.log_z_estimate_.log_z, doc="log Z in nats.")
    log_z_stderr_ = property(lambda self: self.log_z_estimate_.stderr, doc="Its standard error (0: exact).")
    log_z_method_ = property(lambda self: self.log_z_estimate_.method, doc="The method that gave log Z.")
    log_z_reliable_ = property(
        lambda self: self.log_z_estimate_.reliable,
        doc="Whether log Z can be trusted: False when unreliable or unchecked.",
    )
    log_z_verdict_ = property(
        lambda self: self.log_z_estimate_.status,
        doc='The verdict in one word: "reliable", "unchecked" or "unreliable" (docs/trust.md).',
    )
    log_z_reason_ = property(
        lambda self: self.log_z_estimate_.reason,
        doc='Why log Z is not reliable: the first failed check, or what was not checked ("" if reliable).',
    )

    # ------------------------------------------------------------------ transforming and scoring
    def transform(self, X: Any) -> np.ndarray:
        """``p(h = 1 | v = X)``, shape (n_samples, n_components), in X's float dtype."""
        check_is_fitted(self)
        rows = self._rows(X, reset=False, method="transform")
        model = self.model_
        v = _tensor(rows, model)
        beta = torch.ones(v.shape[0], dtype=model.dtype, device=model.device)
        probability = torch.sigmoid(model.conditional_logits(1, (v, None), beta))
        return probability.cpu().numpy().astype(rows.dtype, copy=False)

    def score_samples(self, X: Any) -> np.ndarray:
        """``log p(v)`` per row (nats), ``v = (X >= 0.5)``, with ``log_z_estimate_``'s log Z.

        The first call after a fit computes log Z (``log_z_method``); later calls reuse it
        until the parameters change. A log Z whose checks did not pass gives a
        ``UserWarning`` with the reason (also in ``log_z_reason_``).

        Returns
        -------
        ndarray, shape (n_samples,), float64
            Exact when ``log_z_method_ == "exact"``; otherwise every row shares the estimate's
            error (``log_z_stderr_``), so differences between rows are exact.
        """
        check_is_fitted(self)
        rows = self._rows(X, reset=False, method="score_samples")
        v = _tensor(rows >= 0.5, self.model_)
        estimate = self.log_z_estimate_
        if not estimate.reliable:
            warnings.warn(
                f"BernoulliRBM.score_samples: log Z = {estimate.log_z:.4f} ± {estimate.stderr:.2g} "
                f"({estimate.method}) is {estimate.status}: {estimate.reason}; pass log_z_params "
                "(e.g. more n_temperatures) or another log_z_method for a better estimate",
                UserWarning,
                stacklevel=2,
            )
        return (-self.model_.free_energy(v) - estimate.log_z).cpu().numpy()

    def score(self, X: Any, y: Any = None) -> float:
        """Mean ``log p(v)`` per row of ``X`` (nats): ``score_samples(X).mean()``; ``y`` is ignored.

        What ``GridSearchCV`` and ``cross_val_score`` maximise when given no ``scoring``: the
        held-out log-likelihood. Where log Z is estimated its error (``log_z_stderr_``) is
        shared by every row, so it is also the error of this mean.
        """
        return float(np.mean(self.score_samples(X)))

    def gibbs(self, v: Any) -> np.ndarray:
        """One sweep of ``operator`` from ``v`` (hidden units first); boolean (n_samples, n_features).

        Grey rows start at one Bernoulli draw; the estimator's random stream moves on.
        """
        check_is_fitted(self)
        rows = self._rows(v, reset=False, method="gibbs")
        model = self.model_
        generator = self._generator()
        start = _tensor(rows, model)
        if not is_binary(start):
            start = sample_bernoulli(start, generator=generator)
        chains = model.chains_from(start, generator=generator)
        chains, _ = operators.resolve(self.operator, **(self.operator_params or {})).step(
            model, chains, generator=generator
        )
        self._rng_state = get_state(generator)
        return chains.layers[0].cpu().numpy() > 0.5

    def sample(
        self,
        n_samples: int = 1,
        *,
        n_sweeps: int = 1000,
        sampler: str = "plain",
        random_state: Any = None,
        **options: Any,
    ) -> np.ndarray:
        """``n_samples`` visible states drawn with :func:`boltzlab.sample`; boolean (n_samples, n_features).

        Parameters
        ----------
        n_samples : int, default 1
            Independent chains, started from the model's base.
        n_sweeps : int, default 1000
            Sweeps of ``operator`` (or scheme steps) per chain.
        sampler : str, default "plain"
            ``"plain"`` or a tempering scheme (``"pt"``, ``"st"``, ``"cast"``, ...).
        random_state : int, RandomState instance or None
            ``None`` continues the estimator's own stream (seeded by ``random_state`` at fit).
        **options
            More options of :func:`boltzlab.sample`, e.g. ``burn_in``, ``n_levels``.
        """
        check_is_fitted(self)
        device = self.model_.device
        own = random_state is None
        if own:
            generator = self._generator()
        else:
            generator = make_generator(int(check_random_state(random_state).randint(0, 2**31 - 1)), device)
        with distributed.local():  # a scikit-learn estimator is one process's object
            result = sample_model(
                self.model_,
                sampler=sampler,
                operator=self.operator,
                operator_params=self.operator_params,
                n_chains=n_samples,
                n_sweeps=n_sweeps,
                generator=generator,
                **options,
            )
        if own:
            self._rng_state = get_state(generator)
        return result.chains.layers[0].cpu().numpy() > 0.5
