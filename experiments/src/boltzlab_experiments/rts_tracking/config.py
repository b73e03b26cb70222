"""Sizes and settings of the RTS tracking experiment (Carlson et al. 2016, §4.4; docs/algorithms.md §4.3).

The values live in TOML presets shipped with this package (``presets/full.toml``: the paper's
setting, hours here; ``scaled.toml``: minutes on two cores, the command's default;
``tiny.toml``: seconds, for tests): :mod:`boltzlab_experiments.presets`.
"""

from __future__ import annotations

from dataclasses import dataclass

from boltzlab_experiments.presets import load_preset

__all__ = ["RTSTrackingConfig"]


@dataclass(frozen=True)
class RTSTrackingConfig:
    """Sizes and settings of the tracking experiment (paper values in :meth:`paper`, from a preset).

    Attributes
    ----------
    label : str
    n_hidden : int
    pretrain_updates : int
        CD-1 updates before tracking (batch ``batch_size``, SGD at ``pretrain_learning_rate``).
    pretrain_learning_rate : float
    n_updates : int
        RTS-phase updates with RMSspectral.
    learning_rate : float
        RMSspectral's step η.
    optimizer : {"rmsspectral", "sgd"}
    batch_size : int
    n_chains, sweeps, n_levels : int
        Tempered chains, sweeps per update and temperatures (linear ladder from 0 to 1).
    step_size : float
        α of the damped update.
    n_initial_iterations, initial_sweeps : int
        RTS's initial iterations before training.
    density_dtype : {"float64", "float32"}
        Precision of the softplus in the all-levels densities.
    track_every : int
        Updates between tracked log-likelihoods.
    ais_every : int
        Updates between AIS checkpoints.
    ais_chains, ais_temperatures : int
        AIS runs and temperatures (Salakhutdinov & Murray's schedule shape, ``"sm08"``).
    timing_updates : int
        Updates of each timing run (0 skips the timing).
    timing_repeats : int
        Each timing run is repeated, interleaved, and the fastest kept (the machine is shared).
    """

    label: str
    n_hidden: int
    pretrain_updates: int
    pretrain_learning_rate: float
    n_updates: int
    learning_rate: float
    optimizer: str
    batch_size: int
    n_chains: int
    sweeps: int
    n_levels: int
    step_size: float
    n_initial_iterations: int
    initial_sweeps: int
    density_dtype: str
    track_every: int
    ais_every: int
    ais_chains: int
    ais_temperatures: int
    timing_updates: int
    timing_repeats: int

    @classmethod
    def preset(cls, name: str) -> RTSTrackingConfig:
        """The preset ``name`` (``presets/<name>.toml``)."""
        return load_preset(cls, __package__, name)

    @classmethod
    def paper(cls) -> RTSTrackingConfig:
        """The paper's §4.4 setting (its update count and AIS sizes were not recovered: ours)."""
        return cls.preset("full")

    @classmethod
    def full(cls) -> RTSTrackingConfig:
        """The same as :meth:`paper` (the name ``--full`` uses)."""
        return cls.paper()

    @classmethod
    def scaled(cls) -> RTSTrackingConfig:
        """Minutes on two cores: the paper's setting scaled down (``presets/scaled.toml`` says how)."""
        return cls.preset("scaled")

    @classmethod
    def tiny(cls) -> RTSTrackingConfig:
        """Seconds; checks the pipeline only."""
        return cls.preset("tiny")

    def phase_params(self, *, update_log_z: bool = True) -> dict[str, object]:
        """``algorithm_params`` of the ``"rts"`` phase."""
        return {
            "n_levels": self.n_levels,
            "step_size": self.step_size,
            "n_initial_iterations": self.n_initial_iterations,
            "initial_sweeps": self.initial_sweeps,
            "density_dtype": self.density_dtype,
            "update_log_z": update_log_z,
        }
