"""The real-valued front end: a Gaussian-binary RBM on grey-level images feeding a DBM.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §4.2) model the real-valued
NORB images by first training a Gaussian-binary RBM (Gaussian visible units, binary hidden
units; Hinton 2010, §13.2; Krizhevsky 2009, §1.4; Cho, Raiko & Ilin 2011) on standardised
pixels and then training a DBM on its binary hidden activities. :func:`run_front_end` repeats
that pipeline at a size this machine can afford, on grey-level MNIST or Fashion-MNIST:

1. **Pixels** (:class:`~boltzlab_experiments.front_end.pixels.Standardizer`): grey levels in [0, 1], averaged over ``downsample ×
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
``Standardizer.log_jacobian`` converts to grey-level units (kept pixels only).

Nothing here prints or writes; :mod:`boltzlab_experiments.front_end.command` writes the files.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab import DBM, estimate_log_z, log_likelihood, train, variational_lower_bound
from boltzlab.errors import ValidationError
from boltzlab.models import GaussianRBM
from boltzlab.rng import make_generator, spawn
from boltzlab.training.pretraining import pretrain_dbm
from boltzlab.validation import require
from boltzlab_experiments.front_end.config import FrontEndConfig
from boltzlab_experiments.front_end.pixels import Standardizer

__all__ = ["FrontEndResult", "LogZReport", "run_front_end"]

Progress = Callable[[int, int, str], None]


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
    >>> from boltzlab_experiments.front_end import FrontEndConfig, run_front_end
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
