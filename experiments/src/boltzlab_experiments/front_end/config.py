"""Settings of the real-valued front end (Salakhutdinov & Hinton 2009, §4.2).

The sizes live in TOML presets shipped with this package (``presets/tiny.toml``: seconds on
one core with exact ``log Z`` in both stages; ``scaled.toml``: minutes on one core, the
command's default): :mod:`boltzlab_experiments.presets`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from boltzlab.validation import check_positive_int, require
from boltzlab_experiments.presets import load_preset

__all__ = ["CODE_MODES", "SCHEDULES", "FrontEndConfig"]

CODE_MODES = ("sample", "threshold")
_ALGORITHMS = ("cd", "pcd")
SCHEDULES = ("constant", "linear", "inverse")


@dataclass(frozen=True, kw_only=True)
class FrontEndConfig:
    """Settings of the two-stage pipeline, from a preset (:meth:`preset`).

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

    n_train: int | None
    n_test: int | None
    downsample: int
    min_pixel_std: float
    n_hidden: int
    gaussian_algorithm: str
    gaussian_updates: int
    gaussian_learning_rate: float
    gaussian_momentum: float
    gaussian_lr_schedule: str
    batch_size: int
    n_chains: int
    code_mode: str
    dbm_hidden: tuple[int, ...]
    dbm_updates: int
    dbm_learning_rate: float
    pretrain_updates: int
    ais_chains: int
    ais_temperatures: int
    exact_limit: int
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
            self.gaussian_lr_schedule in SCHEDULES,
            f"gaussian_lr_schedule must be one of {', '.join(SCHEDULES)}, got {self.gaussian_lr_schedule!r}",
        )
        require(
            self.code_mode in CODE_MODES,
            f"code_mode must be 'sample' or 'threshold', got {self.code_mode!r}",
        )
        require(
            len(self.dbm_hidden) >= 2 and min(self.dbm_hidden) >= 1,
            f"dbm_hidden needs at least 2 positive sizes, got {self.dbm_hidden!r}",
        )

    @classmethod
    def preset(cls, name: str) -> FrontEndConfig:
        """The preset ``name`` (``presets/<name>.toml``)."""
        return load_preset(cls, __package__, name)

    @classmethod
    def tiny(cls) -> FrontEndConfig:
        """Seconds on one core, exact ``log Z`` in both stages: checks the pipeline only."""
        return cls.preset("tiny")

    @classmethod
    def scaled(cls) -> FrontEndConfig:
        """Minutes on one core: 14×14 pixels, 20,000 training images, 100 hidden units, DBM 100-100-100."""
        return cls.preset("scaled")

    @property
    def dbm_layer_sizes(self) -> tuple[int, ...]:
        """``(n_hidden, *dbm_hidden)``: the DBM's visible layer is the RBM's hidden layer."""
        return (self.n_hidden, *self.dbm_hidden)
