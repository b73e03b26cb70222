"""Tempering schemes: several temperatures cooperating around any transition operator.

Ladders are ascending (``β_0 < … < β_{K−1} = 1``, target last) everywhere in boltzlab.
"""

from boltzlab.tempering import ladders
from boltzlab.tempering.base import TemperingScheme, metropolis_accept, redraw_summed_layers
from boltzlab.tempering.cast import CAST
from boltzlab.tempering.ladders import Ladder
from boltzlab.tempering.parallel import ParallelTempering
from boltzlab.tempering.ptt import TrajectoryTempering  # registers "ptt"
from boltzlab.tempering.simulated import SimulatedTempering
from boltzlab.tempering.transitions import TemperedTransitions
from boltzlab.tempering.wang_landau import AdaptiveSimulatedTempering

__all__ = [
    "CAST",
    "AdaptiveSimulatedTempering",
    "Ladder",
    "ParallelTempering",
    "SimulatedTempering",
    "TemperedTransitions",
    "TemperingScheme",
    "TrajectoryTempering",
    "ladders",
    "metropolis_accept",
    "redraw_summed_layers",
]
