"""The real-valued front end: a Gaussian-binary RBM on grey-level images feeding a DBM.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §4.2) model the real-valued
NORB images by first training a Gaussian-binary RBM (Gaussian visible units, binary hidden
units; Hinton 2010, §13.2; Krizhevsky 2009, §1.4; Cho, Raiko & Ilin 2011) on standardised
pixels and then training a DBM on its binary hidden activities. :func:`run_front_end` repeats
that pipeline at a size this machine can afford, on grey-level MNIST or Fashion-MNIST:

1. **Pixels** (:class:`Standardizer`): grey levels in [0, 1], averaged over ``downsample ×
   downsample`` blocks (28×28 → 14×14 by default); pixels whose training standard deviation
   is below ``min_pixel_std`` (the nearly constant border) are dropped, because a Gaussian of
   fixed ``σ = 1`` on a constant pixel only adds a constant to every log-density; the rest are
   standardised to zero mean and unit variance, so ``σ = 1`` (Hinton 2010's advice).
2. **Stage 1**: a :class:`~boltzlab.models.gaussian_rbm.GaussianRBM` trained with CD or PCD
   (:func:`boltzlab.train`), its Gaussian base ``N(μ, s²)`` fitted to the training pixels.
   ``log Z`` by AIS, and exactly (the visible integral is Gaussian for each hidden state)
   when the hidden layer is small; the test log-likelihood is compared with the independent
   Gaussian (the base), the model with no hidden units.
3. **Codes**: the hidden activities ``h ~ p(h | v)`` (or thresholded ``p(h|v) > ½``), binary.
4. **Stage 2**: a DBM on the codes trained with SAP (PCD with mean-field data term,
   Salakhutdinov & Hinton 2009), optionally greedily pretrained; ``log Z`` by AIS (exact when
   enumerable); the variational lower bound on the codes' test log-probability, compared with
   the independent-Bernoulli (base-rate) model of the codes.

The two stages are reported separately: the bound on ``log p(codes)`` is a statement about
the DBM as a model of stage 1's representation, not a bound on the pixels' density.

Log-likelihoods of real data are densities: nats per example in standardised pixel units;
:attr:`Standardizer.log_jacobian` converts to grey-level units (kept pixels only).

Nothing here prints or writes; :mod:`boltzlab.cli.reproduce_front_end` writes the files.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.likelihood import log_likelihood
from boltzlab.models.dbm import DBM
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.models.mean_field import variational_lower_bound
from boltzlab.rng import make_generator, spawn
from boltzlab.training.pretraining import pretrain_dbm
from boltzlab.training.trainer import train
from boltzlab.validation import as_real_tensor, check_positive_int, require

__all__ = [
    "FrontEndConfig",
    "FrontEndResult",
    "LogZReport",
    "Standardizer",
    "run_front_end",
]

Progress = Callable[[int, int, str], None]
_CODE_MODES = ("sample", "threshold")
_ALGORITHMS = ("cd", "pcd")
_SCHEDULES = ("constant", "linear", "inverse")


@dataclass(frozen=True)
class FrontEndConfig:
    """Settings of the two-stage pipeline.

    Attributes
    ----------
    n_train, n_test : int or None
        Keep the first examples of each split (``None``: all).
    downsample : int
        Block size of the average pooling of the images (1: none).
    min_pixel_std : float
        Pixels whose training standard deviation (grey levels in [0, 1]) is below this are
        dropped.
    n_hidden : int
        Hidden units of the Gaussian-binary RBM, i.e. the DBM's input size.
    gaussian_algorithm : {"cd", "pcd"}
    gaussian_updates, gaussian_learning_rate, gaussian_momentum
        Training of stage 1 (``σ = 1`` fixed; standardised data).
    gaussian_lr_schedule : {"linear", "constant", "inverse"}
        Learning-rate schedule of stage 1 (:mod:`boltzlab.training.optim`). The default decays
        linearly to 0. Measured here (5,000 PCD updates at 0.03, 20,000 14×14 MNIST images,
        four initial weights): with a constant rate the test log-likelihood ended anywhere
        between −194 and −172 nats (log Z swings with the persistent chains); with the linear
        decay, three initialisations ended at −169.0, −169.4 and −169.0.
    batch_size, n_chains : int
        Minibatch size and persistent chains of both stages.
    code_mode : {"sample", "threshold"}
        How the hidden activities become binary: ``h ~ p(h|v)`` or ``p(h|v) > ½``.
    dbm_hidden : tuple of int
        Hidden layer sizes of the DBM (at least 2).
    dbm_updates, dbm_learning_rate
        SAP training of stage 2 (learning rate ``dbm_learning_rate · 2000/(2000 + t)``).
    pretrain_updates : int
        Greedy pretraining updates per RBM of the DBM (0: start from small random weights).
    ais_chains, ais_temperatures : int
        AIS budget for both stages' ``log Z``.
    exact_limit : int
        Compute the exact ``log Z`` too when the enumerated layer has at most this many units.
    seed : int
    device : str
    """

    n_train: int | None = 20000
    n_test: int | None = 2000
    downsample: int = 2
    min_pixel_std: float = 0.02
    n_hidden: int = 100
    gaussian_algorithm: str = "pcd"
    gaussian_updates: int = 10000
    gaussian_learning_rate: float = 0.03
    gaussian_momentum: float = 0.5
    gaussian_lr_schedule: str = "linear"
    batch_size: int = 100
    n_chains: int = 100
    code_mode: str = "sample"
    dbm_hidden: tuple[int, ...] = (100, 100)
    dbm_updates: int = 10000
    dbm_learning_rate: float = 0.005
    pretrain_updates: int = 1000
    ais_chains: int = 100
    ais_temperatures: int = 5000
    exact_limit: int = 20
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        for name in ("n_train", "n_test"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(value, name)
        for name in (
            "downsample",
            "n_hidden",
            "gaussian_updates",
            "batch_size",
            "n_chains",
            "dbm_updates",
            "ais_chains",
            "ais_temperatures",
        ):
            check_positive_int(getattr(self, name), name)
        require(self.pretrain_updates >= 0, f"pretrain_updates must be >= 0, got {self.pretrain_updates}")
        require(self.exact_limit >= 0, f"exact_limit must be >= 0, got {self.exact_limit}")
        require(self.min_pixel_std >= 0, f"min_pixel_std must be >= 0, got {self.min_pixel_std}")
        for name in ("gaussian_learning_rate", "dbm_learning_rate"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, f"{name} must be positive, got {value}")
        require(
            0.0 <= self.gaussian_momentum < 1.0,
            f"gaussian_momentum must lie in [0, 1), got {self.gaussian_momentum}",
        )
        require(
            self.gaussian_algorithm in _ALGORITHMS,
            f"gaussian_algorithm must be 'cd' or 'pcd', got {self.gaussian_algorithm!r}",
        )
        require(
            self.gaussian_lr_schedule in _SCHEDULES,
            f"gaussian_lr_schedule must be one of {', '.join(_SCHEDULES)}, got {self.gaussian_lr_schedule!r}",
        )
        require(
            self.code_mode in _CODE_MODES,
            f"code_mode must be 'sample' or 'threshold', got {self.code_mode!r}",
        )
        require(
            len(self.dbm_hidden) >= 2 and min(self.dbm_hidden) >= 1,
            f"dbm_hidden needs at least 2 positive sizes, got {self.dbm_hidden!r}",
        )

    @classmethod
    def tiny(cls) -> FrontEndConfig:
        """Seconds on one core, exact ``log Z`` in both stages: checks the pipeline only."""
        return cls(
            n_train=200,
            n_test=50,
            downsample=4,
            n_hidden=8,
            gaussian_updates=60,
            gaussian_learning_rate=0.01,
            gaussian_lr_schedule="constant",
            batch_size=20,
            n_chains=20,
            dbm_hidden=(6, 4),
            dbm_updates=60,
            pretrain_updates=20,
            ais_chains=50,
            ais_temperatures=300,
        )

    @classmethod
    def scaled(cls) -> FrontEndConfig:
        """Minutes on one core: 14×14 pixels, 20,000 training images, 100 hidden units, DBM 100-100-100."""
        return cls()

    @property
    def dbm_layer_sizes(self) -> tuple[int, ...]:
        """``(n_hidden, *dbm_hidden)``: the DBM's visible layer is the RBM's hidden layer."""
        return (self.n_hidden, *self.dbm_hidden)


@dataclass(frozen=True)
class Standardizer:
    """Grey-level images → standardised real vectors (pool, drop constant pixels, standardise).

    Attributes
    ----------
    image_shape : (int, int)
        Height and width after pooling.
    downsample : int
    kept : Tensor, shape (height · width,), bool
        The pixels the model sees.
    mean, std : Tensor, shape (n_kept,), float64
        Training mean and standard deviation of the kept pixels (grey levels in [0, 1]).
    """

    image_shape: tuple[int, int]
    downsample: int
    kept: Tensor
    mean: Tensor
    std: Tensor

    @classmethod
    def fit(cls, images: Any, *, downsample: int = 2, min_pixel_std: float = 0.02) -> Standardizer:
        """Fit to training ``images`` (shape ``(n, H, W)`` or ``(n, H·W)`` square, grey levels 0..255 or [0, 1])."""
        pooled, shape = _pool(images, downsample)
        std = pooled.std(0, unbiased=False)
        kept = std >= min_pixel_std
        if not bool(kept.any()):
            raise ValidationError(
                f"no pixel varies by min_pixel_std={min_pixel_std} over the training images"
            )
        return cls(
            image_shape=shape,
            downsample=downsample,
            kept=kept,
            mean=pooled.mean(0)[kept],
            std=std[kept],
        )

    @property
    def n_visible(self) -> int:
        """Number of kept pixels: the Gaussian-binary RBM's visible units."""
        return int(self.kept.sum())

    @property
    def log_jacobian(self) -> float:
        """``−Σ log std``: add to a standardised log-density to get it in grey-level units [0, 1]."""
        return -float(torch.log(self.std).sum())

    def transform(self, images: Any, *, dtype: torch.dtype = torch.float32) -> Tensor:
        """Standardised kept pixels, shape ``(n, n_visible)``, in ``dtype``."""
        pooled, shape = _pool(images, self.downsample)
        require(
            shape == self.image_shape, f"images pool to {shape}, the standardizer expects {self.image_shape}"
        )
        return ((pooled[:, self.kept] - self.mean) / self.std).to(dtype)

    def inverse(self, v: Tensor) -> Tensor:
        """Pooled images (grey levels, float64, shape ``(n, height, width)``) from standardised ``v``."""
        images = torch.zeros(v.shape[0], self.kept.numel(), dtype=torch.float64)
        images[:, self.kept] = v.detach().to(torch.float64).cpu() * self.std + self.mean
        images[:, ~self.kept] = 0.0
        return images.reshape(v.shape[0], *self.image_shape)


