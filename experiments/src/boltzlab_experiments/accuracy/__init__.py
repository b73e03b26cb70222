"""Accuracy of the log Z estimators at matched cost, on RBMs whose exact log Z is known.

Three benchmarks from the source papers, on 784×20 RBMs trained on binarised MNIST by CD-1,
CD-25 and PCD (20 hidden units, so ``log Z`` is enumerable: 2^20 hidden states;
:mod:`~boltzlab_experiments.accuracy.models`):

* :mod:`~boltzlab_experiments.accuracy.rts_vs_ais` — Carlson, Stinson, Pakman & Paninski
  (2016, ICML), Fig. 3 and docs/algorithms.md §4.3 "Headline figures": bias and RMSE of RTS, AIS and
  RAISE against the number of Gibbs sweeps per chain (``boltzlab reproduce rts-vs-ais``);
* :mod:`~boltzlab_experiments.accuracy.estimators_vs_k` — the same paper's Fig. 4: RMSE of
  RTS, TS, TI, TI-RB and MBAR against the number of temperatures K, from the same tempered
  samples (``boltzlab reproduce estimators-vs-k``);
* :mod:`~boltzlab_experiments.accuracy.varopt` — Kiwaki (2015), Table 1 (docs/algorithms.md §5.4,
  docs/open-questions.md items 5 and 12): log Ẑ and ESS of AIS with the LINEAR, SM08, GMS13, VAROPT
  and decelerated VAROPT schedules (``boltzlab reproduce varopt``).

:mod:`~boltzlab_experiments.accuracy.table` holds the statistics every benchmark reports; the
sizes are TOML presets (``presets/``), one file per size with a table per benchmark and the
training they share. Everything returns frozen dataclasses and neither prints nor writes; the
``*_command`` modules cache the trained models and write the tables, plots and ``summary.md``.
"""

from boltzlab_experiments.accuracy.estimators_vs_k import (
    EstimatorsVsKConfig,
    EstimatorsVsKResult,
    estimators_vs_k_finding,
    run_estimators_vs_k,
)
from boltzlab_experiments.accuracy.models import (
    MODEL_SPECS,
    BenchmarkModel,
    TrainingConfig,
    benchmark_model_from,
    train_benchmark_model,
)
from boltzlab_experiments.accuracy.rts_vs_ais import (
    RTSvsAISConfig,
    RTSvsAISResult,
    rts_vs_ais_finding,
    run_rts_vs_ais,
)
from boltzlab_experiments.accuracy.table import EstimateTable
from boltzlab_experiments.accuracy.varopt import (
    VaroptConfig,
    VaroptResult,
    run_varopt,
    schedule_label,
    varopt_finding,
)

__all__ = [
    "MODEL_SPECS",
    "BenchmarkModel",
    "EstimateTable",
    "EstimatorsVsKConfig",
    "EstimatorsVsKResult",
    "RTSvsAISConfig",
    "RTSvsAISResult",
    "TrainingConfig",
    "VaroptConfig",
    "VaroptResult",
    "benchmark_model_from",
    "estimators_vs_k_finding",
    "rts_vs_ais_finding",
    "run_estimators_vs_k",
    "run_rts_vs_ais",
    "run_varopt",
    "schedule_label",
    "train_benchmark_model",
    "varopt_finding",
]
