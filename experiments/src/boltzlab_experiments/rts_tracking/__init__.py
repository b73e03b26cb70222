"""Tracking the log-likelihood during training with RTS, against AIS, and what it costs.

Carlson, Stinson, Pakman & Paninski (2016, §4.4, Fig. 6); docs/algorithms.md §4.3:

* :mod:`~boltzlab_experiments.rts_tracking.config` — sizes (TOML presets ``tiny``, ``scaled``,
  ``full`` = the paper's);
* :mod:`~boltzlab_experiments.rts_tracking.run` — CD-1 pretraining, RTS-tracked training and
  AIS checkpoints;
* :mod:`~boltzlab_experiments.rts_tracking.timing` — the cost of tracking;
* :mod:`~boltzlab_experiments.rts_tracking.plots`, :mod:`~.report`, :mod:`~.command` — the
  figure, the files and ``boltzlab reproduce rts-tracking``.
"""

from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig
from boltzlab_experiments.rts_tracking.run import RTSTrackingResult, TrackingCurve, run_tracking
from boltzlab_experiments.rts_tracking.timing import TrackingTimings, run_timing

__all__ = [
    "RTSTrackingConfig",
    "RTSTrackingResult",
    "TrackingCurve",
    "TrackingTimings",
    "run_timing",
    "run_tracking",
]