def _pool(images: Any, downsample: int) -> tuple[Tensor, tuple[int, int]]:
    """Grey levels in [0, 1] (float64), average-pooled; ``(n, h·w)`` and ``(h, w)``."""
    downsample = check_positive_int(downsample, "downsample")
    array = images.detach().cpu().numpy() if isinstance(images, Tensor) else np.asarray(images)
    if array.ndim == 2:
        side = math.isqrt(array.shape[1])
        require(side * side == array.shape[1], f"images of {array.shape[1]} pixels are not square")
        array = array.reshape(array.shape[0], side, side)
    require(array.ndim == 3, f"images must have shape (n, H, W) or (n, H*W), got {array.shape}")
    scale = 255.0 if array.dtype == np.uint8 or float(np.max(array)) > 1.0 else 1.0
    tensor = as_real_tensor(array.reshape(array.shape[0], -1), "images", dtype=torch.float64) / scale
    height, width = array.shape[1:]
    tensor = tensor.reshape(-1, 1, height, width)
    if downsample > 1:
        require(
            height % downsample == 0 and width % downsample == 0,
            f"downsample={downsample} must divide the image size {height}x{width}",
        )
        tensor = F.avg_pool2d(tensor, downsample)
    shape = (int(tensor.shape[2]), int(tensor.shape[3]))
    return tensor.reshape(tensor.shape[0], -1), shape


