"""Settings of the CAST comparison (Salakhutdinov 2010, §5 and Table 1; docs/algorithms.md §3.1–3.4).

The sizes live in TOML presets shipped with this package (``presets/tiny.toml``: seconds, a
smoke test; ``scaled.toml``: minutes on two CPU cores, the command's default; ``full.toml``:
the paper's 784-500-1000 DBM and 200,000 updates, for a GPU): :mod:`boltzlab_experiments.presets`.
"""

from __future__ import annotations

from dataclasses import dataclass

from boltzlab.validation import check_positive_int, require
from boltzlab_experiments.presets import load_preset

__all__ = ["ALGORITHMS", "PAPER_TEST_BOUNDS", "CASTComparisonConfig"]

ALGORITHMS = ("sap", "fpcd", "cast")
# Table 1 of the CAST paper, MNIST 784-500-1000: test lower bound, nats per image.
PAPER_TEST_BOUNDS = {"sap": -87.23, "fpcd": -86.72, "trans-sap": -85.41, "cast": -84.12}


@dataclass(frozen=True, kw_only=True)
class CASTComparisonConfig:
    """Settings of the comparison, from a preset (:meth:`preset`); ``full`` is the CAST paper's.

    Attributes
    ----------
    layer_sizes : tuple of int
        DBM layer sizes; ``layer_sizes[0]`` must match the data (784 for MNIST).
    algorithms : tuple of str
        Among ``"sap"``, ``"fpcd"``, ``"cast"``.
    n_updates : int
        Parameter updates of every algorithm (the same budget).
    batch_size : int
        Minibatch size (paper: 100).
    learning_rate : float
        Initial rate of the ``"inverse"`` schedule ``lr·c/(c + t)`` with ``c = 2000``
        (paper: 0.005, i.e. ``10/(2000 + t)``).
    n_chains : int
        SAP and FPCD persistent chains (paper: 100).
    cast_chains : int
        CAST slow chains, and as many fast ones (paper: 50 + 50).
    cast_levels, cast_low, cast_lag : int, float, int
        CAST ladder size, lowest β and exchange lag (paper: 20, 0.9, 50).
    operator : str
        Transition operator of every chain (``"gibbs"``, ``"flip"``, ``"mixture"``).
    n_train, n_test : int or None
        Examples used (``None``: all).
    pretrain_updates : int
        Updates per RBM of greedy pretraining before any algorithm runs (0: random init).
    eval_every : int
        Updates between bound evaluations during learning.
    eval_examples : int
        Training examples in each tracked bound.
    ais_chains, ais_temperatures : int
        AIS budget for ``log Z`` while tracking.
    final_ais_chains, final_ais_temperatures : int
        AIS budget for the final ``log Z``.
    likelihood_examples : int
        Test cases of per-example AIS for ``log p(v)`` (0: skip).
    likelihood_chains, likelihood_temperatures : int
        Its runs per case and schedule length.
    sample_chains, sample_sweeps, sample_keep_every : int
        Gibbs vs adaptive-ST sampling of the CAST model after learning.
    seed : int
    device : str
        Torch device of the models and data (``"cuda"`` for :meth:`full`).
    """

    layer_sizes: tuple[int, ...]
    algorithms: tuple[str, ...] = ALGORITHMS
    n_updates: int
    batch_size: int
    learning_rate: float
    n_chains: int
    cast_chains: int
    cast_levels: int
    cast_low: float
    cast_lag: int
    operator: str = "gibbs"
    n_train: int | None
    n_test: int | None
    pretrain_updates: int
    eval_every: int
    eval_examples: int
    ais_chains: int
    ais_temperatures: int
    final_ais_chains: int
    final_ais_temperatures: int
    likelihood_examples: int
    likelihood_chains: int
    likelihood_temperatures: int
    sample_chains: int
    sample_sweeps: int
    sample_keep_every: int
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        require(len(self.layer_sizes) >= 3, f"layer_sizes needs L >= 2 hidden layers, got {self.layer_sizes}")
        for name in self.algorithms:
            require(name in ALGORITHMS, f"algorithms must be among {', '.join(ALGORITHMS)}, got {name!r}")
        require(len(self.algorithms) >= 1, "algorithms must name at least one algorithm")
        for name in (
            "n_updates",
            "batch_size",
            "n_chains",
            "cast_chains",
            "cast_levels",
            "cast_lag",
            "eval_every",
            "eval_examples",
            "ais_chains",
            "ais_temperatures",
            "final_ais_chains",
            "final_ais_temperatures",
            "sample_chains",
            "sample_sweeps",
            "sample_keep_every",
        ):
            check_positive_int(getattr(self, name), name)
        require(self.pretrain_updates >= 0, f"pretrain_updates must be >= 0, got {self.pretrain_updates}")
        require(
            self.likelihood_examples >= 0, f"likelihood_examples must be >= 0, got {self.likelihood_examples}"
        )
        require(0.0 < self.cast_low < 1.0, f"cast_low must be in (0, 1), got {self.cast_low}")
        require(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")

    @classmethod
    def preset(cls, name: str) -> CASTComparisonConfig:
        """The preset ``name`` (``presets/<name>.toml``)."""
        return load_preset(cls, __package__, name)

    @classmethod
    def tiny(cls) -> CASTComparisonConfig:
        """Seconds: a 784-12-10 DBM, 60 updates (a smoke test of the pipeline, not a result)."""
        return cls.preset("tiny")

    @classmethod
    def scaled(cls) -> CASTComparisonConfig:
        """Minutes on 2 CPU cores: a 784-200-200 DBM, 2,000 updates."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> CASTComparisonConfig:
        """The paper's size (784-500-1000, 200,000 updates, all of MNIST): for a GPU."""
        return cls.preset("full")
