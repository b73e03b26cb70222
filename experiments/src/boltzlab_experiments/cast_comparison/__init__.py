"""The CAST paper's learning comparison, scaled: SAP, FPCD and CAST learning of a DBM.

Salakhutdinov (2010, *Learning deep Boltzmann machines using adaptive MCMC*, ICML, §5, Table 1
and Fig. 5; docs/algorithms.md §3.1–3.4):

* :mod:`~boltzlab_experiments.cast_comparison.config` — settings (TOML presets ``tiny``,
  ``scaled``, ``full`` = the paper's size);
* :mod:`~boltzlab_experiments.cast_comparison.run` — the same DBM trained by each algorithm
  with the same seed and budget, tracked and evaluated;
* :mod:`~boltzlab_experiments.cast_comparison.verdicts` — higher and steadier, decided from
  the numbers;
* :mod:`~.plots`, :mod:`~.report`, :mod:`~.command` — figures, files and
  ``boltzlab reproduce cast``.
"""

from boltzlab_experiments.cast_comparison.config import ALGORITHMS, PAPER_TEST_BOUNDS, CASTComparisonConfig
from boltzlab_experiments.cast_comparison.run import (
    AlgorithmRun,
    CASTComparisonResult,
    curve_statistics,
    run_cast_comparison,
)
from boltzlab_experiments.cast_comparison.verdicts import BaselineComparison, compare_with_baselines, verdicts

__all__ = [
    "ALGORITHMS",
    "PAPER_TEST_BOUNDS",
    "AlgorithmRun",
    "BaselineComparison",
    "CASTComparisonConfig",
    "CASTComparisonResult",
    "compare_with_baselines",
    "curve_statistics",
    "run_cast_comparison",
    "verdicts",
]