@dataclass(frozen=True)
class LogZReport:
    """``log Z`` of one stage: AIS estimate with standard error, and the exact value if computed.

    Attributes
    ----------
    ais, ais_stderr : float
    exact : float
        ``nan`` when the enumerated layer was larger than ``exact_limit``.
    """

    ais: float
    ais_stderr: float
    exact: float

    @property
    def best(self) -> float:
        """The exact value when known, else the AIS estimate."""
        return self.exact if math.isfinite(self.exact) else self.ais

    @property
    def z_score(self) -> float:
        """``(AIS − exact)/stderr`` (``nan`` without the exact value)."""
        if not math.isfinite(self.exact) or self.ais_stderr <= 0:
            return math.nan
        return (self.ais - self.exact) / self.ais_stderr


@dataclass(frozen=True)
class FrontEndResult:
    """What :func:`run_front_end` measured; log-likelihoods in nats per example.

    Attributes
    ----------
    config : FrontEndConfig
    standardizer : Standardizer
    gaussian_model : GaussianRBM
    gaussian_log_z : LogZReport
    gaussian_train_log_likelihood, gaussian_test_log_likelihood : float
        Mean ``log p(v)`` with ``log Z = gaussian_log_z.best``, standardised pixel units.
    gaussian_test_stderr : float
        Standard error of the test mean over examples (not counting the ``log Z`` error).
    independent_test_log_likelihood : float
        The independent Gaussian ``N(μ, s²)`` fitted to the training pixels (the base).
    reconstruction_error : float
        Final mean squared one-step reconstruction error of stage 1 (training data).
    code_activity : float
        Mean of the binary codes over the training set.
    dbm_model : DBM
    dbm_log_z : LogZReport
    dbm_train_bound, dbm_test_bound : float
        Variational lower bounds on ``log p(codes)`` with ``log Z = dbm_log_z.best``.
    independent_code_log_likelihood : float
        Test ``log p(codes)`` under independent Bernoulli units with the smoothed training rates.
    gaussian_seconds, dbm_seconds, seconds : float
    """

    config: FrontEndConfig
    standardizer: Standardizer
    gaussian_model: GaussianRBM
    gaussian_log_z: LogZReport
    gaussian_train_log_likelihood: float
    gaussian_test_log_likelihood: float
    gaussian_test_stderr: float
    independent_test_log_likelihood: float
    reconstruction_error: float
    code_activity: float
    dbm_model: DBM
    dbm_log_z: LogZReport
    dbm_train_bound: float
    dbm_test_bound: float
    independent_code_log_likelihood: float
    gaussian_seconds: float
    dbm_seconds: float
    seconds: float


