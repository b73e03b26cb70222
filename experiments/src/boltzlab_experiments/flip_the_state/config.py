"""Sizes of the flip-the-state study: which datasets, models, runs and chains each part uses.

Brügge, Fischer & Igel (2013); docs/algorithms.md §2.2. The sizes live in TOML presets shipped with
this package (``presets/tiny.toml``, ``scaled.toml``, ``full.toml``;
:mod:`boltzlab_experiments.presets`): ``scaled`` (the default) is sized for two CPU cores in a
few minutes, ``full`` is the paper's protocol (days here), ``tiny`` checks the pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from boltzlab_experiments.presets import load_preset

__all__ = ["DatasetSpec", "FlipTheStateConfig", "LearningSetup", "artificial_modes"]


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset the study needs: ``boltzlab.data.load(source, **dict(options))`` under ``name``."""

    name: str
    source: str
    options: tuple[tuple[str, float | int | str], ...] = ()


@dataclass(frozen=True)
class LearningSetup:
    """One learning-curve setting: a dataset, the RBM's hidden units, minibatch and length.

    ``batch_size=None`` is full-batch learning (Bars & Stripes in the paper).
    """

    data: DatasetSpec
    n_hidden: int
    batch_size: int | None
    n_updates: int


def artificial_modes(p_mut: float, n_samples: int = 1000) -> DatasetSpec:
    """The Artificial Modes dataset with mutation probability ``p_mut`` and ``n_samples`` examples."""
    return DatasetSpec(
        f"artificial-modes-{p_mut:g}", "artificial-modes", (("p_mut", p_mut), ("n_samples", n_samples))
    )


@dataclass(frozen=True, kw_only=True)
class FlipTheStateConfig:
    """Sizes of every part of the study; the values come from a preset (:meth:`preset`).

    SLEM: ``slem_sizes``, ``slem_scales`` (c), ``slem_models`` per (size, c). Learning:
    ``learning`` setups × ``learning_rates`` × ``n_seeds`` × ``algorithms`` × ``operators``,
    ``k`` sweeps (or PT steps) per update, ``pt_levels`` uniform in [0, 1], exact
    log-likelihood every ``evaluate_every`` updates, chains = minibatch size. Mixing:
    ``mixing_models`` RBMs with ``mixing_hidden`` units trained on ``mixing_data`` with
    ``mixing_algorithm`` (``mixing_algorithm_params``) then sampled by each operator with
    ``mixing_chains`` chains for ``mixing_burn_in + mixing_steps`` sweeps from training examples.
    Mode hopping: per ``mode_p_mut``, ``mode_models`` RBMs trained with CD-``mode_k``;
    ``mode_starts`` chains from training examples for at most ``mode_start_steps`` sweeps, and
    one chain from all-ones for ``mode_long_steps``.
    """

    slem_sizes: tuple[tuple[int, int], ...]
    slem_scales: tuple[float, ...]
    slem_models: int
    learning: tuple[LearningSetup, ...]
    learning_rates: tuple[float, ...]
    n_seeds: int
    algorithms: tuple[str, ...] = ("cd", "pcd", "pt")
    operators: tuple[str, ...] = ("gibbs", "flip")
    k: int
    pt_levels: int
    evaluate_every: int
    mixing_data: DatasetSpec
    mixing_models: int
    mixing_hidden: int
    mixing_algorithm: str
    mixing_algorithm_params: tuple[tuple[str, int], ...] = ()
    mixing_k: int
    mixing_updates: int
    mixing_learning_rate: float
    mixing_batch_size: int
    mixing_chains: int
    mixing_burn_in: int
    mixing_steps: int
    mixing_max_lag: int
    mode_p_mut: tuple[float, ...]
    mode_models: int
    mode_hidden: int
    mode_k: int
    mode_updates: int
    mode_learning_rate: float
    mode_batch_size: int
    mode_starts: int
    mode_start_steps: int
    mode_long_steps: int
    label: str

    @classmethod
    def preset(cls, name: str) -> FlipTheStateConfig:
        """The preset ``name`` (``presets/<name>.toml``)."""
        return load_preset(cls, __package__, name)

    @classmethod
    def scaled(cls) -> FlipTheStateConfig:
        """About six minutes on two CPU cores: SLEMs of 2×2 and 3×3 RBMs (100 per c), one learning
        rate × 6 seeds × 500–1,000 updates, three 784×100 MNIST RBMs for τ."""
        return cls.preset("scaled")

    @classmethod
    def full(cls) -> FlipTheStateConfig:
        """The paper's protocol (docs/algorithms.md §2.2): 25 repetitions × 20,000 updates × 3 rates,
        SLEM up to 4×4 with 100 models, 24 RBMs 784×500 trained with 20-PT10 and sampled 10⁶ steps.
        Days on two cores; the PT ladder size for learning curves is not in our copy (10 here)."""
        return cls.preset("full")

    @classmethod
    def tiny(cls) -> FlipTheStateConfig:
        """Seconds: every part on toy sizes, to check the pipeline (the numbers mean nothing)."""
        return cls.preset("tiny")

    def mode_data(self) -> tuple[DatasetSpec, ...]:
        """The Artificial Modes datasets of the mode-hopping part, one per ``mode_p_mut``."""
        return tuple(artificial_modes(p_mut) for p_mut in self.mode_p_mut)

    def datasets(self, parts: Sequence[str] = ("learning", "mixing")) -> tuple[DatasetSpec, ...]:
        """Every dataset the given parts need, each once (``"slem"`` needs none)."""
        specs: list[DatasetSpec] = []
        if "learning" in parts:
            specs += [setup.data for setup in self.learning]
        if "mixing" in parts:
            specs += [self.mixing_data, *self.mode_data()]
        return tuple(dict.fromkeys(specs))
