"""Partition-function estimators: what log Z is, with an error bar and diagnostics.

One door, :func:`estimate_log_z` (:mod:`~boltzlab.estimators.registry`), reads each method's
record (:mod:`~boltzlab.estimators.record`). The estimators live by family:
:mod:`~boltzlab.estimators.annealing` (AIS, anchored AIS, RAISE, schedules),
:mod:`~boltzlab.estimators.tempered` (RTS, TS, TI, TI-RB, MBAR),
:mod:`~boltzlab.estimators.trajectory` (along the training trajectory) and ``exact``; the
verdict, generic over them, is :mod:`~boltzlab.estimators.verdict` (docs/trust.md).
"""

# Importing each family registers its estimators' records.
from boltzlab.estimators.annealing import (
    AISInfo,
    AnchoredInfo,
    RAISEResult,
    ScheduleInfo,
    ais,
    anchored_ais,
    decelerated,
    gms13,
    raise_log_likelihood,
    raise_log_z,
    varopt,
)
from boltzlab.estimators.exact import exact_log_z, joint_log_probabilities, joint_states
from boltzlab.estimators.record import EstimatorRecord, get_record, methods, records, register_estimator
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.tempered import (
    MBARInfo,
    RTSInfo,
    TemperedSamples,
    TIInfo,
    collect_tempered_samples,
    mbar,
    rts,
    ti,
    ti_rb,
    ts,
)
from boltzlab.estimators.trajectory import (
    TrajectoryAISInfo,
    TrajectoryTemperedInfo,
    trajectory_ais,
    trajectory_mbar,
    trajectory_rts,
)

__all__ = [
    "AISInfo",
    "AnchoredInfo",
    "EstimatorRecord",
    "LogZEstimate",
    "MBARInfo",
    "RAISEResult",
    "RTSInfo",
    "ScheduleInfo",
    "TIInfo",
    "TemperedSamples",
    "TrajectoryAISInfo",
    "TrajectoryTemperedInfo",
    "ais",
    "anchored_ais",
    "collect_tempered_samples",
    "decelerated",
    "estimate_log_z",
    "exact_log_z",
    "get_record",
    "gms13",
    "joint_log_probabilities",
    "joint_states",
    "mbar",
    "methods",
    "raise_log_likelihood",
    "raise_log_z",
    "records",
    "register_estimator",
    "rts",
    "ti",
    "ti_rb",
    "trajectory_ais",
    "trajectory_mbar",
    "trajectory_rts",
    "ts",
    "varopt",
]