def _log_z(model: Any, n_enumerated: int, config: FrontEndConfig, generator: torch.Generator) -> LogZReport:
    estimate = estimate_log_z(
        model,
        method="ais",
        n_chains=config.ais_chains,
        n_temperatures=config.ais_temperatures,
        generator=generator,
    )
    exact = math.nan
    if n_enumerated <= config.exact_limit:
        exact = float(estimate_log_z(model, method="exact").log_z)
    return LogZReport(ais=float(estimate.log_z), ais_stderr=float(estimate.stderr), exact=exact)


def _independent_gaussian(train_v: Tensor, test_v: Tensor) -> float:
    """Mean test log-density under N(train mean, train variance) per unit."""
    train64, test64 = train_v.to(torch.float64), test_v.to(torch.float64)
    mean, std = train64.mean(0), train64.std(0, unbiased=False)
    z = (test64 - mean) / std
    return float((-(0.5 * z.square() + torch.log(std) + 0.5 * math.log(2 * math.pi)).sum(1)).mean())


def _independent_bernoulli(train_codes: Tensor, test_codes: Tensor, smoothing: float = 0.05) -> float:
    """Mean test ``log p(codes)`` under independent Bernoulli units (rates smoothed as the base rate)."""
    rate = (1 - smoothing) * train_codes.to(torch.float64).mean(0) + smoothing / 2
    logit = torch.log(rate) - torch.log1p(-rate)
    test64 = test_codes.to(torch.float64)
    return float((test64 @ logit + torch.log1p(-rate).sum()).mean())


