"""Partition-function estimators: what log Z is, with an error bar and diagnostics."""

from boltzlab.estimators.ais import AISInfo, ais  # registers "ais"
from boltzlab.estimators.exact import exact_log_z, joint_log_probabilities, joint_states
from boltzlab.estimators.registry import estimate_log_z, methods, register_estimator
from boltzlab.estimators.result import LogZEstimate

__all__ = [
    "AISInfo",
    "LogZEstimate",
    "ais",
    "estimate_log_z",
    "exact_log_z",
    "joint_log_probabilities",
    "joint_states",
    "methods",
    "register_estimator",
]
