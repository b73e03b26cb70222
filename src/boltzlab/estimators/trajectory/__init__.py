"""Estimators along the training trajectory: the saved parameter snapshots as the path.

docs/algorithms.md §4.6. Trajectory AIS anneals through the snapshots; trajectory RTS and MBAR
temper over levels placed along them, and are the second route of ``"rts"`` and ``"mbar"``
where the ladder in temperature is flagged (:mod:`boltzlab.estimators.routes`).
"""

from boltzlab.estimators.trajectory.ais import TrajectoryAISInfo, trajectory_ais
from boltzlab.estimators.trajectory.tempered import TrajectoryTemperedInfo, trajectory_mbar, trajectory_rts

__all__ = [
    "TrajectoryAISInfo",
    "TrajectoryTemperedInfo",
    "trajectory_ais",
    "trajectory_mbar",
    "trajectory_rts",
]