def run_front_end(
    config: FrontEndConfig,
    train_images: Any,
    test_images: Any,
    *,
    progress: Progress | None = None,
) -> FrontEndResult:
    """Train the Gaussian-binary RBM on standardised pixels, then a DBM on its binary codes.

    Parameters
    ----------
    config : FrontEndConfig
    train_images, test_images : array or Tensor, shape (n, H, W) or (n, H·W)
        Grey levels (uint8 0..255 or floats in [0, 1]); only the first ``config.n_train`` /
        ``config.n_test`` are used.
    progress : callable ``(done, total, label)``, optional
        Called after each of the four stages.

    Returns
    -------
    FrontEndResult

    Examples
    --------
    >>> import torch
    >>> from boltzlab.experiments.front_end import FrontEndConfig, run_front_end
    >>> g = torch.Generator().manual_seed(0)
    >>> images = (torch.rand(250, 28, 28, generator=g) * 255).to(torch.uint8)
    >>> result = run_front_end(FrontEndConfig.tiny(), images[:200], images[200:])
    >>> result.gaussian_model.n_hidden, result.dbm_model.layer_sizes
    (8, (8, 6, 4))
    """
    if not isinstance(config, FrontEndConfig):
        raise ValidationError(f"config must be a FrontEndConfig, got {type(config).__name__}")
    started = time.perf_counter()
    report = progress or (lambda done, total, label: None)
    device = torch.device(config.device)
    train_images = train_images[: config.n_train] if config.n_train is not None else train_images
    test_images = test_images[: config.n_test] if config.n_test is not None else test_images
    standardizer = Standardizer.fit(
        train_images, downsample=config.downsample, min_pixel_std=config.min_pixel_std
    )
    train_v = standardizer.transform(train_images).to(device)
    test_v = standardizer.transform(test_images).to(device)
    require(train_v.shape[0] >= config.batch_size, "train_images needs at least batch_size examples")
    # One stream per purpose, so changing one stage's budget never changes another's randomness.
    streams = spawn(make_generator(config.seed, device), 6)
    init_stream, code_stream, pretrain_stream, gaussian_ais, dbm_ais, dbm_init = streams

    stage_started = time.perf_counter()
    gaussian = GaussianRBM(
        n_visible=standardizer.n_visible, n_hidden=config.n_hidden, generator=init_stream, device=device
    )
    gaussian_run = train(
        gaussian,
        train_v,
        algorithm=config.gaussian_algorithm,
        n_chains=config.n_chains,
        batch_size=config.batch_size,
        n_updates=config.gaussian_updates,
        learning_rate=config.gaussian_learning_rate,
        momentum=config.gaussian_momentum,
        lr_schedule=config.gaussian_lr_schedule,
        generator=config.seed,
        log_every=config.gaussian_updates,
    )
    gaussian_log_z = _log_z(gaussian, config.n_hidden, config, gaussian_ais)
    per_example = -gaussian.free_energy(test_v) - gaussian_log_z.best
    gaussian_seconds = time.perf_counter() - stage_started
    report(1, 4, f"Gaussian-binary RBM: test log p(v) {float(per_example.mean()):.2f}")

    train_codes = gaussian.hidden_activities(train_v, mode=config.code_mode, generator=code_stream)
    test_codes = gaussian.hidden_activities(test_v, mode=config.code_mode, generator=code_stream)
    report(2, 4, f"codes: mean activity {float(train_codes.mean()):.3f}")

    stage_started = time.perf_counter()
    layer_sizes = config.dbm_layer_sizes
    if config.pretrain_updates > 0:
        dbm = pretrain_dbm(
            layer_sizes,
            train_codes,
            n_updates=config.pretrain_updates,
            batch_size=config.batch_size,
            generator=pretrain_stream,
            device=device,
        ).dbm
    else:
        dbm = DBM(layer_sizes=list(layer_sizes), generator=dbm_init, device=device)
    report(3, 4, "DBM pretrained" if config.pretrain_updates else "DBM initialised")
    train(
        dbm,
        train_codes,
        algorithm="pcd",  # SAP: persistent chains, mean-field data term (the DBM's objective)
        n_chains=config.n_chains,
        batch_size=config.batch_size,
        n_updates=config.dbm_updates,
        learning_rate=config.dbm_learning_rate,
        lr_schedule="inverse",
        generator=config.seed + 1,
        log_every=config.dbm_updates,
    )
    # Exact enumeration sums out one parity of layers and enumerates the other (the smaller).
    n_enumerated = min(sum(layer_sizes[0::2]), sum(layer_sizes[1::2]))
    dbm_log_z = _log_z(dbm, n_enumerated, config, dbm_ais)
    dbm_train_bound = variational_lower_bound(dbm, train_codes, dbm_log_z.best)
    dbm_test_bound = variational_lower_bound(dbm, test_codes, dbm_log_z.best)
    dbm_seconds = time.perf_counter() - stage_started
    report(4, 4, f"DBM: test bound {dbm_test_bound:.2f}")

    return FrontEndResult(
        config=config,
        standardizer=standardizer,
        gaussian_model=gaussian,
        gaussian_log_z=gaussian_log_z,
        gaussian_train_log_likelihood=log_likelihood(gaussian, train_v, gaussian_log_z.best),
        gaussian_test_log_likelihood=float(per_example.mean()),
        gaussian_test_stderr=float(per_example.std() / math.sqrt(per_example.numel())),
        independent_test_log_likelihood=_independent_gaussian(train_v, test_v),
        reconstruction_error=float(gaussian_run.history[-1].reconstruction_error),
        code_activity=float(train_codes.mean()),
        dbm_model=dbm,
        dbm_log_z=dbm_log_z,
        dbm_train_bound=dbm_train_bound,
        dbm_test_bound=dbm_test_bound,
        independent_code_log_likelihood=_independent_bernoulli(train_codes, test_codes),
        gaussian_seconds=gaussian_seconds,
        dbm_seconds=dbm_seconds,
        seconds=time.perf_counter() - started,
    )
