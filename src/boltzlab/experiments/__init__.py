"""Reproductions of the source papers' demonstrations and studies, as pure computations.

* :mod:`boltzlab.experiments.two_node` — the CAST paper's two-node demonstration
  (Salakhutdinov 2010): Gibbs, FPCD and Wang-Landau on a two-node MRF.
* :mod:`boltzlab.experiments.flip_the_state` — the flip-the-state study (Brügge, Fischer &
  Igel 2013): SLEM fractions, learning curves with a Wilcoxon test, autocorrelation times,
  mode hopping, and verdicts on the paper's claims.

Functions here return frozen dataclasses and neither print nor write; ``boltzlab reproduce``
(:mod:`boltzlab.cli.reproduce`) writes the figures and tables.
"""

from boltzlab.experiments.flip_the_state import (
    Finding,
    FlipTheStateConfig,
    LearningResult,
    MixingResult,
    ModeHoppingResult,
    WilcoxonRow,
    findings,
    run_learning,
    run_mixing,
    run_mode_hopping,
    run_slem,
    wilcoxon_table,
)
from boltzlab.experiments.two_node import TwoNodeResult, TwoNodeRun, run_two_node, run_two_node_sampler

__all__ = [
    "Finding",
    "FlipTheStateConfig",
    "LearningResult",
    "MixingResult",
    "ModeHoppingResult",
    "TwoNodeResult",
    "TwoNodeRun",
    "WilcoxonRow",
    "findings",
    "run_learning",
    "run_mixing",
    "run_mode_hopping",
    "run_slem",
    "run_two_node",
    "run_two_node_sampler",
    "wilcoxon_table",
]
