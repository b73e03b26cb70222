"""Annealing estimators: AIS and its chain budget, anchored AIS, RAISE, and their schedules.

Each moves chains along a ladder of tempered distributions and accumulates importance
weights in float64 (docs/algorithms.md §4.1–4.2, §4.7, §5):

- :mod:`~boltzlab.estimators.annealing.ais`: AIS (``"ais"``) and its annealing kernel;
- :mod:`~boltzlab.estimators.annealing.chain_budget`: more chains until the checks pass, and
  the family's part of the verdict;
- :mod:`~boltzlab.estimators.annealing.anchored`: anchored AIS (``"anchored-ais"``);
- :mod:`~boltzlab.estimators.annealing.raise_`: reverse AIS (``"raise"``);
- :mod:`~boltzlab.estimators.annealing.schedule_check`: the same run on every fourth step, whose
  shift estimates the bias the error bars leave out (AIS, trajectory AIS, RAISE);
- :mod:`~boltzlab.estimators.annealing.options`: the typed options each of them checks once;
- :mod:`~boltzlab.estimators.annealing.schedules` and ``adaptive_schedules``: fixed and
  measured β schedules (VAROPT, GMS13, deceleration);
- :mod:`~boltzlab.estimators.annealing.increments`: what every annealing estimator shares.
"""

from boltzlab.estimators.annealing.adaptive_schedules import ScheduleInfo, decelerated, gms13, varopt
from boltzlab.estimators.annealing.ais import AISInfo, ais
from boltzlab.estimators.annealing.anchored import AnchoredInfo, anchored_ais
from boltzlab.estimators.annealing.raise_ import RAISEResult, ScheduleCheck, raise_log_likelihood, raise_log_z

__all__ = [
    "AISInfo",
    "AnchoredInfo",
    "RAISEResult",
    "ScheduleCheck",
    "ScheduleInfo",
    "ais",
    "anchored_ais",
    "decelerated",
    "gms13",
    "raise_log_likelihood",
    "raise_log_z",
    "varopt",
]
