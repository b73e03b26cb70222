"""Partition-function estimators: what log Z is, with an error bar and diagnostics."""

from boltzlab.estimators.adaptive_schedules import ScheduleInfo, decelerated, gms13, varopt
from boltzlab.estimators.ais import AISInfo, ais  # registers "ais"
from boltzlab.estimators.anchored import AnchoredInfo, anchored_ais  # registers "anchored-ais"
from boltzlab.estimators.exact import exact_log_z, joint_log_probabilities, joint_states
from boltzlab.estimators.mbar import MBARInfo, mbar  # registers "mbar"
from boltzlab.estimators.raise_ import RAISEResult, raise_log_likelihood, raise_log_z  # registers "raise"
from boltzlab.estimators.record import EstimatorRecord, get_record, methods, records, register_estimator
from boltzlab.estimators.registry import estimate_log_z
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.rts import RTSInfo, rts, ts  # registers "rts", "ts"
from boltzlab.estimators.tempered_samples import TemperedSamples, collect_tempered_samples
from boltzlab.estimators.ti import TIInfo, ti, ti_rb  # registers "ti", "ti-rb"
from boltzlab.estimators.trajectory_ais import TrajectoryAISInfo, trajectory_ais  # registers "trajectory-ais"
from boltzlab.estimators.trajectory_tempered import (  # registers "trajectory-rts", "trajectory-mbar"
    TrajectoryTemperedInfo,
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
